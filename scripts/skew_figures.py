"""Issue 23's figures: one executor's clock off by a skew, 8 real agent processes on 127.0.0.1,
scripted LLM (the chaos suite's swarm), N runs per skew. Per run it prints executions per task
(how many executors spent an LLM call on a task beyond its attempts), takeovers (tasks claimed
by more than one executor), and counted results that changed while the plan ran: on the test's
watching peer as it happened, and on any agent, replayed from its stored log in stored order.

    .venv/bin/python scripts/skew_figures.py --runs 5 --skews 5000,30000,-30000
    .venv/bin/python scripts/skew_figures.py --mode time      # time.time/time_ns patched instead
    .venv/bin/python scripts/skew_figures.py --source /tmp/old # the agents run another checkout

``--source``: a checkout whose ``agent`` package the agent processes import (the figures "before"
a change: ``git worktree add /tmp/old REV``); the driver that watches runs this checkout.
A measurement, not a test: nothing is asserted, every figure is printed (and appended as JSON
lines to ``--out``)."""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

import trio

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT / "tests"), str(ROOT)]

from support.chaos import LATENCY, ChaosRun, complete_lines, counted_history, decode_all  # noqa: E402
from support.chaos import executions as task_executions  # noqa: E402
from swarm_harness import LocalSwarm  # noqa: E402

GOAL = "Plan a two-week trip to Japan"
SWARM = dict(decomposers=2, scorers=3, executors=2, observers=1, max_depth=2, max_children=3,
             scripted_latency=LATENCY)

# patches this process's wall clock (not the monotonic one trio runs on) by SKEW_MS
SITECUSTOMIZE = """\
import os, time
_ms = int(os.environ.get("SKEW_FIGURES_WALL_MS", "0"))
if _ms:
    _time, _time_ns = time.time, time.time_ns
    time.time = lambda: _time() + _ms / 1000
    time.time_ns = lambda: _time_ns() + _ms * 1_000_000
"""


def executions(run: ChaosRun) -> tuple[dict[str, int], int]:
    """Per task: executors that spent an LLM call on it beyond its attempts (calls still in
    flight count); and the calls cancelled before they answered (lost claim races)."""
    spent, cancelled = task_executions({n: run.records(n) for n in ("executor-1", "executor-2")})
    tree = run.tree()
    out = {}
    for node, who in spent.items():
        n = tree.node(node)
        out[node] = len(who) - (n.attempt if n is not None else 1)
    return out, sum(map(len, cancelled.values()))


async def one(root: Path, skew_ms: int, mode: str, source: str | None, timeout: float) -> dict:
    env: dict[str, str] = {}
    if mode == "offset":
        env["SWARM_CLOCK_OFFSET_MS"] = str(skew_ms)
    else:
        site = root / "site"
        site.mkdir(parents=True, exist_ok=True)
        (site / "sitecustomize.py").write_text(SITECUSTOMIZE)
        env["SKEW_FIGURES_WALL_MS"] = str(skew_ms)
        env["PYTHONPATH"] = str(site)
    sw = LocalSwarm(root, **SWARM, agent_env={"executor-2": env})
    if source:  # run from there: `python -m` puts the working directory first on the path
        for c in sw.children:
            e = sw.agent_env.setdefault(c.name, {})
            e["PYTHONPATH"] = ":".join(p for p in (source, e.get("PYTHONPATH", "")) if p)
            sw.agent_prefix[c.name] = ["env", "-C", source]
    t0 = time.monotonic()
    row: dict = {"skew_ms": skew_ms, "mode": mode, "source": source or str(ROOT)}
    with sw:
        async with trio.open_nursery() as nursery:
            run = ChaosRun(sw, nursery, f"skew {skew_ms}")
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
                    watching.cancel_scope.cancel()
                row["completed"] = True
            except (trio.TooSlowError, AssertionError) as exc:
                row["completed"] = False
                row["error"] = str(exc)[:200]
            row["seconds"] = round(time.monotonic() - t0, 1)
            tree = run.tree()
            over, cancelled = executions(run)
            root_node = tree.node(run.goal_id)
            leaves = [n for n in root_node.walk() if not n.children] if root_node else []
            row["tasks"] = len(leaves)
            row["executed_twice"] = sum(1 for v in over.values() if v > 0)
            row["extra_executions"] = sum(v for v in over.values() if v > 0)
            row["extra_peak_during_run"] = peak
            row["cancelled_calls"] = cancelled
            row["takeovers"] = sum(1 for n in leaves if len({c.author for c in n.claims}) > 1)
            row["counted_changed_watcher"] = len({c["node"] for c in run.watch.changes})
            corrected = [r for r in run.records("executor-2") if r.get("event") == "clock corrected to the peers'"]
            row["correction_ms"] = corrected[-1].get("correction_ms") if corrected else None
            held = [r for c in sw.children if c.name != "executor-2" for r in run.records(c.name)
                    if str(r.get("event", "")).startswith("events held")]
            row["held_lines"] = len(held)
            await run.driver.stop()
            nursery.cancel_scope.cancel()
    changed: set[str] = set()
    for c in sw.children:
        store = c.data_dir / "events.jsonl"
        if store.exists():
            events, _ = decode_all(complete_lines(store.read_bytes()))
            changed |= {node for node, h in counted_history(events).items() if len(h) > 1}
    row["counted_changed_any_store"] = len(changed)
    return row


async def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--skews", default="5000,30000,-30000", help="ms, comma-separated")
    ap.add_argument("--mode", choices=("offset", "time"), default="offset",
                    help="offset: SWARM_CLOCK_OFFSET_MS; time: time.time/time_ns patched")
    ap.add_argument("--source", help="the checkout the agents import (default: this one)")
    ap.add_argument("--timeout", type=float, default=300)
    ap.add_argument("--out", type=Path)
    a = ap.parse_args()
    rows = []
    for skew in [int(s) for s in a.skews.split(",")]:
        for k in range(a.runs):
            with tempfile.TemporaryDirectory(prefix="skewfig-") as tmp:
                row = await one(Path(tmp), skew, a.mode, a.source, a.timeout)
            row["run"] = k + 1
            rows.append(row)
            print(json.dumps(row), flush=True)
            if a.out:
                with open(a.out, "a") as fh:
                    fh.write(json.dumps(row) + "\n")
    print(f"\n{'skew s':>7} {'runs':>4} {'done':>4} {'tasks':>5} {'run twice':>9} {'extra':>5} "
          f"{'takeovers':>9} {'cancelled':>9} {'changed(watch)':>14} {'changed(any)':>12} {'correction s':>12}")
    for skew in sorted({r["skew_ms"] for r in rows}, key=lambda s: (abs(s), s)):
        rs = [r for r in rows if r["skew_ms"] == skew]

        def each(key: str) -> str:
            return "/".join(str(r.get(key)) for r in rs)
        corr = "/".join("-" if r["correction_ms"] is None else f"{r['correction_ms'] / 1000:g}" for r in rs)
        print(f"{skew / 1000:>+7g} {len(rs):>4} {sum(r['completed'] for r in rs):>4} {each('tasks'):>5} "
              f"{each('executed_twice'):>9} {each('extra_executions'):>5} {each('takeovers'):>9} "
              f"{each('cancelled_calls'):>9} {each('counted_changed_watcher'):>14} {each('counted_changed_any_store'):>12} {corr:>12}")


if __name__ == "__main__":
    trio.run(main)
