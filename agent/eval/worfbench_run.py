"""Running planners on WorFBench WikiHow tasks and scoring them with node F1.

A planner is any callable ``planner(title) -> PlannerOutput``: it gets the task title ("How to
...") and nothing else. Several planners run side by side on the same tasks, task by task, so
a run cut short still compares them on the same tasks.

Results go to a JSON-lines file, one line per (planner, task), appended and flushed as each
is scored, after a first ``meta`` line (data file's sha256, metric settings). Real runs take
hours: run again with the same ``out`` and the pairs already there are skipped; a meta line
that differs (another data file, threshold or embedding model) is refused rather than mixed.
A line cut by a crash is ignored and that pair is run again.
"""

from __future__ import annotations

import hashlib
import json
import os
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterable, Mapping, Sequence

import structlog

from agent.eval import node_f1
from agent.eval.embedding import CachedEmbedder, Embedder, fingerprint
from agent.eval.worfbench import WorfTask

RUN_VERSION = 1
log = structlog.get_logger("agent.eval.worfbench")


@dataclass
class PlannerOutput:
    steps: list[str]  # the plan's ordered steps (the swarm: its ordered leaves)
    steps_with_results: list[str] | None = None  # e.g. each leaf with its result's sentences
    seconds: float | None = None  # None: the driver's wall time of the call
    tokens: int | None = None
    extra: dict[str, Any] = field(default_factory=dict)  # anything worth keeping (raw text...)


Planner = Callable[[str], PlannerOutput]


class RunFileMismatch(ValueError):
    """The output file holds a run made with other data or metric settings."""


def _meta(threshold: float, embedder: str) -> dict:
    return {"kind": "meta", "version": RUN_VERSION, "threshold": threshold, "embedder": embedder}


def task_digest(task: WorfTask) -> str:
    """What a result was scored against (title and both readings of the gold): a result line
    whose digest differs from the task's was made on other data."""
    body = json.dumps([task.id, task.title, task.gold.nodes, task.gold.edges,
                       task.gold_upstream.nodes, task.gold_upstream.edges], ensure_ascii=False)
    return hashlib.sha256(body.encode()).hexdigest()[:16]


def read_results(path: Path) -> tuple[dict | None, list[dict]]:
    """(meta, result lines) of a run file; unreadable lines (a write cut short) are skipped."""
    if not path.exists():
        return None, []
    meta, rows = None, []
    with path.open(encoding="utf-8") as fh:
        for n, line in enumerate(fh, 1):
            try:
                obj = json.loads(line)
            except ValueError:
                log.warning("worfbench_bad_line", path=str(path), line=n)
                continue
            if obj.get("kind") == "meta":
                meta = meta or obj
            elif obj.get("kind") == "result":
                rows.append(obj)
    return meta, rows


def _scores(pred: Sequence[str] | None, task: WorfTask, embedder: Embedder, threshold: float) -> dict | None:
    if pred is None:
        return None
    return {v: s.to_json() for v, s in node_f1.node_f1(pred, task, embedder, threshold).items()}


def _ends_with_newline(path: Path) -> bool:
    with path.open("rb") as fh:
        fh.seek(-1, os.SEEK_END)
        return fh.read(1) == b"\n"


def _append(fh, obj: dict) -> None:
    fh.write(json.dumps(obj, ensure_ascii=False) + "\n")
    fh.flush()
    os.fsync(fh.fileno())


