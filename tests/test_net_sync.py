"""Sync protocol: paging, epochs, late joiners, dead/foreign peers, restarts."""

from __future__ import annotations

import socket
import time

import orjson
import pytest
import trio

from agent.core.events import Goal, sign_event
from agent.core.hlc import Timestamp
from agent.store import EventStore
from agent.net.config import SyncLimits
from agent.store import raw_event_id
from agent.net.sync import (
    MAX_GET, MAX_ID_PAGE, MAX_PAGE, MAX_PAGE_BYTES, OrjsonCodec, SyncProtocolError, build_get,
    build_page, check_get_response, check_id_response, check_response, pack_ids, unpack_ids,
)
from agent.net.sync_client import SyncClient
from builders import T0, claim, goal, hello, ident, params, proposal, vote
from support.net_runner import Node, identity_for, running, wait_for

pytestmark = pytest.mark.timeout(60)


def history(n: int) -> list:
    """n valid signed events with dependencies: a goal, proposals on it, votes on those."""
    g = goal(ident("alice"))
    out = [g]
    scorers = [ident(f"scorer{i}") for i in range(3)]
    out += [hello(s, "scorer", wall=1) for s in scorers]
    i = 0
    while len(out) < n:
        p = proposal(ident(f"dec{i % 4}"), g.id, [f"part {i} a", f"part {i} b"], wall=10 + i,
                     strategy=f"s{i}")
        out.append(p)
        for s in scorers:
            if len(out) < n:
                out.append(vote(s, g.id, p.id, wall=20 + i))
        if len(out) < n:
            out.append(claim(ident(f"ex{i % 3}"), f"{p.id}/0", wall=30 + i))
        i += 1
    return out[:n]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _fill(store: EventStore, events) -> None:
    for ev in events:
        store.append(ev.raw)


# ---------------------------------------------------------------------- protocol unit tests
def test_build_page_cursor_epoch_and_limits(tmp_path):
    st = EventStore(tmp_path / "e.jsonl")
    evs = history(30)
    _fill(st, evs)
    raws = [e.raw.decode() for e in evs]

    page = build_page(st, {"epoch": None, "cursor": 0, "limit": 10})
    assert page == {"epoch": st.epoch, "events": raws[:10], "next": 10, "total": 30}
    assert check_response(orjson.loads(orjson.dumps(page)))[2] == 10
    page = build_page(st, {"epoch": st.epoch, "cursor": 25, "limit": 10})
    assert page["events"] == raws[25:] and page["next"] == 30
    assert build_page(st, {"epoch": st.epoch, "cursor": 30, "limit": 10})["events"] == []
    # another epoch (the requester pulled a wiped log) or a cursor past the end: from 0
    assert build_page(st, {"epoch": "0" * 16, "cursor": 20, "limit": 5})["events"] == raws[:5]
    assert build_page(st, {"epoch": st.epoch, "cursor": 99, "limit": 5})["next"] == 5
    # the limit is capped
    assert len(build_page(st, {"epoch": None, "cursor": 0, "limit": 10**6})["events"]) == 30
    assert MAX_PAGE >= 200
    for bad in ([], {"cursor": -1, "limit": 5}, {"cursor": 0, "limit": 0},
                {"cursor": "0", "limit": 5}, {"cursor": 0, "limit": 5, "epoch": 7},
                {"cursor": True, "limit": 5}):
        with pytest.raises(SyncProtocolError):
            build_page(st, bad)
    for bad in ({"epoch": "e", "events": [1], "next": 1, "total": 1},
                {"epoch": "e", "events": ["a"], "next": 2, "total": 1},
                {"epoch": "", "events": [], "next": 0, "total": 0}, None):
        with pytest.raises(SyncProtocolError):
            check_response(bad)


