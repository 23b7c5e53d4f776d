"""A node's votes read together with its splits (their scores and refinements): the choices
every elector makes alike. Readings of the votes alone are the tally's own
(``agent.core.consensus.Tally``)."""

from __future__ import annotations

from agent.core.consensus import LEAF, NIL
from agent.core.tree import NodeView


def closed_rounds(n: NodeView) -> int:
    """How many rounds of an undecided node visibly ended without a decision."""
    t = n.tally
    if t is None or n.decided is not None:
        return 0
    return t.closed_rounds()


def public_leader(n: NodeView, before: int) -> str | None:
    """The split the latest earlier round favoured, from what every peer can see: most
    prevotes, then the electors' best mean score, then the lowest id; if its author refined it since, the
    newest refinement stands in for it (it answers the feedback)."""
    if n.tally is None:
        return None
    leader = n.tally.leader(before, exclude=(NIL, LEAF), rank=lambda pid: -_mean(n, pid))
    if leader is None:
        return None
    pv = n.proposal(leader)
    if pv is None:
        return None
    refinements = [p for p in n.proposals if p.author == pv.author and p.refines is not None
                   and (p.wall, p.id) > (pv.wall, pv.id)]
    if refinements:
        leader = max(refinements, key=lambda p: (p.wall, p.id)).id
    return leader


def likely_split(n: NodeView) -> str | None:
    """The split a quorum prevoted on the undecided node ``n`` (its latest polka), if any:
    what is decided next unless a later round overtakes it."""
    if n.decided is not None or n.tally is None:
        return None
    polka = n.tally.latest_polka(before=n.tally.top_round + 1)
    if polka is None or polka[1] == LEAF or n.proposal(polka[1]) is None:
        return None
    return polka[1]


def _mean(n: NodeView, pid: str) -> float:
    """The tie-break between equally prevoted splits: the electors' mean score (the audit: one
    score from outside the electorate flipped which split every elector followed)."""
    pv = n.proposal(pid)
    return pv.mean_score(n.params.electorate) if pv else 0.0


def fallback_value(n: NodeView) -> str:
    """What every unlocked elector prevotes once the regular rounds ran out: the split most
    prevoted in the last regular round (a set of votes that stops changing once the electors
    moved on, so every peer ends up computing the same value), else LEAF: the node is executed
    as it is."""
    if n.tally is None:
        return LEAF
    return n.tally.most_prevoted(n.params.max_rounds, exclude=(NIL, LEAF),
                                 rank=lambda pid: -_mean(n, pid)) or LEAF
