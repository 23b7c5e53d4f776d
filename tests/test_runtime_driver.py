"""The runtime and the trio driver, in one process without libp2p (the network and the event
log are injected): bad input is refused and counted, nothing accepted is lost across a restart
or a full disk, our own events are never published before they are stored, the driver really
cancels LLM work, a role that raises is restarted, and a whole swarm over an in-memory bus
plans a goal with the real behaviours."""

import errno
from pathlib import Path

import orjson
import trio

from agent import metrics
from agent.supervise import supervise
from agent.behaviour import Decomposer, Executor, Scorer
from agent.core.backoff import Backoff
from agent.behaviour.effects import Publish, PublishFailed
from agent.core.events import Claim, Goal, Hello, sign_event
from agent.core.hlc import Timestamp
from agent.drivers.real.driver import Driver
from agent.store import MemoryLog
from agent.llm.base import LLM, LLMUnavailable
from agent.llm.scripted import ScriptedLLM
from agent.store import EventStore, StoreError
from agent.net.sync_client import PeerSync, SyncReport
from agent.drivers.real.runtime import Runtime, load_identity
from agent.settings import load_settings
from builders import goal, ident, params, proposal

SETTINGS = dict(mdns=False, listen_host="127.0.0.1", settle_window=0.05, lease_seconds=2,
                proposal_window=0.1, vote_timeout=0.1, startup_sync=0.2)


class Bus:
    """Gossip and sync between in-process runtimes (a stand-in for libp2p)."""

    def __init__(self) -> None:
        self.rts: list[Runtime] = []
        self.published: list[bytes] = []

    def net(self) -> "BusNet":
        return BusNet(self)


class BusNet:
    def __init__(self, bus: Bus) -> None:
        self.bus = bus
        self.rt: Runtime | None = None
        self.nursery: trio.Nursery | None = None

    async def run(self, *, task_status=trio.TASK_STATUS_IGNORED) -> None:
        async with trio.open_nursery() as n:
            self.nursery = n
            task_status.started()
            await trio.sleep_forever()

    async def publish(self, raw: bytes) -> None:
        self.bus.published.append(raw)
        for other in self.bus.rts:
            if other is not self.rt:
                await other.ingest(raw, self.rt.me)

    async def sync_all(self) -> SyncReport:
        """Like the real net's: who answered, and what each brought."""
        results = []
        for other in self.bus.rts:
            if other is not self.rt:
                new = 0
                for raw in other.store.read_from(0, len(other.store)):
                    new += await self.rt.ingest(raw, "sync:" + other.me)
                results.append(PeerSync(other.me, True, new=new))
        return SyncReport(tuple(results))

    async def sync_from(self, peer: str) -> SyncReport:
        return await self.sync_all()

    async def peer_has(self, peer: str, event_id: str) -> bool:
        """Whether that peer stored the event (a runtime stores what it accepts at once; one it
        holds, stamped ahead of its clock, or keeps waiting for a dependency, it has not)."""
        return any(o.me == peer and event_id in o.plan for o in self.bus.rts)

    @property
    def connected(self) -> list[str]:
        return [o.me for o in self.bus.rts if o is not self.rt]


def make_rt(tmp_path: Path, role="executor", bus: Bus | None = None, disk=False, **kw) -> Runtime:
    s = load_settings(data_dir=tmp_path, **{**SETTINGS, **kw})
    identity = load_identity(tmp_path)
    log = EventStore(tmp_path / "events.jsonl") if disk else MemoryLog()
    net = bus.net() if bus is not None else None
    rt = Runtime(s, role, identity=identity, log=log, net=net)
    if bus is not None:
        net.rt = rt
        bus.rts.append(rt)
    return rt


def rejected(reason):
    return metrics.EVENTS_REJECTED.labels(reason=reason)._value.get()


