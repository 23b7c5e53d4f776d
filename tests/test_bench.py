"""The benchmark's parts (no timing assertions: figures come from `make bench`): the central
baseline drives the real behaviours to a done plan; the critical path covers goal -> done; the
LLM-call accounting; the gossip meter behind the executors' windows; a Cancel really stops an
Ollama request; `python -m agent bench` smoke (core section)."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
import trio

from agent.bench.critical import CATEGORIES, CriticalPath, breakdown, llm_calls
from agent.behaviour.timing import NetMeter
from agent.drivers.central import Central, bench_identity
from agent.llm.scripted import ScriptedLLM


def _central(latency: float = 0.01, **kw):
    return trio.run(lambda: Central(ScriptedLLM(latency), **kw).run("Plan a two-week trip to Japan", timeout=120))


def test_central_baseline_finishes_the_plan_with_every_call_useful():
    res = _central()
    assert res.tree.is_done(res.goal_id)
    calls = llm_calls(res.events, res.calls, res.names)
    assert set(calls) == {"brief", "decompose", "rank", "atomic", "execute", "review", "synthesize"}
    assert all(row["wasted"] == 0 for row in calls.values()), calls  # (a scorer left behind is cancelled)
    tasks = sum(1 for n in res.tree.walk() if n.task is not None)
    # every task executed once (a result sent back by its review is executed again)
    attempts = sum(n.attempt for n in res.tree.walk() if n.task is not None)
    assert calls["execute"]["useful"] + calls["synthesize"]["useful"] == attempts >= tasks
    # the electorate is the bench keys' (the swarm's processes get the same ones)
    scorers = {bench_identity(f"scorer-{i}").peer_id for i in (1, 2, 3)}
    assert set(res.tree.roots[0].params.electorate) == scorers


def test_critical_path_runs_from_the_goal_to_the_root_result_without_gaps():
    res = _central()
    cp = CriticalPath(res.events, res.calls, [], res.names)
    segs = cp.walk(res.goal_id)
    goal = next(e for e in res.events if e.type == "goal")
    root_result = cp.done_event(res.goal_id)  # the root's result, or the decision accepting it
    assert segs and abs(segs[0].start - goal.hlc.wall) <= 2
    assert abs(segs[-1].end - root_result.hlc.wall) <= 2
    for a, b in zip(segs, segs[1:]):
        assert b.start >= a.end - 2, (a, b)  # consecutive, no overlap
    total = sum(s.ms for s in segs)
    assert abs(total - (root_result.hlc.wall - goal.hlc.wall)) <= 5 + 2 * len(segs)
    labels = breakdown(res.events, res.calls, [], res.names, res.goal_id)
    assert set(labels) == set(CATEGORIES)
    assert labels["llm: execute"] > 0 and labels["unexplained"] == 0


def test_net_meter_ignores_startup_history_and_flags_misses():
    m = NetMeter(min_samples=4, miss_window_ms=10_000)
    for i in range(10):
        m.delivered(False, 900, now=1_000 + i)  # the mesh forming: slow
    assert m.view(2_000, ignore_before=None).delay_ms == 900
    for i in range(10):
        m.delivered(False, 20 + i, now=5_000 + i)
    v = m.view(6_000, ignore_before=4_000)
    assert v.delay_ms == 29 and v.gossip_healthy
    m.delivered(True, 5_000, now=7_000)  # sync brought an event gossip should have: a miss
    assert not m.view(8_000, ignore_before=4_000).gossip_healthy
    assert m.view(17_001, ignore_before=4_000).gossip_healthy  # healthy again after the window
    assert not m.view(3_000, ignore_before=4_000).gossip_healthy  # not before the grace is over


async def test_a_cancel_stops_the_request_in_the_ollama_backend():
    """What the driver does with a Cancel effect (cancel the call's scope) reaches the server:
    the request leaves its slot while generating (the fake server sees the client go)."""
    from agent.llm.ollama_backend import OllamaLLM
    from agent.llm.prompts import Frame, criteria_request
    from support.fake_ollama import FakeOllama, QueueModel

    q = QueueModel(parallel=1, token_seconds=0.05, tokens=200)  # 10 s per answer
    with FakeOllama(models=["m"], queue=q) as fake:
        llm = OllamaLLM(fake.url, "m", timeout=60, retries=0)
        req = criteria_request(Frame("g"), path=[], title="t", description="", scorer="x", seed=1)
        async with trio.open_nursery() as nursery:
            nursery.start_soon(llm.generate, req)
            await trio.to_thread.run_sync(q.wait_for, lambda s: s["active"] == 1)
            nursery.cancel_scope.cancel()
        s = await trio.to_thread.run_sync(q.wait_for, lambda s: s["cancelled"] == 1)
        await llm.aclose()
    assert s["active"] == 0 and q.summary()["cancelled_while_running"] == 1


def test_bench_command_core_section(tmp_path):
    out = tmp_path / "b.json"
    r = subprocess.run([sys.executable, "-m", "agent", "bench", "--sections", "core", "--core-sizes", "600",
                        "--out", str(out)], capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr[-2000:]
    data = json.loads(out.read_text())
    row = data["core"]["600"]
    assert row["events"] >= 600 and row["update_incremental_ms_p50"] > 0
    assert "## Core" in r.stdout and out.with_suffix(".md").exists()


def test_scale_roles_add_up_and_keep_an_odd_electorate():
    from agent.bench.fleet import roles_for

    with pytest.raises(ValueError):
        roles_for(5)
    for n in (6, 8, 10, 20, 30, 45):
        r = roles_for(n)
        assert sum(r.values()) == n, (n, r)
        assert r["scorers"] % 2 == 1 and r["scorers"] >= 3
        assert min(r.values()) >= 1


@pytest.mark.slow
def test_scale_run_reports_usage_and_gossip(tmp_path):
    """A small scale run completes and reads real figures: every agent's RSS and CPU, and the
    gossip counter scraped from every agent (it moves only if gossip flowed)."""
    from agent.bench.scale import run_scale

    r = run_scale(6, tmp_path, latency=0.05, idle_s=1.0, timeout=240, max_depth=1)
    assert r.ok, r.error
    assert not r.died
    assert len(r.busy["rss_mb"]) == 6 and all(x > 20 for x in r.busy["rss_mb"])
    assert r.gossip_msgs_per_s and r.gossip_msgs_per_s > 0
    assert r.events > 5


def test_bench_command_latejoin_section(tmp_path):
    """A fresh observer joins 3 agent processes holding 300 events, both syncs: it ends with
    the peers' digest; ids first pulls each body once, whole pages once per peer."""
    out = tmp_path / "b.json"
    r = subprocess.run([sys.executable, "-m", "agent", "bench", "--sections", "latejoin", "--latejoin-events", "300",
                        "--repeats", "1", "--out", str(out)], capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr[-2000:]
    lj = json.loads(out.read_text())["latejoin"]
    assert lj["events"] == 300 and len(lj["runs"]) == 2
    assert all(run.get("digest_equal") for run in lj["runs"]), lj["runs"]
    assert lj["ids"]["pulled"] == 300 and lj["pages"]["pulled"] == 900
    assert "## Late join" in r.stdout


def test_work_done_ahead_of_a_decision_counts_only_after_it_and_a_dead_one_is_wasted():
    """A decomposer that started on a child before its split was decided: only the LLM time
    after the decision lies on the critical path; a call for a child that never came to be is
    wasted."""
    from agent.drivers.central import CallRecord
    from agent.core.plan import child_id
    from builders import T0, goal, ident, precommit, proposal

    u, d1, d2 = ident("user"), ident("d1"), ident("d2")
    s = [ident(f"s{i}") for i in range(3)]
    g = goal(u, scorers=3)
    p = proposal(d1, g.id, ["A one", "A two", "A three"], wall=10)
    decision = [precommit(x, g.id, p.id, 1, 100 + i) for i, x in enumerate(s[:2])]
    kid = child_id(p.id, 0)
    q = proposal(d2, kid, ["Step one", "Step two", "Step three"], wall=150)
    names = {d1.peer_id: "decomposer-1", d2.peer_id: "decomposer-2"}
    events = [g, p, *decision, q]
    for end, llm, react in ((T0 + 140, 39, 10), (T0 + 90, 0, 49)):  # answered after / before it
        call = CallRecord("decomposer-2", "decomposer", "decompose", kid, T0 + 60, end, "answered")
        cp = CriticalPath(events, [call], [], names)
        assert cp._proposal(cp.plan.events[q.id]).id == decision[1].id
        segs = {sg.category: sg.ms for sg in cp.segments}
        assert segs.get("llm: decompose", 0) == llm  # from the decision (T0 + 101) on
        assert sum(v for k, v in segs.items() if "reaction" in k) == react
    dead = CallRecord("decomposer-2", "decomposer", "decompose", child_id("ab" * 32, 0), T0 + 60, T0 + 90, "answered")
    live = CallRecord("decomposer-2", "decomposer", "decompose", kid, T0 + 60, T0 + 140, "answered")
    assert llm_calls(events, [dead, live], names)["decompose"] == {"useful": 1, "wasted": 1, "cancelled": 0}


def test_idle_bench_parts(tmp_path):
    """The idle/scale benches' pieces: a sparse static topology that is connected, and the
    py-spy summaries (waiting threads are idle, stacks sorted by activity)."""
    import collections
    from types import SimpleNamespace

    from agent.bench.fleet import sparse_peers
    from agent.bench.idle import buckets
    from agent.bench.fleet import roles_for

    kids = [SimpleNamespace(name=f"a-{i}") for i in range(100)]
    chosen = sparse_peers(kids, 8)
    adj = collections.defaultdict(set)
    for name, peers in chosen.items():
        assert len(peers) == 8 and name not in {p.name for p in peers}
        for p in peers:
            adj[name].add(p.name)
            adj[p.name].add(name)
    seen, todo = {"a-0"}, ["a-0"]
    while todo:
        for nxt in adj[todo.pop()] - seen:
            seen.add(nxt)
            todo.append(nxt)
    assert len(seen) == 100  # one swarm, not islands
    assert roles_for(100, max_decomposers=5)["decomposers"] == 5
    raw = tmp_path / "p.raw"
    raw.write_text("main;run;SyncClient._pull (agent/net/sync_client.py:240);write 30\n"
                   "main;run;GossipSub.heartbeat (gossipsub.py:1);x 10\n"
                   "main;Thread.run;WorkerThread._work (_thread_cache.py:1) 500\n"
                   "main;run;get_events (trio/_core/_io_epoll.py:1) 900\n")
    assert [(b, c) for b, c, _ in buckets(raw)] == [
        ("sync: pulling peers (anti-entropy)", 30), ("gossipsub heartbeat", 10)]


def test_free_port_is_never_handed_out_twice():
    """100 agents take 100-200 ports from about 20,000: drawn independently, two agents of a
    run got the same one about every other run, and one of them could not listen."""
    from agent.demo import free_port

    ports = [free_port() for _ in range(2000)]
    assert len(set(ports)) == len(ports)
