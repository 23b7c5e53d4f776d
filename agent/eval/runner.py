"""The plan-quality benchmark's central loop: one process, one LLM, the swarm's own requests.

For speed it does not run the swarm. It makes the same requests the roles make, through the
same functions (agent.behaviour.work's ``*_for`` layer over agent.llm.prompts), in the order a swarm
would: judge whether a node is atomic, collect competing splits (one per strategy), score each
(LLM + checks), take the best acceptable one (one refinement round with the scorer's feedback
if none is), execute the leaves with their siblings in view, then synthesise every node
bottom-up. What it measures is the plan, not the protocol: no timing is asserted anywhere.
"""

from __future__ import annotations

import hashlib
import json
import subprocess
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Callable, Sequence

from agent.behaviour import work
from agent.eval.goals import GOALS, GOALS_VERSION, EvalGoal, goal_by_id
from agent.eval.metrics import aggregate, plan_metrics
from agent.llm.base import LLM, LLMBadOutput, LLMRequest

EVAL_VERSION = 1


@dataclass
class EvalConfig:
    goals: Sequence[str] = ()  # goal ids; empty: all of GOALS (then `limit` applies)
    limit: int | None = None
    max_depth: int = 2
    max_children: int = 4
    proposals: int = 2  # competing splits per node, one per strategy
    attempts: int = 2  # seeds per request before giving up on it
    refine: bool = True  # one refinement round when no split is acceptable
    judge_atomic: bool = True
    synthesize: bool = True
    seed: int = 1


@dataclass
class Stats:
    requests: dict[str, int] = field(default_factory=dict)
    invalid: dict[str, int] = field(default_factory=dict)
    seconds: dict[str, float] = field(default_factory=dict)
    prompt_tokens: int = 0
    completion_tokens: int = 0

    def add(self, kind: str, seconds: float, prompt: int = 0, completion: int = 0, ok: bool = True) -> None:
        self.requests[kind] = self.requests.get(kind, 0) + 1
        self.seconds[kind] = round(self.seconds.get(kind, 0.0) + seconds, 3)
        self.prompt_tokens += prompt
        self.completion_tokens += completion
        if not ok:
            self.invalid[kind] = self.invalid.get(kind, 0) + 1

    def to_json(self) -> dict[str, Any]:
        n = sum(self.requests.values())
        total = sum(self.seconds.values())
        return {"requests": dict(self.requests), "invalid": dict(self.invalid),
                "seconds": dict(self.seconds), "total_seconds": round(total, 2),
                "seconds_per_request": round(total / n, 2) if n else 0.0,
                "prompt_tokens": self.prompt_tokens, "completion_tokens": self.completion_tokens}


@dataclass(eq=False)
class Node:
    title: str
    description: str
    depth: int
    parent: "Node | None" = None
    children: list["Node"] = field(default_factory=list)
    proposals: list[dict] = field(default_factory=list)
    strategy: str | None = None
    leaf_reason: str | None = None
    result: str | None = None
    answer: str | None = None
    proposed_atomic: bool = False  # only read when judging atomicity is unavailable (old code)

    def path(self) -> list[str]:
        out, cur = [], self.parent
        while cur is not None:
            out.append(cur.title)
            cur = cur.parent
        return out[::-1]

    def walk(self):
        yield self
        for c in self.children:
            yield from c.walk()

    def elsewhere(self) -> list[str]:
        """Titles in other branches, nearest first (as agent.behaviour.work.elsewhere_titles)."""
        out, skip, anc = [], self, self.parent
        while anc is not None:
            for c in anc.children:
                if c is not skip:
                    out.extend(n.title for n in c.walk())
            skip, anc = anc, anc.parent
        return out

    def to_json(self) -> dict[str, Any]:
        return {"title": self.title, "description": self.description, "depth": self.depth,
                "leaf": not self.children, "leaf_reason": self.leaf_reason,
                "strategy": self.strategy, "proposals": self.proposals,
                "result": self.result, "answer": self.answer,
                "children": [c.to_json() for c in self.children]}


def _seed(*parts: Any) -> int:
    return int.from_bytes(hashlib.sha256("\x1f".join(map(str, parts)).encode()).digest()[:4], "big")


