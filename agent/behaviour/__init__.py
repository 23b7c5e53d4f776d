"""Every role's behaviour as a sans-I/O object: ``poll(tree, now)`` and
``answered(ticket, answer, tree, now)`` return effects (agent.behaviour.effects); drivers
(the trio runtime, the simulator) execute them. No trio, no clock, no I/O in here."""

from .decomposer import Decomposer
from .executor import Executor
from .scorer import Scorer
from .timing import Timing

__all__ = ["Decomposer", "Executor", "Scorer", "Timing", "make"]


def make(role: str, me: str, timing: Timing, seed: int, *, strategy: str = "by phase",
         decomposers: int = 1):
    if role == "decomposer":
        return Decomposer(me, timing, seed, strategy=strategy)
    if role == "scorer":
        return Scorer(me, timing, seed, decomposers=decomposers)
    if role == "executor":
        return Executor(me, timing, seed)
    raise ValueError(f"no behaviour for role {role!r}")
