"""Claims, leases and which result counts (pure; ``now`` only decides whether a lease is alive).

- A claim is a lease: from the claim's stamp until ``claim + lease_ms``, extended by the
  holder's renewals stamped while it was still alive, and never beyond the goal's
  ``max_lease_ms`` after the claim (its *granted* end). A lease that has lapsed cannot be
  revived. A release ends the *holding* early (others may take the task from its stamp on);
  it takes back neither the time granted nor the validity of a result: its stamp is its
  author's word, and a release published late but stamped early would otherwise hand the
  author its time back (re-claims holding a task for ever) or un-count a result every peer
  had counted (a fold that depends on arrival order).
- The cap binds an author, not one claim: once an author's claims on a task (re-claims
  included) have been granted ``max_lease_ms`` in all, its claims *yield* (from
  ``yield_from`` on): they hold the task only while no other author's claim does, and the
  task reads as ready to everyone else, so a squatter re-claiming back to back cannot keep
  others out, while a lone executor can still retry.
- At any instant the task belongs to the earliest (HLC, peer id) claim whose lease is alive
  and that does not yield (else to the earliest yielding one): that is the race's winner on
  every peer, whatever order the claims arrived in. A claim made
  while an earlier lease is alive is a *collision*; one made after every earlier lease ended
  (expired or released) without a result is a *takeover*.
- A result is *valid* only if it was stamped within its own claim's granted lease. The
  counted result is the earliest valid one. Validity depends on the claim and its renewals
  alone, and renewals only lengthen a lease, so once a task has a valid result it stays done
  whatever arrives later (a result finished after a lapsed lease, e.g. by a paused executor,
  never counts). More than one valid result
  means the task ran twice (a partition hid one claim from the other side): counted, never
  hidden.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Iterable, Sequence

from .events import Event

__all__ = ["ClaimState", "Leases", "granted_end", "lease_end", "leases"]


@dataclass(frozen=True)
class ClaimState:
    id: str
    author: str
    start: int
    end: int  # end of its holding (wall ms): the granted end, or its release
    order: tuple[int, int, str]
    yield_from: int = 2**62  # from then on it yields (its author has held the task long enough)
    granted: int = 0  # end of its lease as granted (releases aside): results and budgets

    def holds(self, now_ms: int) -> bool:
        """Alive at ``now_ms`` and not yielding: nobody else may take the task."""
        return self.start <= now_ms < min(self.end, self.yield_from)


@dataclass
class Leases:
    claims: list[ClaimState] = field(default_factory=list)  # in (HLC, author, id) order
    results: list[Event] = field(default_factory=list)  # valid results, earliest first
    invalid_results: int = 0  # finished after the lease lapsed: never counted
    collisions: int = 0
    takeovers: int = 0

    @property
    def counted(self) -> Event | None:
        return self.results[0] if self.results else None

    @property
    def executed_twice(self) -> int:
        return max(0, len(self.results) - 1)

    def holder(self, now_ms: int) -> ClaimState | None:
        """The earliest claim holding the task at ``now_ms``; else the earliest yielding one
        alive then (a lone executor past its budget keeps what nobody else wants)."""
        alive = [c for c in self.claims if c.start <= now_ms < c.end]
        return next((c for c in alive if now_ms < c.yield_from), alive[0] if alive else None)


def granted_end(claim: Event, follow_ups: Sequence[Event], max_lease_ms: int) -> int:
    """The claim's lease as its renewals extended it (releases aside): what its results are
    judged by and what it costs its author's budget."""
    cap = claim.hlc.wall + max_lease_ms  # renewals cannot hold a task forever (a squatter)
    end = min(cap, claim.hlc.wall + claim.body.lease_ms)
    for e in sorted(follow_ups, key=lambda e: (e.order, e.id)):
        if e.hlc.wall >= end:
            break  # a lease cannot be revived once it has lapsed
        if e.body.type == "renew":
            end = min(cap, max(end, e.hlc.wall + e.body.lease_ms))
    return end


def lease_end(claim: Event, follow_ups: Sequence[Event], max_lease_ms: int) -> int:
    """When the claim stops holding the task: its granted end, or its release if earlier."""
    end = granted_end(claim, follow_ups, max_lease_ms)
    released = [e.hlc.wall for e in follow_ups if e.body.type == "release"]
    return min([end, *released])


def leases(claims: Iterable[Event], follow_ups: dict[str, list[Event]], max_lease_ms: int) -> Leases:
    out = Leases()
    ordered = sorted(claims, key=lambda e: (e.order, e.id))
    busy_until = None  # end of the latest lease among earlier claims, while no result
    busy: dict[str, int] = {}  # author -> end of its latest lease among earlier claims
    spent: dict[str, int] = {}  # author -> ms its earlier claims' own leases lasted
    for c in ordered:
        ups = follow_ups.get(c.id, ())
        granted = granted_end(c, ups, max_lease_ms)
        end = lease_end(c, ups, max_lease_ms)
        used = spent.get(c.author, 0)
        spent[c.author] = used + (granted - c.hlc.wall)
        yield_from = c.hlc.wall + max(0, max_lease_ms - used)
        st = ClaimState(c.id, c.author, c.hlc.wall, end, c.order, yield_from if yield_from < end else 2**62, granted)
        out.claims.append(st)
        if busy_until is not None:
            # a collision is a race with someone else: one author's claims overlapping only
            # each other (re-claims, or a flood of them) race nobody
            if any(c.hlc.wall < e for a, e in busy.items() if a != c.author):
                out.collisions += 1
            elif c.hlc.wall >= busy_until:
                out.takeovers += 1
        busy_until = end if busy_until is None else max(busy_until, end)
        busy[c.author] = max(busy.get(c.author, end), end)
        for e in ups:
            if e.body.type != "result":
                continue
            if c.hlc.wall <= e.hlc.wall < granted:
                out.results.append(e)
            else:
                out.invalid_results += 1
    out.results.sort(key=lambda e: (e.order, e.id))
    return out
