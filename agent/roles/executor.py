"""Executor: claims a ready leaf, waits a settle window so a lost race costs no LLM work,
renews its lease while the LLM works, posts the result, moves on."""

from __future__ import annotations

import random
import time

import trio

from agent import metrics, work
from agent.core.decide import holds_claim, ready_leaves, renewal_due
from agent.core.events import Claim, Release, Renew
from agent.llm.base import LLM, LLMBadOutput, LLMUnavailable, ModelMissing
from agent.roles.common import Backoff, ask, timing_of
from agent.runtime import Runtime

ATTEMPTS = 3  # fresh seeds for an unusable result before the task is released


async def _keep_lease(rt: Runtime, node: str, claim: str) -> None:
    timing = timing_of(rt.settings)
    while True:
        await trio.sleep(max(0.2, timing.lease_ms / 6000))
        if renewal_due(rt.tree(), node, claim, timing, rt.now_ms()):
            await rt.publish(Renew(node=node, claim=claim, lease_ms=timing.lease_ms))


async def run(rt: Runtime, llm: LLM) -> None:
    timing = timing_of(rt.settings)
    rng = random.Random()
    backoff = Backoff()
    rt.log.info("executor ready")
    while True:
        ready = ready_leaves(rt.tree())
        if not ready:
            await rt.wait_change(1.0)
            continue
        # Most executors go for the first ready leaf in tree order (plans finish top to bottom);
        # some spread out, which keeps collisions down without any coordination.
        target = ready[0] if rng.random() < 0.5 else rng.choice(ready)
        claim = await rt.publish(Claim(node=target.id, lease_ms=timing.lease_ms))
        log = rt.log.bind(node=target.id, event_id=claim.id)
        await trio.sleep(timing.settle_ms / 1000)
        # Gossip can lag on a loaded host: pull every peer's log before spending LLM work, so a
        # competing claim any peer already stored is seen (the earliest claim wins everywhere).
        with trio.move_on_after(max(1.0, 4 * timing.settle_ms / 1000)):
            await rt.net.sync_all()
        if not holds_claim(rt.tree(), target.id, claim.id):
            metrics.CLAIMS.labels(outcome="lost").inc()
            log.info("lost the claim race; moving on")
            continue
        metrics.CLAIMS.labels(outcome="won").inc()
        t0 = time.perf_counter()
        body = None
        failure: Exception | None = None
        async with trio.open_nursery() as nursery:
            nursery.start_soon(_keep_lease, rt, target.id, claim.id)
            node = rt.tree().node(target.id)
            for attempt in range(ATTEMPTS):
                try:
                    answer = await ask(llm, work.execute_req(rt.tree(), node, rng.randrange(2**31)), "executor")
                    body = work.result_from(answer, node, claim.id, strict=attempt < ATTEMPTS - 1)
                    backoff.reset()
                    break
                except LLMBadOutput as exc:
                    failure = exc
                    log.info("unusable result; trying another seed", attempt=attempt + 1, error=str(exc)[:200])
                except (LLMUnavailable, ModelMissing) as exc:
                    failure = exc
                    break
            if body is None:
                log.warning("task failed; releasing it", error=str(failure)[:300])
                await rt.publish(Release(node=target.id, claim=claim.id, reason=str(failure)[:200]))
            nursery.cancel_scope.cancel()
        if body is None and failure is not None and not isinstance(failure, LLMBadOutput):
            await backoff.wait(log, failure)
        if body is not None:
            await rt.publish(body)
            metrics.TASK_DURATION.observe(time.perf_counter() - t0)
            log.info("task done")
