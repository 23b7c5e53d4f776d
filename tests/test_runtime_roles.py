"""The runtime's intake pipeline and the role loops, in-process without a network: bad input
is refused with a named reason and counted, nothing accepted is lost across a restart or a full
disk, and an unavailable LLM never crashes a role."""

import errno

import orjson
import trio

from agent import metrics
from agent.core.events import Hello
from agent.llm.base import LLM, LLMUnavailable
from agent.llm.scripted import ScriptedLLM
from agent.net.store import StoreError
from agent.roles import decomposer, executor, scorer
from agent.runtime import Runtime
from agent.settings import load_settings
from builders import goal, ident, proposal, vote


def make_rt(tmp_path, role="executor", **kw):
    s = load_settings(data_dir=tmp_path, mdns=False, listen_host="127.0.0.1",
                      settle_window=0.05, lease_seconds=2, collection_window=0.1, **kw)
    return Runtime(s, role)


def rejected(reason):
    return metrics.EVENTS_REJECTED.labels(reason=reason)._value.get()


async def test_bad_input_is_refused_counted_and_never_stored(tmp_path):
    rt = make_rt(tmp_path)
    g = goal(ident("u"))
    before = {r: rejected(r) for r in ("malformed", "bad_signature", "oversize", "duplicate", "clock_drift")}
    assert await rt.ingest(g.raw, "peer")
    assert not await rt.ingest(g.raw, "peer")  # duplicate: dropped quietly
    assert not await rt.ingest(b"{garbage", "peer")
    tampered = orjson.loads(g.raw)
    tampered["body"]["title"] = "something else"
    assert not await rt.ingest(orjson.dumps(tampered), "peer")
    assert not await rt.ingest(b"x" * 70_000, "peer")
    from agent.core.events import Goal, PlanParams, sign_event
    from agent.core.hlc import Timestamp
    future = sign_event(ident("u"), Timestamp(rt.now_ms() + 3_600_000, 0),
                        Goal(title="From the future", params=PlanParams(scorers=1, quorum=1, max_depth=1, max_children=3, max_rounds=1)))
    assert not await rt.ingest(future.raw, "peer")
    assert rejected("malformed") == before["malformed"] + 1
    assert rejected("bad_signature") == before["bad_signature"] + 1
    assert rejected("oversize") == before["oversize"] + 1
    assert rejected("clock_drift") == before["clock_drift"] + 1
    # an event whose parent is unknown waits (not stored); a vote from a non-scorer waits too
    orphan = proposal(ident("d"), "ab" * 32, ["Tokyo", "Kyoto"])
    assert not await rt.ingest(orphan.raw, "peer")
    assert rt.plan.is_pending(orphan.id)
    p = proposal(ident("d"), g.id, ["Tokyo", "Kyoto"])
    assert await rt.ingest(p.raw, "peer")
    v = vote(ident("not-a-scorer"), g.id, p.id)
    assert not await rt.ingest(v.raw, "peer") and rt.plan.is_pending(v.id)
    stored = rt.store.read_from(0, 100)
    assert len(stored) == 2 and all(orjson.loads(r)["body"]["type"] in ("goal", "proposal") for r in stored)


async def test_restart_reloads_everything_and_keeps_identity(tmp_path):
    rt = make_rt(tmp_path)
    me = rt.me
    g = goal(ident("u"))
    await rt.ingest(g.raw, "peer")
    own = await rt.publish(Hello(role="executor"))
    rt.store.close()
    rt2 = make_rt(tmp_path)
    assert rt2.me == me
    assert g.id in rt2.plan and own.id in rt2.plan
    assert rt2.tree().digest == rt.tree().digest


async def test_full_disk_loses_nothing(tmp_path, monkeypatch):
    rt = make_rt(tmp_path)
    real_append = rt.store.append
    calls = {"n": 0}

    def full(raw):
        calls["n"] += 1
        raise StoreError(f"{rt.store.path}: {errno.errorcode[errno.ENOSPC]}")

    monkeypatch.setattr(rt.store, "append", full)
    g = goal(ident("u"))
    assert await rt.ingest(g.raw, "peer")  # accepted and folded, kept for a retry
    assert g.id in rt.plan and rt._unsaved
    monkeypatch.setattr(rt.store, "append", real_append)
    p = proposal(ident("d"), g.id, ["Tokyo", "Kyoto"])
    assert await rt.ingest(p.raw, "peer")  # the next write flushes the backlog first, in order
    assert not rt._unsaved
    assert [orjson.loads(r)["body"]["type"] for r in rt.store.read_from(0, 10)] == ["goal", "proposal"]


class DownLLM(LLM):
    backend, model = "test", "down"

    def __init__(self):
        self.calls = 0

    async def generate(self, req):
        self.calls += 1
        raise LLMUnavailable("Ollama at http://127.0.0.1:1 is unreachable: connection refused")


def events_of(rt, kind):
    return [e for e in rt.plan.events.values() if e.type == kind and e.author == rt.me]


