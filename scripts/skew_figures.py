"""Issue 23's figures: one executor's clock off by a skew, 8 real agent processes on 127.0.0.1,
scripted LLM (the chaos suite's swarm), N runs per skew. Per run it prints executions per task
(how many executors spent an LLM call on a task beyond its attempts; a task is a leaf or a
parent's synthesis), takeovers (tasks both executors claimed, from their logs), and counted
results that changed while the plan ran: on the test's watching peer as it happened, and on any
agent, replayed from its stored log in stored order. A run lasts until every store holds the
same events: what peers held (stamped ahead) has come due by then.

    .venv/bin/python scripts/skew_figures.py --runs 5 --skews 5000,30000,-30000
    .venv/bin/python scripts/skew_figures.py --mode time      # time.time/time_ns patched instead
    .venv/bin/python scripts/skew_figures.py --source /tmp/old # another checkout's swarm

``--source``: the figures "before" a change (``git worktree add --detach /tmp/old REV``). The
whole run is that checkout's: its test harness, the driver that posts the goal and watches, the
fold that counts results, and the agent processes (events are not compatible across versions: a
goal of today's driver is malformed to 35a549d's agents, where issue 23 was measured). Only
the counting of LLM calls from the agents' log lines is this checkout's (tests/support/calls.py).
A checkout from before the authority (35a549d) runs an open swarm; ``--no-authority`` runs
this one open too.
A measurement, not a test: nothing is asserted, every figure is printed (and appended as JSON
lines to ``--out``)."""

from __future__ import annotations

import argparse
import importlib.util
import json
import sys
import tempfile
import time
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import trio

ROOT = Path(__file__).resolve().parent.parent


def load(source: Path) -> SimpleNamespace:
    """The harness and fold of ``source``'s checkout (one ``agent`` package per process), and
    this checkout's count of LLM calls (no ``agent`` import), loaded by its path."""
    sys.path[:0] = [str(source / "tests"), str(source)]
    from support import chaos
    from swarm_harness import LocalSwarm

    from agent.demo import DemoConfig

    spec = importlib.util.spec_from_file_location("skew_figures_calls", ROOT / "tests" / "support" / "calls.py")
    assert spec is not None and spec.loader is not None
    calls = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(calls)
    return SimpleNamespace(chaos=chaos, LocalSwarm=LocalSwarm, calls=calls,
                           has_authority="authority" in getattr(DemoConfig, "__dataclass_fields__", {}))


GOAL = "Plan a two-week trip to Japan"
SWARM = dict(decomposers=2, scorers=3, executors=2, observers=1, max_depth=2, max_children=3)
LIB: SimpleNamespace  # load()

# patches this process's wall clock (not the monotonic one trio runs on) by SKEW_MS
SITECUSTOMIZE = """\
import os, time
_ms = int(os.environ.get("SKEW_FIGURES_WALL_MS", "0"))
if _ms:
    _time, _time_ns = time.time, time.time_ns
    time.time = lambda: _time() + _ms / 1000
    time.time_ns = lambda: _time_ns() + _ms * 1_000_000
"""


def executions(run: Any) -> tuple[dict[str, int], int]:
    """Per task: executors that spent an LLM call on it beyond its attempts (calls still in
    flight count); and the calls cancelled before they answered (lost claim races)."""
    spent, cancelled = LIB.calls.executions({n: run.records(n) for n in ("executor-1", "executor-2")},
                                            LIB.calls.TASK_KINDS)
    tree = run.tree()
    out = {}
    for node, who in spent.items():
        n = tree.node(node)
        out[node] = len(who) - (getattr(n, "attempt", 1) if n is not None else 1)  # (no attempts before review)
    return out, sum(map(len, cancelled.values()))


