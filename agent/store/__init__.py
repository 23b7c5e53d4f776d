"""The event log: its interface and error (log.py), on disk (disk.py), in memory (memory.py)."""

from .disk import EventStore, raw_event_id
from .log import EventLog, StoreError
from .memory import MemoryLog

__all__ = ["EventLog", "EventStore", "MemoryLog", "StoreError", "raw_event_id"]
