"""The one door from the network into the runtime: events from gossip and sync, one at a time."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

import trio

from agent.core.events import Event
from agent.errlog import RepeatedErrorLog
from .stats import IntakeStats

__all__ = ["IngestDoor", "IngestFn"]

IngestFn = Callable[[bytes | Event, str], Awaitable[bool]]
"""``ingest(raw, source) -> is_new``; source is the origin peer id for gossip and
"sync:<peer id>" for sync. Gossip hands the Event its validator decoded (its signature
checked once), sync the raw bytes."""


class IngestDoor:
    """Serializes calls to the runtime's ingest (gossip and concurrent syncs never interleave
    inside it). If ingest raises, the event is not taken: ``None`` is returned so the source
    can retry it (sync re-pulls the page), the failure is counted and logged, the first
    time with its traceback and then as a periodic summary."""

    def __init__(self, ingest: IngestFn, log: Any) -> None:
        self._ingest = ingest
        self._lock = trio.Lock()
        self._stats = IntakeStats()
        self._errors = RepeatedErrorLog(log, "net.ingest_failed")

    def statistics(self) -> IntakeStats:
        return self._stats.snapshot()

    async def __call__(self, raw: bytes | Event, source: str) -> bool | None:
        async with self._lock:
            try:
                is_new = bool(await self._ingest(raw, source))
            except Exception as exc:
                # Broad on purpose: the runtime is handed a peer's bytes. Whatever it raises
                # (a full disk, or a bug a crafted event triggers) must not let that peer stop
                # our network; the traceback is logged, so a bug still surfaces.
                self._stats.errors += 1
                self._errors.failed(f"{type(exc).__name__}: {exc}"[:300], source=source,
                                    exc_info=exc)
                return None
        if self._errors.failing:
            self._errors.succeeded()
        return is_new
