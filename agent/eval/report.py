"""The benchmark's table (rich) and the comparison of two result files."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Mapping

from rich.table import Table

# (metric key, column header, better when: "low" | "high" | None)
COLUMNS: tuple[tuple[str, str, str | None], ...] = (
    ("quality", "quality", "high"),
    ("depth", "depth", "high"),
    ("leaves", "leaves", None),
    ("proposals_per_split", "props/split", None),
    ("repeats_ancestor", "repeats", "low"),
    ("duplicate_siblings", "dup sib", "low"),
    ("overlap_within", "overlap in", "low"),
    ("overlap_across", "overlap x", "low"),
    ("placeholders", "placeh.", "low"),
    ("nonwords", "nonwords", "low"),
    ("wrong_language", "lang", "low"),
    ("cut_results", "cut", "low"),
    ("bad_results", "bad res", "low"),
    ("coverage", "coverage", "high"),
    ("summary", "summary", "high"),
)


def _fmt(v: Any) -> str:
    if isinstance(v, bool):
        return "yes" if v else "no"
    if isinstance(v, float):
        return f"{v:.2f}" if abs(v) < 10 else f"{v:.1f}"
    return str(v)


def table(data: Mapping[str, Any]) -> Table:
    t = Table(title=f"plan quality: {data['model']} ({data['backend']}), commit {data.get('commit')}")
    t.add_column("goal")
    for _, head, _ in COLUMNS:
        t.add_column(head, justify="right")
    t.add_column("s/req", justify="right")
    t.add_column("s/goal", justify="right")
    for g in data["goals"]:
        m = g["metrics"]
        t.add_row(g["id"], *[_fmt(m.get(k)) for k, _, _ in COLUMNS],
                  _fmt(g["llm"]["seconds_per_request"]), _fmt(g["seconds"]))
    a = data["aggregate"]
    if a:
        t.add_row("[bold]mean[/bold]", *[_fmt(a.get(k)) for k, _, _ in COLUMNS],
                  _fmt(a.get("seconds_per_request")), _fmt(a.get("seconds_per_goal")))
    return t


def markdown_table(runs: list[Mapping[str, Any]]) -> str:
    """One row per run (the mean over its goals): for docs and reports."""
    heads = ["model", "commit", "goals"] + [h for _, h, _ in COLUMNS] + ["s/req", "s/goal"]
    lines = ["| " + " | ".join(heads) + " |", "|" + "---|" * len(heads)]
    for d in runs:
        a = d["aggregate"]
        row = [d["model"], str(d.get("commit")), str(len(d["goals"]))]
        row += [_fmt(a.get(k)) for k, _, _ in COLUMNS]
        row += [_fmt(a.get("seconds_per_request")), _fmt(a.get("seconds_per_goal"))]
        lines.append("| " + " | ".join(row) + " |")
    return "\n".join(lines)


def compare(old: Mapping[str, Any], new: Mapping[str, Any]) -> Table:
    """Mean metrics of two runs side by side, on the goals both ran."""
    both = {g["id"] for g in old["goals"]} & {g["id"] for g in new["goals"]}
    from agent.eval.metrics import aggregate

    def mean(d):
        return aggregate([g["metrics"] for g in d["goals"] if g["id"] in both]) if both else {}

    a, b = mean(old), mean(new)
    t = Table(title=f"{old['model']}@{old.get('commit')} -> {new['model']}@{new.get('commit')} "
                    f"on {len(both)} common goals")
    for h in ("metric", "old", "new", "change"):
        t.add_column(h, justify="right" if h != "metric" else "left")
    for key, head, better in COLUMNS:
        x, y = a.get(key), b.get(key)
        if x is None or y is None:
            continue
        d = float(y) - float(x)
        mark = ""
        if better and abs(d) > 1e-9:
            mark = "[green]better[/green]" if (d > 0) == (better == "high") else "[red]worse[/red]"
        t.add_row(head, _fmt(x), _fmt(y), f"{d:+.2f} {mark}")
    return t


def load(path: Path) -> dict[str, Any]:
    return json.loads(Path(path).read_text())


def rescore(data: Mapping[str, Any]) -> dict[str, Any]:
    """The same plans measured again with the current metrics (plans are stored whole, so a
    change to a metric never needs the model to run again)."""
    from agent.eval.goals import goal_by_id
    from agent.eval.metrics import aggregate, plan_metrics

    out = dict(data)
    depth = (data.get("config") or {}).get("max_depth")
    goals = []
    for g in data["goals"]:
        g = dict(g)
        g["metrics"] = plan_metrics(g["plan"], goal_by_id(g["id"]).aspects, depth)
        goals.append(g)
    agg = dict(data.get("aggregate") or {})
    agg.update(aggregate([g["metrics"] for g in goals]))
    out["goals"], out["aggregate"] = goals, agg
    return out
