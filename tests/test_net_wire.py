"""The connection stack below the muxer (agent.net.wire), against py-libp2p 0.8.1 as shipped.

The "library_" tests pin the library's behaviour that killed agents (they fail, loudly, the
day py-libp2p fixes it: then the workaround can go). The others show that the same faults,
on our stack, close one connection at most and never stop the host.
"""

from __future__ import annotations

import hashlib
import os
from contextlib import asynccontextmanager
from typing import Any

import pytest
import trio
from multiaddr import Multiaddr

from agent.net.wire import ConnErrorKind, PskStream, build_host, xsalsa20
from support.net_runner import wait_for

pytestmark = pytest.mark.timeout(60)

ECHO = "/test/collect/1"
LOOPBACK = Multiaddr("/ip4/127.0.0.1/tcp/0")


def _kp(name: str) -> Any:
    from libp2p.crypto.ed25519 import create_new_key_pair

    return create_new_key_pair(hashlib.sha256(name.encode()).digest())


def stock_host(name: str) -> Any:
    from libp2p import new_host

    return new_host(key_pair=_kp(name), listen_addrs=[LOOPBACK], muxer_preference="MPLEX")


class Reports:
    def __init__(self) -> None:
        self.items: list[tuple[ConnErrorKind, str, BaseException | None]] = []

    def __call__(self, kind: ConnErrorKind, peer: str, exc: BaseException | None) -> None:
        self.items.append((kind, peer, exc))

    def kinds(self) -> list[ConnErrorKind]:
        return [k for k, _, _ in self.items]


def our_host(name: str, reports: Reports, **kw: Any) -> Any:
    return build_host(key_pair=_kp(name), listen=LOOPBACK, report=reports, **kw)


class Collector:
    """A protocol handler that records what each inbound stream carried."""

    def __init__(self) -> None:
        self.data = bytearray()
        self.streams = 0

    async def __call__(self, stream: Any) -> None:
        from libp2p.network.stream.exceptions import StreamError

        self.streams += 1
        try:
            while True:
                chunk = await stream.read(65536)
                if not chunk:
                    return
                self.data += chunk
        except StreamError:
            return


@asynccontextmanager
async def running(*hosts: Any):
    """Run hosts; ``died[i]`` holds the exception that ended host i's run(), if any."""
    died: dict[int, BaseException] = {}
    async with trio.open_nursery() as nursery:
        for i, host in enumerate(hosts):
            started = trio.Event()

            async def run(i=i, host=host, started=started) -> None:
                try:
                    async with host.run(listen_addrs=[LOOPBACK]):
                        started.set()
                        await trio.sleep_forever()
                except Exception as exc:  # what the test is about: record, don't propagate
                    died[i] = exc
                    started.set()

            nursery.start_soon(run)
            await started.wait()
        try:
            yield died
        finally:
            nursery.cancel_scope.cancel()


def _leaves(exc: BaseException) -> list[BaseException]:
    if isinstance(exc, BaseExceptionGroup):
        return [leaf for e in exc.exceptions for leaf in _leaves(e)]
    return [exc]


async def _connect(a: Any, b: Any) -> Any:
    from libp2p.peer.peerinfo import PeerInfo

    await a.connect(PeerInfo(b.get_id(), b.get_addrs()))
    return a.get_network().connections[b.get_id()][0]


def _tcp(conn: Any) -> Any:
    """The TrioTCPStream under a connection's secure session."""
    return conn.muxed_conn.secured_conn.conn.read_writer.read_write_closer.stream


async def _hold(lock: trio.Lock, nursery: trio.Nursery) -> trio.Event:
    """Hold a lock from another task (a slow writer or a reader that stopped); returns the
    event that releases it."""
    held, release = trio.Event(), trio.Event()

    async def holder() -> None:
        async with lock:
            held.set()
            await release.wait()

    nursery.start_soon(holder)
    await held.wait()
    return release


async def _freeze_reader(conn: Any, poke: Any) -> trio.Event:
    """Make a host stop reading a connection (as if its process were stopped): gate its
    socket reads behind an event; ``poke()`` sends one message to flush the read in
    progress. Returns the event that lets it read again."""
    tcp = _tcp(conn)
    thaw = trio.Event()
    read = tcp.read

    async def gated(n: int | None = None) -> bytes:
        await thaw.wait()
        return await read(n)

    tcp.read = gated
    await poke()
    return thaw


