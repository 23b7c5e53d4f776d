"""The fault plan: when the partitions, crashes and pauses a run's faults ask for happen, and
the scripted actions of a scenario, put on the simulation's schedule at the start. What a
fault does to an agent when its time comes is the simulation's (agent.drivers.sim.world)."""

from __future__ import annotations

from typing import Any, Callable

from .config import START_MS, SimConfig

MOVABLE_ROLES = ("decomposer", "scorer", "executor", "observer")  # who may crash or pause


def schedule_faults(cfg: SimConfig, rng: Any, now: int, agents: list[Any],
                    at: Callable[[int, str, int, Any], None]) -> None:
    """Draws from the simulation's generator in a fixed order: one seed, one fault plan."""
    for when, action, args in cfg.script:
        at(now + when, "script", -1, (action, args))
    f = cfg.faults
    span = cfg.fault_phase_ms
    movable = [a for a in agents if a.role in MOVABLE_ROLES]
    for _ in range(f.partitions):
        t0 = now + rng.randint(0, span // 2)
        dur = rng.randint(5_000, span // 2)
        at(t0, "partition", -1, None)
        at(min(t0 + dur, START_MS + span), "heal", -1, None)
    for _ in range(f.crashes):
        a = rng.choice(movable)
        t0 = now + rng.randint(0, span)
        at(t0, "crash", a.idx, None)
        at(t0 + rng.randint(1_000, 40_000), "restart", a.idx, None)
    for _ in range(f.pauses):
        a = rng.choice(movable)
        t0 = now + rng.randint(0, span)
        at(t0, "pause", a.idx, rng.randint(cfg.timing.lease_ms + 1_000, 2 * cfg.timing.lease_ms + 5_000))
