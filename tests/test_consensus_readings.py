"""The tally owns every reading of votes alone: what one elector voted, its lock, the round it
is in, the round to catch up to, the leader of earlier rounds, and how a round is shown."""

from agent.core.consensus import LEAF, NIL, tally
from builders import ident, precommit, prevote, vote

A, B, C, D, E = (ident(f"s{i}") for i in range(5))
g = "0" * 64  # a node id
p1, p2, p3, p9 = ("1" * 64, "2" * 64, "3" * 64, "9" * 64)  # splits
pa, pb = "a" * 64, "b" * 64


def test_one_electors_readings():
    t = tally([prevote(A, g, p1, 1), precommit(A, g, p1, 1),
               prevote(A, g, p2, 2), precommit(A, g, NIL, 2),
               prevote(B, g, p2, 3),
               vote(C, g, p9, 1), vote(C, g, p3, 1)], quorum=2)  # C equivocates
    assert t.vote_of(A.peer_id, 1, "precommit") == p1
    assert t.vote_of(A.peer_id, 2, "precommit") == NIL
    assert t.vote_of(A.peer_id, 3, "prevote") is None
    assert t.vote_of(C.peer_id, 1, "prevote") == p3  # the lowest of two: every peer reads the same
    assert t.lock_of(A.peer_id) == (1, p1)  # a NIL precommit is no lock
    assert t.lock_of(B.peer_id) is None
    assert t.top_round_of(A.peer_id) == 2 and t.top_round_of(B.peer_id) == 3
    assert t.top_round_of(D.peer_id) == 0
    assert t.rounds[1].equivocators == {C.peer_id}


def test_jump_and_closed_rounds():
    votes = [prevote(A, g, p1, 1), prevote(B, g, p1, 1), precommit(A, g, NIL, 1),
             precommit(B, g, NIL, 1), prevote(C, g, p1, 4), prevote(D, g, LEAF, 4)]
    t = tally(votes, quorum=3)  # n = 5: n - q + 1 = 3 voters in a round means a live honest one
    assert t.jump_round(5, above=1) is None  # round 4 has two voters
    t = tally(votes + [prevote(E, g, p1, 4)], quorum=3)
    assert t.jump_round(5, above=1) == 4 and t.jump_round(5, above=4) is None
    assert t.closed_rounds() == 3  # rounds 1-3 are over once anyone voted in round 4
    t = tally(votes[:4] + [precommit(C, g, NIL, 1)], quorum=3)
    assert t.closed_rounds() == 1  # a quorum precommitted in the top round without deciding


def test_leader_and_most_prevoted_break_ties_alike():
    t = tally([prevote(A, g, pb, 1), prevote(B, g, pa, 1), prevote(C, g, NIL, 1),
               prevote(D, g, NIL, 1), prevote(E, g, LEAF, 2)], quorum=3)
    assert t.most_prevoted(1) == pa  # NIL left out; a tie goes to the lowest value
    assert t.most_prevoted(1, exclude=()) == NIL
    assert t.most_prevoted(1, rank={pa: 1, pb: 0}.get) == pb  # the rank comes before the id
    assert t.leader(before=3) == LEAF  # the latest round with prevotes
    assert t.leader(before=3, exclude=(NIL, LEAF)) == pa  # round 2 has none but LEAF: round 1
    assert t.leader(before=1) is None and t.most_prevoted(7) is None


def test_shown_rounds():
    t = tally([prevote(A, g, p1, 1), prevote(B, g, p1, 1), precommit(A, g, p1, 1),
               precommit(B, g, p1, 1)], quorum=2)
    shown = t.to_json(full=True)
    assert shown == [{"round": 1, "prevotes": {p1: sorted([A.peer_id, B.peer_id])},
                      "precommits": {p1: sorted([A.peer_id, B.peer_id])},
                      "polka": p1, "committed": p1, "equivocators": []}]
    assert t.to_json() == [{k: shown[0][k] for k in ("round", "prevotes", "precommits")}]
