"""Inbound connections before their handshake (agent.net.wire.InboundGuard), on loopback.

N8 of the insider audit: 300 silent TCP connections, 239 still open after 30 s, and a
stranger's refused dial left no log line and no counter. Here: an address holds at most
``per_ip`` unfinished handshakes, all addresses ``total``; what exceeds them is closed at once,
the rest after ``handshake_timeout``; every one is counted by reason; a member connecting from
another address meanwhile gets in; a stranger without the swarm key is counted and logged once
per address (then summarised), by the real Network.
"""

from __future__ import annotations

import hashlib
import os
import time
from typing import Any

import pytest
import trio
from multiaddr import Multiaddr

from agent.net.config import InboundLimits
from agent.net.wire import InboundGuard, build_host
from support.net_runner import wait_for

pytestmark = pytest.mark.timeout(90)

LOOPBACK = Multiaddr("/ip4/127.0.0.1/tcp/0")
ATTACKER_IP = "127.0.0.2"  # all of 127/8 is loopback on Linux: another address, same machine


def _kp(name: str) -> Any:
    from libp2p.crypto.ed25519 import create_new_key_pair

    return create_new_key_pair(hashlib.sha256(name.encode()).digest())


def _port(host: Any) -> int:
    return int(host.get_addrs()[0].value_for_protocol("tcp"))


async def _silent(port: int, n: int, src: str = ATTACKER_IP) -> list[trio.socket.SocketType]:
    socks = []
    for _ in range(n):
        s = trio.socket.socket()
        await s.bind((src, 0))
        await s.connect(("127.0.0.1", port))
        socks.append(s)
    return socks


async def _closed_within(socks: list, seconds: float) -> int:
    """How many of ``socks`` the other side closed within ``seconds`` (EOF or reset)."""
    closed = 0

    async def one(s) -> None:
        nonlocal closed
        with trio.move_on_after(seconds):
            try:
                data = await s.recv(4096)
                while data:  # (nothing is ever sent to a silent client: EOF comes first)
                    data = await s.recv(4096)
            except OSError:
                pass
            closed += 1

    async with trio.open_nursery() as nursery:
        for s in socks:
            nursery.start_soon(one, s)
    return closed


async def test_silent_connections_are_bounded_and_closed_before_the_handshake():
    psk = os.urandom(32)
    refused: list[tuple[str, str]] = []
    guard = InboundGuard(InboundLimits(per_ip=8, total=64, handshake_timeout=2.0),
                         on_refused=lambda reason, remote: refused.append((reason, remote)))
    a = build_host(key_pair=_kp("a"), listen=LOOPBACK, report=lambda *x: None, psk=psk, guard=guard)
    b = build_host(key_pair=_kp("b"), listen=LOOPBACK, report=lambda *x: None, psk=psk)
    async with a.run(listen_addrs=[LOOPBACK]), b.run(listen_addrs=[LOOPBACK]):
        t0 = time.monotonic()
        socks = await _silent(_port(a), 300)
        await wait_for(lambda: len(refused) >= 292, 10, "292 refusals over the per-address bound")
        assert guard.pending <= 8
        # a member dialling from another address gets in while the flood holds its slots
        from libp2p.peer.peerinfo import PeerInfo

        await b.connect(PeerInfo(a.get_id(), a.get_addrs()))
        assert b.get_network().connections.get(a.get_id())
        closed = await _closed_within(socks, 2.0 + 3.0)
        elapsed = time.monotonic() - t0
        await wait_for(lambda: len(refused) >= 300, 5, "the timed-out handshakes counted too")
        for s in socks:
            s.close()
    reasons = [r for r, _ in refused]
    print(f"\n300 silent connections: {closed} closed by the agent within {elapsed:.1f} s; "
          f"refused {dict((r, reasons.count(r)) for r in set(reasons))}")
    assert closed == 300
    assert reasons.count("pending_limit") == 292 and reasons.count("timeout") == 8
    assert {remote for _, remote in refused} == {ATTACKER_IP}
    assert guard.pending == 0


async def test_a_stranger_without_the_key_is_counted_and_logged_once_per_address(tmp_path):
    """The real Network: a dial with another swarm key fails its handshake; the agent counts
    it (on_refused) and logs net.inbound_refused once for that address, not once per dial."""
    from agent.core.identity import Identity
    from agent.net.config import NetConfig
    from agent.net.host import Network
    from agent.store import EventStore

    lines: list[dict] = []

    class Log:
        def __getattr__(self, level: str):
            return lambda event, **kw: lines.append({"level": level, "event": event, **kw})

        def bind(self, **kw: Any) -> "Log":
            return self

    counted: list[str] = []
    ident = Identity(hashlib.sha256(b"member").digest())
    net = Network(identity=ident, store=EventStore(tmp_path / "events.jsonl"),
                  ingest=lambda raw, source: trio.sleep(0),
                  config=NetConfig(swarm="t", listen_host="127.0.0.1", swarm_key=os.urandom(32)),
                  on_refused=counted.append, log=Log())
    stranger = build_host(key_pair=_kp("stranger"), listen=LOOPBACK, report=lambda *x: None,
                          psk=os.urandom(32))
    async with trio.open_nursery() as nursery:
        await nursery.start(net.run)
        async with stranger.run(listen_addrs=[LOOPBACK]):
            from libp2p.peer.id import ID
            from libp2p.peer.peerinfo import PeerInfo

            target = PeerInfo(ID.from_base58(ident.peer_id), [Multiaddr(net.listen_addrs[0].split("/p2p/")[0])])
            for _ in range(5):
                with trio.move_on_after(3):
                    try:
                        await stranger.connect(target)
                    except Exception:  # the dial fails: what the test is about
                        pass
            await wait_for(lambda: len(counted) >= 5, 20, "five refused dials counted")
        nursery.cancel_scope.cancel()
    assert set(counted) <= {"handshake", "timeout"} and len(counted) >= 5
    logged = [ln for ln in lines if ln["event"] == "net.inbound_refused"]
    assert len(logged) == 1 and logged[0]["remote"] == "127.0.0.1", logged
