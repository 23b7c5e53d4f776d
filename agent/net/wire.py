"""Below the muxer: the connection stack, with what py-libp2p 0.8.1 gets wrong fixed from outside.

Stack per connection: TCP -> [pnet: XSalsa20 with the swarm key] -> Noise -> Mplex/Yamux.
Everything here plugs into the library through its own extension points (``new_host``'s
``sec_opt``, ``muxer_opt`` and ``transports``, and ``INetwork.set_stream_handler``); nothing
in the library is patched or copied. docs/notes/libp2p-noise-invalidtag.md has the
upstream-ready write-up.

1. **Cancel-safe Noise writes** (the root cause of ``NoiseInvalidMessage: Failed
   authentication of message`` that killed agents). The library's
   ``BaseNoiseMsgReadWriter.write_msg`` encrypts a frame (which consumes the next nonce)
   and then awaits the socket write. A caller cancelled in between (a ``move_on_after``
   around a sync, a request timeout, a dial timeout) leaves the nonce consumed and the
   frame unsent, or half sent; the peer's next decrypt fails. The fix: encrypting and
   sending a frame is one unit, under a per-connection lock, and the send is shielded from
   the caller's cancellation; a send that cannot finish within ``FRAME_WRITE_TIMEOUT``
   (the peer stopped reading: go-yamux closes a connection after the same 10 s) closes the
   connection, because a partly written frame can never be repaired.
2. **One connection's failure stays that connection's.** In the library, an exception that
   escapes a connection's read loop (``Mplex.start``) or a protocol's stream handler is
   collected by the Swarm's service manager, which then cancels the whole Swarm: the host
   stops and the agent exits. ``contained_muxers`` and ``contain_stream_handlers`` catch it
   at the connection's boundary, report it (kind + peer) and close that connection only.
3. **pnet compatible with other implementations.** The library's ``security/pnet`` uses
   Salsa20 with an 8-byte nonce; go-, js- and rust-libp2p (spec: libp2p/specs
   pnet/Private-Networks-PSK-V1.md) use XSalsa20 with a 24-byte nonce, so it cannot talk
   to them. Its ``PskConn`` also has the same cancel hazard as Noise (the keystream moves
   on before the write). ``PnetTCP`` is a TCP transport whose connections are wrapped by
   ``PskStream`` (XSalsa20, 24-byte nonce, cancel-safe writes).
4. **Connections bounded before their handshake** (``InboundGuard``): a connection that has not
   finished its security handshake holds one of ``per_ip`` slots for its address and one of
   ``total`` in all, and is closed after ``handshake_timeout``; one over either bound is closed
   at once. Every connection closed unsecured is reported (``handshake``, ``timeout``,
   ``pending_limit``): a stranger dialling without the swarm key is counted and logged, not
   silent. (The library's resource manager admits a connection before the upgrade only by
   subnet totals and per-peer rates, and a peer id is known only after the handshake; its
   inbound slots are held for a connection's whole life, so 250 silent sockets filled them.)
"""

from __future__ import annotations

import os
import struct
from collections import Counter
from collections.abc import Awaitable, Callable
from enum import StrEnum
from typing import Any

import trio
from cryptography.exceptions import InvalidTag
from google.protobuf.message import DecodeError
from libp2p.custom_types import TProtocol
from libp2p.exceptions import ParseError
from libp2p.io.abc import ReadWriteCloser
from libp2p.io.exceptions import ConnectionClosedError, IncompleteReadError, MessageTooLarge
from libp2p.network.stream.exceptions import StreamError
from libp2p.security.noise.io import MAX_PLAINTEXT_LENGTH, NoiseTransportReadWriter
from libp2p.security.noise.transport import Transport as NoiseTransport
from libp2p.stream_muxer.mplex.mplex import MPLEX_PROTOCOL_ID, Mplex
from libp2p.stream_muxer.yamux.yamux import PROTOCOL_ID as YAMUX_PROTOCOL_ID, Yamux
from libp2p.transport.tcp.tcp import TCP, TCPListener
from libp2p.utils.connection_shutdown import is_expected_connection_shutdown
from noise.exceptions import NoiseInvalidMessage

from .config import InboundLimits

__all__ = [
    "FRAME_WRITE_TIMEOUT", "ConnErrorKind", "ReportFn", "CancelSafeNoiseTransport", "build_host",
    "InboundGuard", "InboundLimits",
    "PnetTCP", "PskStream", "classify", "contain_stream_handlers", "contained_muxers",
    "xsalsa20",
]

