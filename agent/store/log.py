"""What a runtime needs from its event log, and the one error a log may raise.

Two logs keep this contract: ``agent.store.disk.EventStore`` (append-only JSON lines, fsync'd)
for a real agent and ``agent.store.memory.MemoryLog`` for the simulator and tests;
tests/test_store_contract.py runs the same checks against both. ``StoreError`` belongs to the
interface, not to one log: a runtime catches it without knowing which log it was given.
"""

from __future__ import annotations

from typing import Protocol


class StoreError(Exception):
    """The log cannot be written (disk full, read-only, ...); the message names file and cause."""


class EventLog(Protocol):
    def append(self, raw: bytes, *, durable: bool = True, event_id: str | None = None) -> int:
        """Store one event; returns the new length. Raises StoreError on I/O errors (and
        stores nothing then). With ``durable`` it (and every earlier one) is on disk when this
        returns; otherwise at the next ``flush()`` or durable append."""

    def flush(self) -> None:
        """Make every append so far durable. Raises StoreError if that fails."""

    async def flush_off_loop(self) -> None:
        """``flush`` without blocking the event loop (what was appended when it started)."""

    def read_from(self, pos: int, limit: int) -> list[bytes]:
        """Events [pos, pos + limit) in append order."""

    def load(self) -> list[bytes]:
        """Every event, in append order."""

    def __len__(self) -> int: ...
