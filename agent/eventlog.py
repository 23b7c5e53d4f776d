"""The small interface a runtime needs from its event log, and an in-memory one.

``agent.net.store.EventStore`` (append-only JSON lines on disk, fsync'd) is the real one; the
simulator and tests pass a ``MemoryLog``.
"""

from __future__ import annotations

from typing import Protocol


class EventLog(Protocol):
    def append(self, raw: bytes, *, durable: bool = True, event_id: str | None = None) -> int:
        """Store one event; returns the new length. Raises on I/O errors. With ``durable``
        it (and every earlier one) is on disk when this returns; otherwise at the next
        ``flush()`` or durable append."""

    def flush(self) -> None:
        """Make every append so far durable."""

    async def flush_off_loop(self) -> None:
        """``flush`` without blocking the event loop (what was appended when it started)."""

    def read_from(self, pos: int, limit: int) -> list[bytes]:
        """Events [pos, pos + limit) in append order."""

    def __len__(self) -> int: ...


class MemoryLog:
    def __init__(self, records: list[bytes] | None = None) -> None:
        self.records: list[bytes] = list(records or [])
        self.epoch = "memory"

    def append(self, raw: bytes, *, durable: bool = True, event_id: str | None = None) -> int:
        self.records.append(bytes(raw))
        return len(self.records)

    def flush(self) -> None:
        pass

    async def flush_off_loop(self) -> None:
        pass

    def read_from(self, pos: int, limit: int) -> list[bytes]:
        pos = max(0, pos)
        return self.records[pos:pos + max(0, limit)]

    def load(self) -> list[bytes]:
        return list(self.records)

    def __len__(self) -> int:
        return len(self.records)

    def tear_last(self) -> bytes | None:
        """What a crash in the middle of the last write leaves: that record is gone."""
        return self.records.pop() if self.records else None
