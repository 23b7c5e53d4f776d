"""The benchmark's tables (rich), and the files of a blind side-by-side reading."""

from __future__ import annotations

import json
import random
from pathlib import Path
from typing import Any, Mapping

from rich.table import Table

from agent.eval.runner import pair_seed

# (metric key, column header, better when)
COLUMNS: tuple[tuple[str, str, str], ...] = (
    ("quality", "quality", "high"),
    ("coverage", "essential work", "high"),
    ("off_goal_facts", "off-goal facts", "low"),
    ("calendar_conflicts", "calendars", "low"),
    ("diary_steps", "diaries", "low"),
    ("chore_steps", "chores", "low"),
    ("concreteness", "concrete /100w", "high"),
    ("synthesis_coverage", "summary uses parts", "high"),
    ("over_budget", "x own budget", "low"),
    ("contradictions", "self-contradictions", "low"),
    ("steps", "steps", "none"),
    ("words", "words", "none"),
)


def _fmt(v: Any) -> str:
    if v is None:
        return "-"
    if isinstance(v, bool):
        return "yes" if v else "no"
    if isinstance(v, float):
        return f"{v:.2f}" if abs(v) < 10 else f"{v:.1f}"
    return str(v)


def load(path: Path) -> dict:
    return json.loads(Path(path).read_text())


def table(data: Mapping[str, Any]) -> Table:
    t = Table(title=f"plan quality, swarm vs one call: {data['model']} ({data['backend']}), "
                    f"commit {data.get('commit')}")
    t.add_column("goal")
    t.add_column("planner")
    for _k, head, _b in COLUMNS:
        t.add_column(head, justify="right")
    t.add_column("seconds", justify="right")
    t.add_column("tokens (prompt+compl.)", justify="right")
    for g in data["goals"]:
        for planner in ("single", "swarm"):
            run = g["runs"].get(planner)
            if run is None:
                continue
            if run.get("error"):
                t.add_row(g["id"], planner, f"error: {run['error'][:60]}")
                continue
            m = run["metrics"]
            t.add_row(g["id"], planner, *[_fmt(m.get(k)) for k, _h, _b in COLUMNS],
                      f"{run['seconds']:.0f}", f"{run['prompt_tokens']}+{run['completion_tokens']}")
    for planner, agg in (data.get("aggregate") or {}).items():
        if agg:
            t.add_row("mean", planner, *[_fmt(agg.get(k)) for k, _h, _b in COLUMNS], "", "")
    return t


def blind_pairs(data: Mapping[str, Any], out_dir: Path, seed: int = 1) -> dict[str, dict[str, str]]:
    """For every goal with both plans: ``<goal>-A.md`` and ``<goal>-B.md``, the two plans in
    the same shape with nothing saying which planner wrote which (the order is drawn per goal
    from ``seed``), and ``<out_dir>-key.json`` beside the directory (kept apart from the readers)
    with the answer."""
    out_dir.mkdir(parents=True, exist_ok=True)
    key: dict[str, dict[str, str]] = {}
    for g in data["goals"]:
        runs = g["runs"]
        if not all(p in runs and runs[p].get("markdown") for p in ("single", "swarm")):
            continue
        order = ["single", "swarm"]
        random.Random(pair_seed(g["id"], seed)).shuffle(order)
        key[g["id"]] = {"A": order[0], "B": order[1]}
        for label, planner in zip("AB", order):
            (out_dir / f"{g['id']}-{label}.md").write_text(runs[planner]["markdown"])
    (out_dir.parent / f"{out_dir.name}-key.json").write_text(json.dumps(key, indent=1))
    return key


def blind_tally(key: Mapping[str, Mapping[str, str]], verdicts: Mapping[str, str]) -> dict[str, Any]:
    """``verdicts``: goal -> "A" | "B" | "tie" as the readers judged: how often each planner
    won."""
    wins = {"swarm": 0, "single": 0, "tie": 0}
    per_goal = {}
    for goal, v in verdicts.items():
        if goal not in key:
            continue
        winner = "tie" if v not in ("A", "B") else key[goal][v]
        wins[winner] += 1
        per_goal[goal] = winner
    return {"wins": wins, "per_goal": per_goal}
