"""Reading a node's rounds from one elector's point of view (pure helpers over the tally)."""

from __future__ import annotations

from agent.core.consensus import LEAF, NIL, Tally
from agent.core.tree import NodeView


def my_vote(t: Tally, me: str, rnd: int, phase: str) -> str | None:
    rt = t.rounds.get(rnd)
    if rt is None:
        return None
    book = rt.prevotes if phase == "prevote" else rt.precommits
    for value, who in sorted(book.items()):
        if me in who:
            return value
    return None


def my_lock(t: Tally, me: str) -> tuple[int, str] | None:
    """(round, value) of my highest-round precommit for something other than NIL."""
    for r in sorted(t.rounds, reverse=True):
        v = my_vote(t, me, r, "precommit")
        if v is not None and v != NIL:
            return r, v
    return None


def my_top_round(t: Tally, me: str) -> int:
    return max((r for r, rt in t.rounds.items() if me in rt.voters()), default=0)


def jump_round(t: Tally, electorate_size: int, above: int) -> int | None:
    """The highest round above ``above`` in which enough electors voted that at least one of
    them is honest and live (n - q + 1): an elector that fell behind catches up there."""
    need = electorate_size - t.quorum + 1
    best = None
    for r, rt in t.rounds.items():
        if r > above and len(rt.voters()) >= need:
            best = r if best is None else max(best, r)
    return best


def closed_rounds(n: NodeView) -> int:
    """How many rounds visibly ended without a decision: a round is over once anyone voted in
    a later one, or once a quorum precommitted in it without deciding."""
    t = n.tally
    if t is None or n.decided is not None:
        return 0
    closed = 0
    top = t.top_round
    for r in range(1, top + 1):
        rt = t.rounds.get(r)
        if r < top or (rt is not None and len(rt.precommitters) >= t.quorum):
            closed = r
    return closed


def public_leader(n: NodeView, before: int) -> str | None:
    """The split the latest earlier round favoured, from what every peer can see: most
    prevotes, then the best mean score, then the lowest id; if its author refined it since, the
    newest refinement stands in for it (it answers the feedback)."""
    t = n.tally
    if t is None:
        return None
    for r in range(before - 1, 0, -1):
        rt = t.rounds.get(r)
        if rt is None:
            continue
        counts = {v: len(w) for v, w in rt.prevotes.items() if v not in (NIL, LEAF)}
        if not counts:
            continue
        leader = min(counts, key=lambda pid: (-counts[pid], -_mean(n, pid), pid))
        pv = n.proposal(leader)
        if pv is None:
            return None
        refinements = [p for p in n.proposals if p.author == pv.author and p.refines is not None
                       and (p.wall, p.id) > (pv.wall, pv.id)]
        if refinements:
            leader = max(refinements, key=lambda p: (p.wall, p.id)).id
        return leader
    return None


def leader(t: Tally | None, before: int, exclude: tuple[str, ...] = (NIL,)) -> str | None:
    """The value most prevoted in the latest round before ``before`` that has any prevotes
    (``exclude`` left out), ties to the lowest value: what every peer reads the same way."""
    if t is None:
        return None
    for r in range(before - 1, 0, -1):
        rt = t.rounds.get(r)
        if rt is None:
            continue
        counts = {v: len(w) for v, w in rt.prevotes.items() if v not in exclude}
        if counts:
            return min(counts, key=lambda v: (-counts[v], v))
    return None


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
    pv = n.proposal(pid)
    return pv.mean_score() if pv else 0.0


def fallback_value(n: NodeView) -> str:
    """What every unlocked elector prevotes once the regular rounds ran out: the split most
    prevoted in the last regular round (a set of votes that stops changing once the electors
    moved on, so every peer ends up computing the same value), else LEAF: the node is executed
    as it is."""
    t = n.tally
    rt = t.rounds.get(n.params.max_rounds) if t is not None else None
    if rt is None:
        return LEAF
    counts = {v: len(w) for v, w in rt.prevotes.items() if v not in (NIL, LEAF)}
    if not counts:
        return LEAF
    return min(counts, key=lambda pid: (-counts[pid], -_mean(n, pid), pid))
