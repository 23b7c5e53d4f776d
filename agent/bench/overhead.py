"""Coordination overhead: the same goal, tree bounds, agents and LLM latency run by the swarm
(separate processes over libp2p on 127.0.0.1) and by the central baseline
(agent.drivers.central), in one run, alternating, with repeats; makespans, their ratio, LLM
calls by kind and the critical path of each."""

from __future__ import annotations

import os
import shutil
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

import trio

from agent.bench.critical import CATEGORIES, breakdown, llm_calls
from agent.bench.swarm import run_swarm
from agent.drivers.central import Central
from agent.llm.scripted import ScriptedLLM

GOAL = "Plan a two-week trip to Japan"
SHAPE = dict(decomposers=3, scorers=3, executors=2, max_depth=2, max_children=4, max_rounds=2)


def load() -> list[float]:
    return [round(x, 2) for x in os.getloadavg()]


def _shape(events: list) -> dict[str, int]:
    from agent.core.plan import fold
    from agent.core.tree import derive

    plan = fold(events)
    tree = derive(plan, plan.latest_wall())
    nodes = list(tree.walk())
    return {"nodes": len(nodes), "tasks": sum(1 for n in nodes if n.task is not None),
            "events": len(events)}


def one_central(latency: float) -> dict[str, Any]:
    t_load = load()
    res = trio.run(lambda: Central(ScriptedLLM(latency), **SHAPE).run(GOAL))
    return {"makespan_s": round(res.makespan_s, 3), "load": t_load,
            "calls": llm_calls(res.events, res.calls, res.names),
            "path": breakdown(res.events, res.calls, [], res.names, res.goal_id),
            "shape": _shape(res.events)}


def one_swarm(latency: float, keep: Path | None = None, extra_env: dict[str, str] | None = None) -> dict[str, Any]:
    t_load = load()
    root = Path(tempfile.mkdtemp(prefix="bench-swarm-", dir=keep))
    try:
        run = run_swarm(latency, root, goal=GOAL, extra_env=extra_env, **SHAPE)
        if not run.ok:
            return {"ok": False, "error": run.error, "load": t_load, "root": str(root)}
        out = {"ok": True, "makespan_s": round(run.makespan_s, 3), "load": t_load,
               "calls": llm_calls(run.events, run.calls, run.names),
               "path": breakdown(run.events, run.calls, run.syncs, run.names, run.goal_id),
               "shape": _shape(run.events)}
        return out
    finally:
        if keep is None:
            shutil.rmtree(root, ignore_errors=True)


def _median_path(rows: list[dict[str, Any]]) -> dict[str, float]:
    return {c: round(statistics.median(r["path"].get(c, 0.0) for r in rows), 3) for c in CATEGORIES}


def _sum_calls(rows: list[dict[str, Any]]) -> dict[str, dict[str, float]]:
    kinds = sorted({k for r in rows for k in r["calls"]})
    out = {}
    for k in kinds:
        out[k] = {f: statistics.median(r["calls"].get(k, {}).get(f, 0) for r in rows)
                  for f in ("useful", "wasted", "cancelled")}
    return out


def run(latencies: list[float], repeats: int, log: Any = print, keep: Path | None = None,
        extra_env: dict[str, str] | None = None) -> dict[str, Any]:
    results: dict[str, Any] = {}
    for lat in latencies:
        swarm_rows, central_rows = [], []
        for i in range(repeats):
            t0 = time.monotonic()
            c = one_central(lat)
            central_rows.append(c)
            s = one_swarm(lat, keep, extra_env)
            swarm_rows.append(s)
            ratio = s["makespan_s"] / c["makespan_s"] if s.get("ok") else float("nan")
            log(f"  L={lat}s repeat {i + 1}/{repeats}: swarm {s.get('makespan_s', 'FAILED')} s, central "
                f"{c['makespan_s']} s, ratio {ratio:.2f} (load {s['load'][0]}; {time.monotonic() - t0:.0f} s)"
                + ("" if s.get("ok") else f" {s.get('error')}"))
        ok = [s for s in swarm_rows if s.get("ok")]
        ratios = [s["makespan_s"] / c["makespan_s"] for s, c in zip(swarm_rows, central_rows) if s.get("ok")]
        results[str(lat)] = {
            "latency_s": lat, "repeats": repeats, "failed": repeats - len(ok),
            "swarm_makespan_s": round(statistics.median(s["makespan_s"] for s in ok), 3) if ok else None,
            "central_makespan_s": round(statistics.median(c["makespan_s"] for c in central_rows), 3),
            "ratio_median": round(statistics.median(ratios), 3) if ratios else None,
            "swarm_calls": _sum_calls(ok) if ok else {}, "central_calls": _sum_calls(central_rows),
            "swarm_path": _median_path(ok) if ok else {}, "central_path": _median_path(central_rows),
            "runs": {"swarm": swarm_rows, "central": central_rows},
        }
    return results


__all__ = ["run", "one_central", "one_swarm"]
