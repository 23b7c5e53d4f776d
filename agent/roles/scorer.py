"""Scorer: scores every split of a node (deterministic checks + an LLM judgment), waits a
collection window for competing splits, then casts one approval at most per node per round."""

from __future__ import annotations

from agent import work
from agent.core.decide import choose_votes, scorer_tasks
from agent.core.events import Vote
from agent.core.scoring import Verdict
from agent.llm.base import LLM, LLMBadOutput, LLMUnavailable, ModelMissing
from agent.roles.common import Backoff, ask, timing_of
from agent.runtime import Runtime


async def run(rt: Runtime, llm: LLM) -> None:
    timing = timing_of(rt.settings)
    backoff = Backoff()
    verdicts: dict[str, Verdict] = {}  # proposals are immutable: score each once
    rt.log.info("scorer ready")
    while True:
        tasks = scorer_tasks(rt.tree(), rt.me, timing, rt.now_ms())
        if not tasks:
            await rt.wait_change(0.5)
            continue
        task = tasks[0]
        log = rt.log.bind(node=task.node.id, round=task.round)
        unavailable = False
        for p in task.node.proposals:
            if p.id not in task.proposals or p.id in verdicts:
                continue
            req = work.score_req(rt.tree(), task.node, p, rt.me, None)
            try:
                verdicts[p.id] = work.verdict_from(await ask(llm, req, "scorer"), task.node, p)
                backoff.reset()
            except LLMBadOutput as exc:
                log.info("LLM judgment unusable; scoring on the checks alone", proposal=p.id[:16], error=str(exc)[:200])
                verdicts[p.id] = work.verdict_without_llm(task.node, p)
            except (LLMUnavailable, ModelMissing) as exc:
                await backoff.wait(log, exc)
                unavailable = True
                break
        if unavailable:
            continue
        # The tree may have moved on while we were thinking: vote only if this is still our task.
        current = {(t.node.id, t.round) for t in scorer_tasks(rt.tree(), rt.me, timing, rt.now_ms())}
        if (task.node.id, task.round) not in current:
            continue
        for d in choose_votes(task, verdicts):
            await rt.publish(Vote(node=task.node.id, proposal=d.proposal, round=task.round,
                                  specificity=d.specificity, non_overlap=d.non_overlap,
                                  coverage=d.coverage, approve=d.approve, feedback=d.feedback))
