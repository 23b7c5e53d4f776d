"""The plan-quality benchmark: for each fixed goal, the swarm's plan beside what one direct
call of the same model writes, on the same machine, measured the same way.

- The swarm: the real behaviours (decomposers, scorers, executors) driven by the central
  driver (agent.drivers.central: one process, no network, every LLM call the roles make,
  concurrently), with the model under test. The plan is the folded tree, as any peer would hold it.
- One call: the goal (and its description) in one prompt, "Write a complete, concrete plan for:
  ...", free text, with ``single_max_tokens`` for the answer.

Both plans become ``agent.eval.plans.PlanDoc``; ``agent.eval.metrics`` scores them, and both are
written as Markdown in one shape for a blind side-by-side reading (``report.blind_pairs``).
Wall time and tokens are recorded for both: the swarm's cost is part of the result.
"""

from __future__ import annotations

import hashlib
import json
import subprocess
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Callable, Sequence

from agent.drivers.central import Central
from agent.eval.goals import GOALS, GOALS_VERSION, EvalGoal, goal_by_id
from agent.eval.judging import judging_stats
from agent.eval.metrics import aggregate, plan_metrics
from agent.eval.plans import PlanDoc, from_text, from_tree_json, markdown
from agent.llm.base import LLM, LLMError, LLMRequest

EVAL_VERSION = 2
SINGLE_PROMPT = ("Write a complete, concrete plan for: {goal}. Break it into sections and steps, and "
                 "give the concrete content of each step.")


@dataclass
class EvalConfig:
    goals: Sequence[str] = ()  # goal ids; empty: all of GOALS (then `limit` applies)
    custom: Sequence[EvalGoal] = ()  # goals given on the command line (held out: no aspects)
    limit: int | None = None
    max_depth: int = 1  # as the demo: one level of up to six subgoals
    max_children: int = 6
    max_rounds: int = 2
    decomposers: int = 3
    scorers: int = 3
    executors: int = 2
    single_max_tokens: int = 1200  # the direct call's answer budget
    swarm: bool = True
    single: bool = True
    seed: int = 1
    timeout_s: float = 3600.0


@dataclass
class Run:
    planner: str  # "swarm" | "single"
    seconds: float
    prompt_tokens: int
    completion_tokens: int
    calls: dict[str, int] = field(default_factory=dict)
    metrics: dict[str, Any] = field(default_factory=dict)
    markdown: str = ""  # the plan in the shared shape (for the blind reading)
    plan: str = ""  # the plan as its planner gives it (the swarm's own Markdown, the call's text)
    error: str | None = None
    judging: dict[str, Any] = field(default_factory=dict)  # the swarm's: rejections, agreement


def goal_text(g: EvalGoal) -> str:
    return f"{g.title}. {g.description}".strip() if g.description else g.title


def single_request(g: EvalGoal | str, max_tokens: int, seed: int) -> LLMRequest:
    text = goal_text(g) if isinstance(g, EvalGoal) else g
    return LLMRequest(kind="execute", system="", prompt=SINGLE_PROMPT.format(goal=text.rstrip(".")),
                      context={"goal": text}, max_tokens=max_tokens, temperature=0.7,
                      seed=seed, free_text=True)


async def run_single(llm: LLM, g: EvalGoal, cfg: EvalConfig) -> tuple[PlanDoc, Run]:
    start = time.monotonic()
    ans = await llm.complete(single_request(g, cfg.single_max_tokens, cfg.seed))
    text = str(ans.value.get("text", ""))
    doc = from_text(g.title, text)
    run = Run("single", round(time.monotonic() - start, 2), ans.prompt_tokens, ans.completion_tokens,
              {"single": 1}, plan=text)
    return doc, run


async def run_swarm(llm: LLM, g: EvalGoal, cfg: EvalConfig) -> tuple[PlanDoc, Run, dict]:
    from agent.render import markdown_from_json

    central = Central(llm, decomposers=cfg.decomposers, scorers=cfg.scorers, executors=cfg.executors,
                      max_depth=cfg.max_depth, max_children=cfg.max_children, max_rounds=cfg.max_rounds,
                      tag=f"eval-{g.id}", seed=cfg.seed)
    res = await central.run(g.title, timeout=cfg.timeout_s, description=g.description)
    root = res.tree.node(res.goal_id)
    assert root is not None
    tree_json = root.to_json()
    calls: dict[str, int] = {}
    for c in res.calls:
        calls[c.kind] = calls.get(c.kind, 0) + 1
    run = Run("swarm", round(res.makespan_s, 2), sum(c.prompt_tokens for c in res.calls),
              sum(c.completion_tokens for c in res.calls), calls, plan=markdown_from_json(tree_json))
    run.judging = judging_stats(tree_json)
    return from_tree_json(tree_json), run, tree_json


