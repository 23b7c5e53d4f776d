"""The sync server cannot be starved and answers bad requests clearly; the client reports who
answered."""

from __future__ import annotations

import time
from typing import Any

import orjson
import pytest
import trio

from agent import metrics
from agent.net.config import SyncLimits
from agent.net.sync import SyncRefused, check_response
from agent.net.sync_server import SyncServer
from support.net_runner import Node, running, wait_for
from test_net_resilience import _dial, stranger
from test_net_sync import history

pytestmark = pytest.mark.timeout(60)


def _fill(store, events) -> None:
    for ev in events:
        store.append(ev.raw)


def _refused(reason: str) -> float:
    return metrics.SYNC_REQUESTS_REFUSED.labels(reason=reason)._value.get()


async def _open_idle(host: Any, node: Node, n: int) -> list[Any]:
    """Open n sync streams and send nothing (a slowloris)."""
    from libp2p.peer.id import ID

    pid = ID.from_base58(node.net.peer_id)
    return [await host.new_stream(pid, [node.net.sync_protocol]) for _ in range(n)]


async def _ask_raw(host: Any, node: Node, payload: bytes) -> Any:
    """Send one framed request of raw bytes; return the decoded reply (None if reset)."""
    from libp2p.io.msgio import VarIntLengthMsgReadWriter
    from libp2p.network.stream.exceptions import StreamError
    from libp2p.peer.id import ID

    stream = await host.new_stream(ID.from_base58(node.net.peer_id), [node.net.sync_protocol])
    rw = VarIntLengthMsgReadWriter(stream, max_msg_size=1 << 24)
    await rw.write_msg(payload)
    try:
        return orjson.loads(await rw.read_msg())
    except StreamError:
        return None


def test_admission_keeps_room_for_newcomers():
    server = SyncServer(protocol="p", store=None, limits=SyncLimits(per_peer=4, total=12,
                                                                     reserved=4))
    assert all(server._admit("hog") for _ in range(4))
    assert not server._admit("hog")                       # per-peer cap
    assert all(server._admit("b") for _ in range(4))       # 8 in use: 4 reserved remain
    assert not server._admit("b") and not server._admit("hog")
    assert all(server._admit(f"new{i}") for i in range(4))  # newcomers get the reserve
    assert not server._admit("late")                       # total cap
    server._release("hog")
    assert not server._admit("b")                          # freed slot is in the reserve
    assert server._admit("late")                           # ... for a peer holding none
    with pytest.raises(ValueError):
        SyncLimits(per_peer=5, total=4)


async def test_slowloris_does_not_starve_sync(tmp_path):
    """A peer that keeps opening sync streams and never sends a request (a slowloris, 40 such
    streams starved the old server): it never holds more than 4, the rest are refused at
    once, its idle ones are closed after the idle timeout, and a fresh peer syncs meanwhile."""
    limits = SyncLimits(idle_timeout=1.0)
    b = Node("b", tmp_path, sync_interval=3600, sync_limits=limits)
    _fill(b.store, history(40))
    busy0, idle0 = _refused("busy"), _refused("idle_timeout")
    peak = 0
    async with running(b.net):
        async with stranger() as bad, trio.open_nursery() as nursery:
            await _dial(bad, b)

            alone = True  # B serves only the hog until C starts

            async def hog() -> None:
                nonlocal peak
                while True:
                    await _open_idle(bad, b, 1)
                    if alone:
                        peak = max(peak, b.net.stats.serve.active)

            nursery.start_soon(hog)
            await wait_for(lambda: _refused("busy") - busy0 >= 100, 30, "100 busy refusals")
            alone = False
            c = Node("c", tmp_path, sync_interval=3600, peers=[b.addr])
            t0 = time.perf_counter()
            async with running(c.net):
                await wait_for(lambda: len(c.rt.order) == 40, 10, "C's sync despite the hog")
                took = time.perf_counter() - t0
                report = await c.net.sync_all()
                assert report.peers_answered == 1 and report.new == 0
            await wait_for(lambda: _refused("idle_timeout") - idle0 >= limits.per_peer, 10,
                           "the hog's idle streams closed by the server")
            nursery.cancel_scope.cancel()
        # (a refusal is counted when the timeout fires; the slot is freed once the reset is out)
        await wait_for(lambda: b.net.stats.serve.active == 0, 5, "every slot released")
        refused = b.net.stats.serve.refused
        print(f"\nfresh peer synced 40 events in {took * 1e3:.0f} ms beside the hog; hog held "
              f"at most {peak} streams; refused {refused}")
        assert peak <= limits.per_peer
        assert refused["busy"] >= 100 and refused["idle_timeout"] >= limits.per_peer
        assert _refused("idle_timeout") - idle0 == refused["idle_timeout"]
        assert b.net.running