async def _write_cancelled_while_socket_busy(conn: Any, stream: Any, data: bytes) -> bool:
    """The InvalidTag trigger: another writer is mid-``send_all`` on the connection (here:
    holds the socket's write lock) when this write's cancel scope expires (the executor's
    ``move_on_after`` around ``sync_all``, a request timeout...). Returns whether the
    scope's deadline passed during the write (with the fix the write completes first and
    the cancellation, if any, lands at the caller's next checkpoint)."""
    async with trio.open_nursery() as nursery:
        release = await _hold(_tcp(conn).write_lock, nursery)
        with trio.move_on_after(0.2) as scope:
            nursery.start_soon(_release_later, release, 0.4)
            await stream.write(data)
    return trio.current_time() >= scope.deadline


async def _release_later(event: trio.Event, delay: float) -> None:
    await trio.sleep(delay)
    event.set()


# ------------------------------------------------------------------ the root cause (library)
async def test_library_noise_write_cancelled_after_encrypting_kills_the_peer():
    """py-libp2p 0.8.1 as shipped: the reproduction of the agents' InvalidTag crash."""
    from noise.exceptions import NoiseInvalidMessage

    a, b = stock_host("a"), stock_host("b")
    collect = Collector()
    b.set_stream_handler(ECHO, collect)
    async with running(a, b) as died:
        conn = await _connect(a, b)
        stream = await a.new_stream(b.get_id(), [ECHO])
        await stream.write(b"zero")
        await wait_for(lambda: bytes(collect.data) == b"zero", 5, "first message")
        assert await _write_cancelled_while_socket_busy(conn, stream, b"one")
        await stream.write(b"two")  # the next frame carries nonce n+1; B expects n
        await wait_for(lambda: 1 in died, 5, "B's host to die")
    assert any(isinstance(e, NoiseInvalidMessage) for e in _leaves(died[1])), died[1]
    assert 0 not in died


async def test_cancelled_write_keeps_the_channel_in_step():
    ra, rb = Reports(), Reports()
    a, b = our_host("a", ra), our_host("b", rb)
    collect = Collector()
    b.set_stream_handler(ECHO, collect)
    async with running(a, b) as died:
        conn = await _connect(a, b)
        stream = await a.new_stream(b.get_id(), [ECHO])
        await stream.write(b"zero")
        assert await _write_cancelled_while_socket_busy(conn, stream, b"one")
        await stream.write(b"two")
        # the cancelled write was completed (shielded), in order, then the next one
        await wait_for(lambda: bytes(collect.data) == b"zeroonetwo", 5, "all three writes")
        assert not died and ra.items == [] and rb.items == []
        assert b.get_id() in a.get_network().connections


async def test_stalled_write_closes_that_connection_only():
    """The peer stops reading (SIGSTOP): a write blocked past the write timeout closes the
    connection (a half-written frame cannot be repaired); a cancelled caller waits at most
    that long; both hosts keep running and can connect again."""
    ra, rb = Reports(), Reports()
    a, b = our_host("a", ra, write_timeout=0.5), our_host("b", rb)
    collect = Collector()
    b.set_stream_handler(ECHO, collect)
    async with running(a, b) as died:
        await _connect(a, b)
        stream = await a.new_stream(b.get_id(), [ECHO])
        b_conn = b.get_network().connections[a.get_id()][0]
        resume = await _freeze_reader(b_conn, lambda: stream.write(b"poke"))
        t0 = trio.current_time()
        with trio.move_on_after(0.1):
            for _ in range(64):  # far more than the socket buffers hold
                await stream.write(os.urandom(1 << 20))
        waited = trio.current_time() - t0
        assert waited < 0.5 + 2.0, waited
        await wait_for(lambda: ConnErrorKind.WRITE_STALLED in ra.kinds(), 5, "the stall report")
        await wait_for(lambda: b.get_id() not in a.get_network().connections, 5, "A to drop it")
        resume.set()
        await wait_for(lambda: a.get_id() not in b.get_network().connections, 5, "B to drop it")
        assert not died
        await _connect(a, b)
        fresh = await a.new_stream(b.get_id(), [ECHO])
        before = len(collect.data)
        await fresh.write(b"again")
        await wait_for(lambda: bytes(collect.data[before:]).endswith(b"again"), 5, "after")
        assert ra.kinds() == [ConnErrorKind.WRITE_STALLED]


@pytest.mark.parametrize("stock", [True, False], ids=["library", "ours"])
async def test_garbage_under_noise_closes_one_connection(stock):
    """A peer writes bytes that are not a valid Noise frame on an established connection."""
    reports = Reports()
    a = stock_host("a")
    b = stock_host("b") if stock else our_host("b", reports)
    collect = Collector()
    b.set_stream_handler(ECHO, collect)
    async with running(a, b) as died:
        conn = await _connect(a, b)
        await _tcp(conn).write(b"\x00\x30" + os.urandom(0x30))  # framed, not authentic
        if stock:
            await wait_for(lambda: 1 in died, 5, "B's host to die")
            return
        await wait_for(lambda: reports.items, 5, "B's report")
        assert reports.kinds() == [ConnErrorKind.DECRYPT]
        assert reports.items[0][1] == a.get_id().to_base58()
        await wait_for(lambda: a.get_id() not in b.get_network().connections, 5, "closed")
        assert not died
        await _connect(a, b)  # the same peer may come back
        stream = await a.new_stream(b.get_id(), [ECHO])
        await stream.write(b"ok")
        await wait_for(lambda: bytes(collect.data) == b"ok", 5, "a message after reconnect")


