"""Decomposer: proposes splits of open nodes with its own strategy; refines its split after a
round failed, using the scorers' feedback."""

from __future__ import annotations

import random

from agent import work
from agent.core.decide import ProposeTask, RefineTask, decomposer_tasks
from agent.llm.base import LLM, LLMBadOutput, LLMUnavailable, ModelMissing
from agent.roles.common import Backoff, ask, timing_of
from agent.runtime import Runtime

ATTEMPTS = 3  # fresh seeds per task before it is set aside for a while


def _still_wanted(rt: Runtime, task: ProposeTask | RefineTask) -> bool:
    timing = timing_of(rt.settings)
    for t in decomposer_tasks(rt.tree(), rt.me, timing, rt.now_ms()):
        if type(t) is type(task) and t.node.id == task.node.id:
            return True
    return False


async def run(rt: Runtime, llm: LLM) -> None:
    timing = timing_of(rt.settings)
    strategy = rt.settings.strategy or random.choice(work.DEFAULT_STRATEGIES)
    log = rt.log.bind(strategy=strategy)
    rng = random.Random()
    backoff = Backoff()
    set_aside: dict[str, float] = {}
    log.info("decomposer ready")
    while True:
        now = rt.now_ms()
        tasks = [t for t in decomposer_tasks(rt.tree(), rt.me, timing, now)
                 if set_aside.get(t.node.id, 0) <= now]
        if not tasks:
            await rt.wait_change(1.0)
            continue
        task = tasks[0]
        node_log = log.bind(node=task.node.id, refine=isinstance(task, RefineTask))
        body = None
        for attempt in range(ATTEMPTS):
            req = work.decompose_req(rt.tree(), task, strategy, rng.randrange(2**31))
            try:
                body = work.proposal_from(await ask(llm, req, "decomposer"), task, strategy)
                backoff.reset()
                break
            except LLMBadOutput as exc:
                node_log.info("unusable split; trying another seed", attempt=attempt + 1, error=str(exc)[:200])
            except (LLMUnavailable, ModelMissing) as exc:
                await backoff.wait(node_log, exc)
                break
        if body is None:
            set_aside[task.node.id] = rt.now_ms() + 15_000
            continue
        if _still_wanted(rt, task):
            await rt.publish(body)
        else:
            node_log.info("node moved on while thinking; proposal dropped")