@pytest.mark.parametrize("payload,expect", [
    (b"not json", "not JSON"),
    (b"[1, 2]", "JSON object"),
    (b'{"cursor": -5, "limit": 10}', "'cursor' must be an integer"),
    (b'{"has": ["zz"]}', "64-char hex"),
    (b'{"cursor": 0, "limit": 5, "epoch": 7}', "'epoch'"),
    (b'{"get": "%%%"}', "not base64"),
    (b'{"get": "AAAA"}', "whole 32-byte"),
    (b'{"get": ""}', "no event"),
    (b'{"cursor": 0, "limit": 5, "ids": 10, "epoch": []}', "'epoch'"),
    (b'{"cursor": 0, "limit": 5, "ids": true}', "'ids' must be an integer"),
])
async def test_bad_request_gets_a_clear_error_reply(tmp_path, capsys, payload, expect):
    b = Node("b", tmp_path, sync_interval=3600)
    before = _refused("bad_request")
    async with running(b.net):
        async with stranger() as bad:
            await _dial(bad, b)
            reply = await _ask_raw(bad, b, payload)
    assert reply["error"]["code"] == "bad_request" and expect in reply["error"]["message"]
    with pytest.raises(SyncRefused, match=expect):
        check_response(reply)
    assert _refused("bad_request") == before + 1
    assert b.net.stats.serve.refused == {"bad_request": 1}
    out = capsys.readouterr()
    assert "Traceback" not in out.out + out.err


async def test_oversize_request_is_refused(tmp_path):
    b = Node("b", tmp_path, sync_interval=3600)
    async with running(b.net):
        async with stranger() as bad:
            await _dial(bad, b)
            reply = await _ask_raw(bad, b, b"{" + b" " * (70 * 1024) + b"}")
    assert reply["error"]["code"] == "bad_request" and "bytes" in reply["error"]["message"]


async def test_report_counts_who_answered(tmp_path):
    """Two peers connected, one of them refuses everything (busy): the report says 1 of 2."""
    b = Node("b", tmp_path, sync_interval=3600)
    _fill(b.store, history(10))
    d = Node("d", tmp_path, sync_interval=3600,
             sync_limits=SyncLimits(per_peer=1, total=1, reserved=0, idle_timeout=60))
    async with running(b.net), running(d.net):
        a = Node("a", tmp_path, sync_interval=3600, peers=[b.addr, d.addr])
        async with running(a.net):
            await wait_for(lambda: len(a.net.connected) == 2, 10, "A connected to B and D")
            async with stranger() as bad:  # takes D's only slot
                await _dial(bad, d)
                await _open_idle(bad, d, 1)
                # (5 s was too short once in a full run on this 2-core machine)
                await wait_for(lambda: d.net.stats.serve.active == 1, 30, "D's slot taken")
                report = await a.net.sync_all()
            assert report.peers_asked == 2 and report.peers_answered == 1
            assert "busy" in report.errors[d.net.peer_id]
            assert a.net.stats.sync.refused >= 1


async def test_a_stream_with_no_request_in_time_is_told_why(tmp_path):
    """A stream whose request the server did not read within the idle timeout (a slowloris, or
    a request an overloaded agent could not get to in time) gets an `idle_timeout` error reply,
    not a silent reset, so the client knows to retry."""
    from libp2p.io.msgio import VarIntLengthMsgReadWriter

    b = Node("b", tmp_path, sync_interval=3600, sync_limits=SyncLimits(idle_timeout=0.5))
    before = _refused("idle_timeout")
    async with running(b.net):
        async with stranger() as bad:
            await _dial(bad, b)
            (stream,) = await _open_idle(bad, b, 1)
            with trio.fail_after(10):
                reply = orjson.loads(await VarIntLengthMsgReadWriter(stream, 1 << 20).read_msg())
    assert reply["error"]["code"] == "idle_timeout"
    with pytest.raises(SyncRefused, match="no request"):
        check_response(reply)
    assert _refused("idle_timeout") == before + 1


async def test_has_answers_what_is_stored_not_what_is_known(tmp_path):
    """A peer asked whether it has an event answers from its store: an event it holds (stamped
    ahead of its clock) or keeps waiting for a dependency is known to it (sync need not fetch
    it again) but not stored, and counts nowhere yet. An executor asks this about its claim
    before it spends an LLM call (issue 23): "known" would let a claim every peer holds pass."""
    evs = history(3)
    b = Node("b", tmp_path, sync_interval=3600)
    _fill(b.store, evs[:1])
    held = evs[1]
    b.net = b.make_net(knows=lambda i: b.rt.knows(i) or i == held.id)  # b holds evs[1]
    a = Node("a", tmp_path, sync_interval=3600)
    async with running(b.net):
        a.net = a.make_net(peers=[b.addr])
        async with running(a.net):
            await wait_for(lambda: b.net.peer_id in a.net.connected, 20, "a connected to b")
            peer = b.net.peer_id
            assert await a.net.peer_has(peer, evs[0].id)
            assert not await a.net.peer_has(peer, held.id), "a held event was reported stored"
            assert not await a.net.peer_has(peer, evs[2].id)
            _fill(b.store, [held])  # due: accepted and stored
            assert await a.net.peer_has(peer, held.id)
