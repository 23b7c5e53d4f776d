"""Vote latency and claim races, measured on real swarms of processes on 127.0.0.1.

- vote latency: for every decided node, from the stamp of the precommit that completed the
  quorum to the moment the last of the swarm's peers held the decision (each agent logs
  "decided" when it first does);
- claim races: many ready leaves, several executors: claims, claims lost (released after a
  lost race), LLM calls started by losers, tasks executed more than once.
"""

from __future__ import annotations

import shutil
import tempfile
from collections import defaultdict
from pathlib import Path
from typing import Any

from agent.bench.critical import llm_calls
from agent.bench.swarm import run_swarm
from agent.core.plan import fold
from agent.core.tree import derive


def _pct(xs: list[float], q: float) -> float | None:
    if not xs:
        return None
    xs = sorted(xs)
    return round(xs[min(len(xs) - 1, int(q * len(xs)))], 1)


def vote_latency(keep: Path | None = None, latency: float = 0.05) -> dict[str, Any]:
    root = Path(tempfile.mkdtemp(prefix="bench-votes-", dir=keep))
    try:
        run = run_swarm(latency, root, decomposers=3, scorers=4, executors=2, observers=1, max_depth=3,
                        max_children=4)
        if not run.ok:
            return {"ok": False, "error": run.error}
        plan = fold(run.events)
        samples = []
        for node in plan.by_node:
            t = plan.tally(node)
            if t.decided is None:
                continue
            pcs = sorted((e for e in plan.by_node[node].votes if e.body.phase == "precommit"
                          and e.body.round == t.decided_round and e.body.value == t.decided),
                         key=lambda e: (e.hlc.wall, e.hlc.logical))
            start = pcs[t.quorum - 1].hlc.wall
            have = [acc["decided:" + node] for acc in run.accepted.values() if "decided:" + node in acc]
            if len(have) == len(run.accepted):  # every peer logs when it first holds the decision
                samples.append(max(have) - start)
        return {"ok": True, "agents": len(run.accepted), "decisions": len(samples),
                "p50_ms": _pct(samples, 0.5), "p95_ms": _pct(samples, 0.95),
                "max_ms": round(max(samples), 1) if samples else None}
    finally:
        if keep is None:
            shutil.rmtree(root, ignore_errors=True)


GOALS = ["Plan a two-week trip to Japan", "Organise a wedding for 120 guests",
         "Renovate a small apartment kitchen", "Launch a neighbourhood book club"]


def claim_goals(n: int) -> list[str]:
    """n goal titles: GOALS, then GOALS again numbered (the scripted LLM splits each alike)."""
    return [GOALS[i % len(GOALS)] + (f" ({i // len(GOALS) + 1})" if i >= len(GOALS) else "") for i in range(n)]


def claim_races(keep: Path | None = None, latency: float = 0.05, executors: int = 5,
                goals: int = 44) -> dict[str, Any]:
    """``goals``: 4 goals made 25 leaves (33 tasks) once atomic judgments stopped splits early,
    32 made 160 leaves; 44 give the 200+ leaves this section is about (about 5 per goal)."""
    root = Path(tempfile.mkdtemp(prefix="bench-claims-", dir=keep))
    try:
        run = run_swarm(latency, root, goal=claim_goals(goals), decomposers=3, scorers=3, executors=executors,
                        max_depth=3, max_children=5, timeout=1500)
        if not run.ok:
            return {"ok": False, "error": run.error}
        plan = fold(run.events)
        tree = derive(plan, plan.latest_wall())
        nodes = list(tree.walk())
        claims = [e for e in run.events if e.type == "claim"]
        lost = [e for e in run.events if e.type == "release" and "lost" in e.body.reason]
        calls = llm_calls(run.events, run.calls, run.names).get("execute", {})
        by_task: dict[str, set[str]] = defaultdict(set)
        for c in run.calls:
            if c.kind == "execute" and c.node:
                by_task[c.node].add(c.agent)
        return {"ok": True, "executors": executors, "goals": goals, "makespan_s": round(run.makespan_s, 1),
                "tasks": sum(1 for n in nodes if n.task is not None),
                "leaves": sum(1 for n in nodes if n.leaf), "claims": len(claims),
                "collisions": sum(n.collisions for n in nodes), "claims_lost": len(lost),
                "loser_llm_calls": calls.get("wasted", 0) + calls.get("cancelled", 0),
                "tasks_with_work_from_two_executors": sum(1 for a in by_task.values() if len(a) > 1),
                "executed_twice": sum(n.executed_twice for n in nodes)}
    finally:
        if keep is None:
            shutil.rmtree(root, ignore_errors=True)


__all__ = ["claim_races", "vote_latency"]
