"""What the page shows, as plain JSON-ready dicts, derived from the tree and the plan (pure).

Nodes are flat (children by id) so that an update carries only the nodes that changed. Each
node carries what the detail panel shows: its competing splits with every score and the
feedback each refinement answered, the votes per round and phase, its claims classified the way
the fold counts them (first, collision, takeover) with when each ended, and its counted result.
"""

from __future__ import annotations

from typing import Any

from agent.core.consensus import LEAF, NIL
from agent.core.plan import Plan
from agent.core.tree import NodeView, Tree


def _round(x: float) -> float:
    return round(float(x), 3)


def node_view(n: NodeView, plan: Plan, now_ms: int) -> dict[str, Any]:
    by_id = {p.id: p for p in n.proposals}
    proposals = []
    for p in n.proposals:
        refined = by_id.get(p.refines) if p.refines else None
        proposals.append({
            "id": p.id,
            "author": p.author,
            "strategy": p.strategy,
            "wall": p.wall,
            "refines": p.refines,
            # the feedback this refinement answered: the scores of the split it refines
            "answers": [{"author": s.author, "feedback": s.feedback} for s in refined.scores if s.feedback]
            if refined is not None else [],
            "subgoals": [{"title": s["title"], "description": s.get("description", ""),
                          "atomic": bool(s.get("atomic")), "after": list(s.get("after", ()))}
                         for s in p.subgoals],
            "scores": [{"author": s.author, "specificity": _round(s.specificity),
                        "non_overlap": _round(s.non_overlap), "coverage": _round(s.coverage),
                        "overall": _round(s.overall), "acceptable": s.acceptable,
                        "feedback": s.feedback, "wall": s.wall, "rank": p.ranks.get(s.author)}
                       for s in p.scores],
            "mean": _round(p.mean_score()),
        })
    rounds = n.tally.to_json(full=True) if n.tally is not None else []
    claims = []
    busy_until: int | None = None
    counted_claim = n.result["claim"] if n.result else None
    for c in n.claims:
        if busy_until is None:
            kind = "first"
        elif c.start < busy_until:
            kind = "collision"
        else:
            kind = "takeover"
        busy_until = c.end if busy_until is None else max(busy_until, c.end)
        results = [e for e in plan.by_claim.get(c.id, ()) if e.type == "result"]
        result_at = min((e.hlc.wall for e in results), default=None)
        if c.id == counted_claim:
            outcome = "counted"
        elif results:
            outcome = "ran twice" if any(c.start <= e.hlc.wall < c.granted for e in results) else "late result"
        elif c.end <= now_ms:
            released = any(e.type == "release" for e in plan.by_claim.get(c.id, ()))
            outcome = "released" if released else "lapsed"
        else:
            outcome = "holding" if n.holder is not None and n.holder.id == c.id else "waiting"
        claims.append({"id": c.id, "author": c.author, "start": c.start, "end": c.end, "kind": kind,
                       "result_at": result_at, "outcome": outcome})
    result = None
    if n.result is not None:
        ev = plan.events.get(n.result.get("claim", ""))
        res_events = [e for e in plan.by_claim.get(n.result["claim"], ()) if e.type == "result"]
        result = {**n.result, "wall": min((e.hlc.wall for e in res_events), default=None),
                  "claimed": ev.hlc.wall if ev is not None else None}
    out: dict[str, Any] = {
        "id": n.id,
        "root": n.root,
        "parent": n.parent,
        "depth": n.depth,
        "title": n.title,
        "description": n.description,
        "state": n.state.value,
        "task": n.task.value if n.task else None,
        "leaf": n.leaf,
        "leaf_reason": n.leaf_reason,
        "atomic_hint": n.atomic,
        "decided": n.decided,
        "decided_round": n.decided_round,
        "children": [c.id for c in n.children],
        "proposals": proposals,
        "rounds": rounds,
        "claims": claims,
        "holder": n.holder.id if n.holder is not None else None,
        "collisions": n.collisions,
        "takeovers": n.takeovers,
        "executed_twice": n.executed_twice,
        "late_results": n.late_results,
        "result": result,
        "after": list(n.after),
        "attempt": n.attempt,
        "history": [{k: v for k, v in h.items() if k != "reviews_v"} for h in n.history],
        "candidate": n.candidate,
        "reviews": [{"author": r.author, "result": r.result, "accept": r.accept, "problems": r.problems,
                     "feedback": r.feedback} for r in n.reviews],
    }
    if n.depth == 0:
        goal = plan.goals.get(n.id)
        p = n.params
        out["params"] = {"electorate": list(p.electorate), "quorum": p.quorum, "max_depth": p.max_depth,
                         "max_children": p.max_children, "max_rounds": p.max_rounds,
                         "max_lease_ms": p.max_lease_ms}
        out["submitted"] = {"author": goal.author, "wall": goal.hlc.wall} if goal is not None else None
        out["brief"] = n.brief
        out["brief_settled"] = n.brief_settled
        out["brief_wanted"] = p.brief
        out["briefs"] = [{"id": b.id, "author": b.author, "facts": b.facts, "chosen": b.id == n.brief_id}
                         for b in n.briefs]
        out["budget"] = {"tokens": p.token_budget, "phase": n.budget_phase,
                         "spent": {k: list(v) for k, v in sorted(n.spent.items())},
                         "spent_total": sum(a + b for a, b in n.spent.values())}
    return out


def nodes_view(tree: Tree, plan: Plan) -> dict[str, dict[str, Any]]:
    return {n.id: node_view(n, plan, tree.now_ms) for n in tree.walk()}


class Names:
    """Agents' announced names (from their hello events), kept incrementally."""

    def __init__(self) -> None:
        self.names: dict[str, str] = {}
        self._seen = 0

    def update(self, plan: Plan) -> dict[str, str]:
        if len(plan.roles) != self._seen:  # a new member announced itself: rescan the hellos
            for e in plan.events.values():
                if e.type == "hello" and e.body.name:
                    self.names.setdefault(e.author, e.body.name)
            self._seen = len(plan.roles)
        return self.names


def clock_offsets(lags: dict[str, int], ahead_ms: int) -> dict[str, int]:
    """Each peer's clock against the swarm's (ms, positive: ahead), from our least lag to it
    (``SkewEstimator.per_peer_ms``: our clock minus its stamps, delay included) and our own
    offset to the swarm: a peer whose stamps arrive 30 s 'early' is 30 s ahead."""
    return {peer: ahead_ms - lag for peer, lag in lags.items()}


def members_view(tree: Tree, names: dict[str, str], connected: list[str], me: str,
                 clocks: dict[str, int] | None = None) -> list[dict[str, Any]]:
    """The peer list: roles, names, whether connected, and each one's clock against the swarm's
    (``clock_ms``; None when not heard from within the estimate's window). ``clocks`` may name
    ``me`` too: our own offset."""
    clocks = clocks or {}
    live = set(connected)
    out = [{"peer": peer, "roles": sorted(roles), "name": names.get(peer, ""), "connected": peer in live,
            "clock_ms": clocks.get(peer)}
           for peer, roles in sorted(tree.members.items())]
    known = set(tree.members)
    # peers connected that never announced a role (an observer, a submitter, another page)
    out += [{"peer": p, "roles": [], "name": "", "connected": True, "clock_ms": clocks.get(p)}
            for p in sorted(live - known) if p != me]
    return out


__all__ = ["LEAF", "NIL", "Names", "clock_offsets", "members_view", "node_view", "nodes_view"]