def run_worfbench(
    planner: Planner | Mapping[str, Planner],
    tasks: Sequence[WorfTask],
    embedder: Embedder,
    *,
    limit: int | None = None,
    out: str | Path | None = None,
    threshold: float = node_f1.THRESHOLD,
    retry_errors: bool = False,
    say: Callable[[str], None] | None = print,
) -> dict:
    """Run every planner on the first ``limit`` tasks, score, append to ``out``; returns the
    summary (``summarize``) of everything in ``out`` for these tasks, and prints its table.

    A planner that raises is recorded for that task (error text, an empty plan, scored 0 as
    the benchmark scores an unusable answer) and the run goes on; ``retry_errors`` runs such
    pairs again on resume."""
    planners = dict(planner) if isinstance(planner, Mapping) else {"planner": planner}
    if not planners:
        raise ValueError("no planner to run")
    chosen = list(tasks[:limit] if limit is not None else tasks)
    cached = embedder if isinstance(embedder, CachedEmbedder) else CachedEmbedder(embedder)
    meta = _meta(threshold, fingerprint(embedder))
    path = Path(out) if out is not None else None
    rows: list[dict] = []
    if path is not None:
        old_meta, rows = read_results(path)
        if old_meta is not None:
            diff = [k for k in ("version", "threshold", "embedder") if old_meta.get(k) != meta[k]]
            if diff:
                raise RunFileMismatch(
                    f"{path} holds a run with another {', '.join(diff)} "
                    f"({', '.join(f'{k}={old_meta.get(k)!r}' for k in diff)}); use another output file")
        digests = {t.id: task_digest(t) for t in chosen}
        stale = sorted({r["task"] for r in rows if r["task"] in digests and r.get("digest") != digests[r["task"]]})
        if stale:
            raise RunFileMismatch(f"{path} scored {', '.join(stale[:5])} against other data (the task's "
                                  "title or gold differ); use another output file")
        path.parent.mkdir(parents=True, exist_ok=True)
    done = {(r["planner"], r["task"]) for r in rows if not (retry_errors and r.get("error"))}
    fh = path.open("a", encoding="utf-8") if path is not None else None
    try:
        if fh is not None:
            if path.stat().st_size == 0:
                _append(fh, meta)
            elif not _ends_with_newline(path):
                fh.write("\n")  # close a line cut by a crash, so that the next one is whole
        for n, task in enumerate(chosen, 1):
            for name, plan in planners.items():
                if (name, task.id) in done:
                    continue
                row = run_one(name, plan, task, cached, threshold)
                rows = [r for r in rows if (r["planner"], r["task"]) != (name, task.id)] + [row]
                if fh is not None:
                    _append(fh, row)
                if say is not None:
                    s = row["scores"]["steps"]
                    say(f"[{n}/{len(chosen)}] {name} {task.id}: {len(row['predicted'])} steps, "
                        f"F1 {s['upstream']['f1']:.3f} (strict {s['strict']['f1']:.3f}), "
                        f"{row['seconds']:.1f} s" + (f", error: {row['error']}" if row.get("error") else ""))
    finally:
        if fh is not None:
            fh.close()
    summary = summarize(rows, [t.id for t in chosen], list(planners))
    summary["threshold"] = threshold
    if say is not None:
        say(format_summary(summary))
    return summary


def run_one(name: str, plan: Planner, task: WorfTask, embedder: Embedder, threshold: float) -> dict:
    t0 = time.perf_counter()
    error = None
    try:
        output = plan(task.title)  # the title only: never the action list, never the gold
        if not isinstance(output, PlannerOutput):
            raise TypeError(f"the planner returned {type(output).__name__}, not PlannerOutput")
    # a caller's planner is arbitrary code (LLM servers, the swarm): one task's failure is
    # recorded and scored 0, not allowed to end a run of hours
    except Exception as exc:  # noqa: BLE001
        error = f"{type(exc).__name__}: {exc}"[:500]
        log.warning("worfbench_planner_failed", planner=name, task=task.id, error=error)
        output = PlannerOutput(steps=[])
    wall = time.perf_counter() - t0
    s0 = time.perf_counter()
    steps = [str(s) for s in output.steps]
    with_results = [str(s) for s in output.steps_with_results] if output.steps_with_results is not None else None
    scores = {"steps": _scores(steps, task, embedder, threshold),
              "with_results": _scores(with_results, task, embedder, threshold)}
    return {
        "kind": "result", "planner": name, "task": task.id, "digest": task_digest(task), "title": task.title,
        "predicted": steps, "predicted_with_results": with_results, "gold": list(task.steps),
        "scores": scores, "seconds": round(output.seconds if output.seconds is not None else wall, 3),
        "tokens": output.tokens, "scoring_seconds": round(time.perf_counter() - s0, 3),
        "error": error, "extra": output.extra,
    }


def summarize(rows: Iterable[dict], task_ids: Sequence[str], planners: Sequence[str]) -> dict:
    """Per planner over ``task_ids``: tasks, errors, mean P/R/F1 (both variants, steps and
    with results), seconds and tokens per task; ``common`` = the same figures over only the
    tasks every planner has, which is what a comparison should read."""
    wanted = set(task_ids)
    by = {(r["planner"], r["task"]): r for r in rows if r["task"] in wanted and r["planner"] in planners}
    common = [t for t in task_ids if all((p, t) in by for p in planners)]

    def figures(name: str, ids: Sequence[str]) -> dict:
        rs = [by[(name, t)] for t in ids if (name, t) in by]
        out: dict[str, Any] = {"tasks": len(rs), "errors": sum(1 for r in rs if r.get("error"))}
        for kind in ("steps", "with_results"):
            for variant in node_f1.VARIANTS:
                scored = [r["scores"][kind][variant] for r in rs if r["scores"].get(kind)]
                if scored:
                    n = len(scored)
                    out[f"{kind}.{variant}"] = {m: round(sum(s[m] for s in scored) / n, 4)
                                                for m in ("precision", "recall", "f1")} | {"tasks": n}
        secs = [r["seconds"] for r in rs]
        toks = [r["tokens"] for r in rs if r.get("tokens") is not None]
        scoring = [r["scoring_seconds"] for r in rs]
        out["seconds_per_task"] = round(sum(secs) / len(secs), 2) if secs else None
        out["tokens_per_task"] = round(sum(toks) / len(toks)) if toks else None
        out["scoring_seconds_per_task"] = round(sum(scoring) / len(scoring), 3) if scoring else None
        return out

    return {"planners": list(planners), "tasks": len(task_ids), "common_tasks": len(common),
            "all": {p: figures(p, task_ids) for p in planners},
            "common": {p: figures(p, common) for p in planners}}