def test_build_page_caps_bytes(tmp_path):
    st = EventStore(tmp_path / "big.jsonl", fsync=False)
    big = [sign_event(ident(f"g{i}"), Timestamp(T0 + i, 0),
                      Goal(title="t", description='"\\' * 900, params=params()))
           for i in range(40)]
    for _ in range(100):  # 4000 events of ~3.8 KiB whose quotes double when re-encoded
        _fill(st, big)
    page = build_page(st, {"epoch": None, "cursor": 0, "limit": MAX_PAGE})
    encoded = len(orjson.dumps(page))
    assert 0 < len(page["events"]) < MAX_PAGE
    assert MAX_PAGE_BYTES * 0.9 < encoded <= MAX_PAGE_BYTES + 4096
    assert encoded < 10 * 1024 * 1024  # the library's response limit


def test_ids_page_and_get_serve_ids_then_bodies(tmp_path):
    st = EventStore(tmp_path / "e.jsonl")
    evs = history(30)
    _fill(st, evs[:20])
    ids = [e.id for e in evs]
    assert [raw_event_id(e.raw) for e in evs] == ids  # the store's id is the event's id
    page = build_page(st, {"epoch": None, "cursor": 5, "limit": 200, "ids": 10})
    assert check_id_response(orjson.loads(orjson.dumps(page))) == (st.epoch, ids[5:15], 5, 15, 20)
    _fill(st, evs[20:])  # appended after the index was built: indexed too
    page = build_page(st, {"epoch": st.epoch, "cursor": 15, "limit": 1, "ids": 100})
    assert unpack_ids(page["ids"], 100) == ids[15:] and page["next"] == 30
    # an ids page may be larger than an events page, up to MAX_ID_PAGE, and fits a response
    assert MAX_ID_PAGE > MAX_PAGE
    assert len(orjson.dumps({"epoch": "e" * 64, "ids": pack_ids(["ab" * 32] * MAX_ID_PAGE),
                             "start": 2**53, "next": 2**53, "total": 2**53})) <= MAX_PAGE_BYTES
    for bad in ({"cursor": 0, "limit": 5, "ids": True}, {"cursor": 0, "limit": 5, "ids": 0}):
        with pytest.raises(SyncProtocolError, match="'ids' must be an integer"):
            build_page(st, bad)
    # get: the bodies in the order asked, null for one not held
    unknown = "ab" * 32
    got = build_get(st, {"get": pack_ids([ids[7], unknown, ids[2]])})
    assert got == {"events": [evs[7].raw.decode(), None, evs[2].raw.decode()]}
    assert check_get_response(got, 3) == got["events"]


def test_malformed_and_oversize_id_lists_are_refused(tmp_path):
    st = EventStore(tmp_path / "e.jsonl")
    _fill(st, history(5))
    one = pack_ids(["cd" * 32])
    for bad, why in (({"get": "!!not base64!!"}, "not base64"),
                     ({"get": one[:-8]}, "whole 32-byte"),  # a truncated id
                     ({"get": 12}, "base64 string"),
                     ({"get": ""}, "no event"),
                     ({"get": pack_ids(["cd" * 32] * (MAX_GET + 1))}, f"at most {MAX_GET}")):
        with pytest.raises(SyncProtocolError, match=why):
            build_get(st, bad)
    # the largest get a client may send fits a request the server reads
    biggest = OrjsonCodec().encode_request({"get": pack_ids(["ef" * 32] * MAX_GET)})
    assert len(biggest) <= SyncLimits().max_request_bytes
    # responses: an ids page longer than its positions, too many ids, bad shapes
    with pytest.raises(SyncProtocolError, match="inconsistent"):
        check_id_response({"epoch": "e", "ids": pack_ids(["cd" * 32] * 3), "start": 0,
                           "next": 2, "total": 2})
    with pytest.raises(SyncProtocolError, match="at most"):
        check_id_response({"epoch": "e", "ids": pack_ids(["cd" * 32] * (MAX_ID_PAGE + 1)),
                           "start": 0, "next": MAX_ID_PAGE + 1, "total": MAX_ID_PAGE + 1})
    for bad in ({"events": []}, {"events": [1]}, {"events": ["a", "b", "c"]}, {"x": 1}, None):
        with pytest.raises(SyncProtocolError):
            check_get_response(bad, 2)


