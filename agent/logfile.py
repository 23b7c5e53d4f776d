"""JSON-lines event logs: one signed event per line (replay input, simulate/demo output)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Iterable

from agent.core.events import Event, decode_event
from agent.core.reasons import Rejected


@dataclass(frozen=True)
class BadLine:
    line: int
    reason: str
    detail: str


def read_log(path: Path) -> tuple[list[Event], list[BadLine]]:
    """Raises OSError when the file cannot be read; bad lines are returned, not raised."""
    events: list[Event] = []
    bad: list[BadLine] = []
    with open(path, "rb") as fh:
        for no, line in enumerate(fh, 1):
            line = line.strip()
            if not line:
                continue
            try:
                events.append(decode_event(line))
            except Rejected as exc:
                bad.append(BadLine(no, exc.reason.value, exc.detail))
    return events, bad


def write_log(path: Path, events: Iterable[Event]) -> int:
    path.parent.mkdir(parents=True, exist_ok=True)
    n = 0
    with open(path, "wb") as fh:
        for ev in events:
            fh.write(ev.raw + b"\n")
            n += 1
    return n
