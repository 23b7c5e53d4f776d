"""Gossip between three Networks in one trio process, connected in a line A - B - C."""

from __future__ import annotations

import hashlib
import statistics
import time
from contextlib import AsyncExitStack, asynccontextmanager

import orjson
import pytest
import trio

from agent.core.events import MAX_EVENT_BYTES, canonical, decode_event
from agent.core.reasons import Reason, Rejected
from agent.net import gossip_topic
from builders import goal, hello, ident
from support.net_runner import Node, running, wait_for

pytestmark = pytest.mark.timeout(60)


@asynccontextmanager
async def line3(tmp_path, **kw):
    """A -> B <- C by static peers; returns once both links are in the gossip mesh."""
    kw.setdefault("sync_interval", 3600)  # no anti-entropy: gossip alone must deliver
    a, b, c = (Node(n, tmp_path, **kw) for n in ("a", "b", "c"))
    async with AsyncExitStack() as stack:
        await stack.enter_async_context(running(b.net))
        a.net = a.make_net(peers=[b.addr])
        c.net = c.make_net(peers=[b.addr])
        t0 = time.perf_counter()
        await stack.enter_async_context(running(a.net))
        await stack.enter_async_context(running(c.net))
        await wait_for(lambda: set(b.net.connected) == {a.net.peer_id, c.net.peer_id}, 10,
                       "A and C to connect to B")
        connect_s = time.perf_counter() - t0
        await wait_for(lambda: a.net.mesh_peers == [b.net.peer_id]
                       and c.net.mesh_peers == [b.net.peer_id]
                       and set(b.net.mesh_peers) == {a.net.peer_id, c.net.peer_id}, 10,
                       "the gossip mesh A-B-C")
        mesh_s = time.perf_counter() - t0
        print(f"\nconnect {connect_s * 1e3:.0f} ms, mesh formed {mesh_s * 1e3:.0f} ms")
        yield a, b, c
    for n in (a, b, c):
        n.store.close()


async def test_event_from_a_reaches_c_through_b(tmp_path):
    async with line3(tmp_path) as (a, b, c):
        assert c.net.peer_id not in a.net.connected  # really a line
        ev = goal(ident("a"))
        t0 = time.perf_counter()
        await a.publish(ev)
        await wait_for(lambda: ev.id in c.rt.ids, 5, "the event at C")
        print(f"A->B->C latency {(c.rt.arrived[ev.id] - t0) * 1e3:.1f} ms")
        assert ev.id in b.rt.ids
        assert c.rt.sources[ev.id] == a.net.peer_id  # via gossip, origin A
        assert c.net.stats.sync.new == 0
        assert a.net.stats.gossip.own == 1  # A's own message is not fed back to ingest
        assert [s for _, s in a.rt.calls] == ["local"]
        port = int(b.addr.split("/tcp/")[1].split("/")[0])
    # clean shutdown: B's listener is closed
    with pytest.raises(OSError):
        with trio.fail_after(5):
            await trio.open_tcp_stream("127.0.0.1", port)


async def test_200_events_at_50_per_second_all_arrive(tmp_path):
    async with line3(tmp_path) as (a, b, c):
        events = [hello(ident(f"w{i % 9}"), "scorer", wall=i) for i in range(200)]
        sent: dict[str, float] = {}
        t0 = time.perf_counter()
        for i, ev in enumerate(events):
            await trio.sleep_until(trio.current_time() + max(0.0, t0 + i / 50 - time.perf_counter()))
            sent[ev.id] = time.perf_counter()
            await a.publish(ev)
        rate = len(events) / (time.perf_counter() - t0)
        await wait_for(lambda: all(e.id in c.rt.ids and e.id in b.rt.ids for e in events), 15,
                       "all 200 events at B and C")
        lat = sorted((c.rt.arrived[i] - s) * 1e3 for i, s in sent.items())
        print(f"published at {rate:.1f}/s; A->C latency median {statistics.median(lat):.1f} ms,"
              f" p95 {lat[int(len(lat) * 0.95)]:.1f} ms, max {lat[-1]:.1f} ms")
        for node in (b, c):
            assert node.net.stats.gossip.new == 200
            assert node.net.stats.sync.new == 0  # delivered by gossip alone
            assert node.net.stats.gossip.inbox_overflow == 0
            assert node.rt.duplicates == 0
        assert a.net.stats.gossip.own == 200 and a.net.stats.gossip.published == 200


