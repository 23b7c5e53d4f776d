"""The metrics sink of the drivers without Prometheus (the simulator, the central baseline)."""

from __future__ import annotations

from agent.behaviour.effects import Count, Observe


class Tally:
    """Every metric effect's total, and each value an Observe reported, by metric name."""

    def __init__(self) -> None:
        self.totals: dict[str, float] = {}
        self.observed: dict[str, list[float]] = {}

    def record(self, eff: Count | Observe) -> None:
        key = eff.metric.value
        self.totals[key] = self.totals.get(key, 0.0) + eff.value
        if isinstance(eff, Observe):
            self.observed.setdefault(key, []).append(eff.value)