async def test_bad_input_is_refused_counted_and_never_stored(tmp_path):
    rt = make_rt(tmp_path)
    g = goal(ident("u"))
    before = {r: rejected(r) for r in ("malformed", "bad_signature", "oversize", "clock_drift", "not_elector")}
    assert await rt.ingest(g.raw, "peer")
    assert not await rt.ingest(g.raw, "peer")  # duplicate: dropped quietly
    assert not await rt.ingest(b"{garbage", "peer")
    tampered = orjson.loads(g.raw)
    tampered["body"]["title"] = "something else"
    assert not await rt.ingest(orjson.dumps(tampered), "peer")
    assert not await rt.ingest(b"x" * 70_000, "peer")
    future = sign_event(ident("u"), Timestamp(rt.now_ms() + 3_600_000, 0), Goal(title="From the future", params=params()))
    assert not await rt.ingest(future.raw, "peer")
    p = proposal(ident("d"), g.id, ["Tokyo", "Kyoto"])
    assert await rt.ingest(p.raw, "peer")
    from builders import prevote
    assert not await rt.ingest(prevote(ident("sybil"), g.id, p.id).raw, "peer")
    orphan = proposal(ident("d"), "ab" * 32, ["Tokyo", "Kyoto"])
    assert not await rt.ingest(orphan.raw, "peer") and rt.plan.is_pending(orphan.id)
    for r, n in (("malformed", 1), ("bad_signature", 1), ("oversize", 1), ("clock_drift", 1), ("not_elector", 1)):
        assert rejected(r) == before[r] + n, r
    stored = rt.store.read_from(0, 100)
    assert [orjson.loads(r)["body"]["type"] for r in stored] == ["goal", "proposal"]


async def test_a_flood_of_bad_events_is_counted_each_but_logged_once_per_reason_and_source(tmp_path):
    """A member sending thousands of bad events must not write a warning line each (the
    chaos suite's hostile peer did: 10,000 lines per agent); every one is still counted."""
    from structlog.testing import capture_logs

    rt = make_rt(tmp_path)
    g = goal(ident("u"))
    assert await rt.ingest(g.raw, "peer")
    before = {r: rejected(r) for r in ("malformed", "clock_drift")}
    with capture_logs() as logs:
        for i in range(200):
            assert not await rt.ingest(b"{garbage %d" % i, "hostile")
            future = sign_event(ident("h"), Timestamp(rt.now_ms() + 3_600_000, i), Hello(role="scorer", name=f"f{i}"))
            assert not await rt.ingest(future.raw, "hostile")
        assert not await rt.ingest(b"{garbage", "sync:other")  # another source: its own line
    assert rejected("malformed") == before["malformed"] + 201
    assert rejected("clock_drift") == before["clock_drift"] + 200
    lines = [(x["reason"], x["source"]) for x in logs if x["event"] == "event rejected" and x["log_level"] == "warning"]
    assert sorted(lines) == [("clock_drift", "hostile"), ("malformed", "hostile"), ("malformed", "sync:other")]


async def test_events_our_own_vote_unblocks_are_stored(tmp_path):
    """A claim that arrived before its node was a task waits (parked); our own precommit then
    completes the decision and releases it. It must be stored like any accepted event: it was
    only filed in the fold, and the stored log lacked it for good (sync had passed it), found
    by the chaos suite's torn-line scenario. (The claim is stamped after our precommit, as an
    honest executor's is: it came early only by gossip.)"""
    from agent.core.events import Vote
    from agent.drivers.real.runtime import wall_ms
    from builders import T0, claim, precommit, prevote

    rt = make_rt(tmp_path, role="scorer", disk=True)
    s1 = ident("s1")
    g = goal(ident("u"), electorate=[rt.me, s1.peer_id, ident("s2").peer_id], max_depth=1)
    p = proposal(ident("d"), g.id, ["Tokyo", "Kyoto"])
    early = claim(ident("x"), p.id + "/0", wall=wall_ms() - T0 + 1000)
    for e in (g, p, prevote(s1, g.id, p.id), precommit(s1, g.id, p.id)):
        assert await rt.ingest(e.raw, "peer")
    assert not await rt.ingest(early.raw, "peer") and rt.plan.is_pending(early.id)
    await rt.publish(Vote(node=g.id, round=1, phase="prevote", value=p.id))
    await rt.publish(Vote(node=g.id, round=1, phase="precommit", value=p.id))
    assert rt.plan.decided(g.id) == p.id and early.id in rt.plan
    stored = rt.store.read_from(0, 100)
    assert early.raw in stored
    assert stored.index(early.raw) == len(stored) - 1  # after our precommit, which it needed


async def test_restart_reloads_everything_and_keeps_identity(tmp_path):
    rt = make_rt(tmp_path, disk=True)
    g = goal(ident("u"))
    await rt.ingest(g.raw, "peer")
    own = await rt.publish(Hello(role="executor"))
    rt.store.close()
    rt2 = make_rt(tmp_path, disk=True)
    assert rt2.me == rt.me and g.id in rt2.plan and own.id in rt2.plan
    assert rt2.tree().digest == rt.tree().digest