def format_summary(summary: dict) -> str:
    """The comparison table over the tasks every planner has (plain text)."""
    head = ("planner", "tasks", "err", "P", "R", "F1", "F1 strict", "F1 +results", "s/task", "tokens/task")
    lines = []
    for name in summary["planners"]:
        f = summary["common"][name]
        up = f.get("steps.upstream", {})
        st = f.get("steps.strict", {})
        wr = f.get("with_results.upstream", {})

        def num(d: dict, k: str) -> str:
            return f"{d[k]:.3f}" if k in d else "-"

        lines.append((name, str(f["tasks"]), str(f["errors"]), num(up, "precision"), num(up, "recall"),
                      num(up, "f1"), num(st, "f1"), num(wr, "f1"),
                      "-" if f["seconds_per_task"] is None else f"{f['seconds_per_task']:.1f}",
                      "-" if f["tokens_per_task"] is None else str(f["tokens_per_task"])))
    widths = [max(len(r[i]) for r in [head, *lines]) for i in range(len(head))]
    fmt = lambda r: "  ".join(c.ljust(w) if i == 0 else c.rjust(w) for i, (c, w) in enumerate(zip(r, widths)))  # noqa: E731
    title = (f"WorFBench WikiHow node F1 (all-mpnet-base-v2, threshold "
             f"{summary.get('threshold', node_f1.THRESHOLD)}), "
             f"{summary['common_tasks']} tasks every planner has, of {summary['tasks']} asked; "
             "P/R/F1 as the benchmark counts (k starts at 1), strict from 0")
    return "\n".join([title, fmt(head), *(fmt(r) for r in lines)])


def bench(limit: int = 40, directory: str | None = None, say: Callable[[str], None] = print) -> dict:
    """The metric's own cost on this machine: the embedding model's load time, then seconds of
    scoring per task (both variants, nothing cached between tasks) for a prediction of the
    task's gold steps in reverse order plus two unrelated steps, a typical size. Timing only:
    these predictions are made from the gold and are not a planner."""
    from agent.eval import embedding
    from agent.eval.worfbench import load_tasks

    emb = embedding.load(directory)
    say(f"embedding model: {emb.path}, loaded in {emb.load_seconds:.1f} s (import torch and "
        "sentence-transformers, verify, load)")
    tasks = load_tasks(limit=limit)
    per_task, f1s = [], []
    for t in tasks:
        pred = [*reversed(t.steps), "Tell a friend about it.", "Take a short break."]
        t0 = time.perf_counter()
        s = node_f1.node_f1(pred, t, emb)
        per_task.append(time.perf_counter() - t0)
        f1s.append((s["upstream"].f1, s["strict"].f1))
    n = len(per_task)
    ordered = sorted(per_task)
    out = {"tasks": n, "load_seconds": round(emb.load_seconds, 2),
           "scoring_seconds_per_task": round(sum(per_task) / n, 3),
           "scoring_seconds_median": round(ordered[n // 2], 3), "scoring_seconds_max": round(ordered[-1], 3),
           "f1_upstream": round(sum(a for a, _ in f1s) / n, 4), "f1_strict": round(sum(b for _, b in f1s) / n, 4)}
    say(f"scored {n} tasks: {out['scoring_seconds_per_task']:.3f} s per task (median "
        f"{out['scoring_seconds_median']:.3f}, max {out['scoring_seconds_max']:.3f}); reversed gold + 2 "
        f"unrelated steps: node F1 {out['f1_upstream']:.3f} (strict {out['f1_strict']:.3f})")
    return out


if __name__ == "__main__":
    import argparse

    ap = argparse.ArgumentParser(prog="python -m agent.eval.worfbench_run",
                                 description="time WorFBench's node F1 on this machine")
    ap.add_argument("command", choices=["bench"])
    ap.add_argument("--limit", type=int, default=40)
    ap.add_argument("--dir", default=os.environ.get("SWARM_MODEL_DIR") or None)
    a = ap.parse_args()
    bench(a.limit, a.dir)
