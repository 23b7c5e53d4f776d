"""The roles' pure decisions: rounds, who votes when, convergence, refinement, executors."""

from agent.core.decide import (
    ProposeTask, RefineTask, Timing, choose_votes, decomposer_tasks, holds_claim, public_leader,
    ready_leaves, renewal_due, round_state, scorer_tasks,
)
from agent.core.plan import fold
from agent.core.scoring import Verdict, check_split, combine
from builders import T0, claim, goal, hello, ident, proposal, vote

U = ident("user")
D1, D2 = ident("d1"), ident("d2")
S = [ident(f"s{i}") for i in range(5)]
E1 = ident("e1")
TM = Timing(collection_window_ms=1000, round_timeout_ms=10_000, settle_ms=300, lease_ms=4000)


def setup(scorers=3, quorum=2, **kw):
    g = goal(U, scorers=scorers, quorum=quorum, **kw)
    return g, [g] + [hello(s, "scorer") for s in S[:scorers]]


def V(x, hard=False):
    return Verdict(x, x, x, f"fb {x}", hard)


def test_round_opens_after_collection_window_and_closes_when_all_voted():
    g, evs = setup()
    a = proposal(D1, g.id, ["Tokyo", "Kyoto"], wall=100)
    t = fold(evs + [a]).tree(T0 + 500)
    n = t.node(g.id)
    st = round_state(n, TM, T0 + 500)
    assert st.number == 1 and st.opens_at == T0 + 1100
    assert scorer_tasks(t, S[0].peer_id, TM, T0 + 500) == []
    t = fold(evs + [a]).tree(T0 + 1200)
    assert [x.round for x in scorer_tasks(t, S[0].peer_id, TM, T0 + 1200)] == [1]
    votes = [vote(S[0], g.id, a.id, approve=False, wall=1300), vote(S[1], g.id, a.id, approve=False, wall=1310)]
    # 2 of 3 rejected: quorum 2 is impossible, but a scorer's other votes may still be in
    # flight: the round closes one collection window after the last vote
    t = fold(evs + [a] + votes).tree(T0 + 1400)
    assert round_state(t.node(g.id), TM, T0 + 1400).number == 1
    t = fold(evs + [a] + votes).tree(T0 + 2400)
    st = round_state(t.node(g.id), TM, T0 + 2400)
    assert st.number == 2 and st.opens_at == T0 + 1310 + TM.round_timeout_ms
    assert scorer_tasks(t, S[2].peer_id, TM, T0 + 2400) == []
    tasks = decomposer_tasks(t, D1.peer_id, TM, T0 + 2400)
    assert len(tasks) == 1 and isinstance(tasks[0], RefineTask) and tasks[0].previous == a.id
    assert tasks[0].feedback == ()
    ref = proposal(D1, g.id, ["Tokyo food", "Kyoto temples"], wall=2500, refines=a.id)
    t = fold(evs + [a, ref] + votes).tree(T0 + 3600)
    assert decomposer_tasks(t, D1.peer_id, TM, T0 + 3600) == []  # already refined
    st = round_state(t.node(g.id), TM, T0 + 3600)
    assert st.number == 2 and st.opens_at == T0 + 3500
    assert [x.round for x in scorer_tasks(t, S[0].peer_id, TM, T0 + 3600)] == [2]


def test_round_times_out_and_leaf_round_after_max_rounds():
    g, evs = setup(max_rounds=1)
    a = proposal(D1, g.id, ["Tokyo", "Kyoto"], wall=100)
    v = [vote(S[0], g.id, a.id, approve=True, wall=1200)]
    t = fold(evs + [a] + v).tree(T0 + 1300)
    assert round_state(t.node(g.id), TM, T0 + 1300).number == 1
    now = T0 + 1200 + TM.round_timeout_ms
    st = round_state(fold(evs + [a] + v).tree(now).node(g.id), TM, now)
    assert st.number == 2 and st.leaf_round
    tasks = scorer_tasks(fold(evs + [a] + v).tree(now), S[1].peer_id, TM, now)
    assert tasks[0].leaf_round and tasks[0].proposals == ()
    (d,) = choose_votes(tasks[0], {})
    assert d.proposal is None and d.approve
    # nobody proposes fresh splits for a node in its leaf round
    assert decomposer_tasks(fold(evs + [a] + v).tree(now), D2.peer_id, TM, now) == []


def test_decomposer_proposes_once_per_open_node():
    g, evs = setup()
    t = fold(evs).tree(T0)
    assert [type(x) for x in decomposer_tasks(t, D1.peer_id, TM, T0)] == [ProposeTask]
    a = proposal(D1, g.id, ["Tokyo", "Kyoto"], wall=100)
    t = fold(evs + [a]).tree(T0 + 200)
    assert decomposer_tasks(t, D1.peer_id, TM, T0 + 200) == []
    assert len(decomposer_tasks(t, D2.peer_id, TM, T0 + 200)) == 1


def test_choose_votes_round_one_one_approval_best_acceptable():
    g, evs = setup()
    a = proposal(D1, g.id, ["Tokyo", "Kyoto"], wall=100)
    b = proposal(D2, g.id, ["Food", "Temples"], wall=110)
    t = fold(evs + [a, b]).tree(T0 + 2000)
    (task,) = scorer_tasks(t, S[0].peer_id, TM, T0 + 2000)
    ds = choose_votes(task, {a.id: V(0.6), b.id: V(0.8)})
    assert [d.approve for d in ds] == [False, True]
    ds = choose_votes(task, {a.id: V(0.6), b.id: V(0.9, hard=True)})
    assert [d.approve for d in ds] == [True, False]
    ds = choose_votes(task, {a.id: V(0.3), b.id: V(0.4)})
    assert not any(d.approve for d in ds)