async def test_full_disk_loses_nothing_and_never_publishes_what_is_not_stored(tmp_path, monkeypatch):
    bus = Bus()
    rt = make_rt(tmp_path, bus=bus)
    real_append = rt.store.append

    def full(raw, **_kw):
        raise StoreError(f"events.jsonl: {errno.errorcode[errno.ENOSPC]}")

    monkeypatch.setattr(rt.store, "append", full)
    g = goal(ident("u"))
    assert await rt.ingest(g.raw, "peer")  # accepted and folded, kept for a retry
    own = await rt.publish(Hello(role="executor"))
    assert own.id in rt.plan and rt.outbox == 1 and bus.published == []  # not stored: not sent
    monkeypatch.setattr(rt.store, "append", real_append)
    await rt._flush_outbox()
    assert rt.outbox == 0 and bus.published == [own.raw]
    assert [orjson.loads(r)["body"]["type"] for r in rt.store.read_from(0, 10)] == ["goal", "hello"]


async def test_an_own_event_our_fold_refuses_is_logged_and_counted_and_the_role_goes_on(tmp_path):
    """Audit: a revocation's refold between a role's poll and its publish (a claim on a task
    that just stopped being one) made `sign` raise through the driver, and supervise restarted
    the role, losing its LLM work in flight."""
    bus = Bus()
    rt = make_rt(tmp_path, bus=bus)
    g = goal(ident("u"), max_depth=1)
    await rt.ingest(g.raw, "peer")
    drv = Driver(Executor(rt.me, load_settings(**SETTINGS).timing(), seed=1), rt, None)
    before = rejected("own_malformed")
    out = await drv.on_publish(Publish(Claim(node=g.id, lease_ms=1000)))  # not a task: undecided
    assert isinstance(out, PublishFailed) and "own claim event not accepted" in out.error
    assert rejected("own_malformed") == before + 1
    assert bus.published == [] and [e.type for e in rt.plan.events.values()] == ["goal"]


class DownThenUp(LLM):
    backend, model = "test", "flaky"

    def __init__(self, down: int):
        self.down, self.calls = down, 0
        self.scripted = ScriptedLLM()

    async def generate(self, req):
        self.calls += 1
        if self.calls <= self.down:
            raise LLMUnavailable("Ollama at http://127.0.0.1:1 is unreachable: connection refused")
        return await self.scripted.generate(req)


async def test_executor_releases_while_the_llm_is_down_then_completes(tmp_path):
    rt = make_rt(tmp_path)
    g = goal(ident("u"), max_depth=0)
    await rt.ingest(g.raw, "peer")
    llm = DownThenUp(down=1)
    beh = Executor(rt.me, load_settings(**SETTINGS).timing().__class__(
        settle_ms=50, lease_ms=2000, startup_sync_ms=0, backoff_first_ms=100, lease_margin_ms=200), seed=1)
    with trio.fail_after(10):
        async with trio.open_nursery() as n:
            n.start_soon(Driver(beh, rt, llm).run)
            while not rt.tree().is_done(g.id):
                await trio.sleep(0.05)
            n.cancel_scope.cancel()
    mine = [e.type for e in rt.plan.events.values() if e.author == rt.me]
    assert mine.count("release") == 1 and mine.count("result") == 1 and llm.calls == 2


class TwoPeers:
    """A net of two peers that answer every pull; ``stored``: whether they say they stored
    what they are asked about (False: every peer holds our claim, or lost it)."""

    def __init__(self, stored: bool) -> None:
        self.stored = stored
        self.asked: list[str] = []

    async def run(self, *, task_status=trio.TASK_STATUS_IGNORED) -> None:
        task_status.started()
        await trio.sleep_forever()

    async def publish(self, raw: bytes) -> None:
        pass

    async def sync_all(self) -> SyncReport:
        return SyncReport((PeerSync("p1", True), PeerSync("p2", True)))

    async def sync_from(self, peer: str) -> SyncReport:
        return await self.sync_all()

    async def peer_has(self, peer: str, event_id: str) -> bool:
        self.asked.append(event_id)
        return self.stored

    @property
    def connected(self) -> list[str]:
        return ["p1", "p2"]