class _FakePeer:
    """Answers a SyncClient's requests from a list of events, optionally lying."""

    def __init__(self, evs, *, old=False, swap=None, drop=None):
        self.evs, self.old, self.swap, self.drop = evs, old, swap or {}, drop or set()
        self.asked: list[str] = []
        self.requests: list[dict] = []

    async def __call__(self, peer, req):
        self.requests.append(req)
        by_id = {e.id: e for e in self.evs}
        if "get" in req:
            ids = unpack_ids(req["get"], MAX_GET)
            self.asked += ids
            out = []
            for i in ids:
                if i in self.drop:
                    out.append(None)
                else:
                    out.append(by_id[self.swap.get(i, i)].raw.decode())
            return {"events": out}
        start, limit = req["cursor"], req["limit"]
        if "ids" in req and not self.old:
            ids = [e.id for e in self.evs[start:start + req["ids"]]]
            return {"epoch": "ep", "ids": pack_ids(ids), "start": start,
                    "next": start + len(ids), "total": len(self.evs)}
        page = self.evs[start:start + min(limit, MAX_PAGE)]
        return {"epoch": "ep", "events": [e.raw.decode() for e in page],
                "next": start + len(page), "total": len(self.evs)}


def _client(known: set[str], got: list[bytes], **kw) -> SyncClient:
    from agent.core.events import decode_event
    from agent.net.door import IngestDoor
    import structlog

    async def ingest(raw, source):
        got.append(raw)
        eid = decode_event(raw).id
        new = eid not in known
        known.add(eid)
        return new

    client = SyncClient(protocol="p", intake=IngestDoor(ingest, structlog.get_logger()),
                        connected=lambda: [], on_foreign=lambda p: None, knows=known.__contains__,
                        **kw)
    client._rr = object()  # "running"; requests go to the fake peer
    return client


async def test_client_holding_most_events_receives_only_the_missing_bodies():
    evs = history(300)
    known = {e.id for e in evs} - {e.id for e in evs[::10]}  # 30 missing, spread out
    got: list[bytes] = []
    client = _client(known, got, id_page=100, get_batch=7)
    peer = _FakePeer(evs)
    client._request = peer
    res = await client.sync_from("b")
    assert res.answered and res.new == res.pulled == 30
    assert peer.asked == [e.id for e in evs[::10]]  # asked for exactly those, in log order
    assert got == [e.raw for e in evs[::10]]
    st = client.statistics()
    assert st.ids == 300 and st.skipped == 270 and st.pulled == st.new == 30
    # again: nothing to ask for; only the ids page
    n = len(peer.requests)
    assert (await client.sync_from("b")).pulled == 0 and len(peer.requests) == n + 1


async def test_an_event_refused_for_now_is_asked_for_again_when_the_peer_is_read_from_the_start():
    """The intake may refuse an event for now (its author over its rate): our cursor is past
    it, so only a pull that reads the peer's ids from the start (every RESCAN_EVERY-th) asks
    for it again; without one, peers that took different parts of a flood differed for good."""
    from agent.core.events import decode_event
    from agent.net.door import IngestDoor
    from agent.net.sync import RESCAN_EVERY
    import structlog

    evs = history(30)
    known: set[str] = set()
    refused = {evs[7].id}

    async def ingest(raw, source):
        eid = decode_event(raw).id
        if eid in refused:
            return False  # refused for now: not stored, not known
        new = eid not in known
        known.add(eid)
        return new

    client = SyncClient(protocol="p", intake=IngestDoor(ingest, structlog.get_logger()),
                        connected=lambda: [], on_foreign=lambda p: None, knows=known.__contains__,
                        id_page=100)
    client._rr = object()
    peer = _FakePeer(evs)
    client._request = peer
    assert (await client.sync_from("b")).new == 29 and evs[7].id not in known
    refused.clear()  # its author's rate allows it again
    for _ in range(RESCAN_EVERY - 2):  # pulls from the cursor: nothing asked for
        assert (await client.sync_from("b")).pulled == 0
    assert evs[7].id not in known and peer.asked.count(evs[7].id) == 1
    assert client.statistics().rescans == 0
    res = await client.sync_from("b")  # the RESCAN_EVERY-th: from the start, the one unknown id
    assert res.new == res.pulled == 1 and evs[7].id in known
    assert peer.asked.count(evs[7].id) == 2 and len(peer.asked) == 31
    assert client.statistics().rescans == 1 and client.cursors["b"].cursor == 30


