"""What a simulated run measured: the world, the network and the behaviours' metric effects
add to it; the checker, the sweep and the CLI read it. Its own module so that the network
model and the checker can be handed it without reaching into the world."""

from __future__ import annotations

from dataclasses import dataclass, field

from agent.behaviour.effects import Metric
from agent.shell import Tally


@dataclass
class SimStats:
    steps: int = 0
    events_published: int = 0
    deliveries: int = 0
    lost: int = 0
    duplicated: int = 0
    llm_calls: dict[str, int] = field(default_factory=dict)
    llm_cancelled: int = 0
    llm_wasted: int = 0  # answers that arrived for work nobody wanted any more
    tally: Tally = field(default_factory=Tally)  # the behaviours' metric effects
    rejected: dict[str, int] = field(default_factory=dict)
    injected: list[str] = field(default_factory=list)
    done_ms: int | None = None
    virtual_ms: int = 0
    held_back: int = 0  # publishes that waited for the agent's stamps to be within the bound
    executions: dict[str, set] = field(default_factory=dict)  # task -> claims that spent LLM work on it

    @property
    def metrics(self) -> dict[str, float]:
        return self.tally.totals

    @property
    def first_round_tables(self) -> list[int]:
        """Per first-round prevote, the proposals on the table."""
        return [int(v) for v in self.tally.observed.get(Metric.PROPOSALS_SCORED.value, [])]
