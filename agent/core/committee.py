"""A goal's electoral committee: a bounded electorate drawn from the scorers its submitter
named, by a rule every peer checks from the goal event alone (pure: no clock, no I/O).

With many scorers, naming every one as the electorate makes every scorer judge every split
and every decision wait for a majority of them (per decision O(scorers) votes and judgments).
A goal may instead carry a *pool* (the live, credentialed scorers its submitter holds
connections to: ``agent.goals``) and a *committee* size k: its electorate is then exactly the
k scorers of the pool that rendezvous hashing (``agent.core.rendezvous``) ranks first for the
goal's seed (its author, title and description). The fold refuses a goal whose electorate is
not that draw (``bad_electorate``), so a submitter cannot name its friends out of the pool and
no scorer can choose the goals it judges. Everything else is the electorate's as before: the
quorum is a strict majority of the committee, its members must hold scorer credentials in a
swarm with an authority (``agent.core.membership``), and it is fixed for the goal's life.

What the rule cannot stop (stated in the README's threat model): the pool is the submitter's
word for who is live, so a submitter that leaves honest scorers out of it draws from fewer;
and a submitter can re-word its goal until the draw suits it (each try costs one hash per
pooled scorer). Only members the authority lets submit can do either.

Liveness: a committee of k with quorum q decides while q of its members vote; k - q may die
(5 of 7 die: the goal stalls, as an electorate of 7 would). A pool no larger than k is the
electorate itself, written as before (no pool, no committee): small swarms are unchanged."""

from __future__ import annotations

from typing import Iterable

from .rendezvous import top

MAX_POOL = 500  # scorers a goal may name as its pool: about 28 KB of the 64 KB an event may be


def seed(author: str, title: str, description: str) -> str:
    """What the draw ranks scorers by: fixed by the goal event itself."""
    return f"committee|{author}|{title}|{description}"


def draw(seed_text: str, pool: Iterable[str], k: int) -> tuple[str, ...]:
    """The committee of ``k`` for ``seed_text`` out of ``pool``, sorted (an electorate's order)."""
    return tuple(sorted(top(seed_text, pool, k)))


def pool_of(seed_text: str, scorers: Iterable[str]) -> tuple[str, ...]:
    """The pool a goal names out of the live scorers: all of them, or the MAX_POOL the draw
    ranks first (the committee is drawn from those, so it is the same either way), sorted."""
    return tuple(sorted(top(seed_text, scorers, MAX_POOL)))


def problem(author: str, title: str, description: str, electorate: tuple[str, ...],
            pool: tuple[str, ...], k: int) -> str | None:
    """Why a goal's electorate is not its committee, or None (also None without a committee)."""
    if not k:
        return None
    want = draw(seed(author, title, description), pool, k)
    if tuple(electorate) == want or tuple(electorate) == tuple(sorted(want + (author,))):
        return None  # the goal's author may sit on its own committee as one more elector
    return f"the electorate is not the committee of {k} drawn from its pool of {len(pool)}"