async def test_wrong_or_missing_bodies_are_not_taken_and_old_peers_get_pages():
    evs = history(20)
    got: list[bytes] = []
    client = _client(set(), got, id_page=100)
    liar = _FakePeer(evs, swap={evs[3].id: evs[4].id}, drop={evs[5].id})
    client._request = liar
    res = await client.sync_from("liar")
    st = client.statistics()
    assert st.lied == 1 and st.missing == 1 and res.pulled == 18
    assert evs[3].raw not in got and evs[5].raw not in got
    # a first-version peer answers the ids request with a whole page: pulled in pages
    got2: list[bytes] = []
    client2 = _client(set(), got2, id_page=100)
    old = _FakePeer(evs, old=True)
    client2._request = old
    assert (await client2.sync_from("old")).new == 20 and got2 == [e.raw for e in evs]
    assert client2.cursors["old"].old and old.asked == []
    assert old.requests[0]["limit"] == 200  # what an old server sends: a page it can send whole
    assert (await client2.sync_from("old")).new == 0
    assert "ids" not in old.requests[-1] and old.requests[-1]["cursor"] == 20  # stays with pages


# ---------------------------------------------------------------------- over the network
async def test_fresh_peer_pulls_a_log_of_large_events(tmp_path):
    """Pages stay readable: 400 goals with 2,000-character descriptions (~2.4 KiB each, as
    large as a real model's results get: up to 8,000 characters). With pages capped at 4 MiB a
    default page of 200 such events (~480 KiB) could not be read: py-libp2p's reader gives up
    after 101 reads, of one ~4 KiB mplex frame each, so the peer never caught up."""
    evs = [sign_event(ident(f"big{i % 5}"), Timestamp(T0 + i, 0),
                      Goal(title=f"t{i}", description="x" * 2000, params=params()))
           for i in range(400)]
    b = Node("b", tmp_path, sync_interval=3600)
    _fill(b.store, evs)
    c = Node("c", tmp_path, sync_interval=3600)
    async with running(b.net):
        c.net = c.make_net(peers=[b.addr])
        async with running(c.net):
            await wait_for(lambda: len(c.rt.order) == 400, 30, "400 large events at C")
    assert c.rt.order == [e.id for e in evs]


@pytest.mark.parametrize("ids", [True, False], ids=["ids-first", "whole-pages"])
async def test_fresh_peer_pulls_500_events_in_pages_in_order(tmp_path, ids):
    evs = history(500)
    b = Node("b", tmp_path, sync_interval=3600)
    _fill(b.store, evs)
    c = Node("c", tmp_path, sync_interval=3600, sync_ids=ids, sync_id_page=200,
             sync_get_batch=150)
    async with running(b.net):
        c.net = c.make_net(peers=[b.addr])
        t0 = time.perf_counter()
        async with running(c.net):
            await wait_for(lambda: len(c.rt.order) == 500
                           and c.net.cursors.get(b.net.peer_id, None) is not None
                           and c.net.cursors[b.net.peer_id].cursor == 500, 20, "500 events at C")
            took = time.perf_counter() - t0
            cur = c.net.cursors[b.net.peer_id]
            print(f"\nsync of 500 events (connect included): {took * 1e3:.0f} ms, "
                  f"{cur.pages} pages")
            assert c.rt.order == [e.id for e in evs]  # B's acceptance order: deps first
            assert set(c.rt.sources.values()) == {f"sync:{b.net.peer_id}"}
            assert cur.pages >= 3 and cur.cursor == 500 and cur.epoch == b.store.epoch
            assert c.store.load() == b.store.load()
            # nothing new: an explicit sync is a no-op costing one round trip
            assert (await c.net.sync_from(b.net.peer_id)).new == 0
            # B accepts more; the periodic / explicit sync picks up only those
            more = [hello(ident(f"late{i}"), "executor", wall=900 + i) for i in range(7)]
            _fill(b.store, more)
            report = await c.net.sync_all()
            assert report.new == 7 and report.peers_asked == report.peers_answered == 1
            assert c.rt.order[-7:] == [e.id for e in more]
            st = c.net.stats.sync
            if ids:  # every body came once, asked by id; nothing came twice
                assert st.pulled == st.new == 507 and st.ids == 507 and st.skipped == 0
            else:
                assert st.pulled == 507 and st.ids == 0


