"""Log a repeated error once, then a periodic summary with a count: a full disk or a dead
store must not write the same line every second.

    persist_errors = RepeatedErrorLog(log, "cannot persist event; will retry")
    ...
    except StoreError as exc:
        persist_errors.failed(str(exc), unsaved=len(unsaved))   # logs the 1st, then 1/minute
    else:
        persist_errors.succeeded()                               # logs "recovered" once

Errors are grouped by key (default: the message); a different message is logged at once.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

__all__ = ["RepeatedErrorLog"]


@dataclass
class _Run:
    count: int          # occurrences since the first one
    first_at: float
    reported_at: float  # when the last line about it was written
    reported_count: int


class RepeatedErrorLog:
    def __init__(self, log: Any, event: str, *, every: float = 60.0, level: str = "error",
                 field: str = "error", clock: Callable[[], float] = time.monotonic) -> None:
        self._log = log
        self._field = field
        self._event = event
        self._every = every
        self._level = level
        self._clock = clock
        self._runs: dict[str, _Run] = {}

    @property
    def failing(self) -> bool:
        return bool(self._runs)

    def failed(self, message: str, /, *, key: str | None = None, **fields: Any) -> bool:
        """Record one occurrence; returns True if a line was written for it. ``message`` is
        logged under the constructor's ``field`` name ("error" by default)."""
        key = message if key is None else key
        now = self._clock()
        run = self._runs.get(key)
        if run is None:
            self._runs[key] = _Run(1, now, now, 1)
            getattr(self._log, self._level)(self._event, **{self._field: message}, **fields)
            return True
        run.count += 1
        if now - run.reported_at < self._every:
            return False
        getattr(self._log, self._level)(
            self._event, **{self._field: message}, repeated=run.count - run.reported_count,
            total=run.count, since_s=round(now - run.first_at, 1), **fields)
        run.reported_at, run.reported_count = now, run.count
        return True

    def succeeded(self, **fields: Any) -> None:
        """The operation worked again: one line per error that had been failing."""
        now = self._clock()
        for key, run in self._runs.items():
            self._log.info(f"{self._event}: recovered", **{self._field: key}, failures=run.count,
                           after_s=round(now - run.first_at, 1), **fields)
        self._runs.clear()
