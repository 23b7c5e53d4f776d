"""Intake, sans-I/O: what happens to an event from anywhere before the role sees it.

    bytes -> decode + verify -> duplicate? -> clock bound (hold or refuse) -> Plan.apply
          -> accepted (the caller stores it) | pending (waits for a dependency) | rejected

The real runtime and the simulator both run this object; the caller passes ``now`` (its own
physical clock, ms) and does the I/O: it persists what was accepted before acting on it.

Clocks: an event stamped more than ``max_ahead_ms`` ahead of our clock is *held* until it is
due (``wall - max_ahead_ms``), so a member whose clock runs fast cannot drag our hybrid clock,
and with it every window and lease, forward; beyond ``max_drift_ms`` it is refused. An event
waiting for a dependency (or a claim for a node that is not yet a task) is dropped after
``pending_ttl_ms``; one waiting for its author's credential after ``member_ttl_ms``.

Bounds on what any author can make us hold (each refusal named and counted; none of them is
part of the fold: like the clock bound they decide when an event is taken, and a refused event
is taken later when a peer's log offers it again):
- held events: at most ``held_per_author`` per author and ``held_max`` in all;
- waiting events: at most ``pending_per_author`` per author (``pending_per_stranger`` for an
  author with no credential yet, in a swarm with an authority);
- a rate per author (a token bucket of ``author_rate`` events/s, ``author_burst`` deep, and
  one of ``claim_rate`` claims/s, ``claim_burst`` deep) for
  what comes from the network: gossip, and sync, whoever relays it. Events stamped more than
  ``fresh_window_ms`` before our clock (history, pulled by a peer that joins late) and events a
  peer relays by sync (not their author) cost ``old_cost`` of a token each. Relayed events were
  once free, as rate-limited where they were first taken; but a member relaying its other keys'
  floods, or events no honest peer took, passed any rate so. They are not charged in full
  because sync is how a joiner and a healed partition catch up: a page's refused event is not
  offered by that peer's sync again (its cursor has moved on), so a full charge would cost an
  honest joiner events. An event that came by gossip is a duplicate by the time sync offers it,
  and is not charged twice.
- with an authority, a hello is checked against its credential before it is held (a flood of
  hellos from fresh keys is refused at once, never held).
"""

from __future__ import annotations

import heapq
from collections import Counter
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any, Iterable

from .events import Event, decode_event, sign_event
from .hlc import HybridClock
from .identity import Identity
from .membership import MEMBER_KEY
from .plan import Plan
from .reasons import Reason, Rejected

EXEMPT_SOURCES = ("self", "due")  # our own events; held events coming due (counted when offered)


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
    member_ttl_ms: int = 15_000  # a hello comes before its author's events, or by the next sync
    held_per_author: int = 64
    held_max: int = 2_000
    pending_per_author: int = 512
    pending_per_stranger: int = 16
    author_rate: float = 50.0  # events per second, per author
    author_burst: float = 500.0
    # claims, per author, on top: an executor works on one task at a time, and every claim
    # on a task is folded into that task's lease race
    claim_rate: float = 2.0
    claim_burst: float = 20.0
    fresh_window_ms: int = 600_000
    old_cost: float = 0.05


@dataclass
class IntakeStats:
    accepted: int = 0
    held: int = 0
    released: int = 0
    expired: int = 0
    rejected: dict[str, int] = field(default_factory=dict)
    held_peak: int = 0  # the most events held at once
    pending_peak: int = 0


class _Buckets:
    """A token bucket per author (``now`` passed in). Full buckets are forgotten, so memory
    follows the authors that sent much lately, not every key that ever sent anything."""

    def __init__(self, rate: float, burst: float) -> None:
        self.rate, self.burst = rate, burst
        self._b: dict[str, tuple[float, int]] = {}  # author -> (tokens, at ms)

    def take(self, author: str, cost: float, now: int) -> bool:
        tokens, at = self._b.get(author, (self.burst, now))
        tokens = min(self.burst, tokens + max(0, now - at) * self.rate / 1000)
        if tokens < cost:
            self._b[author] = (tokens, now)
            return False
        self._b[author] = (tokens - cost, now)
        return True

    def prune(self, now: int) -> None:
        if len(self._b) < 1024:
            return
        full = self.burst * 1000 / self.rate if self.rate > 0 else 0
        self._b = {a: (t, at) for a, (t, at) in self._b.items() if now - at < full}

    def __len__(self) -> int:
        return len(self._b)


