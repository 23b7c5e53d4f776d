"""Swarm keys: the pre-shared key of a libp2p private network (PSK v1), in the swarm.key
format other libp2p implementations use (go-libp2p, kubo, js-libp2p):

    /key/swarm/psk/1.0.0/
    /base16/
    <64 hex digits>

``/base64/`` is read too. No libp2p import here: settings and the CLI use this module.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import secrets

__all__ = ["HEADER", "SwarmKeyError", "format_swarm_key", "generate_swarm_key", "key_id",
           "parse_swarm_key"]

HEADER = "/key/swarm/psk/1.0.0/"
KEY_BYTES = 32


class SwarmKeyError(ValueError):
    """Not a usable swarm key; the message says what is wrong (never the key itself)."""


def parse_swarm_key(text: str | bytes) -> bytes:
    """The 32-byte key from a swarm.key file's content, or from just its 64 hex digits."""
    if isinstance(text, bytes):
        try:
            text = text.decode("ascii")
        except UnicodeDecodeError:
            raise SwarmKeyError("a swarm key is ASCII text (swarm.key format)") from None
    lines = [ln.strip() for ln in text.strip().splitlines() if ln.strip()]
    if len(lines) == 1:
        return _decode("/base16/", lines[0])
    if len(lines) != 3 or lines[0] != HEADER:
        raise SwarmKeyError(f"expected {HEADER!r}, an encoding line and the key on three "
                            "lines (or just the key's 64 hex digits)")
    return _decode(lines[1], lines[2])


def _decode(encoding: str, body: str) -> bytes:
    try:
        if encoding == "/base16/":
            key = binascii.unhexlify(body)
        elif encoding == "/base64/":
            key = base64.b64decode(body, validate=True)
        else:
            raise SwarmKeyError(f"unsupported swarm key encoding {encoding!r} "
                                "(use /base16/ or /base64/)")
    except (binascii.Error, ValueError) as exc:
        if isinstance(exc, SwarmKeyError):
            raise
        raise SwarmKeyError(f"the swarm key is not valid {encoding.strip('/')}") from None
    if len(key) != KEY_BYTES:
        raise SwarmKeyError(f"a swarm key is {KEY_BYTES} bytes ({2 * KEY_BYTES} hex digits), "
                            f"got {len(key)} bytes")
    return key


def format_swarm_key(key: bytes) -> str:
    if len(key) != KEY_BYTES:
        raise SwarmKeyError(f"a swarm key is {KEY_BYTES} bytes")
    return f"{HEADER}\n/base16/\n{key.hex()}\n"


def generate_swarm_key() -> str:
    """A new random swarm key in swarm.key format."""
    return format_swarm_key(secrets.token_bytes(KEY_BYTES))


def key_id(key: bytes) -> str:
    """A short, non-secret name for a key (to compare in logs which key agents use)."""
    return hashlib.sha256(b"swarm-key-id:" + key).hexdigest()[:12]