async def one(root: Path, skew_ms: int, mode: str, source: Path, timeout: float,
              authority: bool = True) -> dict:
    env: dict[str, str] = {}
    if mode == "offset":
        env["SWARM_CLOCK_OFFSET_MS"] = str(skew_ms)
    else:
        site = root / "site"
        site.mkdir(parents=True, exist_ok=True)
        (site / "sitecustomize.py").write_text(SITECUSTOMIZE)
        env["SKEW_FIGURES_WALL_MS"] = str(skew_ms)
        env["PYTHONPATH"] = str(site)
    open_swarm = {} if authority or not LIB.has_authority else {"authority": False}
    sw = LIB.LocalSwarm(root, **SWARM, scripted_latency=LIB.chaos.LATENCY, **open_swarm,
                        agent_env={"executor-2": env})
    if source != ROOT:  # the agents run from there: `python -m` puts the working directory first
        for c in sw.children:
            e = sw.agent_env.setdefault(c.name, {})
            e["PYTHONPATH"] = ":".join(p for p in (str(source), e.get("PYTHONPATH", "")) if p)
            sw.agent_prefix[c.name] = ["env", "-C", str(source)]
    t0 = time.monotonic()
    row: dict = {"skew_ms": skew_ms, "mode": mode, "source": str(source),
                 "authority": authority and LIB.has_authority}
    with sw:
        async with trio.open_nursery() as nursery:
            run = LIB.chaos.ChaosRun(sw, nursery, f"skew {skew_ms}")
            await run.start(GOAL, ready=[c.name for c in sw.children if c.name != "executor-2"])
            peak = 0

            async def watch() -> None:
                nonlocal peak
                while True:
                    peak = max(peak, sum(v for v in executions(run)[0].values() if v > 0))
                    await trio.sleep(0.5)

            try:
                async with trio.open_nursery() as watching:
                    watching.start_soon(watch)
                    with trio.fail_after(timeout):
                        await run.until_done(timeout)
                    row["completed"] = True
                    row["seconds"] = round(time.monotonic() - t0, 1)
                    # the run goes on until every store holds the same events: what peers held
                    # (stamped ahead) comes due meanwhile, and the counted results it changes
                    # are part of the run (issue 23: they changed on some peers then)
                    await run.until_converged(timeout)
                    row["converged_s"] = round(time.monotonic() - t0, 1)
                    watching.cancel_scope.cancel()
            except (trio.TooSlowError, AssertionError) as exc:
                row.setdefault("completed", False)
                row["error"] = str(exc)[:200]
            row.setdefault("seconds", round(time.monotonic() - t0, 1))
            tree = run.tree()
            over, cancelled = executions(run)
            root_node = tree.node(run.goal_id)
            # every node an executor held: the leaves, and the parents it synthesized
            tasks = [n for n in root_node.walk() if n.claims] if root_node else []
            row["tasks"] = len(tasks)
            row["executed_twice"] = sum(1 for v in over.values() if v > 0)
            row["extra_executions"] = sum(v for v in over.values() if v > 0)
            row["extra_peak_during_run"] = peak
            row["cancelled_calls"] = cancelled
            # tasks claimed by both executors, as each logged its claims: the driver's tree may
            # not show them (a claim stamped 30 s ahead is held by every peer until it is due,
            # later than the plan is done)
            claimed: dict[str, set[str]] = {}
            for name in ("executor-1", "executor-2"):
                for r in run.records(name):
                    if r.get("event") == "claimed; settling":
                        claimed.setdefault(str(r.get("node")), set()).add(name)
            row["takeovers"] = sum(1 for who in claimed.values() if len(who) > 1)
            row["takeovers_in_tree"] = sum(1 for n in tasks if len({c.author for c in n.claims}) > 1)
            row["counted_changed_watcher"] = len({c["node"] for c in run.watch.changes})
            corrected = [r for r in run.records("executor-2") if r.get("event") == "clock corrected to the peers'"]
            row["correction_ms"] = corrected[-1].get("correction_ms") if corrected else None
            held = [r for c in sw.children if c.name != "executor-2" for r in run.records(c.name)
                    if "held: stamped ahead" in str(r.get("event", ""))]  # (35a549d: "event held: ...")
            row["held_lines"] = len(held)
            # the pull before work found the claim in no peer's store: waited, or dropped the task
            row["claims_unstored"] = sum(1 for n in ("executor-1", "executor-2") for r in run.records(n)
                                         if str(r.get("event", "")).startswith("no peer has stored our claim")
                                         or r.get("event") == "no peer stored our claim; work dropped")
            await run.driver.stop()
            nursery.cancel_scope.cancel()
    changed: set[str] = set()
    for c in sw.children:
        store = c.data_dir / "events.jsonl"
        if store.exists():
            events, _ = LIB.chaos.decode_all(LIB.chaos.complete_lines(store.read_bytes()))
            changed |= {node for node, h in LIB.chaos.counted_history(events).items() if len(h) > 1}
    row["counted_changed_any_store"] = len(changed)
    return row


async def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--skews", default="5000,30000,-30000", help="ms, comma-separated")
    ap.add_argument("--mode", choices=("offset", "time"), default="offset",
                    help="offset: SWARM_CLOCK_OFFSET_MS; time: time.time/time_ns patched")
    ap.add_argument("--source", type=Path, default=ROOT,
                    help="the checkout whose swarm runs (default: this one)")
    ap.add_argument("--no-authority", action="store_true", help="an open swarm (the swarm key alone)")
    ap.add_argument("--timeout", type=float, default=300)
    ap.add_argument("--out", type=Path)
    ap.add_argument("--keep", type=Path, help="keep each run's logs and stores under this directory")
    a = ap.parse_args()
    global LIB
    a.source = a.source.resolve()
    LIB = load(a.source)
    rows = []
    for skew in [int(s) for s in a.skews.split(",")]:
        for k in range(a.runs):
            if a.keep:
                a.keep.mkdir(parents=True, exist_ok=True)
                tmp = tempfile.mkdtemp(prefix=f"skew{skew}-", dir=a.keep)
                row = await one(Path(tmp), skew, a.mode, a.source, a.timeout, not a.no_authority)
                row["dir"] = tmp
            else:
                with tempfile.TemporaryDirectory(prefix="skewfig-") as tmp:
                    row = await one(Path(tmp), skew, a.mode, a.source, a.timeout, not a.no_authority)
            row["run"] = k + 1
            rows.append(row)
            print(json.dumps(row), flush=True)
            if a.out:
                with open(a.out, "a") as fh:
                    fh.write(json.dumps(row) + "\n")
    print(f"\n{'skew s':>7} {'runs':>4} {'done':>4} {'tasks':>5} {'run twice':>9} {'extra':>5} "
          f"{'takeovers':>9} {'cancelled':>9} {'changed(watch)':>14} {'changed(any)':>12} {'unstored':>9} "
          f"{'correction s':>12}")
    for skew in sorted({r["skew_ms"] for r in rows}, key=lambda s: (abs(s), s)):
        rs = [r for r in rows if r["skew_ms"] == skew]

        def each(key: str) -> str:
            return "/".join(str(r.get(key)) for r in rs)
        corr = "/".join("-" if r["correction_ms"] is None else f"{r['correction_ms'] / 1000:g}" for r in rs)
        print(f"{skew / 1000:>+7g} {len(rs):>4} {sum(r['completed'] for r in rs):>4} {each('tasks'):>5} "
              f"{each('executed_twice'):>9} {each('extra_executions'):>5} {each('takeovers'):>9} "
              f"{each('cancelled_calls'):>9} {each('counted_changed_watcher'):>14} {each('counted_changed_any_store'):>12} "
              f"{each('claims_unstored'):>9} {corr:>12}")


if __name__ == "__main__":
    trio.run(main)
