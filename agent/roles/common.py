"""What every role loop shares: timing from settings, instrumented LLM calls, backoff."""

from __future__ import annotations

import time

import trio

from agent import metrics
from agent.core.decide import Timing
from agent.llm.base import LLM, LLMBadOutput, LLMError, LLMRequest, LLMUnavailable, ModelMissing
from agent.settings import Settings


def timing_of(s: Settings) -> Timing:
    return Timing(
        collection_window_ms=int(s.collection_window * 1000),
        round_timeout_ms=int(s.round_timeout * 1000),
        settle_ms=int(s.settle_window * 1000),
        lease_ms=int(s.lease_seconds * 1000),
    )


def _kind(exc: LLMError) -> str:
    if isinstance(exc, ModelMissing):
        return "model_missing"
    if isinstance(exc, LLMUnavailable):
        return "unavailable"
    if isinstance(exc, LLMBadOutput):
        return "invalid_output"
    return "other"


async def ask(llm: LLM, req: LLMRequest, role: str) -> dict:
    """One LLM request, timed and counted; errors propagate for the loop to handle."""
    t0 = time.perf_counter()
    try:
        return await llm.generate(req)
    except LLMError as exc:
        metrics.LLM_ERRORS.labels(role=role, backend=llm.backend, kind=_kind(exc)).inc()
        raise
    finally:
        metrics.LLM_REQUEST_DURATION.labels(role=role, backend=llm.backend).observe(time.perf_counter() - t0)


def declare_llm_series(role: str, backend: str) -> None:
    """Create this agent's LLM series at zero, so dashboards show 0 rather than no data."""
    metrics.LLM_REQUEST_DURATION.labels(role=role, backend=backend)
    for kind in ("model_missing", "unavailable", "invalid_output", "other"):
        metrics.LLM_ERRORS.labels(role=role, backend=backend, kind=kind)


class Backoff:
    """Exponential backoff (an unavailable LLM, a failing loop): log, wait, retry; never crash-loop."""

    def __init__(self, first: float = 1.0, cap: float = 60.0) -> None:
        self.first, self.cap, self.delay = first, cap, 0.0

    def reset(self) -> None:
        self.delay = 0.0

    async def wait(self, log, exc: Exception, what: str = "LLM unavailable") -> None:
        self.delay = min(self.cap, self.delay * 2 if self.delay else self.first)
        log.warning(f"{what}; backing off", error=str(exc)[:300], retry_in=round(self.delay, 1))
        await trio.sleep(self.delay)
