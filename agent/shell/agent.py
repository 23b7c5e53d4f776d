"""What every driver keeps around one agent's behaviour, the same under all of them: the intake
(validate, clock bound, fold), the event log, the tree the behaviour reads, what publishing
files, and the view of the network the behaviour is handed. The drivers differ only in how
they execute effects (agent.shell.effects), and they sit side by side in agent.drivers: the
real one over libp2p and trio (real/: runtime.py, driver.py), the simulator in virtual time
(sim/), the central baseline in one process (central.py).
"""

from __future__ import annotations

from typing import Any

from agent.behaviour.base import Behaviour
from agent.behaviour.timing import STARTUP_GRACE_MS, NetMeter
from agent.core.events import Event
from agent.core.identity import Identity
from agent.core.intake import Intake
from agent.core.plan import Plan
from agent.core.tree import Tree, derive
from agent.store import EventLog


class AgentShell:
    def __init__(self, intake: Intake, log: EventLog) -> None:
        self.intake = intake
        self.log = log
        self.meter = NetMeter()  # gossip delay and misses, for the behaviours' windows
        self._tree: Tree | None = None
        self._tree_version = -1
        self._viewed: Behaviour | None = None
        self._ready_at: int | None = None

    @property
    def plan(self) -> Plan:
        return self.intake.plan

    def tree(self, now: int) -> Tree:
        """The derived tree at ``now``: derived again (from the previous one) only when the fold
        changed or time passed what the last one is valid for, since a poll reads it often."""
        t = self._tree
        if t is None or self._tree_version != self.plan.version or not t.now_ms <= now < t.valid_until:
            t = self._tree = derive(self.plan, now, prev=t)
            self._tree_version = self.plan.version
        return t

    def sign(self, identity: Identity, body: Any, now: int) -> list[Event]:
        """Sign and fold an event of ours; returns it, then the others' events it released
        (parked claims a decision of ours made valid), in the order the log must take them:
        a released event is accepted like any other and must be stored too (one that stayed in
        the fold but not in the store was never served to a syncing peer: found by the chaos
        suite)."""
        released: list[Event] = []
        ev = self.intake.sign(identity, body, now, released)
        return [ev, *released]

    def delivered(self, ev: Event, source: str, now: int) -> None:
        """A peer's event was accepted: a sample of how gossip does (by sync: was it missed?)."""
        self.meter.delivered(source.startswith("sync"), now - ev.hlc.wall, now)

    def hand_net_view(self, behaviour: Behaviour, now: int) -> None:
        """Set what was measured of the network on ``behaviour`` before a call. Gossip misses
        before it was past its startup sync, plus a grace, are history being pulled, not gossip
        failing; a new behaviour (a restarted role) has its own startup."""
        if behaviour is not self._viewed:
            self._viewed, self._ready_at = behaviour, None
        if self._ready_at is None and behaviour.ready:
            self._ready_at = now
        since = None if self._ready_at is None else self._ready_at + STARTUP_GRACE_MS
        behaviour.net = self.meter.view(now, since)