# go-yamux's ConnectionWriteTimeout: a connection whose writes stall this long is dead.
FRAME_WRITE_TIMEOUT = 10.0
PNET_NONCE_SIZE = 24


class ConnErrorKind(StrEnum):
    """Why a connection was closed by us (the ``kind`` label of swarm_connection_errors)."""

    DECRYPT = "decrypt"            # a frame failed authentication (Noise InvalidTag)
    WRITE_STALLED = "write_stalled"  # a frame could not be written within FRAME_WRITE_TIMEOUT
    MALFORMED = "malformed"        # the peer sent bytes that do not parse (frame, protobuf...)
    UNEXPECTED = "unexpected"      # anything else: a bug here or in the library (traceback kept)


ReportFn = Callable[[ConnErrorKind, str, "BaseException | None"], None]
"""(kind, peer id, exception or None): called once per connection we close."""


def classify(exc: BaseException) -> ConnErrorKind:
    """Map an exception that escaped a connection's reader or a stream handler to a kind."""
    if isinstance(exc, (NoiseInvalidMessage, InvalidTag)):
        return ConnErrorKind.DECRYPT
    if isinstance(exc, (DecodeError, ParseError, MessageTooLarge, IncompleteReadError,
                        UnicodeDecodeError)):
        return ConnErrorKind.MALFORMED
    return ConnErrorKind.UNEXPECTED


def _peer_of(obj: Any) -> str:
    peer = getattr(obj, "peer_id", None)
    to_b58 = getattr(peer, "to_base58", None)
    return to_b58() if to_b58 is not None else "?"


# ---------------------------------------------------------------------------------- writes
class _StalledWrite(Exception):
    pass


async def _send_whole(write: Callable[[bytes], Awaitable[None]], data: bytes,
                      timeout: float) -> None:
    """Put ``data`` on the wire completely, whatever happens to the caller's cancel scope.

    Raises _StalledWrite if it takes longer than ``timeout`` (the data may be partly sent:
    the byte stream is now unusable). The caller's cancellation, if any, is delivered at its
    next checkpoint, after the write.
    """
    with trio.CancelScope(shield=True) as scope:
        scope.deadline = trio.current_time() + timeout
        await write(data)
    if scope.cancelled_caught:
        raise _StalledWrite(f"a write of {len(data)} bytes did not finish within {timeout:g} s")


class CancelSafeNoiseReadWriter(NoiseTransportReadWriter):
    """The library's Noise transport reader/writer, with frames encrypted and sent as one
    unit (module doc, 1)."""

    def __init__(self, conn: Any, noise_state: Any, *, write_timeout: float,
                 on_stall: Callable[[], None]) -> None:
        super().__init__(conn, noise_state)
        self._send_lock = trio.Lock()
        self._write_timeout = write_timeout
        self._on_stall = on_stall
        self._broken: str | None = None

    def _frames(self, msg: bytes, prefix_encoded: bool) -> bytes:
        out = []
        for start in range(0, max(len(msg), 1), MAX_PLAINTEXT_LENGTH):
            frame = self.encrypt(msg[start:start + MAX_PLAINTEXT_LENGTH])
            if prefix_encoded and start == 0:
                frame = self.prefix + frame
            out.append(self.read_writer.encode_msg(frame))
        return b"".join(out)

    async def write_msg(self, msg: bytes, prefix_encoded: bool = False) -> None:
        # Waiting for the lock is cancellable: no nonce has been used yet.
        async with self._send_lock:
            if self._broken is not None:
                raise ConnectionClosedError(self._broken)
            # No checkpoint between encrypting and sending: nonces reach the wire in order.
            data = self._frames(msg, prefix_encoded)
            raw = self.read_writer.read_write_closer
            try:
                await _send_whole(raw.write, data, self._write_timeout)
            except _StalledWrite as exc:
                self._broken = f"secure channel closed: {exc}"
                self._on_stall()
                with trio.CancelScope(shield=True):
                    await raw.close()
                raise ConnectionClosedError(self._broken) from None


