"""The event log kept in memory: the simulator's and the tests' (agent.store.log.EventLog)."""

from __future__ import annotations


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
