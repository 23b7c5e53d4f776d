"""ed25519 identities whose public name is the libp2p peer id of the same key.

An ed25519 peer id inlines the public key (identity multihash of the protobuf-encoded key),
so a signature can be checked from the author field alone.

Signatures are checked with libsodium (PyNaCl, which libp2p already uses): 43 us against
OpenSSL's 68 us on this machine, and every agent checks every event once (a late joiner
10,000 at a time). libsodium also refuses small-order public keys and R points, which
OpenSSL accepts; no honest key or signature is either, and every agent of this version
checks the same way (an agent of an earlier version would accept such a forged-looking
event that this one refuses: see docs/performance.md).
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache

import base58
from nacl.bindings import crypto_sign_open
from nacl.exceptions import BadSignatureError
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from cryptography.hazmat.primitives.serialization import Encoding, PublicFormat

# protobuf PublicKey{Type=Ed25519(1), Data=<32 bytes>} prefix, and the identity multihash header.
_PB_PREFIX = b"\x08\x01\x12\x20"
_MH_IDENTITY = b"\x00\x24"


class BadPeerId(ValueError):
    pass


def peer_id_from_public(raw_public: bytes) -> str:
    if len(raw_public) != 32:
        raise BadPeerId("an ed25519 public key has 32 bytes")
    return base58.b58encode(_MH_IDENTITY + _PB_PREFIX + raw_public).decode()


@lru_cache(maxsize=4096)
def public_bytes_of(peer_id: str) -> bytes:
    try:
        raw = base58.b58decode(peer_id.encode())
    except ValueError as exc:
        raise BadPeerId(f"not base58: {exc}") from None
    if len(raw) != 38 or not raw.startswith(_MH_IDENTITY + _PB_PREFIX):
        raise BadPeerId("not an ed25519 peer id")
    return raw[6:]


def verify(peer_id: str, message: bytes, signature: bytes) -> bool:
    if len(signature) != 64:
        return False
    try:
        crypto_sign_open(signature + message, public_bytes_of(peer_id))
    except (BadSignatureError, BadPeerId, ValueError):
        return False
    return True


@dataclass(frozen=True)
class Identity:
    """A signing key and its peer id. The seed is the 32-byte ed25519 private key."""

    seed: bytes

    def __post_init__(self) -> None:
        if len(self.seed) != 32:
            raise ValueError("an ed25519 seed has 32 bytes")

    @property
    def _key(self) -> Ed25519PrivateKey:
        return _private(self.seed)

    @property
    def peer_id(self) -> str:
        return _peer_id_of_seed(self.seed)

    @property
    def public_bytes(self) -> bytes:
        return self._key.public_key().public_bytes(Encoding.Raw, PublicFormat.Raw)

    def sign(self, message: bytes) -> bytes:
        return self._key.sign(message)


@lru_cache(maxsize=256)
def _private(seed: bytes) -> Ed25519PrivateKey:
    return Ed25519PrivateKey.from_private_bytes(seed)


@lru_cache(maxsize=256)
def _peer_id_of_seed(seed: bytes) -> str:
    pub = _private(seed).public_key().public_bytes(Encoding.Raw, PublicFormat.Raw)
    return peer_id_from_public(pub)
