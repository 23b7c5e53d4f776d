"""What every role's behaviour shares: tickets, a seeded random source, the LLM backoff, and
the startup sync barrier (a restarted agent pulls its peers' logs before it acts)."""

from __future__ import annotations

import random
from typing import Any

from agent.core.tree import Tree

from agent.core.backoff import Backoff
from .effects import Effect, SyncPeers, WakeAt, log
from .timing import NetView, Timing


class Behaviour:
    """Subclasses implement ``_poll`` and ``_answered``. Contract:

    - ``poll(tree, now)``: called whenever the tree may have changed or a WakeAt came due;
    - ``answered(ticket, answer, tree, now)``: the answer to an effect that carried a ticket;
    - both return effects and never raise for anything the outside world does (a bug may).
    No clock, no I/O, no randomness but ``self.rng`` (seeded by the caller).
    """

    role = "?"

    def __init__(self, me: str, timing: Timing | None = None, seed: int = 0) -> None:
        self.me = me
        self.timing = timing or Timing()
        self.rng = random.Random(seed)
        self.backoff = Backoff(self.timing.backoff_first_ms, self.timing.backoff_cap_ms,
                               random.Random(seed ^ 0x5EED))
        self._tickets = 0
        self._sync_ticket: int | None = None
        self._started_ms: int | None = None
        self.ready = False  # past the startup sync barrier
        self.net = NetView()  # set by the driver before each call: what it measured of the network
        # tokens my LLM spent on a node that no event of mine reported yet (an unusable answer,
        # a judgment that publishes nothing): the next event I publish about it carries them
        self.unpaid: dict[str, tuple[int, int]] = {}

    def owe(self, key: str, answer: Any) -> None:
        p, c = getattr(answer, "prompt_tokens", 0), getattr(answer, "completion_tokens", 0)
        if p or c:
            op, oc = self.unpaid.get(key, (0, 0))
            self.unpaid[key] = (op + p, oc + c)

    def pay(self, key: str) -> tuple[int, int]:
        return self.unpaid.pop(key, (0, 0))

    def ticket(self) -> int:
        self._tickets += 1
        return self._tickets

    def poll(self, tree: Tree, now: int) -> list[Effect]:
        if not self.ready:
            if self._started_ms is None:
                self._started_ms = now
                self._sync_ticket = self.ticket()
                return [SyncPeers(self._sync_ticket), WakeAt(now + self.timing.startup_sync_ms)]
            if now - self._started_ms < self.timing.startup_sync_ms:
                return [WakeAt(self._started_ms + self.timing.startup_sync_ms)]
            self.ready = True
            out: list[Effect] = [log("warning", "no peer answered the startup sync; acting on the local log",
                                     waited_ms=now - self._started_ms)]
            return out + self._poll(tree, now)
        return self._poll(tree, now)

    def answered(self, ticket: int, answer: Any, tree: Tree, now: int) -> list[Effect]:
        if ticket == self._sync_ticket:
            self._sync_ticket = None
            if not self.ready:
                self.ready = True
                return self._poll(tree, now)
            return []
        return self._answered(ticket, answer, tree, now)

    def idle(self, plan: Any) -> bool:
        """Nothing in ``plan`` (the fold, agent.core.plan.Plan) is this role's to act on, and
        no job of its own is running: a driver may skip the poll and the tree it would derive
        for it. Cheap by contract: a thousand-agent swarm asks it of every agent per event."""
        return False

    def _poll(self, tree: Tree, now: int) -> list[Effect]:
        raise NotImplementedError

    def _answered(self, ticket: int, answer: Any, tree: Tree, now: int) -> list[Effect]:
        raise NotImplementedError


def wake_at(times: list[int]) -> list[Effect]:
    return [WakeAt(min(times))] if times else []
