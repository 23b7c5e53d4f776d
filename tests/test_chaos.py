"""The chaos suite: faults injected into a real swarm of agent processes on 127.0.0.1 (scripted
LLM with a realistic-but-short latency) while it plans. Each scenario ends with the same checks
(tests/support/chaos.py, ``ChaosRun.finish``): the plan completes; every agent's stored log
folds to the same digest; no event is lost; no agent process died; no counted result changed
after every agent had it. Each prints its recovery time.

The partition (network namespaces) is in test_chaos_partition.py, the hostile peer in
test_chaos_hostile.py.
"""

from __future__ import annotations

import os
import shutil
import signal
import time

import pytest
import trio

from support.chaos import (LATENCY, TASK_KINDS, ChaosRun, SmallDisk, complete_lines, decode_all, executions,
                           in_flight)
from swarm_harness import FAST_ENV, LocalSwarm

pytestmark = [pytest.mark.slow, pytest.mark.timeout(420)]

GOAL = "Plan a two-week trip to Japan"
# 8 agents: 2 decomposers, 3 scorers (quorum 2), 2 executors, 1 observer; a depth-2 plan
SWARM = dict(decomposers=2, scorers=3, executors=2, observers=1, max_depth=2, max_children=3,
             scripted_latency=LATENCY)


def swarm(tmp_path, **kw) -> LocalSwarm:
    return LocalSwarm(tmp_path, **{**SWARM, **kw})


async def test_kill_executor_holding_a_claim(tmp_path):
    """SIGKILL an executor while it works on a task it claimed: its lease lapses, the other
    executor takes the task over; restarted after the plan, it catches up."""
    # executor-1's LLM calls take longer, so it is caught working
    with swarm(tmp_path, agent_env={"executor-1": {"SWARM_SCRIPTED_LATENCY": "3"}}) as sw:
        async with trio.open_nursery() as nursery:
            run = ChaosRun(sw, nursery, "SIGKILL executor holding a claim")
            await run.start(GOAL)
            me = run.peer("executor-1")
            node = await run.until(lambda: working_on_held_task(run, "executor-1", me), 180,
                                   "executor-1 working on a task the driver sees it hold")
            run.kill("executor-1")
            run.rec.fault_end = time.monotonic()
            await run.until_done()
            took_over = [c for c in run.tree().node(node).claims if c.author != run.peer("executor-1")]
            assert took_over, "the other executor took the task over"
            sw.restart("executor-1")
            await run.finish()
            nursery.cancel_scope.cancel()


async def test_kill_decomposer_mid_plan(tmp_path):
    """SIGKILL a decomposer while it decomposes a subgoal: the other one carries the plan."""
    with swarm(tmp_path, agent_env={"decomposer-2": {"SWARM_SCRIPTED_LATENCY": "2"}}) as sw:
        async with trio.open_nursery() as nursery:
            run = ChaosRun(sw, nursery, "SIGKILL decomposer mid-plan")
            await run.start(GOAL)
            await run.until_log("decomposer-2", lambda r: [c for c in in_flight(r, "decompose")
                                                           if run.node_depth(c.get("node_id")) == 1],
                                180, "a subgoal's decomposition in flight")
            run.kill("decomposer-2")
            run.rec.fault_end = time.monotonic()
            await run.until_done()
            sw.restart("decomposer-2")
            await run.finish()
            nursery.cancel_scope.cancel()


async def test_kill_scorer_while_quorum_reachable(tmp_path):
    """SIGKILL one of 3 scorers (quorum 2) while it ranks the goal's splits: the other two
    decide every node."""
    with swarm(tmp_path, agent_env={"scorer-3": {"SWARM_SCRIPTED_LATENCY": "2"}}) as sw:
        async with trio.open_nursery() as nursery:
            run = ChaosRun(sw, nursery, "SIGKILL scorer (quorum reachable)")
            goal = await run.start(GOAL)
            await run.until_log("scorer-3", lambda r: [c for c in in_flight(r, "rank")
                                                       if c.get("node_id") == goal],
                                180, "a ranking of the goal's splits in flight")
            assert run.tree().node(goal).decided is None
            run.kill("scorer-3")
            run.rec.fault_end = time.monotonic()
            await run.until_done()
            sw.restart("scorer-3")
            await run.finish()
            nursery.cancel_scope.cancel()


