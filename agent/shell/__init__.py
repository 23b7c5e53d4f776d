"""One agent's shell around its behaviour, the same under every driver: its state
(agent.py), the routing of effects to a driver's methods (effects.py), and the metrics sink
of the drivers without Prometheus (tally.py)."""

from .agent import AgentShell
from .effects import route
from .tally import Tally

__all__ = ["AgentShell", "Tally", "route"]