class CancelSafeNoiseTransport(NoiseTransport):
    """libp2p Noise (XX) whose sessions write frames atomically (module doc, 1)."""

    def __init__(self, libp2p_keypair: Any, noise_privkey: Any, *, report: ReportFn,
                 write_timeout: float = FRAME_WRITE_TIMEOUT) -> None:
        super().__init__(libp2p_keypair, noise_privkey)
        self._report = report
        self._write_timeout = write_timeout

    def _harden(self, session: Any) -> Any:
        inner = session.conn
        if type(inner) is not NoiseTransportReadWriter:  # the library changed under us
            raise TypeError(f"unexpected Noise session writer {type(inner).__name__}")
        peer = session.get_remote_peer().to_base58()
        session.conn = CancelSafeNoiseReadWriter(
            inner.read_writer.read_write_closer, inner.noise_state,
            write_timeout=self._write_timeout,
            on_stall=lambda: self._report(ConnErrorKind.WRITE_STALLED, peer, None))
        return session

    async def secure_inbound(self, conn: Any) -> Any:
        session = self._harden(await super().secure_inbound(conn))
        secured = getattr(getattr(conn, "stream", None), "secured", None)
        if secured is not None:
            secured()  # the InboundGuard's slot for this handshake is free again
        return session

    async def secure_outbound(self, conn: Any, peer_id: Any) -> Any:
        return self._harden(await super().secure_outbound(conn, peer_id))


# ---------------------------------------------------------------------------- containment
def contained_muxers(report: ReportFn, preference: str = "MPLEX") -> dict[Any, type]:
    """``muxer_opt`` for new_host: Mplex and Yamux whose read loop cannot take the host down.

    The connection task (``start``) is run by the Swarm's service manager; an exception out
    of it cancels the whole Swarm. Here it is reported and the connection closed.
    """
    def contain(base: type) -> type:
        class Contained(base):  # type: ignore[misc, valid-type]
            async def start(self) -> None:
                try:
                    await super().start()
                except Exception as exc:
                    # Broad on purpose: whatever a peer's bytes make the library's reader
                    # raise (InvalidTag, protobuf and varint errors, ...), and bugs too,
                    # must end this connection only. classify() tells them apart and
                    # the report keeps the traceback of the unexpected ones.
                    report(classify(exc), _peer_of(self), exc)
                    with trio.CancelScope(shield=True):
                        await self.secured_conn.close()

        Contained.__name__ = Contained.__qualname__ = f"Contained{base.__name__}"
        return Contained

    mplex = (TProtocol(MPLEX_PROTOCOL_ID), contain(Mplex))
    yamux = (TProtocol(YAMUX_PROTOCOL_ID), contain(Yamux))
    order = [mplex, yamux] if preference.upper() == "MPLEX" else [yamux, mplex]
    return dict(order)


def contain_stream_handlers(network: Any, report: ReportFn) -> None:
    """Wrap the Swarm's handler for inbound streams (protocol negotiation + the protocol's
    handler, e.g. pubsub's reader, identify, our sync server): an exception escaping it
    resets the stream and closes that peer's connection instead of stopping the Swarm."""
    inner = network.common_stream_handler

    async def contained(stream: Any) -> None:
        try:
            await inner(stream)
        except Exception as exc:
            # Broad on purpose (see contained_muxers); expected hang-ups stay quiet.
            if is_expected_connection_shutdown(exc):
                return
            conn = stream.muxed_conn
            report(classify(exc), _peer_of(conn), exc)
            with trio.CancelScope(shield=True):
                await _reset_quietly(stream)
                await conn.close()

    network.set_stream_handler(contained)


async def _reset_quietly(stream: Any) -> None:
    try:
        await stream.reset()
    except StreamError:
        pass  # already reset or closed: what we wanted


# ------------------------------------------------------------------------- before the handshake
RefusedFn = Callable[[str, str], None]
"""(reason, remote address): an inbound connection closed before its handshake finished."""


class _Guarded(ReadWriteCloser):
    """An accepted byte stream, until its security handshake is done (module doc, 4)."""

    def __init__(self, inner: Any, on_secured: Callable[[], None]) -> None:
        self._inner = inner
        self._on_secured = on_secured
        self.done = False

    def secured(self) -> None:
        if not self.done:
            self.done = True
            self._on_secured()

    async def read(self, n: int | None = None) -> bytes:
        return await self._inner.read(n)

    async def write(self, data: bytes) -> None:
        await self._inner.write(data)

    async def close(self) -> None:
        await self._inner.close()

    def get_remote_address(self) -> tuple[str, int] | None:
        return self._inner.get_remote_address()

    def __getattr__(self, name: str) -> Any:  # anything else the library asks of a TCP stream
        return getattr(self._inner, name)