async def test_the_pull_before_work_asks_whether_the_claim_is_stored(tmp_path):
    """The driver asks the peers that answered the pull whether they stored our claim: none
    did, no LLM call (the claim is released, again and again while that lasts); once they
    have, the task is worked on."""
    for stored in (False, True):
        rt = make_rt(tmp_path / str(stored))
        rt.net = net = TwoPeers(stored)
        g = goal(ident("u"), max_depth=0)
        await rt.ingest(g.raw, "peer")
        llm = DownThenUp(down=0)
        beh = Executor(rt.me, load_settings(**SETTINGS).timing().__class__(
            settle_ms=50, lease_ms=2000, startup_sync_ms=0, backoff_first_ms=100, lease_margin_ms=200), seed=1)
        assert beh.sync_before_work

        def released() -> int:
            return sum(1 for e in rt.plan.events.values() if e.author == rt.me and e.type == "release")

        with trio.fail_after(10):
            async with trio.open_nursery() as n:
                n.start_soon(Driver(beh, rt, llm).run)
                while not (rt.tree().is_done(g.id) if stored else released() >= 2):
                    await trio.sleep(0.05)
                n.cancel_scope.cancel()
        claims = {e.id for e in rt.plan.events.values() if e.author == rt.me and e.type == "claim"}
        assert net.asked and set(net.asked) <= claims  # asked about our claims, nothing else
        assert llm.calls == (1 if stored else 0), (stored, llm.calls)


class Slow(LLM):
    backend, model = "test", "slow"

    def __init__(self):
        self.started = self.finished = 0

    async def generate(self, req):
        self.started += 1
        await trio.sleep(30)
        self.finished += 1
        return {}


async def test_driver_really_cancels_llm_work_for_a_decided_node(tmp_path):
    from builders import precommit

    rt = make_rt(tmp_path, role="scorer")
    scorers = [ident(f"s{i}") for i in range(2)]
    g = goal(ident("u"), electorate=[rt.me] + [s.peer_id for s in scorers])
    p = proposal(ident("d"), g.id, ["Tokyo", "Kyoto"])
    for e in (g, p):
        await rt.ingest(e.raw, "peer")
    llm = Slow()
    before = metrics.LLM_CANCELLED.labels(role="scorer")._value.get()
    with trio.fail_after(10):
        async with trio.open_nursery() as n:
            n.start_soon(Driver(Scorer(rt.me, rt.settings.timing(), 1), rt, llm).run)
            while llm.started == 0:
                await trio.sleep(0.05)
            for s in scorers[:2]:
                await rt.ingest(precommit(s, g.id, p.id).raw, "peer")
            while metrics.LLM_CANCELLED.labels(role="scorer")._value.get() == before:
                await trio.sleep(0.05)
            n.cancel_scope.cancel()
    assert llm.finished == 0


async def test_a_failing_role_is_restarted_not_fatal(tmp_path):
    rt = make_rt(tmp_path)
    runs = []

    async def flaky():
        runs.append(1)
        if len(runs) < 3:
            raise RuntimeError("a bug in a role")

    before = metrics.ROLE_RESTARTS._value.get()
    with trio.fail_after(5):
        await supervise(flaky, rt, Backoff(10, 50))
    assert len(runs) == 3 and metrics.ROLE_RESTARTS._value.get() == before + 2


async def test_a_whole_swarm_over_an_in_memory_bus_plans_a_goal(tmp_path):
    bus = Bus()
    roles = ["decomposer"] * 2 + ["scorer"] * 3 + ["executor"] * 2
    rts = [make_rt(tmp_path / f"{r}{i}", role=r, bus=bus) for i, r in enumerate(roles)]
    user = make_rt(tmp_path / "user", role="submitter", bus=bus)
    llm = ScriptedLLM()
    electorate = [rt.me for rt in rts if rt.role == "scorer"]
    from agent.goals import plan_params

    with trio.fail_after(60):
        async with trio.open_nursery() as n:
            for rt in rts + [user]:
                await n.start(rt.run)
            for i, rt in enumerate(rts):
                await rt.publish(Hello(role=rt.role))
                cls = {"decomposer": Decomposer, "scorer": Scorer, "executor": Executor}[rt.role]
                n.start_soon(Driver(cls(rt.me, rt.settings.timing(), i), rt, llm).run)
            settings = load_settings(**SETTINGS, max_depth=2, max_children=3)
            g = await user.publish(Goal(title="Organise a team offsite", params=plan_params(settings, electorate)))
            while not all(rt.tree().is_done(g.id) for rt in rts + [user]):
                await trio.sleep(0.1)
            n.cancel_scope.cancel()
    digests = {rt.tree().digest for rt in rts + [user]}
    tree = user.tree()
    assert len(digests) == 1
    assert tree.node(g.id).result is not None and max(n.depth for n in tree.walk()) == 2
    assert sum(n.executed_twice for n in tree.walk()) == 0
    # what the plan cost in tokens, splits and judgments and results included, rolled up
    spent = tree.to_json()["goals"][0]["tokens"]
    leaves = tree.node(g.id).children[0].to_json()["tokens"]
    assert spent["prompt"] > leaves["prompt"] > 0 and spent["completion"] > 0
