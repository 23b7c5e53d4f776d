"""Exponential backoff with jitter from a seeded generator (pure: the caller passes now)."""

from __future__ import annotations

import random
from dataclasses import dataclass, field


@dataclass
class Backoff:
    first_ms: int
    cap_ms: int
    rng: random.Random = field(default_factory=random.Random)
    failures: int = 0
    until_ms: int = 0

    def failed(self, now_ms: int) -> int:
        """Record a failure; returns the delay (ms) before the next attempt."""
        self.failures += 1
        delay = min(self.cap_ms, self.first_ms * 2 ** min(self.failures - 1, 20))
        delay = int(delay * self.rng.uniform(0.8, 1.2))
        self.until_ms = now_ms + delay
        return delay

    def reset(self) -> None:
        self.failures = 0
        self.until_ms = 0

    def blocked(self, now_ms: int) -> bool:
        return now_ms < self.until_ms