class InboundGuard:
    """Bounds inbound connections that have not finished their security handshake (module
    doc, 4); ``on_refused`` hears of each one closed unsecured."""

    def __init__(self, limits: InboundLimits = InboundLimits(), on_refused: RefusedFn | None = None) -> None:
        self.limits = limits
        self._on_refused = on_refused or (lambda reason, remote: None)
        self._pending: Counter[str] = Counter()
        self.refused: Counter[str] = Counter()  # reason -> connections

    @property
    def pending(self) -> int:
        return sum(self._pending.values())

    def _refuse(self, reason: str, remote: str) -> None:
        self.refused[reason] += 1
        self._on_refused(reason, remote)

    async def serve(self, stream: Any, handler: Callable[[Any], Awaitable[None]]) -> None:
        addr = stream.get_remote_address()
        ip = addr[0] if addr else "?"
        lim = self.limits
        if self._pending[ip] >= lim.per_ip or self.pending >= lim.total:
            self._refuse("pending_limit", ip)
            with trio.CancelScope(shield=True):
                await stream.close()
            return
        self._pending[ip] += 1
        held = [True]

        def release() -> None:
            if held[0]:
                held[0] = False
                self._pending[ip] -= 1
                if self._pending[ip] <= 0:
                    del self._pending[ip]

        done = trio.Event()
        guarded = _Guarded(stream, lambda: (release(), done.set()))
        timed_out = [False]

        async def deadline() -> None:
            with trio.move_on_after(lim.handshake_timeout):
                await done.wait()
                return
            timed_out[0] = True
            with trio.CancelScope(shield=True):
                await stream.close()  # the upgrade's next read ends: the library cleans up

        try:
            async with trio.open_nursery() as nursery:
                nursery.start_soon(deadline)
                try:
                    await handler(guarded)
                finally:
                    nursery.cancel_scope.cancel()
        finally:
            release()
            if not guarded.done:
                self._refuse("timeout" if timed_out[0] else "handshake", ip)


# ----------------------------------------------------------------------------------- pnet
_SIGMA = struct.unpack("<4I", b"expand 32-byte k")


def _rotl(v: int, c: int) -> int:
    return ((v << c) & 0xFFFFFFFF) | (v >> (32 - c))


def _hsalsa20(key: bytes, nonce16: bytes) -> bytes:
    """HSalsa20 (the subkey step of XSalsa20); runs once per connection direction."""
    x = [0] * 16
    x[0], x[5], x[10], x[15] = _SIGMA
    x[1:5] = struct.unpack("<4I", key[:16])
    x[11:15] = struct.unpack("<4I", key[16:])
    x[6:10] = struct.unpack("<4I", nonce16)

    def qr(a: int, b: int, c: int, d: int) -> None:
        x[b] ^= _rotl((x[a] + x[d]) & 0xFFFFFFFF, 7)
        x[c] ^= _rotl((x[b] + x[a]) & 0xFFFFFFFF, 9)
        x[d] ^= _rotl((x[c] + x[b]) & 0xFFFFFFFF, 13)
        x[a] ^= _rotl((x[d] + x[c]) & 0xFFFFFFFF, 18)

    for _ in range(10):
        qr(0, 4, 8, 12); qr(5, 9, 13, 1); qr(10, 14, 2, 6); qr(15, 3, 7, 11)  # noqa: E702
        qr(0, 1, 2, 3); qr(5, 6, 7, 4); qr(10, 11, 8, 9); qr(15, 12, 13, 14)  # noqa: E702
    return struct.pack("<8I", x[0], x[5], x[10], x[15], x[6], x[7], x[8], x[9])


def xsalsa20(key: bytes, nonce: bytes) -> Any:
    """An XSalsa20 keystream cipher (PyCryptodome's Salsa20 keyed with the HSalsa20 subkey);
    ``.encrypt``/``.decrypt`` continue the stream across calls."""
    from Crypto.Cipher import Salsa20

    if len(key) != 32 or len(nonce) != PNET_NONCE_SIZE:
        raise ValueError("XSalsa20 needs a 32-byte key and a 24-byte nonce")
    return Salsa20.new(key=_hsalsa20(key, nonce[:16]), nonce=nonce[16:])


