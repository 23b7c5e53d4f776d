"""Exponential backoff with jitter (pure: the caller passes the time, in any unit, and the
random source): an unavailable LLM, a failing role, a peer that does not answer."""

from __future__ import annotations

import random
from dataclasses import dataclass, field


@dataclass
class Backoff:
    first: float  # the first delay, in the caller's unit (ms for behaviours, s for redials)
    cap: float
    rng: random.Random = field(default_factory=random.Random)
    failures: int = 0
    until: float = 0

    def failed(self, now: float) -> float:
        """Record a failure; returns the delay before the next attempt."""
        self.failures += 1
        delay = min(self.cap, self.first * 2 ** min(self.failures - 1, 20))
        delay *= self.rng.uniform(0.8, 1.2)
        if isinstance(self.first, int) and isinstance(self.cap, int):
            delay = int(delay)
        self.until = now + delay
        return delay

    def reset(self) -> None:
        self.failures = 0
        self.until = 0

    def blocked(self, now: float) -> bool:
        return now < self.until

    def due(self, now: float) -> bool:
        return not self.blocked(now)

    @property
    def until_ms(self) -> int:  # behaviours count in ms
        return int(self.until)
