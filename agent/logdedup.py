"""Log a repeated identical error once, then a periodic summary with its count (a full disk
must not write an error line every second)."""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any, Callable


@dataclass
class _Seen:
    detail: str
    first: float
    last_report: float
    count: int = 1
    since_report: int = 0


class RepeatedErrors:
    def __init__(self, log: Any, every: float = 60.0, clock: Callable[[], float] = time.monotonic) -> None:
        self._log = log
        self._every = every
        self._clock = clock
        self._seen: dict[str, _Seen] = {}

    def error(self, event: str, detail: str, **fields: Any) -> None:
        now = self._clock()
        seen = self._seen.get(event)
        if seen is None or seen.detail != detail:
            self._seen[event] = _Seen(detail, now, now)
            self._log.error(event, error=detail, **fields)
            return
        seen.count += 1
        seen.since_report += 1

    def summarize(self) -> None:
        now = self._clock()
        for event, seen in self._seen.items():
            if seen.since_report and now - seen.last_report >= self._every:
                self._log.error(event, error=seen.detail, repeated=seen.since_report,
                                total=seen.count, since_s=round(now - seen.first))
                seen.since_report = 0
                seen.last_report = now

    def cleared(self, event: str) -> None:
        seen = self._seen.pop(event, None)
        if seen is not None:
            self._log.info(f"resolved: {event}", after_s=round(self._clock() - seen.first), occurrences=seen.count)