async def test_dead_and_foreign_peers_do_not_crash_sync_or_reconnect(tmp_path):
    dead_port = _free_port()  # nobody listens there
    dead_id = identity_for("dead").peer_id
    dead_addr = f"/ip4/127.0.0.1/tcp/{dead_port}/p2p/{dead_id}"

    b = Node("b", tmp_path)
    other = Node("o", tmp_path, swarm="another-swarm")  # a libp2p peer of another swarm
    _fill(b.store, history(20))
    _fill(other.store, [goal(ident("stranger"))])
    async with running(b.net), running(other.net):
        a = Node("a", tmp_path, reconnect_interval=0.2, sync_interval=0.3,
                 peers=[dead_addr, b.addr, other.addr])
        async with running(a.net):
            await wait_for(lambda: len(a.rt.order) == 20, 10, "A synced from B")
            await trio.sleep(2.5)  # reconnect loop keeps failing on the dead peer meanwhile
            dead = a.net._peers.book.peers[dead_id]
            failures = dead.backoff.failures
            print(f"\ndead peer: {failures} failed dials in ~2.5 s; last: {dead.last_error[:80]}")
            assert 2 <= failures <= 8  # retried, with backoff (not every 0.2 s)
            assert a.net.running
            dead_sync = await a.net.sync_from(dead_id)  # never raises
            assert not dead_sync.answered and dead_sync.new == 0 and dead_sync.error
            assert not (await a.net.sync_from("not-a-peer-id")).answered
            foreign = await a.net.sync_from(other.net.peer_id)
            assert not foreign.answered and "does not serve" in foreign.error
            assert other.net.peer_id not in a.net.connected  # marked foreign: not counted
            assert set(a.net.connected) == {b.net.peer_id}
            assert "stranger" not in str(a.rt.calls)  # nothing crossed from the other swarm
            # still healthy: new events at B arrive through anti-entropy
            _fill(b.store, [hello(ident("z"), "observer", wall=77)])
            await wait_for(lambda: len(a.rt.order) == 21, 5, "anti-entropy from B")
            assert a.net.stats.sync.failed >= 1