def _tampered(raw: bytes) -> bytes:
    obj = orjson.loads(raw)
    obj["body"]["name"] = "mallory"
    return canonical(obj)


async def test_invalid_messages_rejected_by_validator_and_not_forwarded(tmp_path):
    from libp2p import new_host
    from libp2p.crypto.ed25519 import create_new_key_pair
    from libp2p.peer.peerinfo import info_from_p2p_addr
    from libp2p.pubsub.pubsub import Pubsub
    from libp2p.tools.anyio_service import background_trio_service
    from multiaddr import Multiaddr

    from agent.net.gossip import make_gossipsub

    valid = hello(ident("x"), "executor", wall=5)
    bad_sig = _tampered(valid.raw)
    with pytest.raises(Rejected) as info:
        decode_event(bad_sig)
    assert info.value.reason is Reason.BAD_SIGNATURE
    oversize = b'{"pad":"' + b"x" * (MAX_EVENT_BYTES + 100) + b'"}'
    invalid = [b"not json at all", bad_sig, oversize, b'{"v":1}']

    async with line3(tmp_path) as (a, b, c):
        topic = gossip_topic("test")
        ma = Multiaddr("/ip4/127.0.0.1/tcp/0")
        host = new_host(key_pair=create_new_key_pair(hashlib.sha256(b"raw-x").digest()),
                        listen_addrs=[ma], muxer_preference="MPLEX")
        gs = make_gossipsub()
        ps = Pubsub(host, gs)  # no validator: it publishes whatever it is given
        async with background_trio_service(ps), background_trio_service(gs):
            async with host.run(listen_addrs=[ma]):
                await ps.wait_until_ready()
                await ps.subscribe(topic)
                await host.connect(info_from_p2p_addr(Multiaddr(b.addr)))
                await wait_for(lambda: any(p.to_base58() == b.net.peer_id
                                           for p in gs.mesh.get(topic, ())), 10, "B in X's mesh")
                for data in invalid:
                    await ps.publish(topic, data)
                await ps.publish(topic, valid.raw)  # same path, valid: must arrive
                await wait_for(lambda: valid.id in c.rt.ids, 5, "the valid event at C")
                await trio.sleep(0.3)

        assert b.net.stats.gossip.rejected == len(invalid)
        assert c.net.stats.gossip.rejected == 0  # B never forwarded them
        assert a.net.stats.gossip.rejected == 0
        for node in (b, c, a):  # ingest only ever saw the valid event
            assert [raw for raw, _ in node.rt.calls] == [valid.raw]
            assert node.rt.rejected == []


async def test_port_in_use_is_reported(tmp_path):
    import socket

    from agent.net import ListenError

    with socket.socket() as s:  # libp2p binds with SO_REUSEPORT and only logs a failure
        s.bind(("127.0.0.1", 0))
        s.listen()
        node = Node("p", tmp_path, listen_port=s.getsockname()[1])
        with trio.fail_after(10):
            async with trio.open_nursery() as nursery:
                with pytest.raises(ListenError, match="cannot listen on"):
                    await nursery.start(node.net.run)
    assert not node.net.running and node.net.listen_addrs == []
    node.store.close()


