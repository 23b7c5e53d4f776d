"""The one place a role's behaviour is made, and which splitting strategy a decomposer gets:
the real agent, the simulator, the central baseline and the demo all come here."""

from __future__ import annotations

from .base import Behaviour
from .decomposer import Decomposer
from .executor import Executor
from .scorer import Scorer
from .timing import Timing
from .work import DEFAULT_STRATEGIES


def strategy_for(index: int) -> str:
    """The ``index``-th decomposer's strategy: the defaults in turn, so a few decomposers
    propose splits of different kinds."""
    return DEFAULT_STRATEGIES[index % len(DEFAULT_STRATEGIES)]


def make(role: str, me: str, timing: Timing, seed: int, *, strategy: str = "by phase",
         decomposers: int = 1, sync_before_work: bool = True) -> Behaviour:
    if role == "decomposer":
        return Decomposer(me, timing, seed, strategy=strategy)
    if role == "scorer":
        return Scorer(me, timing, seed, decomposers=decomposers)
    if role == "executor":
        return Executor(me, timing, seed, sync_before_work=sync_before_work)
    raise ValueError(f"no behaviour for role {role!r}")