async def test_restart_with_same_key_reconnects_and_resumes(tmp_path):
    port = _free_port()
    b = Node("b", tmp_path, sync_interval=3600, listen_port=port)
    b_addr = f"/ip4/127.0.0.1/tcp/{port}/p2p/{b.identity.peer_id}"
    a = Node("a", tmp_path, sync_interval=3600, peers=[b_addr])
    first = [hello(ident(f"p{i}"), "scorer", wall=i) for i in range(40)]
    async with running(a.net):
        async with running(b.net):
            await wait_for(lambda: b.net.peer_id in a.net.connected, 10, "A-B connected")
            await wait_for(lambda: a.net.mesh_peers and b.net.mesh_peers, 10, "mesh")
            for ev in first:  # much faster than 1/s: the seqno trap on restart
                await b.publish(ev)
            await wait_for(lambda: all(e.id in a.rt.ids for e in first), 10, "first batch")
        await wait_for(lambda: not a.net.connected, 5, "A to see B gone")
        assert not (await a.net.sync_from(b.net.peer_id)).answered  # B is down: no crash
        # while B is down it accepts more events (e.g. from a local tool)
        offline = [hello(ident(f"q{i}"), "executor", wall=100 + i) for i in range(5)]
        _fill(b.store, offline)
        b.net = b.make_net()
        t0 = time.perf_counter()
        async with running(b.net):
            took = await wait_for(lambda: b.net.peer_id in a.net.connected, 10,
                                  "A reconnected to restarted B")
            print(f"\nreconnect after restart: {took * 1e3:.0f} ms "
                  f"(reconnect_interval 0.5 s)")
            # sync on reconnect pulls what B accepted while it was away
            await wait_for(lambda: all(e.id in a.rt.ids for e in offline), 10, "offline")
            assert a.rt.sources[offline[0].id] == f"sync:{b.net.peer_id}"
            # live gossip from the restarted peer is not mistaken for old messages
            await wait_for(lambda: a.net.mesh_peers and b.net.mesh_peers, 10, "mesh again")
            live = hello(ident("fresh"), "observer", wall=500)
            await b.publish(live)
            await wait_for(lambda: live.id in a.rt.ids, 5, "live gossip after restart")
            assert a.rt.sources[live.id] == b.net.peer_id
            assert time.perf_counter() - t0 < 30

        # B comes back with a wiped log (new epoch, fewer events): A starts over at 0
        b.store.close()
        b.store.path.unlink()
        b.store = EventStore(b.store.path)
        b.rt.store = b.store
        reborn = [goal(ident("again"), wall=1000)]
        _fill(b.store, reborn)
        b.net = b.make_net()
        async with running(b.net):
            # (ids first: the body is ingested before the page's cursor moves; wait for both)
            await wait_for(lambda: reborn[0].id in a.rt.ids
                           and a.net.cursors[b.net.peer_id].cursor == 1, 10, "A pulled the new log")
            cur = a.net.cursors[b.net.peer_id]
            assert cur.epoch == b.store.epoch and cur.cursor == 1 and cur.resets >= 1


async def test_failing_ingest_stops_that_sync_but_not_the_network(tmp_path):
    evs = history(12)
    b = Node("b", tmp_path, sync_interval=3600, sync_page=5)
    _fill(b.store, evs)
    c = Node("c", tmp_path, sync_interval=3600, sync_page=5)
    real_ingest, failures = c.rt.ingest, []

    async def flaky(raw, source):
        if len(c.rt.order) == 7 and not failures:  # e.g. the disk filled up once
            failures.append(source)
            raise OSError(28, "No space left on device")
        return await real_ingest(raw, source)

    async with running(b.net):
        c.net = c.make_net(ingest=flaky, peers=[b.addr])
        async with running(c.net):
            await wait_for(lambda: failures, 10, "the failing ingest")
            assert c.net.running and c.net.stats.intake.errors == 1
            assert len(c.rt.order) == 7
            # the failed page is pulled again on the next sync; nothing is skipped
            assert (await c.net.sync_from(b.net.peer_id)).new == 5
            assert c.rt.order == [e.id for e in evs]


async def test_late_joiner_pulls_each_body_once_from_three_peers(tmp_path):
    evs = history(600)
    peers = [Node(n, tmp_path, sync_interval=3600) for n in ("b", "d", "e")]
    for p in peers:
        _fill(p.store, evs)
    async with running(peers[0].net), running(peers[1].net), running(peers[2].net):
        c = Node("c", tmp_path, sync_interval=3600, sync_id_page=250, sync_get_batch=100,
                 peers=[p.addr for p in peers])
        async with running(c.net):
            await wait_for(lambda: len(c.rt.order) == 600, 20, "600 events at C")
            await wait_for(lambda: all(p.net.peer_id in c.net.cursors
                                       and c.net.cursors[p.net.peer_id].cursor == 600
                                       for p in peers), 20, "C synced from all three")
            st = c.net.stats.sync
            raw_bytes = sum(len(e.raw) for e in evs)
            print(f"\nlate join of 600 events from 3 peers: {st.bytes_in} bytes in "
                  f"({st.bytes_in / raw_bytes:.2f} copies), {st.pulled} pulled, "
                  f"{st.skipped} ids skipped")
            assert set(c.rt.order) == {e.id for e in evs}
            assert st.pulled == st.new == 600 and c.rt.duplicates == 0  # each body once
            assert st.ids == 1800
            # whole pages from 3 peers would be 3 escaped copies; ids first: about one, plus ids
            assert st.bytes_in < 2 * raw_bytes