async def test_peer_cut_mid_frame_is_a_quiet_disconnect():
    reports = Reports()
    a, b = stock_host("a"), our_host("b", reports)
    async with running(a, b) as died:
        conn = await _connect(a, b)
        tcp = _tcp(conn)
        await tcp.write(b"\x01\x00" + b"x" * 10)  # announces 256 bytes, sends 10
        await tcp.close()
        await wait_for(lambda: a.get_id() not in b.get_network().connections, 5, "closed")
        assert not died and reports.items == []  # an ordinary hang-up, not an error


# ------------------------------------------------------------------------------------ pnet
class _Pipe:
    """A ReadWriteCloser over one end of a trio memory stream pair."""

    def __init__(self, end: Any) -> None:
        self.end = end
        self.sent = bytearray()

    async def write(self, data: bytes) -> None:
        self.sent += data
        await self.end.send_all(data)

    async def read(self, n: int | None = None) -> bytes:
        return await self.end.receive_some(n)

    async def close(self) -> None:
        await self.end.aclose()

    def get_remote_address(self) -> tuple[str, int]:
        return ("127.0.0.1", 1)


def test_xsalsa20_matches_libsodium():
    import nacl.secret

    key, nonce, msg = os.urandom(32), os.urandom(24), os.urandom(3000)
    boxed = nacl.secret.SecretBox(key).encrypt(msg, nonce).ciphertext  # tag || ciphertext
    stream = xsalsa20(key, nonce).encrypt(bytes(32 + len(msg)))  # secretbox skips 32 bytes
    assert bytes(m ^ k for m, k in zip(msg, stream[32:])) == boxed[16:]


async def test_psk_stream_wire_format_and_round_trip():
    from trio.testing import memory_stream_pair

    key = os.urandom(32)
    left, right = memory_stream_pair()
    a, b = _Pipe(left), _Pipe(right)
    sa, sb = PskStream(a, key), PskStream(b, key)
    await sa.write(b"hello ")
    await sa.write(b"world")
    # PSK v1: a 24-byte nonce, then XSalsa20(psk, nonce) of the bytes written, as one stream
    nonce, body = bytes(a.sent[:24]), bytes(a.sent[24:])
    assert xsalsa20(key, nonce).decrypt(body) == b"hello world"
    got = b""
    while len(got) < 11:
        got += await sb.read(100)
    assert got == b"hello world"
    await sb.write(b"back")
    assert await sa.read(100) == b"back"
    # another key reads noise
    left2, right2 = memory_stream_pair()
    sc, sd = PskStream(_Pipe(left2), key), PskStream(_Pipe(right2), os.urandom(32))
    await sc.write(b"/multistream/1.0.0\n")
    assert await sd.read(100) != b"/multistream/1.0.0\n"


@pytest.mark.parametrize("other", ["same", "different", "none"])
async def test_private_network_hosts(other):
    """With a swarm key only holders of the same key connect."""
    key = os.urandom(32)
    ra, rb = Reports(), Reports()
    a = our_host("a", ra, psk=key)
    b_key = {"same": key, "different": os.urandom(32), "none": None}[other]
    b = our_host("b", rb, psk=b_key)
    collect = Collector()
    a.set_stream_handler(ECHO, collect)
    async with running(a, b) as died:
        if other == "same":
            await _connect(b, a)
            stream = await b.new_stream(a.get_id(), [ECHO])
            await stream.write(b"member")
            await wait_for(lambda: bytes(collect.data) == b"member", 5, "the member's bytes")
        else:
            from libp2p.peer.peerinfo import PeerInfo

            outcome = "still trying after 5 s"
            with trio.move_on_after(5):
                try:
                    await b.connect(PeerInfo(a.get_id(), a.get_addrs()))
                    outcome = "connected"
                except Exception as exc:  # the library's dial error types vary by stage
                    outcome = f"{type(exc).__name__}: {str(exc)[:100]}"
            print(f"\nstranger ({other} key): {outcome}")
            assert outcome != "connected"
            assert a.get_network().connections == {} and collect.streams == 0
        assert not died and ra.items == [] and rb.items == []
