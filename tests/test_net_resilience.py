"""No peer's behaviour ends an agent's Network: failures close one connection, are counted,
and the agent reconnects."""

from __future__ import annotations

import hashlib
import os
from contextlib import asynccontextmanager
from typing import Any

import pytest
import trio
from multiaddr import Multiaddr

from agent import metrics
from builders import hello, ident
from support.net_runner import Node, running, wait_for
from test_net_sync import history

pytestmark = pytest.mark.timeout(60)


def _fill(store, events) -> None:
    for ev in events:
        store.append(ev.raw)


def _conn_errors(kind: str) -> float:
    return metrics.CONNECTION_ERRORS.labels(kind=kind)._value.get()


@asynccontextmanager
async def stranger(name: str = "mallory"):
    """A plain py-libp2p host (the library's defaults), as a hostile peer would run."""
    from libp2p import new_host
    from libp2p.crypto.ed25519 import create_new_key_pair

    ma = Multiaddr("/ip4/127.0.0.1/tcp/0")
    host = new_host(key_pair=create_new_key_pair(hashlib.sha256(name.encode()).digest()),
                    listen_addrs=[ma], muxer_preference="MPLEX")
    async with host.run(listen_addrs=[ma]):
        yield host


async def _dial(host: Any, node: Node) -> Any:
    from libp2p.peer.peerinfo import info_from_p2p_addr

    await host.connect(info_from_p2p_addr(Multiaddr(node.addr)))
    return host.get_network().connections[info_from_p2p_addr(Multiaddr(node.addr)).peer_id][0]


def _tcp(conn: Any) -> Any:
    return conn.muxed_conn.secured_conn.conn.read_writer.read_write_closer.stream


async def test_sync_cancelled_while_the_socket_is_busy_kills_nobody(tmp_path):
    """The executor's pattern: ``move_on_after`` around ``sync_all`` while another write is
    in flight on the same connection. Before the fix the serving peer died of InvalidTag."""
    b = Node("b", tmp_path, sync_interval=3600)
    _fill(b.store, history(30))
    a = Node("a", tmp_path, sync_interval=3600)
    async with running(b.net):
        a.net = a.make_net(peers=[b.addr])
        async with running(a.net):
            await wait_for(lambda: len(a.rt.order) == 30, 10, "first sync")
            conn = next(iter(a.net._host.get_network().connections.values()))[0]
            tcp = _tcp(conn)
            for round_ in range(5):
                _fill(b.store, [hello(ident(f"r{round_}"), "scorer", wall=round_)])
                held = trio.Event()

                async def holder() -> None:
                    async with tcp.write_lock:  # a large write in flight for 0.3 s
                        held.set()
                        await trio.sleep(0.3)

                async with trio.open_nursery() as nursery:
                    nursery.start_soon(holder)
                    await held.wait()
                    with trio.move_on_after(0.05):  # expires while the sync waits its turn
                        await a.net.sync_all()
                report = await a.net.sync_all()
                assert b.net.running and a.net.running
                assert report.peers_answered == 1, report
            await wait_for(lambda: len(a.rt.order) == 35, 5, "every round's event")
            assert a.net.stats.connections.errors == 0 and b.net.stats.connections.errors == 0


async def test_garbage_on_an_established_connection_is_counted_and_survived(tmp_path):
    node = Node("n", tmp_path, sync_interval=3600)
    _fill(node.store, history(5))
    before = _conn_errors("decrypt")
    async with running(node.net):
        async with stranger() as bad:
            conn = await _dial(bad, node)
            await _tcp(conn).write(b"\x00\x40" + os.urandom(0x40))
            await wait_for(lambda: node.net.stats.connections.errors == 1, 5, "the count")
            assert _conn_errors("decrypt") == before + 1
            await wait_for(lambda: bad.get_id().to_base58() not in node.net.connected, 5,
                           "the connection to be closed")
            assert node.net.running
        # an honest peer still connects and syncs
        c = Node("c", tmp_path, sync_interval=3600, peers=[node.addr])
        async with running(c.net):
            await wait_for(lambda: len(c.rt.order) == 5, 10, "sync after the attack")


async def test_garbage_pubsub_rpc_closes_that_connection_only(tmp_path):
    """Bytes that are not a protobuf on the gossip stream: the library's pubsub reader raises
    a DecodeError nobody catches, which used to stop the whole host."""
    from libp2p.peer.id import ID
    from libp2p.pubsub.gossipsub import PROTOCOL_ID_V11

    node = Node("n", tmp_path, sync_interval=3600)
    before = _conn_errors("malformed")
    async with running(node.net):
        async with stranger() as bad:
            await _dial(bad, node)
            stream = await bad.new_stream(ID.from_base58(node.net.peer_id), [PROTOCOL_ID_V11])
            await stream.write(b"\x05\xff\xff\xff\xff\xff")  # varint 5 + 5 bytes of junk
            await wait_for(lambda: _conn_errors("malformed") == before + 1, 5, "the count")
            await wait_for(lambda: bad.get_id().to_base58() not in node.net.connected, 5,
                           "the connection to be closed")
            assert node.net.running
