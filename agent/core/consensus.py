"""Deciding a node: two-phase voting rounds among the goal's fixed electorate (pure).

The rule the fold applies is one line: a value (a proposal, or LEAF) is decided at a node when
a quorum of electors precommitted it in one round. Everything that makes that safe lives in
how honest electors vote (``agent.behaviour.scorer``), in the manner of Tendermint
(Buchman, Kwon, Milosevic 2018), without a proposer:

- an elector casts at most one prevote and one precommit per round, rounds in increasing order;
- it precommits a value only after seeing a quorum of prevotes for it in that round (a
  *polka*), and is then *locked* on it;
- in a later round it prevotes its locked value, unless it has seen a polka for another value
  in a round at or after its lock (then that value); unlocked, it prevotes what it judges best.

Safety (never two decided values, whatever the delays, losses, partitions, crashes, restarts
or pauses) holds while fewer than 2q - n electors lie (equivocate, ignore their locks); with
the default majority quorum that means electors are trusted not to lie, and with n = 3f + 1,
q = 2f + 1 up to f may. Timing decides only liveness. Because the decided value can never
change once a quorum of precommits exists, the fold may judge it over whatever votes it holds:
a late vote from a partition or a restarted elector can add to the tally but never overturn.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, Iterable

from .events import LEAF, NIL, Event

__all__ = ["LEAF", "NIL", "RoundTally", "Tally", "tally"]


@dataclass
class RoundTally:
    number: int
    prevotes: dict[str, set[str]] = field(default_factory=dict)  # value -> electors
    precommits: dict[str, set[str]] = field(default_factory=dict)
    prevoters: set[str] = field(default_factory=set)
    precommitters: set[str] = field(default_factory=set)
    equivocators: set[str] = field(default_factory=set)  # two values in one phase of this round

    def polka(self, quorum: int) -> str | None:
        """The value (possibly NIL) a quorum prevoted in this round, if any."""
        return _quorum_value(self.prevotes, quorum)

    def committed(self, quorum: int) -> str | None:
        """The non-NIL value a quorum precommitted in this round, if any."""
        v = _quorum_value(self.precommits, quorum, skip_nil=True)
        return v

    def voters(self) -> set[str]:
        return self.prevoters | self.precommitters

    def vote_of(self, elector: str, phase: str) -> str | None:
        """What ``elector`` voted in ``phase`` of this round (the lowest value if it voted two)."""
        book = self.prevotes if phase == "prevote" else self.precommits
        for value, who in sorted(book.items()):
            if elector in who:
                return value
        return None

    def most_prevoted(self, exclude: tuple[str, ...] = (NIL,),
                      rank: Callable[[str], Any] | None = None) -> str | None:
        """The value most electors prevoted in this round (``exclude`` left out); ties go to
        the lowest ``rank`` then the lowest value, so every peer reads the same one."""
        counts = {v: len(w) for v, w in self.prevotes.items() if v not in exclude}
        if not counts:
            return None
        if rank is None:
            return min(counts, key=lambda v: (-counts[v], v))
        return min(counts, key=lambda v: (-counts[v], rank(v), v))

    def to_json(self, quorum: int | None = None) -> dict[str, Any]:
        """The round as it is shown: who voted what; with ``quorum``, what it came to."""
        out: dict[str, Any] = {
            "round": self.number,
            "prevotes": {v: sorted(w) for v, w in sorted(self.prevotes.items())},
            "precommits": {v: sorted(w) for v, w in sorted(self.precommits.items())},
        }
        if quorum is not None:
            out.update(polka=self.polka(quorum), committed=self.committed(quorum),
                       equivocators=sorted(self.equivocators))
        return out


def _quorum_value(by_value: dict[str, set[str]], quorum: int, skip_nil: bool = False) -> str | None:
    # With more liars than the safety bound two values could both reach a quorum: the lowest
    # value id is taken so every agent still agrees (see the module doc for the bound).
    hits = sorted(v for v, who in by_value.items() if len(who) >= quorum and not (skip_nil and v == NIL))
    return hits[0] if hits else None


@dataclass
class Tally:
    rounds: dict[int, RoundTally]
    quorum: int
    decided: str | None = None  # a proposal id or LEAF
    decided_round: int | None = None

    def round(self, number: int) -> RoundTally:
        return self.rounds.get(number) or RoundTally(number)

    @property
    def top_round(self) -> int:
        return max(self.rounds, default=0)

    # ---------------------------------------------------------------- one elector's readings
    def vote_of(self, elector: str, rnd: int, phase: str) -> str | None:
        rt = self.rounds.get(rnd)
        return None if rt is None else rt.vote_of(elector, phase)

    def lock_of(self, elector: str) -> tuple[int, str] | None:
        """(round, value) of the elector's highest-round precommit for something other than NIL."""
        for r in sorted(self.rounds, reverse=True):
            v = self.rounds[r].vote_of(elector, "precommit")
            if v is not None and v != NIL:
                return r, v
        return None

    def top_round_of(self, elector: str) -> int:
        return max((r for r, rt in self.rounds.items() if elector in rt.voters()), default=0)

    # ---------------------------------------------------------------- what every peer reads alike
    def jump_round(self, electorate_size: int, above: int) -> int | None:
        """The highest round above ``above`` in which enough electors voted that at least one of
        them is honest and live (n - q + 1): an elector that fell behind catches up there."""
        need = electorate_size - self.quorum + 1
        best = None
        for r, rt in self.rounds.items():
            if r > above and len(rt.voters()) >= need:
                best = r if best is None else max(best, r)
        return best

    def closed_rounds(self) -> int:
        """How many rounds visibly ended: a round is over once anyone voted in a later one, or
        once a quorum precommitted in it (without deciding, when the node is undecided)."""
        closed = 0
        top = self.top_round
        for r in range(1, top + 1):
            rt = self.rounds.get(r)
            if r < top or (rt is not None and len(rt.precommitters) >= self.quorum):
                closed = r
        return closed

    def leader(self, before: int, exclude: tuple[str, ...] = (NIL,),
               rank: Callable[[str], Any] | None = None) -> str | None:
        """The value most prevoted in the latest round before ``before`` that has any prevotes
        (``exclude`` left out; ties as in ``RoundTally.most_prevoted``)."""
        for r in range(before - 1, 0, -1):
            rt = self.rounds.get(r)
            if rt is None:
                continue
            value = rt.most_prevoted(exclude, rank)
            if value is not None:
                return value
        return None

    def most_prevoted(self, rnd: int, exclude: tuple[str, ...] = (NIL,),
                      rank: Callable[[str], Any] | None = None) -> str | None:
        rt = self.rounds.get(rnd)
        return None if rt is None else rt.most_prevoted(exclude, rank)

    def to_json(self, full: bool = False) -> list[dict[str, Any]]:
        return [self.rounds[r].to_json(self.quorum if full else None) for r in sorted(self.rounds)]

    def latest_polka(self, before: int) -> tuple[int, str] | None:
        """(round, value) of the highest-round non-NIL polka in a round < ``before``."""
        for r in sorted((r for r in self.rounds if r < before), reverse=True):
            v = self.rounds[r].polka(self.quorum)
            if v is not None and v != NIL:
                return r, v
        return None


def tally(votes: Iterable[Event], quorum: int) -> Tally:
    rounds: dict[int, RoundTally] = {}
    for v in votes:
        b = v.body
        rt = rounds.get(b.round)
        if rt is None:
            rt = rounds[b.round] = RoundTally(b.round)
        if b.phase == "prevote":
            book, who = rt.prevotes, rt.prevoters
        else:
            book, who = rt.precommits, rt.precommitters
        if v.author in who and v.author not in book.get(b.value, ()):
            rt.equivocators.add(v.author)
        who.add(v.author)
        book.setdefault(b.value, set()).add(v.author)
    t = Tally(rounds, quorum)
    for r in sorted(rounds):
        value = rounds[r].committed(quorum)
        if value is not None:
            t.decided, t.decided_round = value, r
            break
    return t
