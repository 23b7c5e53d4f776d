"""Every role's behaviour as a sans-I/O object: ``poll(tree, now)`` and
``answered(ticket, answer, tree, now)`` return effects (agent.behaviour.effects); drivers
(the trio runtime, the simulator) execute them. No trio, no clock, no I/O in here."""

from .decomposer import Decomposer
from .executor import Executor
from .factory import make, strategy_for
from .scorer import Scorer
from .timing import Timing

__all__ = ["Decomposer", "Executor", "Scorer", "Timing", "make", "strategy_for"]