class GoalRun:
    def __init__(self, llm: LLM, goal: EvalGoal, cfg: EvalConfig, say: Callable[[str], None]):
        self.llm, self.goal, self.cfg, self.say = llm, goal, cfg, say
        self.stats = Stats()

    async def ask(self, req: LLMRequest) -> dict:
        t0 = time.perf_counter()
        try:
            ans = await self.llm.complete(req)
        except LLMBadOutput:
            self.stats.add(req.kind, time.perf_counter() - t0, ok=False)
            raise
        self.stats.add(req.kind, time.perf_counter() - t0, ans.prompt_tokens, ans.completion_tokens)
        return ans.value

    # ------------------------------------------------------------------ splitting

    async def atomic(self, n: Node) -> bool:
        req = work.atomic_req_for(goal=self.goal.title, path=n.path(), title=n.title,
                                  description=n.description, seed=_seed(self.cfg.seed, "atomic", n.title))
        try:
            return work.atomic_from(await self.ask(req))
        except LLMBadOutput:
            return False  # an unusable judgment: split it (max_depth still bounds the tree)

    async def propose(self, n: Node, preference: str, previous: dict | None = None) -> dict | None:
        ancestors = n.path()
        elsewhere = n.elsewhere()
        for attempt in range(self.cfg.attempts):
            req = work.decompose_req_for(
                goal=self.goal.title, path=ancestors, title=n.title, description=n.description,
                preference=preference, max_children=self.cfg.max_children,
                feedback=[previous["feedback"]] if previous and previous.get("feedback") else (),
                previous=previous["subgoals_full"] if previous else None,
                parent_split=[c.title for c in n.parent.children] if n.parent else (),
                seed=_seed(self.cfg.seed, "split", n.title, preference, attempt, bool(previous)))
            try:
                subs = work.subgoals_for(await self.ask(req), title=n.title,
                                         ancestors=list(reversed(ancestors)),
                                         max_children=self.cfg.max_children, elsewhere=elsewhere)
            except LLMBadOutput as exc:
                self.say(f"    unusable split ({str(exc)[:100]})")
                continue
            return {"strategy": req.context["strategy"], "subgoals": [s["title"] for s in subs],
                    "subgoals_full": subs, "refines": bool(previous)}
        return None

    async def score(self, n: Node, prop: dict) -> None:
        req = work.score_req_for(goal=self.goal.title, title=n.title, description=n.description,
                                 strategy=prop["strategy"], subgoals=prop["subgoals_full"],
                                 scorer="eval", elsewhere=n.elsewhere(),
                                 seed=_seed(self.cfg.seed, "score", n.title, *prop["subgoals"]))
        try:
            answer: dict | None = await self.ask(req)
            v = work.verdict_for(answer, title=n.title, subgoals=prop["subgoals_full"],
                                 ancestors=list(reversed(n.path())), elsewhere=n.elsewhere())
        except LLMBadOutput:
            v = work.verdict_for(None, title=n.title, subgoals=prop["subgoals_full"],
                                 ancestors=list(reversed(n.path())), elsewhere=n.elsewhere())
        prop.update(score=round(v.overall, 3), acceptable=v.acceptable, feedback=v.feedback)

    def preferences(self, n: Node) -> list[str]:
        """Distinct strategies that suit the node, as competing decomposers would bring."""
        prefs = list(work.DEFAULT_STRATEGIES)
        k = _seed(self.goal.id, n.title) % len(prefs)
        out: list[str] = []
        for p in prefs[k:] + prefs[:k]:
            s = work.strategy_for(p, self.goal.title, n.title, n.description) \
                if hasattr(work, "strategy_for") else p
            if s not in out:
                out.append(s)
        return out[: self.cfg.proposals]

    async def split(self, n: Node) -> None:
        if n.depth >= self.cfg.max_depth:
            n.leaf_reason = "max_depth"
            return
        if n.depth > 0 and self.cfg.judge_atomic:
            judged = await self.atomic(n) if hasattr(work, "atomic_req_for") else n.proposed_atomic
            if judged:
                n.leaf_reason = "atomic"
                return
        props = [p for pref in self.preferences(n) if (p := await self.propose(n, pref))]
        for p in props:
            await self.score(n, p)
        ok = [p for p in props if p["acceptable"]]
        if not ok and props and self.cfg.refine:
            best = max(props, key=lambda p: p["score"])
            again = await self.propose(n, best["strategy"], previous=best)
            if again:
                await self.score(n, again)
                props.append(again)
                ok = [again] if again["acceptable"] else []
        for p in props:
            p["accepted"] = False
        n.proposals = [{k: v for k, v in p.items() if k != "subgoals_full"} for p in props]
        if not ok:
            n.leaf_reason = "no acceptable split" if props else "no usable split"
            return
        best = max(ok, key=lambda p: p["score"])
        n.proposals[props.index(best)]["accepted"] = True
        n.strategy = best["strategy"]
        n.children = [Node(s["title"], s["description"], n.depth + 1, n,
                           proposed_atomic=bool(s.get("atomic")))
                      for s in best["subgoals_full"]]

    # ------------------------------------------------------------------ answers

    async def execute(self, n: Node) -> None:
        split = [c.title for c in n.parent.children] if n.parent else []
        for attempt in range(self.cfg.attempts):
            req = work.execute_req_for(goal=self.goal.title, path=n.path(), title=n.title,
                                       description=n.description,
                                       siblings=[t for t in split if t != n.title],
                                       parent_split=split,
                                       decided=[(c.title, c.result) for c in (n.parent.children if n.parent else [])
                                                if c is not n and c.result],
                                       seed=_seed(self.cfg.seed, "exec", n.title, attempt))
            try:
                n.result = work.result_text_for(await self.ask(req), goal=self.goal.title,
                                                strict=attempt < self.cfg.attempts - 1)
                return
            except LLMBadOutput as exc:
                self.say(f"    unusable result ({str(exc)[:100]})")

    async def synthesize(self, n: Node) -> None:
        children = [(c.title, c.answer or c.result or "") for c in n.children]
        if not all(a for _, a in children):
            return  # a child without an answer: the swarm would not synthesise either
        for attempt in range(self.cfg.attempts):
            req = work.synthesis_req_for(goal=self.goal.title, path=n.path(), title=n.title,
                                         description=n.description, children=children,
                                         seed=_seed(self.cfg.seed, "synth", n.title, attempt))
            try:
                n.answer = work.synthesis_text_for(await self.ask(req), goal=self.goal.title,
                                                   strict=attempt < self.cfg.attempts - 1)
                return
            except LLMBadOutput as exc:
                self.say(f"    unusable synthesis ({str(exc)[:100]})")

    async def run(self) -> Node:
        root = Node(self.goal.title, self.goal.description, 0)
        frontier = [root]
        while frontier:  # breadth first, as a swarm fills the tree level by level
            n = frontier.pop(0)
            await self.split(n)
            self.say(f"  split {n.title[:60]!r}: "
                     + (f"{len(n.children)} subgoals ({n.strategy})" if n.children else f"leaf ({n.leaf_reason})"))
            frontier.extend(n.children)
        for n in root.walk():
            if not n.children:
                await self.execute(n)
        if self.cfg.synthesize and hasattr(work, "synthesis_req_for"):
            for n in reversed(list(root.walk())):  # children before parents
                if n.children:
                    await self.synthesize(n)
        return root


