"""Derive the plan tree from a Plan's indexes (pure; `now_ms` only decides lease expiry)."""

from __future__ import annotations

import hashlib
from collections import defaultdict
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Iterator

from .events import Event, PlanParams, canonical

if TYPE_CHECKING:
    from .plan import Plan

LEAF_TARGET = ""  # the "execute as it is" target of a vote with proposal=None

OPEN, VOTING, SPLIT, READY, CLAIMED, DONE = "open", "voting", "split", "ready", "claimed", "done"
STATES = (OPEN, VOTING, SPLIT, READY, CLAIMED, DONE)


@dataclass
class RoundView:
    number: int
    voters: set[str] = field(default_factory=set)
    approvals: dict[str, list[tuple[int, int, str]]] = field(default_factory=dict)
    rejections: dict[str, int] = field(default_factory=dict)
    equivocators: set[str] = field(default_factory=set)
    first_wall: int = 0
    last_wall: int = 0

    def best(self) -> int:
        return max((len(v) for v in self.approvals.values()), default=0)


@dataclass
class ProposalView:
    id: str
    author: str
    strategy: str
    refines: str | None
    wall: int
    subgoals: list[dict[str, Any]]
    feedback: dict[int, list[str]] = field(default_factory=dict)  # round -> scorers' feedback
    scores: dict[int, list[float]] = field(default_factory=dict)  # round -> mean score per vote


@dataclass
class ClaimView:
    holder: str
    claim: str
    start: int
    expires: int


@dataclass
class NodeView:
    id: str
    root: str
    depth: int
    title: str
    description: str
    atomic: bool
    params: PlanParams
    parent: str | None
    state: str = OPEN
    leaf: bool = False
    leaf_reason: str | None = None
    proposals: list[ProposalView] = field(default_factory=list)
    rounds: dict[int, RoundView] = field(default_factory=dict)
    accepted: str | None = None
    accepted_round: int | None = None
    accepted_wall: int | None = None
    children: list["NodeView"] = field(default_factory=list)
    claim: ClaimView | None = None
    claims: list[tuple[int, int, str, str]] = field(default_factory=list)  # (wall, logical, author, id)
    collisions: int = 0
    takeovers: int = 0
    result: dict[str, str] | None = None

    def walk(self) -> Iterator["NodeView"]:
        yield self
        for c in self.children:
            yield from c.walk()

    @property
    def first_proposal_wall(self) -> int | None:
        return min((p.wall for p in self.proposals), default=None)

    def to_json(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "title": self.title,
            "description": self.description,
            "depth": self.depth,
            "state": self.state,
            "leaf": self.leaf,
            "leaf_reason": self.leaf_reason,
            "atomic": self.atomic,
            "accepted": self.accepted,
            "accepted_round": self.accepted_round,
            "proposals": [
                {
                    "id": p.id,
                    "author": p.author,
                    "strategy": p.strategy,
                    "refines": p.refines,
                    "subgoals": [s["title"] for s in p.subgoals],
                    "approvals": {str(r): len(rv.approvals.get(p.id, ())) for r, rv in sorted(self.rounds.items())},
                }
                for p in self.proposals
            ],
            "rounds": len(self.rounds),
            "claim": None if self.claim is None else {
                "holder": self.claim.holder, "claim": self.claim.claim,
                "start": self.claim.start, "expires": self.claim.expires,
            },
            "collisions": self.collisions,
            "takeovers": self.takeovers,
            "result": self.result,
            "children": [c.to_json() for c in self.children],
        }


@dataclass
class Tree:
    roots: list[NodeView]
    now_ms: int
    index: dict[str, NodeView]

    def node(self, node_id: str) -> NodeView | None:
        return self.index.get(node_id)

    def walk(self) -> Iterator[NodeView]:
        for r in self.roots:
            yield from r.walk()

    def to_json(self) -> dict[str, Any]:
        body = {"goals": [r.to_json() for r in self.roots]}
        return {**body, "digest": hashlib.sha256(canonical(body)).hexdigest()}

    @property
    def digest(self) -> str:
        return self.to_json()["digest"]

    def counts(self) -> dict[str, int]:
        out = {s: 0 for s in STATES}
        for n in self.walk():
            out[n.state] += 1
        return out


def derive(plan: "Plan", now_ms: int) -> Tree:
    index: dict[str, NodeView] = {}
    roots = []
    for gid, goal in sorted(plan.goals.items(), key=lambda kv: (kv[1].order, kv[0])):
        g = goal.body
        root = NodeView(gid, gid, 0, g.title, g.description, False, g.params, None)
        _derive_node(plan, root, now_ms, index)
        roots.append(root)
    return Tree(roots, now_ms, index)