class Intake:
    def __init__(self, config: IntakeConfig | None = None, plan: Plan | None = None) -> None:
        self.config = config or IntakeConfig()
        self.plan = plan if plan is not None else Plan()  # (an empty plan is falsy)
        self.clock = HybridClock(self.config.max_drift_ms)
        self.stats = IntakeStats()
        self._held: list[tuple[int, str, Event, str]] = []  # (due, id, event, source)
        self._held_ids: set[str] = set()
        self._held_by: Counter[str] = Counter()  # author -> events held
        self._pending_since: dict[str, int] = {}
        # (when it may expire, id): a lower bound, checked again when popped (what an event
        # waits for, and with it its time to live, can change while it waits)
        self._expiry: list[tuple[int, str]] = []
        self._pending_author: dict[str, str] = {}
        self._pending_by: Counter[str] = Counter()  # author -> events waiting (from the network)
        self._buckets = _Buckets(self.config.author_rate, self.config.author_burst)
        self._claim_buckets = _Buckets(self.config.claim_rate, self.config.claim_burst)
        self._generation = self.plan.generation

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
                self._track(ev, now)
            for e in applied.accepted:
                self._untrack(e.id)
                self.clock.receive(e.hlc, max(now, e.hlc.wall))
        self._reconcile(now)
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
        cfg = self.config
        ahead = ev.hlc.wall - now
        if ahead > cfg.max_drift_ms:
            return self._rejected(ev, Reason.CLOCK_DRIFT,
                                  f"stamped {ahead} ms ahead of our clock (max {cfg.max_drift_ms} ms)")
        if source not in EXEMPT_SOURCES:
            relayed = source.startswith("sync:") and source[5:] != ev.author
            cost = 1.0 if ev.hlc.wall >= now - cfg.fresh_window_ms and not relayed else cfg.old_cost
            if not self._buckets.take(ev.author, cost, now):
                return self._rejected(ev, Reason.RATE_LIMITED,
                                      f"{ev.author[-8:]} sent more than {cfg.author_rate:g} events/s")
            if ev.body.type == "claim" and not self._claim_buckets.take(ev.author, cost, now):
                return self._rejected(ev, Reason.RATE_LIMITED,
                                      f"{ev.author[-8:]} sent more than {cfg.claim_rate:g} claims/s")
        if ahead > cfg.max_ahead_ms and source != "self":
            if ev.body.type == "hello" and self.plan.members.closed:
                try:  # a hello is judged by its own credential: no need to hold a forged one
                    self.plan.members.gate(ev)
                except Rejected as exc:
                    return self._rejected(ev, exc.reason, exc.detail)
            cap = cfg.held_per_author if self._member(ev.author) else max(1, cfg.held_per_author // 8)
            if len(self._held) >= cfg.held_max or self._held_by[ev.author] >= cap:
                return self._rejected(ev, Reason.HELD_OVERFLOW,
                                      f"{len(self._held)} held in all, {self._held_by[ev.author]} from "
                                      f"{ev.author[-8:]} (max {cfg.held_max}, {cap} per author)")
            due = ev.hlc.wall - cfg.max_ahead_ms
            heapq.heappush(self._held, (due, ev.id, ev, source))
            self._held_ids.add(ev.id)
            self._held_by[ev.author] += 1
            self.stats.held += 1
            self.stats.held_peak = max(self.stats.held_peak, len(self._held))
            return Offer(Status.HELD, ev, detail=f"held {ahead - cfg.max_ahead_ms} ms: stamped {ahead} ms ahead")
        return self._apply(ev, now, source)

    def _member(self, author: str) -> bool:
        """Whether ``author`` showed a credential (always, in a swarm without an authority)."""
        m = self.plan.members
        return not m.closed or author in m.credentials

    def _apply(self, ev: Event, now: int, source: str = "self") -> Offer:
        try:
            applied = self.plan.apply(ev)
        except Rejected as exc:
            return self._rejected(ev, exc.reason, exc.detail)
        if applied.pending:
            cap = self.config.pending_per_author if self._member(ev.author) else self.config.pending_per_stranger
            if source != "self" and self._pending_by[ev.author] >= cap:
                self.plan.drop_pending(ev.id)
                return self._rejected(ev, Reason.PENDING_OVERFLOW,
                                      f"{self._pending_by[ev.author]} events of {ev.author[-8:]} already wait")
            self._track(ev, now)
            return Offer(Status.PENDING, ev, waiting_for=applied.waiting_for)
        for e in applied.accepted:
            self._untrack(e.id)
            self.clock.receive(e.hlc, now)
        for e, exc in applied.dropped:
            self._untrack(e.id)
            self._count(exc.reason)
        if self.plan.generation != self._generation:
            self._reconcile(now)
        self.stats.accepted += len(applied.accepted)
        return Offer(Status.ACCEPTED, ev, accepted=applied.accepted, dropped=applied.dropped)

    def _track(self, ev: Event, now: int) -> None:
        if ev.id not in self._pending_since:
            self._pending_since[ev.id] = now
            heapq.heappush(self._expiry, (now + min(self.config.member_ttl_ms, self.config.pending_ttl_ms), ev.id))
            self._pending_author[ev.id] = ev.author
            self._pending_by[ev.author] += 1
            self.stats.pending_peak = max(self.stats.pending_peak, len(self._pending_since))

    def _untrack(self, event_id: str) -> None:
        if self._pending_since.pop(event_id, None) is not None:
            author = self._pending_author.pop(event_id)
            self._pending_by[author] -= 1
            if self._pending_by[author] <= 0:
                del self._pending_by[author]

    def _reconcile(self, now: int) -> None:
        """After a refold (a revocation): what waits now is what the plan holds waiting."""
        self._generation = self.plan.generation
        for eid in [e for e in self._pending_since if not self.plan.is_pending(e)]:
            self._untrack(eid)
        for ev, _key in self.plan.pending_events():
            self._track(ev, now)

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
            _, eid, ev, source = heapq.heappop(self._held)
            self._held_ids.discard(eid)
            self._held_by[ev.author] -= 1
            if self._held_by[ev.author] <= 0:
                del self._held_by[ev.author]
            self.stats.released += 1
            out.append(self._apply(ev, now, source))
        while self._expiry and self._expiry[0][0] <= now:
            _, eid = heapq.heappop(self._expiry)
            since = self._pending_since.get(eid)
            if since is None:
                continue  # filed or refused meanwhile
            ttl = self._ttl(self.plan.pending_key(eid))
            if now - since < ttl:
                heapq.heappush(self._expiry, (since + ttl, eid))
                continue
            dropped = self.plan.drop_pending(eid)
            self._untrack(eid)
            if dropped is None:
                continue
            ev, key = dropped
            self.stats.expired += 1
            reason, why = self._wait_refusal(ev, key)
            out.append(self._rejected(ev, reason, f"{why}: waited {ttl // 1000} s for {key}"))
        self._buckets.prune(now)
        self._claim_buckets.prune(now)
        return out

    def _ttl(self, key: str | None) -> int:
        if key is not None and key.startswith(MEMBER_KEY):
            return self.config.member_ttl_ms
        return self.config.pending_ttl_ms

    def _wait_refusal(self, ev: Event, key: str) -> tuple[Reason, str]:
        if key.startswith(MEMBER_KEY):
            return self.plan.members.wait_refusal(ev, key)
        if key.startswith(("task:", "done:")):
            if self.plan.claimable(ev.body.node):  # a task now, but not when it was claimed
                return Reason.BACKDATED, "claimed before its node became a task"
            return Reason.NOT_CLAIMABLE, "its node never became a task"
        return Reason.UNKNOWN_DEPENDENCY, "what it refers to never came"

    def next_due(self) -> int | None:
        """When ``due`` next has something to do (for a driver's or simulator's timer)."""
        times = []
        if self._held:
            times.append(self._held[0][0])
        while self._expiry and self._expiry[0][1] not in self._pending_since:
            heapq.heappop(self._expiry)  # (stale: filed or refused meanwhile)
        if self._expiry:
            times.append(self._expiry[0][0])
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
            self._untrack(ev.id)
        if not offer.ok:
            raise Rejected(offer.reason or Reason.MALFORMED,
                           f"own {ev.type} event not accepted: {offer.status.value} {offer.detail or offer.waiting_for}")
        return ev

    @property
    def held_count(self) -> int:
        return len(self._held)

    @property
    def pending_count(self) -> int:
        return len(self._pending_since)

    def holding(self) -> tuple[int, int, int, int]:
        """(held, the most held from one author, waiting, the most waiting from one author)."""
        return (len(self._held), max(self._held_by.values(), default=0), len(self._pending_since),
                max(self._pending_by.values(), default=0))

    def held_from(self, author: str) -> int:
        return self._held_by.get(author, 0)

    def waiting_from(self, author: str) -> int:
        return self._pending_by.get(author, 0)

    @property
    def rate_tracked(self) -> int:
        """Authors whose token bucket is remembered (bounded: full ones are forgotten)."""
        return len(self._buckets)