async def test_executor_releases_on_unavailable_llm_then_completes(tmp_path):
    rt = make_rt(tmp_path)
    g = goal(ident("u"), max_depth=0)
    await rt.ingest(g.raw, "peer")
    down = DownLLM()
    with trio.move_on_after(1.5):
        await executor.run(rt, down)  # must not raise: it logs, releases, backs off
    assert down.calls >= 1
    assert events_of(rt, "claim") and events_of(rt, "release")
    assert rt.tree().node(g.id).state == "ready"
    with trio.move_on_after(5):
        await executor.run(rt, ScriptedLLM())
    assert rt.tree().node(g.id).state == "done"
    assert len(events_of(rt, "result")) == 1


async def test_decomposer_and_scorer_back_off_without_llm(tmp_path):
    for role, loop in (("decomposer", decomposer.run), ("scorer", scorer.run)):
        rt = make_rt(tmp_path / role, role=role, scorers=1)
        g = goal(ident("u"), scorers=1, quorum=1)
        await rt.ingest(g.raw, "peer")
        if role == "scorer":
            await rt.publish(Hello(role="scorer"))
            await rt.ingest(proposal(ident("d"), g.id, ["Tokyo trip", "Kyoto temples"]).raw, "peer")
        down = DownLLM()
        with trio.move_on_after(2.5):
            await loop(rt, down)
        assert down.calls >= 1
        assert not events_of(rt, "proposal") and not events_of(rt, "vote")


async def test_decomposer_and_scorer_with_scripted_llm_split_the_root(tmp_path):
    d = make_rt(tmp_path / "d", role="decomposer", scorers=1)
    s = make_rt(tmp_path / "s", role="scorer", scorers=1)
    g = goal(ident("u"), scorers=1, quorum=1, max_depth=1)
    for rt in (d, s):
        await rt.ingest(g.raw, "peer")
    hello_ev = await s.publish(Hello(role="scorer"))
    await d.ingest(hello_ev.raw, "peer")
    llm = ScriptedLLM()

    async def relay(src, dst):  # a stand-in for gossip between the two runtimes
        while True:
            for e in list(src.plan.events.values()):
                if e.id not in dst.plan:
                    await dst.ingest(e.raw, src.me)
            await trio.sleep(0.05)

    with trio.move_on_after(8):
        async with trio.open_nursery() as n:
            n.start_soon(decomposer.run, d, llm)
            n.start_soon(scorer.run, s, llm)
            n.start_soon(relay, d, s)
            n.start_soon(relay, s, d)
            while d.tree().node(g.id).accepted is None:
                await trio.sleep(0.1)
            n.cancel_scope.cancel()
    root = d.tree().node(g.id)
    assert root.accepted is not None and len(root.children) >= 2
    assert s.tree().digest == d.tree().digest


class JunkThenGood(LLM):
    backend, model = "test", "junk"

    def __init__(self, junk: int):
        self.junk, self.calls = junk, 0

    async def generate(self, req):
        self.calls += 1
        if self.calls <= self.junk:
            return {"result": "1234567890"}
        return {"result": "Book the Nozomi from Tokyo to Kyoto at 9:00 on day three."}


async def test_executor_retries_unusable_results_and_never_stalls(tmp_path):
    for junk, expected in ((1, "Nozomi"), (99, "1234567890")):
        rt = make_rt(tmp_path / str(junk))
        g = goal(ident("u"), max_depth=0)
        await rt.ingest(g.raw, "peer")
        llm = JunkThenGood(junk)
        with trio.move_on_after(3):
            await executor.run(rt, llm)
        (res,) = events_of(rt, "result")
        assert expected in res.body.output
        assert llm.calls == (2 if junk == 1 else executor.ATTEMPTS)


async def test_a_failing_role_loop_is_restarted_not_fatal(tmp_path):
    from agent.app import supervise
    from agent.roles.common import Backoff

    rt = make_rt(tmp_path)
    runs = []

    async def flaky(rt_, llm):
        runs.append(1)
        if len(runs) < 3:
            raise RuntimeError("a bug in a role")

    before = metrics.ROLE_RESTARTS._value.get()
    with trio.fail_after(5):
        await supervise(flaky, rt, None, Backoff(first=0.01, cap=0.05))
    assert len(runs) == 3
    assert metrics.ROLE_RESTARTS._value.get() == before + 2


class GarbageLLM(LLM):
    backend, model = "test", "garbage"

    async def generate(self, req):
        from agent.llm.base import LLMBadOutput

        raise LLMBadOutput("not valid against the schema")


async def test_scorer_votes_on_the_checks_when_the_llm_answer_is_unusable(tmp_path):
    rt = make_rt(tmp_path, role="scorer", scorers=1)
    g = goal(ident("u"), scorers=1, quorum=1)
    await rt.ingest(g.raw, "peer")
    await rt.publish(Hello(role="scorer"))
    p = proposal(ident("d"), g.id, ["Book flights to Tokyo", "Kyoto temples", "Osaka food"])
    await rt.ingest(p.raw, "peer")
    with trio.move_on_after(2):
        await scorer.run(rt, GarbageLLM())
    (v,) = events_of(rt, "vote")
    assert v.body.proposal == p.id and v.body.approve
    assert rt.tree().node(g.id).accepted == p.id
