"""Hybrid logical clock (Kulkarni et al., 2014).

Timestamps are (wall milliseconds, logical counter) and order totally with the author's peer
id as the tie-break. The physical time is always passed in: this module never reads a clock.
"""

from __future__ import annotations

from typing import NamedTuple


class Timestamp(NamedTuple):
    wall: int
    logical: int

    def __str__(self) -> str:
        return f"{self.wall}.{self.logical}"


class ClockDrift(ValueError):
    """A remote timestamp is further ahead of local physical time than allowed."""


class HybridClock:
    def __init__(self, max_drift_ms: int = 60_000) -> None:
        self.max_drift_ms = max_drift_ms
        self.wall = 0
        self.logical = 0

    @property
    def last(self) -> Timestamp:
        return Timestamp(self.wall, self.logical)

    def send(self, physical_ms: int) -> Timestamp:
        """Timestamp for a local event (or a message about to be sent)."""
        if physical_ms > self.wall:
            self.wall, self.logical = physical_ms, 0
        else:
            self.logical += 1
        return self.last

    def check(self, remote: Timestamp, physical_ms: int) -> None:
        if remote.wall - physical_ms > self.max_drift_ms:
            raise ClockDrift(
                f"remote wall time {remote.wall} is {remote.wall - physical_ms} ms ahead "
                f"(max drift {self.max_drift_ms} ms)"
            )

    def receive(self, remote: Timestamp, physical_ms: int) -> Timestamp:
        """Merge a remote timestamp; raises ClockDrift (and leaves the clock unchanged)."""
        self.check(remote, physical_ms)
        wall = max(self.wall, remote.wall, physical_ms)
        if wall == self.wall and wall == remote.wall:
            logical = max(self.logical, remote.logical) + 1
        elif wall == self.wall:
            logical = self.logical + 1
        elif wall == remote.wall:
            logical = remote.logical + 1
        else:
            logical = 0
        self.wall, self.logical = wall, logical
        return self.last