@pytest.mark.parametrize("ids", [True, False], ids=["ids-first", "whole-pages"])
async def test_large_events_cross_whole(tmp_path, ids):
    """Responses stay under MAX_PAGE_BYTES: over Mplex, ~420 KB responses arrived cut."""
    big = [sign_event(ident(f"g{i}"), Timestamp(T0 + i, 0),
                      Goal(title="t", description='"\\' * 900, params=params()))
           for i in range(150)]  # ~3.8 KiB each, about twice that as a JSON string
    b = Node("b", tmp_path, sync_interval=3600)
    _fill(b.store, big)
    c = Node("c", tmp_path, sync_interval=3600, sync_ids=ids, sync_page=MAX_PAGE,
             sync_get_batch=MAX_GET)
    async with running(b.net):
        c.net = c.make_net(peers=[b.addr])
        async with running(c.net):
            await wait_for(lambda: len(c.rt.order) == 150, 20, "150 large events at C")
            assert c.net.stats.sync.failed == 0
            assert c.store.load() == b.store.load()


async def test_a_peer_that_always_has_more_cannot_hold_a_sync_forever(tmp_path, monkeypatch):
    """A hostile server answers every page request with one junk event and "there is more"
    (total 2**40): one sync pulls at most MAX_PAGES_PER_PULL pages and returns (sync_all, and
    with it anti-entropy from every peer, used to wait for it forever)."""
    from libp2p.io.msgio import VarIntLengthMsgReadWriter

    from agent.net import sync_client
    from agent.net.sync import sync_protocol_id

    monkeypatch.setattr(sync_client, "MAX_PAGES_PER_PULL", 20)
    served = []

    async def endless(stream):
        rw = VarIntLengthMsgReadWriter(stream, max_msg_size=1 << 20)
        req = orjson.loads(await rw.read_msg())
        cursor = int(req.get("cursor") or 0)
        served.append(cursor)
        await rw.write_msg(orjson.dumps({"epoch": "e", "events": ['{"junk": 1}'], "next": cursor + 1,
                                         "total": 2**40}))
        await stream.close()

    b = Node("b", tmp_path, sync_interval=3600)
    c = Node("c", tmp_path, sync_interval=3600)
    async with running(b.net):
        b.net._host.set_stream_handler(sync_protocol_id("test"), endless)
        c.net = c.make_net(peers=[b.addr])
        async with running(c.net):
            await wait_for(lambda: b.net.peer_id in c.net.connected, 10, "C connected to B")
            with trio.fail_after(20):
                report = await c.net.sync_all()
            # the pull that greets a new peer runs too, before or after this one (one pull
            # per peer at a time): counted only once both are over (under load it ran during
            # the second sync_all below and was taken for part of it)
            await wait_for(lambda: len(served) >= 2 * 20, 20, "the greeting pull is over too")
            n = len(served)
            with trio.fail_after(20):
                await c.net.sync_all()  # goes on from its cursor
    assert report.peers_answered == 1 and len(served) - n <= 20
    assert served[n] == served[n - 1] + 1  # resumed where it stopped
    assert c.rt.rejected and not c.rt.order  # the junk was refused, nothing accepted


