"""Keep a role running: a bug that makes it raise is logged, counted and the role started
afresh after a backoff, rather than the process dying and crash-looping under a supervisor."""

from __future__ import annotations

from typing import Any, Awaitable, Callable

import trio

from agent import metrics
from agent.core.backoff import Backoff
from agent.drivers.real.runtime import Runtime, wall_ms


async def _sleep_backoff(backoff: Backoff, log: Any, exc: Exception, what: str) -> None:
    delay = backoff.failed(wall_ms())
    log.warning(f"{what}; backing off", error=str(exc)[:300], retry_in=round(delay / 1000, 1))
    await trio.sleep(delay / 1000)


async def supervise(run: Callable[[], Awaitable[None]], rt: Runtime, backoff: Backoff | None = None) -> None:
    """Run a role; if a bug makes it raise, log the traceback, back off and start it afresh
    (a new behaviour object: its state rebuilds from the log) rather than let the process die
    and crash-loop under a supervisor."""
    backoff = backoff or Backoff(1_000, 60_000)
    while True:
        try:
            await run()
            return
        except Exception as exc:  # a bug in the role: trio.Cancelled is a BaseException and passes
            rt.log.exception("role failed; restarting it", error=repr(exc)[:300])
            metrics.ROLE_RESTARTS.inc()
            await _sleep_backoff(backoff, rt.log, exc, "role failed")
