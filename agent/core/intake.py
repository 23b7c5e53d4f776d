"""Intake, sans-I/O: what happens to an event from anywhere before the role sees it.

    bytes -> decode + verify -> duplicate? -> clock bound (hold or refuse) -> Plan.apply
          -> accepted (the caller stores it) | pending (waits for a dependency) | rejected

The real runtime and the simulator both run this object; the caller passes ``now`` (its own
physical clock, ms) and does the I/O: it persists what was accepted before acting on it.

Clocks: an event stamped more than ``max_ahead_ms`` ahead of our clock is *held* until it is
due (``wall - max_ahead_ms``), so a member whose clock runs fast cannot drag our hybrid clock,
and with it every window and lease, forward; beyond ``max_drift_ms`` it is refused. An event
waiting for a dependency (or a claim for a node that is not yet a task) is dropped after
``pending_ttl_ms``.
"""

from __future__ import annotations

import heapq
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any, Iterable

from .events import Event, decode_event, sign_event
from .hlc import HybridClock
from .identity import Identity
from .plan import Plan
from .reasons import Reason, Rejected


class Status(StrEnum):
    ACCEPTED = "accepted"
    PENDING = "pending"
    HELD = "held"
    REJECTED = "rejected"


@dataclass
class Offer:
    status: Status
    event: Event | None = None
    accepted: list[Event] = field(default_factory=list)  # this event and any it unblocked
    reason: Reason | None = None
    detail: str = ""
    waiting_for: str | None = None
    dropped: list[tuple[Event, Rejected]] = field(default_factory=list)  # unblocked, then refused

    @property
    def ok(self) -> bool:
        return self.status is Status.ACCEPTED


@dataclass(frozen=True)
class IntakeConfig:
    max_ahead_ms: int = 2_000
    max_drift_ms: int = 60_000
    pending_ttl_ms: int = 120_000


@dataclass
class IntakeStats:
    accepted: int = 0
    held: int = 0
    released: int = 0
    expired: int = 0
    rejected: dict[str, int] = field(default_factory=dict)


