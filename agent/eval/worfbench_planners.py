"""The two planners WorFBench compares, given only a task's title ("How to ..."):

- ``single``: one direct call of the model ("Write a complete, concrete plan for: ..."), its
  steps read as the benchmark reads a workflow (the numbered lines, in order);
- ``swarm``: the swarm's behaviours (agent.drivers.central, with the same model) plan the title; its
  steps are the plan's ordered leaves, and, for the second score, each leaf followed by the
  sentences of its result (the actions its executor wrote).

A planner is a plain function (agent.eval.worfbench_run drives it); each call runs its own trio
loop with an LLM made by ``make_llm`` (a client of one shared server, so nothing is loaded per
task).
"""

from __future__ import annotations

import re
import time
from dataclasses import dataclass
from typing import Awaitable, Callable

import trio

from agent.drivers.central import Central
from agent.eval.plans import from_text, from_tree_json
from agent.eval.runner import EvalConfig, single_request
from agent.eval.worfbench_run import PlannerOutput
from agent.llm.base import LLM

MakeLLM = Callable[[], Awaitable[LLM]]


def _sentences(text: str) -> list[str]:
    out = []
    for line in str(text).splitlines():
        line = line.strip().lstrip("-*• ").strip()
        out += [s.strip() for s in re.split(r"(?<=[.!?])\s+", line) if len(s.strip()) > 3]
    return out


@dataclass
class Planners:
    make_llm: MakeLLM
    cfg: EvalConfig

    def _run(self, fn):
        async def main():
            llm = await self.make_llm()
            try:
                return await fn(llm)
            finally:
                await llm.aclose()

        return trio.run(main)

    def single(self, title: str) -> PlannerOutput:
        async def go(llm: LLM) -> PlannerOutput:
            start = time.monotonic()
            ans = await llm.complete(single_request(title, self.cfg.single_max_tokens, self.cfg.seed))
            doc = from_text(title, str(ans.value.get("text", "")))
            steps = [s.text or s.title for s in doc.steps]
            return PlannerOutput(steps, None, time.monotonic() - start, ans.prompt_tokens + ans.completion_tokens)

        return self._run(go)

    def swarm(self, title: str) -> PlannerOutput:
        async def go(llm: LLM) -> PlannerOutput:
            c = self.cfg
            central = Central(llm, decomposers=c.decomposers, scorers=c.scorers, executors=c.executors,
                              max_depth=c.max_depth, max_children=c.max_children, max_rounds=c.max_rounds,
                              tag="worfbench", seed=c.seed)
            res = await central.run(title, timeout=c.timeout_s)
            root = res.tree.node(res.goal_id)
            assert root is not None
            doc = from_tree_json(root.to_json())
            steps = [s.title for s in doc.steps]
            with_results = []
            for s in doc.steps:
                with_results.append(s.title)
                with_results += _sentences(s.text)
            tokens = sum(x.prompt_tokens + x.completion_tokens for x in res.calls)
            return PlannerOutput(steps, with_results, res.makespan_s, tokens)

        return self._run(go)