def select_goals(cfg: EvalConfig) -> list[EvalGoal]:
    goals = [goal_by_id(g) for g in cfg.goals] if cfg.goals else list(GOALS)
    return goals[: cfg.limit] if cfg.limit else goals


def git_commit() -> str | None:
    try:
        out = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True,
                             text=True, timeout=5, cwd=Path(__file__).parent)
        return out.stdout.strip() or None
    except (OSError, subprocess.SubprocessError):
        return None


async def run_eval(llm: LLM, cfg: EvalConfig, *, model: str, say: Callable[[str], None] = print,
                   render: Callable[[dict], str] | None = None) -> dict[str, Any]:
    """Plan every selected goal and measure it; the returned dict is what ``--out`` writes."""
    results = []
    for goal in select_goals(cfg):
        say(f"goal {goal.id}: {goal.title}")
        run = GoalRun(llm, goal, cfg, say)
        t0 = time.perf_counter()
        root = await run.run()
        plan = root.to_json()
        m = plan_metrics(plan, goal.aspects, cfg.max_depth)
        entry = {"id": goal.id, "domain": goal.domain, "title": goal.title,
                 "seconds": round(time.perf_counter() - t0, 1), "metrics": m,
                 "llm": run.stats.to_json(), "plan": plan}
        if render is not None:
            entry["markdown"] = render(plan)
        results.append(entry)
        say(f"  quality {m['quality']}, depth {m['depth']}, {m['leaves']} leaves, "
            f"{entry['seconds']}s, {run.stats.to_json()['seconds_per_request']}s/request")
    agg = aggregate([r["metrics"] for r in results]) if results else {}
    n_req = sum(sum(r["llm"]["requests"].values()) for r in results)
    secs = sum(r["llm"]["total_seconds"] for r in results)
    agg["seconds_per_request"] = round(secs / n_req, 2) if n_req else 0.0
    agg["seconds_per_goal"] = round(sum(r["seconds"] for r in results) / len(results), 1) if results else 0.0
    agg["prompt_tokens"] = sum(r["llm"]["prompt_tokens"] for r in results)
    agg["completion_tokens"] = sum(r["llm"]["completion_tokens"] for r in results)
    return {"eval_version": EVAL_VERSION, "goals_version": GOALS_VERSION, "commit": git_commit(),
            "model": model, "backend": llm.backend, "config": asdict(cfg),
            "aggregate": agg, "goals": results}


def write_json(data: dict, path: Path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(path.suffix + ".tmp")
    tmp.write_text(json.dumps(data, indent=2, ensure_ascii=False) + "\n")
    tmp.replace(path)