class Intake:
    def __init__(self, config: IntakeConfig | None = None, plan: Plan | None = None) -> None:
        self.config = config or IntakeConfig()
        self.plan = plan or Plan()
        self.clock = HybridClock(self.config.max_drift_ms)
        self.stats = IntakeStats()
        self._held: list[tuple[int, str, Event, str]] = []  # (due, id, event, source)
        self._held_ids: set[str] = set()
        self._pending_since: dict[str, int] = {}

    # ------------------------------------------------------------------ restore
    def restore(self, events: Iterable[Event], now: int) -> list[tuple[Event, Rejected]]:
        """Reload a stored log: what we accepted before is accepted again whatever the clock
        says now (our own events may be ahead of a clock that went back)."""
        refused: list[tuple[Event, Rejected]] = []
        for ev in events:
            try:
                applied = self.plan.apply(ev)
            except Rejected as exc:
                refused.append((ev, exc))
                continue
            if applied.pending:
                self._pending_since[ev.id] = now
            for e in applied.accepted:
                self._pending_since.pop(e.id, None)
                self.clock.receive(e.hlc, max(now, e.hlc.wall))
        return refused

    # ------------------------------------------------------------------ offer
    def offer_raw(self, raw: bytes | str, source: str, now: int) -> Offer:
        try:
            ev = decode_event(raw)
        except Rejected as exc:
            return self._rejected(None, exc.reason, exc.detail)
        return self.offer(ev, source, now)

    def knows(self, event_id: str) -> bool:
        return event_id in self.plan or self.plan.is_pending(event_id) or event_id in self._held_ids

    def offer(self, ev: Event, source: str, now: int) -> Offer:
        if self.knows(ev.id):
            return self._rejected(ev, Reason.DUPLICATE, "already known")
        ahead = ev.hlc.wall - now
        if ahead > self.config.max_drift_ms:
            return self._rejected(ev, Reason.CLOCK_DRIFT,
                                  f"stamped {ahead} ms ahead of our clock (max {self.config.max_drift_ms} ms)")
        if ahead > self.config.max_ahead_ms and source != "self":
            due = ev.hlc.wall - self.config.max_ahead_ms
            heapq.heappush(self._held, (due, ev.id, ev, source))
            self._held_ids.add(ev.id)
            self.stats.held += 1
            return Offer(Status.HELD, ev, detail=f"held {ahead - self.config.max_ahead_ms} ms: stamped {ahead} ms ahead")
        return self._apply(ev, now)

    def _apply(self, ev: Event, now: int) -> Offer:
        try:
            applied = self.plan.apply(ev)
        except Rejected as exc:
            return self._rejected(ev, exc.reason, exc.detail)
        if applied.pending:
            self._pending_since[ev.id] = now
            return Offer(Status.PENDING, ev, waiting_for=applied.waiting_for)
        for e in applied.accepted:
            self._pending_since.pop(e.id, None)
            self.clock.receive(e.hlc, now)
        for e, exc in applied.dropped:
            self._pending_since.pop(e.id, None)
            self._count(exc.reason)
        self.stats.accepted += len(applied.accepted)
        return Offer(Status.ACCEPTED, ev, accepted=applied.accepted, dropped=applied.dropped)

    def _count(self, reason: Reason) -> None:
        self.stats.rejected[reason.value] = self.stats.rejected.get(reason.value, 0) + 1

    def _rejected(self, ev: Event | None, reason: Reason, detail: str) -> Offer:
        self._count(reason)
        return Offer(Status.REJECTED, ev, reason=reason, detail=detail)

    # ------------------------------------------------------------------ time
    def due(self, now: int) -> list[Offer]:
        """Release held events whose time has come; drop what waited too long."""
        out: list[Offer] = []
        while self._held and self._held[0][0] <= now:
            _, eid, ev, _source = heapq.heappop(self._held)
            self._held_ids.discard(eid)
            self.stats.released += 1
            out.append(self._apply(ev, now))
        ttl = self.config.pending_ttl_ms
        for eid, since in list(self._pending_since.items()):
            if now - since < ttl:
                continue
            dropped = self.plan.drop_pending(eid)
            del self._pending_since[eid]
            if dropped is None:
                continue
            ev, key = dropped
            self.stats.expired += 1
            reason = Reason.NOT_CLAIMABLE if key.startswith(("task:", "done:")) else Reason.UNKNOWN_DEPENDENCY
            out.append(self._rejected(ev, reason, f"waited {ttl // 1000} s for {key}"))
        return out

    def next_due(self) -> int | None:
        """When ``due`` next has something to do (for a driver's or simulator's timer)."""
        times = []
        if self._held:
            times.append(self._held[0][0])
        if self._pending_since:
            times.append(min(self._pending_since.values()) + self.config.pending_ttl_ms)
        return min(times) if times else None

    # ------------------------------------------------------------------ our own events
    def sign(self, identity: Identity, body: Any, now: int,
             released: list[Event] | None = None) -> Event:
        """Stamp and sign an event of ours and file it; raises Rejected if the fold refuses it
        (a bug: roles only publish what they checked). Events of others it unblocked (our
        precommit completing the decision a parked claim waited for) are accepted too: they
        are appended to ``released``, for the caller to store like any accepted event."""
        ev = sign_event(identity, self.clock.send(now), body)
        offer = self._apply(ev, now)
        if released is not None:
            released.extend(e for e in offer.accepted if e is not ev)
        if offer.status is Status.PENDING:
            self.plan.drop_pending(ev.id)
            self._pending_since.pop(ev.id, None)
        if not offer.ok:
            raise Rejected(offer.reason or Reason.MALFORMED,
                           f"own {ev.type} event not accepted: {offer.status.value} {offer.detail or offer.waiting_for}")
        return ev

    @property
    def held_count(self) -> int:
        return len(self._held)