class PskStream(ReadWriteCloser):
    """A byte stream encrypted with the swarm key, as libp2p's PSK v1 specifies: each side
    sends a random 24-byte nonce first, then XSalsa20(psk, nonce) of everything it writes.
    A peer without the key (or with another) produces noise that fails the next layer's
    handshake. Writes are cancel-safe for the same reason as Noise's."""

    def __init__(self, inner: Any, psk: bytes, *, write_timeout: float = FRAME_WRITE_TIMEOUT,
                 on_stall: Callable[[], None] | None = None) -> None:
        if len(psk) != 32:
            raise ValueError("the swarm key must be 32 bytes")
        self._inner = inner
        self._psk = psk
        self._write_timeout = write_timeout
        self._on_stall = on_stall
        self._send_lock = trio.Lock()
        self._recv_lock = trio.Lock()
        self._enc: Any = None
        self._dec: Any = None
        self._nonce = b""
        self._broken: str | None = None

    async def write(self, data: bytes) -> None:
        async with self._send_lock:
            if self._broken is not None:
                raise ConnectionClosedError(self._broken)
            head = b""
            if self._enc is None:
                head = os.urandom(PNET_NONCE_SIZE)
                self._enc = xsalsa20(self._psk, head)
            out = head + self._enc.encrypt(bytes(data))
            try:
                await _send_whole(self._inner.write, out, self._write_timeout)
            except _StalledWrite as exc:
                self._broken = f"private-network channel closed: {exc}"
                if self._on_stall is not None:
                    self._on_stall()
                with trio.CancelScope(shield=True):
                    await self._inner.close()
                raise ConnectionClosedError(self._broken) from None

    async def read(self, n: int | None = None) -> bytes:
        async with self._recv_lock:
            while self._dec is None:
                chunk = await self._inner.read(PNET_NONCE_SIZE - len(self._nonce))
                if not chunk:
                    return b""  # closed before the nonce: EOF for the layers above
                self._nonce += chunk
                if len(self._nonce) == PNET_NONCE_SIZE:
                    self._dec = xsalsa20(self._psk, self._nonce)
            data = await self._inner.read(n)
            # no checkpoint between receiving and decrypting: the keystream stays in step
            return self._dec.decrypt(data) if data else b""

    async def close(self) -> None:
        await self._inner.close()

    def get_remote_address(self) -> tuple[str, int] | None:
        return self._inner.get_remote_address()


class PnetTCP(TCP):
    """A TCP transport inside the private network of ``psk`` (32 bytes): every connection,
    dialled or accepted, is a PskStream before security is negotiated on it. With ``psk``
    None it is plain TCP; with a ``guard``, accepted connections are bounded until their
    handshake (module doc, 4)."""

    def __init__(self, psk: bytes | None, *, write_timeout: float = FRAME_WRITE_TIMEOUT,
                 guard: InboundGuard | None = None) -> None:
        super().__init__()
        if psk is not None and len(psk) != 32:
            raise ValueError("the swarm key must be 32 bytes")
        self._psk = psk
        self._write_timeout = write_timeout
        self._guard = guard

    def _protect(self, stream: Any) -> Any:
        if self._psk is None:
            return stream
        return PskStream(stream, self._psk, write_timeout=self._write_timeout)

    async def dial(self, maddr: Any) -> Any:
        raw = await super().dial(maddr)
        raw.stream = self._protect(raw.stream)
        return raw

    async def dial_with_source(self, maddr: Any, source: tuple[str, int]) -> Any:
        raw = await super().dial_with_source(maddr, source)
        raw.stream = self._protect(raw.stream)
        return raw

    def create_listener(self, handler_function: Any) -> Any:
        guard = self._guard

        async def protected(stream: Any) -> None:
            if guard is None:
                await handler_function(self._protect(stream))
            else:
                await guard.serve(self._protect(stream), handler_function)

        return TCPListener(protected)


# ------------------------------------------------------------------------------ the host
def build_host(*, key_pair: Any, listen: Any, report: ReportFn, muxer: str = "MPLEX",
               psk: bytes | None = None, mdns: bool = False, addrs_factory: Any = None,
               write_timeout: float = FRAME_WRITE_TIMEOUT, guard: InboundGuard | None = None) -> Any:
    """A py-libp2p host with the connection stack of this module.

    Security is Noise only: the library's defaults also offer TLS, SECIO and *plaintext*
    (``/plaintext/2.0.0`` exchanges public keys without proving possession, so a peer
    could claim any peer id).
    """
    from libp2p import new_host
    from libp2p.crypto.x25519 import create_new_key_pair as new_x25519
    from libp2p.security.noise.transport import PROTOCOL_ID as NOISE_PROTOCOL_ID

    noise = CancelSafeNoiseTransport(key_pair, new_x25519().private_key, report=report,
                                     write_timeout=write_timeout)
    transports = ([PnetTCP(psk, write_timeout=write_timeout, guard=guard)]
                  if psk is not None or guard is not None else None)
    host = new_host(key_pair=key_pair, listen_addrs=[listen], enable_mDNS=mdns,
                    bootstrap=None, sec_opt={TProtocol(NOISE_PROTOCOL_ID): noise},
                    muxer_opt=contained_muxers(report, muxer), transports=transports,
                    addrs_factory=addrs_factory)
    contain_stream_handlers(host.get_network(), report)
    return host