def _derive_node(plan: "Plan", n: NodeView, now_ms: int, index: dict[str, NodeView]) -> None:
    index[n.id] = n
    evs = plan.by_node.get(n.id, {})
    for p in sorted(evs.get("proposal", ()), key=lambda e: (e.order, e.id)):
        b = p.body
        n.proposals.append(ProposalView(
            p.id, p.author, b.strategy, b.refines, p.hlc.wall,
            [s.model_dump() for s in b.subgoals],
        ))
    if n.depth >= n.params.max_depth:
        n.leaf, n.leaf_reason = True, "max_depth"
    elif n.atomic:
        n.leaf, n.leaf_reason = True, "atomic"
    else:
        _tally(n, evs.get("vote", ()))
        if n.accepted == LEAF_TARGET:
            n.leaf, n.leaf_reason = True, "vote"
    if n.leaf:
        _claims(plan, n, evs.get("claim", ()), now_ms)
        return
    if n.accepted is None:
        n.state = VOTING if n.proposals else OPEN
        return
    prop = plan.proposals[n.accepted]
    for i, s in enumerate(prop.body.subgoals):
        child = NodeView(f"{prop.id}/{i}", n.root, n.depth + 1, s.title, s.description,
                         s.atomic, n.params, n.id)
        _derive_node(plan, child, now_ms, index)
        n.children.append(child)
    n.state = DONE if all(c.state == DONE for c in n.children) else SPLIT


def _tally(n: NodeView, votes: Any) -> None:
    """Count approvals per round; one approving target per scorer per round (an equivocating
    scorer's approvals in that round are void); the lowest round reaching quorum wins, then
    the earliest quorum-completing vote (HLC, author), then the target id."""
    by_voter: dict[tuple[int, str], list[Event]] = defaultdict(list)
    feedback_of = {p.id: p for p in n.proposals}
    for v in votes:
        b = v.body
        rv = n.rounds.setdefault(b.round, RoundView(b.round, first_wall=v.hlc.wall, last_wall=v.hlc.wall))
        rv.voters.add(v.author)
        rv.first_wall = min(rv.first_wall, v.hlc.wall)
        rv.last_wall = max(rv.last_wall, v.hlc.wall)
        by_voter[(b.round, v.author)].append(v)
        pv = feedback_of.get(b.proposal or "")
        if pv is not None:
            pv.scores.setdefault(b.round, []).append(round((b.specificity + b.non_overlap + b.coverage) / 3, 4))
            if not b.approve:
                rv.rejections[pv.id] = rv.rejections.get(pv.id, 0) + 1
            if b.feedback:
                pv.feedback.setdefault(b.round, []).append(b.feedback)
    for (rnd, author), vs in by_voter.items():
        approved = [v for v in vs if v.body.approve]
        targets = {v.body.proposal or LEAF_TARGET for v in approved}
        if len(targets) > 1:
            n.rounds[rnd].equivocators.add(author)
            continue
        if targets:
            first = min(approved, key=lambda v: (v.order, v.id))
            n.rounds[rnd].approvals.setdefault(targets.pop(), []).append(first.order)
    for pv in n.proposals:
        for fb in pv.feedback.values():
            fb.sort()
        for sc in pv.scores.values():
            sc.sort()
    quorum = n.params.quorum
    best: tuple[int, tuple[int, int, str], str] | None = None
    for rnd, rv in n.rounds.items():
        for target, orders in rv.approvals.items():
            orders.sort()
            if len(orders) >= quorum:
                cand = (rnd, orders[quorum - 1], target)
                if best is None or cand < best:
                    best = cand
    if best is not None:
        n.accepted_round, completing, n.accepted = best
        n.accepted_wall = completing[0]


def _claims(plan: "Plan", n: NodeView, claims: Any, now_ms: int) -> None:
    """Earliest (HLC, author) claim holds the lease; a claim made while a lease is alive is a
    collision; one made after the lease ended (expired or released, no result) takes over."""
    ordered = sorted(claims, key=lambda e: (e.order, e.id))
    n.claims = [(c.hlc.wall, c.hlc.logical, c.author, c.id) for c in ordered]
    results = []
    holder: Event | None = None
    holder_end = 0
    for c in ordered:
        end = _lease_end(plan, c)
        for e in plan.by_claim.get(c.id, ()):
            if e.body.type == "result":
                results.append(e)
        if holder is None:
            holder, holder_end = c, end
        elif c.hlc.wall >= holder_end and not _has_result(plan, holder):
            holder, holder_end = c, end
            n.takeovers += 1
        else:
            n.collisions += 1
    if results:
        r = min(results, key=lambda e: (e.order, e.id))
        n.result = {"author": r.author, "claim": r.body.claim, "output": r.body.output}
        n.state = DONE
    elif holder is not None and holder_end > now_ms:
        n.state = CLAIMED
    else:
        n.state = READY
    if holder is not None:
        n.claim = ClaimView(holder.author, holder.id, holder.hlc.wall, holder_end)


def _has_result(plan: "Plan", claim: Event) -> bool:
    return any(e.body.type == "result" for e in plan.by_claim.get(claim.id, ()))


def _lease_end(plan: "Plan", claim: Event) -> int:
    end = claim.hlc.wall + claim.body.lease_ms
    for e in sorted(plan.by_claim.get(claim.id, ()), key=lambda e: (e.order, e.id)):
        if e.hlc.wall > end:
            break  # a lease cannot be revived once it has lapsed
        if e.body.type == "renew":
            end = max(end, e.hlc.wall + e.body.lease_ms)
        elif e.body.type == "release":
            end = min(end, e.hlc.wall)
            break
    return end
