"""The fold: a set of verified events -> the plan tree.

`Plan` is an incremental, order-independent accumulator. `apply()` files an event into
indexes (or parks it until what it refers to arrives); `tree(now_ms)` derives the tree from
the indexes alone. Because nothing derived is stored, the same set of events in any order,
with any duplicates, gives the same tree and digest, and applying one event at a time equals
folding from scratch.
"""

from __future__ import annotations

import hashlib
from collections import defaultdict
from dataclasses import dataclass, field
from typing import Any, Iterable

from .events import (
    Claim, Event, Goal, Hello, PlanParams, Proposal, Release, Renew, Result, Vote, canonical,
)
from .reasons import Reason, Rejected

MAX_PENDING = 10_000


@dataclass(frozen=True)
class NodeRef:
    """Where a node sits: its goal, depth, and the proposal/index that created it."""

    id: str
    root: str
    depth: int
    proposal: str | None
    index: int


@dataclass
class Applied:
    accepted: list[Event] = field(default_factory=list)  # this event and any it unparked
    pending: bool = False
    waiting_for: str | None = None


def child_id(proposal_id: str, index: int) -> str:
    return f"{proposal_id}/{index}"


class Plan:
    def __init__(self) -> None:
        self.events: dict[str, Event] = {}
        self.goals: dict[str, Event] = {}
        self.proposals: dict[str, Event] = {}
        self.claims: dict[str, Event] = {}
        self.roles: dict[str, set[str]] = defaultdict(set)
        self.by_node: dict[str, dict[str, list[Event]]] = defaultdict(lambda: defaultdict(list))
        self.by_claim: dict[str, list[Event]] = defaultdict(list)
        self._pending: dict[str, dict[str, Event]] = defaultdict(dict)  # missing key -> events
        self._pending_ids: dict[str, str] = {}
        self.version = 0  # bumps on every accepted event (callers cache on it)

    # ------------------------------------------------------------------ intake
    def __len__(self) -> int:
        return len(self.events)

    def __contains__(self, event_id: object) -> bool:
        return event_id in self.events

    def is_pending(self, event_id: str) -> bool:
        return event_id in self._pending_ids

    @property
    def pending_count(self) -> int:
        return len(self._pending_ids)

    def pending_keys(self) -> list[str]:
        return list(self._pending)

    def apply(self, ev: Event) -> Applied:
        """File one verified event. Raises Rejected for events that can never be valid;
        returns pending=True when it waits for a dependency (then it is not yet in the log)."""
        if ev.id in self.events or ev.id in self._pending_ids:
            raise Rejected(Reason.DUPLICATE, ev.id)
        missing = self._missing(ev)
        if missing is not None:
            if len(self._pending_ids) >= MAX_PENDING:
                raise Rejected(Reason.PENDING_OVERFLOW, f"{MAX_PENDING} events already wait")
            self._pending[missing][ev.id] = ev
            self._pending_ids[ev.id] = missing
            return Applied(pending=True, waiting_for=missing)
        self._check(ev)
        out = Applied()
        self._file(ev, out)
        return out

    def drop_pending(self, event_id: str) -> Event | None:
        key = self._pending_ids.pop(event_id, None)
        if key is None:
            return None
        ev = self._pending[key].pop(event_id)
        if not self._pending[key]:
            del self._pending[key]
        return ev

    def pending_events(self) -> list[tuple[Event, str]]:
        return [(ev, key) for key, evs in self._pending.items() for ev in evs.values()]

    def _file(self, ev: Event, out: Applied) -> None:
        stack = [ev]
        while stack:
            e = stack.pop()
            self._index(e)
            out.accepted.append(e)
            for key in self._keys_provided(e):
                for waiting in list(self._pending.pop(key, {}).values()):
                    del self._pending_ids[waiting.id]
                    missing = self._missing(waiting)
                    if missing is not None:
                        self._pending[missing][waiting.id] = waiting
                        self._pending_ids[waiting.id] = missing
                        continue
                    try:
                        self._check(waiting)
                    except Rejected:
                        continue  # dropped; reported by whoever drains pending_rejections
                    stack.append(waiting)

    # ------------------------------------------------------------------ dependencies
    def node_ref(self, node: str) -> NodeRef | None:
        if "/" not in node:
            return NodeRef(node, node, 0, None, 0) if node in self.goals else None
        pid, _, idx = node.partition("/")
        prop = self.proposals.get(pid)
        if prop is None:
            return None
        i = int(idx)
        if i >= len(prop.body.subgoals):
            return None
        parent = self.node_ref(prop.body.node)
        if parent is None:
            return None
        return NodeRef(node, parent.root, parent.depth + 1, pid, i)

    def _node_key(self, node: str) -> str:
        return "node:" + node

    def _missing(self, ev: Event) -> str | None:
        b = ev.body
        if isinstance(b, (Hello, Goal)):
            return None
        if isinstance(b, (Renew, Release, Result)):
            return None if b.claim in self.claims else "event:" + b.claim
        if isinstance(b, Proposal) and b.refines is not None and b.refines not in self.proposals:
            return "event:" + b.refines
        if isinstance(b, Vote):
            if b.proposal is not None and b.proposal not in self.proposals:
                return "event:" + b.proposal
            if "scorer" not in self.roles.get(ev.author, ()):
                return "scorer:" + ev.author
        if self.node_ref(b.node) is None:
            if "/" in b.node:
                pid = b.node.partition("/")[0]
                if pid not in self.proposals:
                    return "event:" + pid
                raise Rejected(Reason.UNKNOWN_DEPENDENCY, f"proposal {pid[:10]} has no subgoal {b.node}")
            return "event:" + b.node
        return None

    def _keys_provided(self, ev: Event) -> list[str]:
        keys = ["event:" + ev.id]
        if isinstance(ev.body, Hello) and ev.body.role == "scorer":
            keys.append("scorer:" + ev.author)
        return keys

    def params_of(self, node: str) -> PlanParams:
        ref = self.node_ref(node)
        assert ref is not None
        return self.goals[ref.root].body.params

    def _check(self, ev: Event) -> None:
        """Rules that need the dependencies present and can never change once they are."""
        b = ev.body
        if isinstance(b, Goal):
            if b.params.quorum > b.params.scorers:
                raise Rejected(Reason.BAD_PARAMS, "quorum exceeds the scorer count")
            return
        if isinstance(b, Hello):
            return
        ref = self.node_ref(b.node)
        assert ref is not None
        params = self.goals[ref.root].body.params
        if isinstance(b, Proposal):
            if ref.depth >= params.max_depth:
                raise Rejected(Reason.TOO_DEEP, f"node at depth {ref.depth}, max {params.max_depth}")
            if len(b.subgoals) > params.max_children:
                raise Rejected(Reason.TOO_MANY_CHILDREN,
                               f"{len(b.subgoals)} subgoals, max {params.max_children}")
            if b.refines is not None and self.proposals[b.refines].body.node != b.node:
                raise Rejected(Reason.WRONG_NODE, "refines a proposal for another node")
        elif isinstance(b, Vote):
            if b.round > params.max_rounds + 1:
                raise Rejected(Reason.BAD_ROUND, f"round {b.round} > {params.max_rounds + 1}")
            if b.proposal is not None and self.proposals[b.proposal].body.node != b.node:
                raise Rejected(Reason.WRONG_NODE, "vote names a proposal of another node")
        elif isinstance(b, (Renew, Release, Result)):
            claim = self.claims[b.claim]
            if claim.author != ev.author:
                raise Rejected(Reason.NOT_CLAIMANT, "only the claim's author may renew, release or report")
            if claim.body.node != b.node:
                raise Rejected(Reason.WRONG_NODE, "claim is for another node")

    def _index(self, ev: Event) -> None:
        self.events[ev.id] = ev
        self.version += 1
        b = ev.body
        if isinstance(b, Hello):
            self.roles[ev.author].add(b.role)
        elif isinstance(b, Goal):
            self.goals[ev.id] = ev
        else:
            if isinstance(b, Proposal):
                self.proposals[ev.id] = ev
            elif isinstance(b, Claim):
                self.claims[ev.id] = ev
            elif isinstance(b, (Renew, Release, Result)):
                self.by_claim[b.claim].append(ev)
            self.by_node[b.node][b.type].append(ev)

    # ------------------------------------------------------------------ derivation
    def tree(self, now_ms: int | None = None) -> "Tree":
        from .tree import derive  # derivation lives apart from intake

        if now_ms is None:
            now_ms = self.latest_wall()
        return derive(self, now_ms)

    def latest_wall(self) -> int:
        return max((e.hlc.wall for e in self.events.values()), default=0)


def fold(events: Iterable[Event]) -> Plan:
    """Fold events in any order; duplicates and invalid ones are skipped."""
    plan = Plan()
    for ev in events:
        try:
            plan.apply(ev)
        except Rejected:
            pass
    return plan


def digest_of(obj: Any) -> str:
    return hashlib.sha256(canonical(obj)).hexdigest()


from .tree import Tree  # noqa: E402,F401  (re-export)