# ---------------------------------------------------------------------- anti-entropy fanout
def test_anti_entropy_rounds_take_a_few_peers_in_turn():
    """An idle agent pulls ``fanout`` peers per period, not every peer: each period used to cost
    a request to, and a request from, every connected peer (most of an idle agent's CPU in a
    20-agent swarm). In turn, so every peer is still pulled once per ceil(peers / fanout) rounds."""
    peers = [f"p{i}" for i in range(10)]
    live = list(peers)
    client = SyncClient(protocol="p", intake=None, connected=lambda: live,  # type: ignore[arg-type]
                        on_foreign=lambda p: None, fanout=3)
    seen: list[str] = []
    for _ in range(4):  # ceil(10 / 3) rounds cover everyone
        r = client.next_round()
        assert len(r) == 3 and len(set(r)) == 3
        seen += r
    assert set(seen) == set(peers)
    for _ in range(20):  # a peer that left is never picked; every round still has 3
        live = peers[:5]
        r = client.next_round()
        assert len(r) == 3 and set(r) <= set(live)
    live = peers[:2]  # fewer peers than the fanout: all of them
    assert sorted(client.next_round()) == ["p0", "p1"]
    everyone = SyncClient(protocol="p", intake=None, connected=lambda: peers,  # type: ignore[arg-type]
                          on_foreign=lambda p: None, fanout=0)
    assert everyone.next_round() == peers  # fanout 0: every peer, as before


async def test_anti_entropy_period_pulls_fanout_peers_but_a_resync_pulls_all(autojump_clock):
    peers = [f"p{i}" for i in range(8)]
    client = SyncClient(protocol="p", intake=None, connected=lambda: peers,  # type: ignore[arg-type]
                        on_foreign=lambda p: None, fanout=2, interval=10.0)
    pulled: list[str] = []

    async def fake_sync_from(peer):
        pulled.append(peer)
        from agent.net.sync_client import PeerSync
        return PeerSync(peer, True)

    client.sync_from = fake_sync_from  # type: ignore[method-assign]
    async with trio.open_nursery() as nursery:
        nursery.start_soon(client._anti_entropy)
        await trio.sleep(10.5)
        assert len(pulled) == 2  # one period: two peers
        await trio.sleep(30)
        assert len(pulled) == 8  # four periods: each peer once
        assert sorted(pulled) == sorted(peers)
        client.request_resync()  # gossip overflowed: every peer at once
        await trio.sleep(0.1)
        assert len(pulled) == 16
        nursery.cancel_scope.cancel()


async def test_a_page_carries_the_servers_clock_and_the_client_takes_a_round_trip(tmp_path):
    """Each pull's first page says the server's clock; the client notes its own clock around
    the request (agent.core.skew bounds its offset from that). An old peer's page without it,
    or a page with garbage there, gives no round trip and still syncs."""
    from agent.net.sync import SyncClock
    from agent.net.sync_server import SyncServer

    st = EventStore(tmp_path / "e.jsonl")
    evs = history(20)
    _fill(st, evs)
    server = SyncServer(protocol="p", store=st, limits=SyncLimits(),
                        clock=SyncClock(serve=lambda: 1_000_000, local=lambda: 0, round_trip=None))
    page = server.answer({"epoch": None, "cursor": 0, "limit": 5, "ids": 5})
    assert page["now"] == 1_000_000 and check_id_response(page)[2] == 0
    assert "now" not in server.answer({"get": pack_ids([evs[0].id])})

    ticks = iter(range(5_000, 10_000, 100))
    trips: list[tuple] = []
    clock = SyncClock(serve=lambda: 0, local=lambda: next(ticks), round_trip=lambda *t: trips.append(t))
    got: list[bytes] = []
    client = _client(set(), got, clock=clock)
    peer = _FakePeer(evs)

    async def with_clock(p, req):
        resp = await peer(p, req)
        return {**resp, "now": 4_000} if "get" not in req else resp

    client._request = with_clock
    assert (await client.sync_from("b")).new == 20
    assert trips == [("b", 5_000, 4_000, 5_100)]  # one per pull: its first page
    for bad in (None, "4000", -1, True, 2**60):
        trips.clear()
        client2 = _client(set(), [], clock=clock)

        async def garbage(p, req, bad=bad):
            resp = await peer(p, req)
            return {**resp, "now": bad} if bad is not None and "get" not in req else resp

        client2._request = garbage
        assert (await client2.sync_from("b")).new == 20 and trips == []