async def test_a_burst_of_valid_messages_in_one_rpc_all_arrive(tmp_path):
    """300 valid events in one RPC: the library validates them in parallel tasks and used to
    hand them to a 32-slot subscription channel that dropped the rest (a warning line each,
    no counter; seen under the chaos suite's hostile flood). Now every one reaches ingest."""
    from libp2p import new_host
    from libp2p.crypto.ed25519 import create_new_key_pair
    from libp2p.peer.id import ID
    from libp2p.peer.peerinfo import info_from_p2p_addr
    from libp2p.pubsub.gossipsub import PROTOCOL_ID_V11
    from libp2p.pubsub.pb import rpc_pb2
    from libp2p.pubsub.validators import PUBSUB_SIGNING_PREFIX
    from libp2p.utils import encode_varint_prefixed
    from multiaddr import Multiaddr

    events = [hello(ident(f"w{i % 7}"), "scorer", wall=1000 + i) for i in range(300)]
    async with line3(tmp_path) as (a, b, c):
        ma = Multiaddr("/ip4/127.0.0.1/tcp/0")
        host = new_host(key_pair=create_new_key_pair(hashlib.sha256(b"raw-burst").digest()),
                        listen_addrs=[ma], muxer_preference="MPLEX")
        key = host.get_private_key()
        msgs = []
        for i, ev in enumerate(events):
            m = rpc_pb2.Message(from_id=host.get_id().to_bytes(), data=ev.raw,
                                seqno=(10**9 + i).to_bytes(8, "big"), topicIDs=[gossip_topic("test")])
            m.signature = key.sign(PUBSUB_SIGNING_PREFIX.encode() + m.SerializeToString())
            m.key = key.get_public_key().serialize()
            msgs.append(m)
        async with host.run(listen_addrs=[ma]):
            await host.connect(info_from_p2p_addr(Multiaddr(b.addr)))
            stream = await host.new_stream(ID.from_base58(b.net.peer_id), [PROTOCOL_ID_V11])
            await stream.write(encode_varint_prefixed(rpc_pb2.RPC(publish=msgs).SerializeToString()))
            await wait_for(lambda: all(e.id in b.rt.ids for e in events), 15, "all 300 at B")
            await stream.close()
        assert b.net.stats.gossip.new == 300 and b.net.stats.gossip.inbox_overflow == 0
        assert b.net.stats.sync.new == 0  # delivered by gossip alone


# ---------------------------------------------------------------------- idle mesh churn
def _mesh_of(n: int):
    from types import SimpleNamespace

    from libp2p.crypto.ed25519 import create_new_key_pair
    from libp2p.peer.id import ID
    from libp2p.pubsub.gossipsub import PROTOCOL_ID_V11

    from agent.net.gossip import make_gossipsub

    gs = make_gossipsub()
    topic = "/swarm/t/events/1"
    peers = [ID.from_pubkey(create_new_key_pair(bytes([i + 1]) * 32).public_key) for i in range(n)]
    gs.pubsub = SimpleNamespace(peer_topics={topic: set(peers)}, my_id=peers[0])
    for p in peers:
        gs.peer_protocol[p] = PROTOCOL_ID_V11
    return gs, topic, peers


def test_a_peer_we_prune_or_refuse_is_not_grafted_within_the_back_off():
    """The library recorded a back-off only on the pruned side, so a pruner short of peers
    grafted the peer it had just pruned (or refused) a heartbeat later, was refused as a GRAFT
    "flood", and the pair refused each other for ever: 20 idle agents exchanged 1.6 GRAFT and
    1.6 PRUNE per agent per second (0.03 refusals after this change)."""
    gs, topic, peers = _mesh_of(16)
    gs.mesh[topic] = set(peers[1:])  # 15 > degree_high (12): the heartbeat prunes down to 6
    _graft, prune = gs.mesh_heartbeat()
    pruned = [p for p, topics in prune.items() if topic in topics]
    assert len(pruned) == 15 - gs.degree
    assert all(gs._check_back_off(p, topic) for p in pruned)
    # below degree_low now: the next heartbeat grafts, never one of those just pruned
    gs.mesh[topic] = set(peers[1:3])
    graft, _ = gs.mesh_heartbeat()
    assert graft and not set(graft) & set(pruned)

    sent = []

    async def capture(msg, to_peer):
        sent.append((msg, to_peer))

    gs.emit_control_message = capture
    trio.run(gs.emit_prune, topic, peers[5], False, False)  # how handle_graft refuses a GRAFT
    assert sent and gs._check_back_off(peers[5], topic)


def test_graft_flood_window_is_shorter_than_the_back_off():
    """An honest peer re-grafts once its back-off (prune_back_off) is over; the flood check
    must not call that a flood (it used min(10 s, back-off): the back-off itself)."""
    gs, topic, peers = _mesh_of(3)
    assert gs.graft_flood_threshold < gs.prune_back_off
    gs.graft_flood_tracking[peers[1]][topic] = time.time() - gs.prune_back_off - 0.5
    assert gs._check_graft_flood_protection(peers[1], topic)
    gs.graft_flood_tracking[peers[1]][topic] = time.time() - 0.5
    assert not gs._check_graft_flood_protection(peers[1], topic)  # a real flood still is one