def select_goals(cfg: EvalConfig) -> list[EvalGoal]:
    chosen = [goal_by_id(i) for i in cfg.goals] if cfg.goals or cfg.custom else list(GOALS)
    chosen += list(cfg.custom)
    return chosen[: cfg.limit] if cfg.limit else chosen


def custom_goal(text: str, n: int) -> EvalGoal:
    """A goal from the command line, "TITLE" or "TITLE :: DESCRIPTION": a goal the benchmark
    never saw, so no aspects (coverage is not measured for it)."""
    title, _, description = text.partition("::")
    if not title.strip():
        raise ValueError(f"--goal {text!r}: the title is empty")
    return EvalGoal(f"goal-{n}", "custom", title.strip(), description.strip(), {})


def git_commit() -> str | None:
    try:
        out = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True,
                             timeout=5, cwd=Path(__file__).resolve().parents[2])
        return out.stdout.strip() or None
    except (OSError, subprocess.SubprocessError):
        return None


async def run_eval(llm: LLM, cfg: EvalConfig, *, model: str, say: Callable[[str], None] = print,
                   done: dict[str, Any] | None = None, save: Callable[[dict], None] | None = None,
                   backend: str | None = None) -> dict:
    """Every selected goal with both planners; ``done``: an earlier results file whose goals are
    kept (a long run resumes where it stopped); ``save`` is called after every goal; ``backend``
    names what served the model when the client's own name does not say it."""
    data: dict[str, Any] = {
        "eval_version": EVAL_VERSION, "goals_version": GOALS_VERSION, "model": model,
        "backend": backend or llm.backend, "commit": git_commit(), "config": asdict(cfg), "goals": [],
    }
    kept = {g["id"]: g for g in (done or {}).get("goals", ())}
    for g in select_goals(cfg):
        if g.id in kept:
            data["goals"].append(kept[g.id])
            continue
        entry: dict[str, Any] = {"id": g.id, "domain": g.domain, "title": g.title,
                                 "description": g.description, "runs": {}}
        for planner in (["single"] if cfg.single else []) + (["swarm"] if cfg.swarm else []):
            say(f"{g.id}: {planner} ...")
            try:
                if planner == "single":
                    doc, run = await run_single(llm, g, cfg)
                else:
                    doc, run, tree_json = await run_swarm(llm, g, cfg)
                    entry["tree"] = tree_json
            except (LLMError, TimeoutError) as exc:
                entry["runs"][planner] = asdict(Run(planner, 0.0, 0, 0, error=str(exc)[:300]))
                say(f"{g.id}: {planner} failed: {exc}")
                continue
            run.metrics = plan_metrics(doc, description=g.description, aspects=g.aspects)
            # the blind reading's shape: no assumptions section, which only the swarm has and
            # which would name the planner (its brief still shapes every step it wrote)
            run.markdown = markdown(doc, with_brief=False)
            entry["runs"][planner] = asdict(run)
            say(f"{g.id}: {planner} done in {run.seconds:.0f}s, quality {run.metrics['quality']}, "
                f"{run.prompt_tokens}+{run.completion_tokens} tokens")
        data["goals"].append(entry)
        if save is not None:
            save(data)
    data["aggregate"] = {p: aggregate([g["runs"][p]["metrics"] for g in data["goals"]
                                       if p in g["runs"] and g["runs"][p].get("metrics")])
                         for p in ("single", "swarm")}
    return data


def write_json(data: dict, path: Path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(path.suffix + ".tmp")
    tmp.write_text(json.dumps(data, indent=1, ensure_ascii=False))
    tmp.replace(path)


def pair_seed(goal_id: str, seed: int) -> int:
    return int(hashlib.sha256(f"{goal_id}:{seed}".encode()).hexdigest()[:8], 16)