async def test_sigstop_executor_past_its_lease(tmp_path):
    """SIGSTOP an executor while it works on a claimed task, until its lease has lapsed and the
    other executor has taken the task over; then SIGCONT. Its late work must not count."""
    with swarm(tmp_path, agent_env={"executor-1": {"SWARM_SCRIPTED_LATENCY": "3"}}) as sw:
        async with trio.open_nursery() as nursery:
            run = ChaosRun(sw, nursery, "SIGSTOP executor past its lease, SIGCONT")
            await run.start(GOAL)
            me = run.peer("executor-1")
            node = await run.until(lambda: working_on_held_task(run, "executor-1", me), 180,
                                   "executor-1 working on a task the driver sees it hold")
            sw.signal("executor-1", signal.SIGSTOP)
            t_stop = time.monotonic()
            paused = [r["event_id"] for r in run.records("executor-1") if r.get("event") == "published"
                      and r.get("type") == "claim" and r.get("node_id") == node][-1]

            lease_s = float(FAST_ENV["SWARM_LEASE_SECONDS"])

            def lapsed():
                # stopped, it renews nothing: a lease past t_stop + lease_s has lapsed (the
                # driver's view alone is not enough: a renew sent just before the stop may not
                # have reached it yet; a run stopped only 1.8 s on that, and its result counted)
                if time.monotonic() - t_stop <= lease_s + 1:
                    return False
                mine = [c.end for c in run.tree().node(node).claims if c.author == me]
                return not mine or run.rt.now_ms() > max(mine) + 1000  # and as the others see it

            await run.until(lapsed, 60, "its lease to lapse")
            run.rec.notes["taken_over_while_stopped"] = any(
                c.author != me for c in run.tree().node(node).claims)
            sw.signal("executor-1", signal.SIGCONT)
            run.rec.fault_end = time.monotonic()
            run.rec.notes["stopped_s"] = round(run.rec.fault_end - t_stop, 1)
            await run.until_done()
            await run.finish()
            # the paused work was dropped (it may have claimed the task again afterwards)
            events = {e.id: e for e in decode_all(complete_lines(run.read_store("driver")))[0]}
            assert events[run.watch.counted[node]].body.claim != paused, "the paused claim's result counted"
            assert not [e for e in events.values() if e.type == "result" and e.body.claim == paused]
            nursery.cancel_scope.cancel()


async def test_restart_every_agent_from_its_store(tmp_path):
    """SIGKILL every agent at once while tasks are being executed (the driver stops too), then
    start them all again from their stores."""
    with swarm(tmp_path) as sw:
        async with trio.open_nursery() as nursery:
            run = ChaosRun(sw, nursery, "restart every agent from its store")
            await run.start(GOAL)
            await run.until_log("executor-1", lambda r: in_flight(r, "execute"), 180,
                                "an execute call in flight")
            await run.driver.stop()
            for c in sw.children:
                run.kill(c.name)  # (checks that what each published is in its store)
            sizes = {c.name: len(run.read_store(c.name).splitlines()) for c in sw.children}
            for c in sw.children:
                sw.restart(c.name)
            await run.driver.start(nursery)
            run.rec.fault_end = time.monotonic()
            for c in sw.children:  # each reloaded exactly what it had stored
                reload = await run.until_log(c.name, lambda r: [x for x in r if x.get("event") == "log reloaded"][1:],
                                             60, "its log reloaded")
                assert reload[0]["events"] == sizes[c.name], (c.name, reload[0], sizes[c.name])
            await run.finish()
            nursery.cancel_scope.cancel()