def test_later_rounds_converge_on_the_public_leader():
    g, evs = setup(scorers=3, quorum=2)
    a = proposal(D1, g.id, ["Tokyo", "Kyoto"], wall=100)
    b = proposal(D2, g.id, ["Food", "Temples"], wall=110)
    c = proposal(ident("d3"), g.id, ["Day one", "Day two"], wall=120)
    r1 = [vote(S[0], g.id, a.id, wall=1500), vote(S[0], g.id, b.id, approve=False, wall=1500),
          vote(S[1], g.id, b.id, wall=1510), vote(S[1], g.id, a.id, approve=False, wall=1510),
          vote(S[2], g.id, c.id, wall=1520)]
    now = T0 + 1520 + TM.round_timeout_ms + 10
    t = fold(evs + [a, b, c] + r1).tree(now)
    n = t.node(g.id)
    assert n.accepted is None
    # a: 1 approval, mean over 2 votes; b: 1 approval; c: 1 approval, one vote. Tie on
    # approvals, then mean score: all builders' votes score the same, so the lowest id leads.
    lead = public_leader(n, 2)
    assert lead == min([a.id, b.id, c.id])
    for s in S[:3]:
        (task,) = scorer_tasks(t, s.peer_id, TM, now)
        own_best = max([a.id, b.id, c.id], key=lambda p: p != lead)  # each prefers another split
        ds = choose_votes(task, {a.id: V(0.6), b.id: V(0.6), c.id: V(0.6), own_best: V(0.9)})
        assert [d.proposal for d in ds if d.approve] == [lead]


def test_refinement_of_leader_stands_in():
    g, evs = setup()
    a = proposal(D1, g.id, ["Tokyo", "Kyoto"], wall=100)
    r1 = [vote(S[0], g.id, a.id, wall=1500), vote(S[1], g.id, a.id, approve=False, wall=1510),
          vote(S[2], g.id, a.id, approve=False, wall=1520)]
    ref = proposal(D1, g.id, ["Tokyo food", "Kyoto temples"], wall=2000, refines=a.id)
    other = proposal(D2, g.id, ["Hokkaido", "Okinawa"], wall=2100, refines=None)
    n = fold(evs + [a, ref, other] + r1).tree(T0 + 5000).node(g.id)
    assert public_leader(n, 2) == ref.id


def test_executor_helpers():
    g, evs = setup(max_depth=0)
    t = fold(evs).tree(T0 + 10)
    assert [n.id for n in ready_leaves(t)] == [g.id]
    c = claim(E1, g.id, 100, lease_ms=4000)
    t = fold(evs + [c]).tree(T0 + 200)
    assert ready_leaves(t) == [] and holds_claim(t, g.id, c.id)
    assert not renewal_due(t, g.id, c.id, TM, T0 + 200)
    assert renewal_due(t, g.id, c.id, TM, T0 + 2200)
    assert not holds_claim(fold(evs + [c]).tree(T0 + 4200), g.id, c.id)


def test_scoring_checks():
    c = check_split("Plan a two-week trip to Japan", ["Tokyo sights", "Tokyo sights!", "misc"])
    assert c.duplicates == 1 and c.vague == 1 and not c.clean
    c = check_split("Plan a two-week trip to Japan", ["Plan a trip to Japan", "Trip to Japan", "Kyoto"])
    assert c.repeats_parent == 2 and c.hard_fail
    c = check_split("Plan a two-week trip to Japan", ["Book flights to Tokyo", "Kyoto temples", "Osaka food"])
    assert c.clean and not c.hard_fail
    v = combine({"specificity": 0.9, "non_overlap": 0.9, "coverage": 0.9, "feedback": "ok"},
                check_split("Japan trip", ["Tokyo", "Tokyo"]))
    assert v.non_overlap == 0.5 and v.hard_fail and not v.acceptable


def test_result_problem():
    from agent.core.scoring import result_problem

    assert result_problem("1234567890") is not None
    assert result_problem("{{url}}} Two-week trip to Japan") is not None
    assert result_problem("Book the Nozomi from Tokyo to Kyoto at 9:00.") is None


def test_titles_without_words_are_vague():
    c = check_split("Plan a two-week trip to Japan", ["2022-02-29", "2022-02-30", "Kyoto temples"])
    assert c.vague == 2 and c.hard_fail


def test_verdict_without_llm_uses_the_checks_alone():
    from agent import work

    g, evs = setup()
    good = proposal(D1, g.id, ["Book flights to Tokyo", "Kyoto temples", "Osaka food"], wall=100)
    bad = proposal(D2, g.id, ["Plan a trip to Japan", "Trip to Japan"], wall=110)
    n = fold(evs + [good, bad]).tree(T0 + 200).node(g.id)
    pg, pb = n.proposals
    v = work.verdict_without_llm(n, pg)
    assert v.acceptable and v.non_overlap == 0.75  # 0.5 neutral LLM half + 1.0 from clean checks
    assert not work.verdict_without_llm(n, pb).acceptable