async def test_torn_last_line(tmp_path):
    """A crash mid-write: one agent is killed, half an event line is appended to its
    events.jsonl, and it is restarted. It drops the torn tail, syncs, and goes on."""
    with swarm(tmp_path) as sw:
        async with trio.open_nursery() as nursery:
            run = ChaosRun(sw, nursery, "torn last line in one log")
            goal = await run.start(GOAL)
            await until_decided(run, goal)
            run.kill("scorer-2")
            store = sw.child("scorer-2").data_dir / "events.jsonl"
            have = set(store.read_bytes().splitlines())
            other = [ln for ln in run.read_store("driver").splitlines() if ln not in have]
            line = (other or sorted(have))[-1]
            half = line[: len(line) // 2]
            with open(store, "ab") as fh:
                fh.write(half)
            sw.restart("scorer-2")
            run.rec.fault_end = time.monotonic()
            torn = await run.until_log("scorer-2", lambda r: [x for x in r if x.get("event") == "store.torn_tail"],
                                       60, "the torn tail noticed")
            assert torn[0]["dropped_bytes"] == len(half) and torn[0]["partial_last_line"] is True
            await run.finish()
            nursery.cancel_scope.cancel()


# patches the process's wall clock (time.time, time.time_ns), not the monotonic one trio runs on
WALL_SKEW = """\
import os, time
_ms = int(os.environ["TEST_WALL_SKEW_MS"])
_time, _time_ns = time.time, time.time_ns
time.time = lambda: _time() + _ms / 1000
time.time_ns = lambda: _time_ns() + _ms * 1_000_000
"""


@pytest.mark.parametrize("skew_ms,how", [(30_000, "offset"), (-30_000, "offset"), (5_000, "offset"),
                                         (30_000, "time.time")])
async def test_clock_skew_on_one_agent(tmp_path, skew_ms, how):
    """One executor's clock runs ``skew_ms`` off: the settings offset (SWARM_CLOCK_OFFSET_MS,
    fault injection only), or its process's time.time/time_ns themselves. It estimates its offset from its peers' stamps and stamps in step (holding back
    what it would stamp beyond what peers accept), so no work is wasted: watched during the
    run, every task attempt (a leaf's execution, a parent's synthesis) is executed once, no
    counted result changes (on the driver as it runs, and on any agent, its store replayed in
    the order it accepted events), and the plan completes. (Before the correction, +30 s: 5
    and 7 of 11 leaves executed twice, 11 takeovers, counted results changed on some peers
    while the plan ran.)"""
    if how == "offset":
        skew = {"SWARM_CLOCK_OFFSET_MS": str(skew_ms)}
    else:
        site = tmp_path / "wall-skew"
        site.mkdir()
        (site / "sitecustomize.py").write_text(WALL_SKEW)
        skew = {"TEST_WALL_SKEW_MS": str(skew_ms), "PYTHONPATH": str(site)}
    with swarm(tmp_path, agent_env={"executor-2": skew}) as sw:
        async with trio.open_nursery() as nursery:
            run = ChaosRun(sw, nursery, f"clock skew {skew_ms / 1000:+g} s on one executor ({how})")
            run.rec.fault_end = time.monotonic()  # the fault lasts the whole run
            await run.start(GOAL, ready=[c.name for c in sw.children if c.name != "executor-2"])
            async def watch_executions():
                # executions per task attempt, as the run goes (an execution is an LLM call)
                while True:
                    over = executions_over_attempts(run)
                    assert not over, f"tasks executed more often than attempted: {over}"
                    await trio.sleep(0.5)

            async with trio.open_nursery() as watching:
                watching.start_soon(watch_executions)
                await run.until_done()
                watching.cancel_scope.cancel()
            tree_at_end = run.tree()
            over = executions_over_attempts(run)
            takeovers = sum(1 for n in tree_at_end.node(run.goal_id).walk()
                            if len({c.author for c in n.claims}) > 1)
            corrected = [r for r in run.records("executor-2") if r.get("event") == "clock corrected to the peers'"]
            _spent, cancelled = executions({n: run.records(n) for n in ("executor-1", "executor-2")}, TASK_KINDS)
            run.rec.notes.update(skew_ms=skew_ms, double_executions=sum(over.values()), takeovers=takeovers,
                                 cancelled_calls=sum(map(len, cancelled.values())),
                                 correction_ms=corrected[-1].get("correction_ms") if corrected else 0)
            await run.finish()  # also: no counted result changed while the driver watched
            assert not over, f"tasks executed more often than attempted: {over}"
            changed = run.counted_changes()
            assert not changed, f"counted results changed while the plan ran, by agent: {changed}"
            if abs(skew_ms) > 2_000:
                # (its peers' clocks absorbed its first, ahead stamps once due: the estimate
                # is somewhat short of the skew, e.g. 3.4 s for 5 s)
                assert corrected and abs(corrected[-1]["correction_ms"] - skew_ms) <= max(2_000, abs(skew_ms) // 2), corrected
            nursery.cancel_scope.cancel()


def executions_over_attempts(run: ChaosRun) -> dict[str, int]:
    """Nodes executed (or synthesized) by more executors than the task had attempts (an
    executor's own retries of an unusable answer, with a fresh seed, are one execution). A call
    cancelled before it answered, when the executor learnt that an earlier claim held the task,
    is the claim race's cost, not an execution: seen once in a full run, the loser's gossip
    delay (210 ms) past its settle window (130 ms) under load, its call cancelled 17 ms in; such
    calls are counted apart (``cancelled_executions``)."""
    spent, _cancelled = executions({n: run.records(n) for n in ("executor-1", "executor-2")}, TASK_KINDS)
    tree = run.tree()
    out = {}
    for node, who in spent.items():
        n = tree.node(node)
        attempts = n.attempt if n is not None else 1
        if len(who) > attempts:
            out[node[:12] + node[64:]] = len(who) - attempts
    return out


@pytest.mark.skipif(os.geteuid() != 0 or not (shutil.which("unshare") and shutil.which("nsenter")),
                    reason="a private mount namespace with a tiny tmpfs needs root, unshare and nsenter")
async def test_data_dir_fills_up_then_frees(tmp_path):
    """One scorer's data dir (a small tmpfs) fills up while the goal is voted on, then frees:
    it holds its own events back while it cannot store them, the others decide, and it
    catches up once the disk frees."""
    probe = swarm(tmp_path)  # the children's data dirs and keys exist before the swarm starts
    with SmallDisk(probe.child("scorer-2").data_dir) as disk:
        probe.agent_prefix["scorer-2"] = disk.prefix
        with probe as sw:
            async with trio.open_nursery() as nursery:
                run = ChaosRun(sw, nursery, "data dir fills up, then frees")
                run.readers["scorer-2"] = lambda: disk.read("events.jsonl")
                goal = await run.start(GOAL)
                disk.fill()
                t_full = time.monotonic()
                await until_decided(run, goal)
                await run.until_log("scorer-2", lambda r: [x for x in r if x.get("level") == "error"
                                                           and "cannot" in str(x.get("event"))],
                                    60, "the full disk noticed")
                decided = await until_decided(run, goal, more=2)
                disk.free()
                run.rec.fault_end = time.monotonic()
                run.rec.notes["full_s"] = round(run.rec.fault_end - t_full, 1)
                await run.finish()
                errors = [x for x in run.records("scorer-2") if x.get("level") == "error"]
                assert 1 <= len(errors) <= 4, errors  # logged once (per kind), not once a second
                assert decided
                nursery.cancel_scope.cancel()


def working_on_held_task(run: ChaosRun, name: str, peer: str) -> str | None:
    """A task the agent's log shows an LLM call in flight for, and the driver already sees it
    hold (its view lags the agent's by a gossip hop): the node id, or None."""
    recs = run.records(name)
    for call in in_flight(recs, "execute") + in_flight(recs, "synthesize"):
        n = run.tree().node(call["node_id"])
        if n is not None and n.holder is not None and n.holder.author == peer:
            return call["node_id"]
    return None


async def until_decided(run: ChaosRun, goal: str, more: int = 0) -> list[str]:
    """Until the goal is decided (and ``more`` nodes below it): the decided nodes."""
    def decided():
        root = run.tree().node(goal)
        got = [n.id for n in root.walk() if n.decided is not None] if root else []
        return got if got and root.decided is not None and len(got) >= 1 + more else None

    return await run.until(decided, 180, f"the goal and {more} more decided")
