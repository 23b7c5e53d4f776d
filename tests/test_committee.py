"""Committees (issue 22): a goal's electorate drawn from its pool by a rule every peer checks,
a node's home decomposers, and the simulator's swarms with more scorers and decomposers than
a goal or a node takes."""

import pytest
from hypothesis import given, settings, strategies as st

from agent.behaviour import Decomposer, Timing
from agent.behaviour.effects import Ask, SyncDone, SyncPeers
from agent.core import committee, rendezvous
from agent.core.events import Goal, PlanParams
from agent.core.plan import Plan, fold
from agent.core.reasons import Reason, Rejected
from agent.core.tree import derive
from agent.drivers.sim import Faults, SimConfig, Simulation
from builders import T0, ev, hello, ident, proposal

SCORERS = [ident(f"pool-scorer-{i}").peer_id for i in range(20)]
USER = ident("committee-user")


def committee_goal(who=USER, scorers=SCORERS, k=7, title="Plan a two-week trip to Japan", description=""):
    seed = committee.seed(who.peer_id, title, description)
    params = PlanParams.of(scorers, committee=k, seed=seed, max_depth=2, max_children=4, max_rounds=2,
                           author=who.peer_id)
    return Goal(title=title, description=description, params=params)


def refusal(body, who=USER):
    try:
        Plan().apply(ev(who, body, 0))
    except Rejected as exc:
        return exc.reason
    return None


# ----------------------------------------------------------------- the draw
@settings(max_examples=200, deadline=None)
@given(st.lists(st.integers(0, 400), min_size=1, max_size=60, unique=True), st.integers(1, 9),
       st.text(max_size=20), st.randoms(use_true_random=False))
def test_the_draw_is_the_same_for_any_order_and_a_dead_peer_moves_one_place(ids, k, key, rnd):
    peers = [f"peer-{i}" for i in ids]
    shuffled = peers[:]
    rnd.shuffle(shuffled)
    drawn = committee.draw(key, peers, k)
    assert drawn == committee.draw(key, shuffled + peers[:3], k)  # order and repeats do not matter
    assert len(drawn) == min(k, len(peers)) and set(drawn) <= set(peers) and list(drawn) == sorted(drawn)
    outside = [p for p in peers if p not in drawn]
    if outside:  # a peer outside the committee leaving changes nothing
        assert committee.draw(key, [p for p in peers if p != outside[0]], k) == drawn
    gone = drawn[0]  # one inside leaving: the rest stay, one comes in
    again = committee.draw(key, [p for p in peers if p != gone], k)
    assert set(drawn) - {gone} <= set(again) and len(set(again) - set(drawn)) == (1 if outside else 0)


def test_the_draw_spreads_goals_over_the_scorers():
    seats = {s: 0 for s in SCORERS}
    for i in range(400):
        for s in committee.draw(f"goal {i}", SCORERS, 5):
            seats[s] += 1
    assert sum(seats.values()) == 2000
    assert min(seats.values()) > 50 and max(seats.values()) < 160, seats  # 100 each on average


def test_the_rendezvous_rule_is_the_executors_and_the_rapporteurs():
    from agent.behaviour.executor import home_of
    from agent.behaviour.scorer import rapporteur

    assert home_of("task-1", SCORERS) == rendezvous.first("task-1", SCORERS) == rendezvous.top("task-1", SCORERS, 3)[0]
    assert rapporteur("slot#v1", tuple(SCORERS)) == rendezvous.first("slot#v1", SCORERS)


# ----------------------------------------------------------------- the goal
def test_more_scorers_than_the_committee_give_a_pool_and_a_drawn_electorate():
    g = committee_goal()
    p = g.params
    assert p.committee == 7 and p.pool == tuple(sorted(SCORERS)) and len(p.electorate) == 7
    assert set(p.electorate) <= set(p.pool) and p.quorum == 4
    assert p.electorate == committee.draw(committee.seed(USER.peer_id, g.title, ""), SCORERS, 7)
    assert refusal(g) is None


def test_a_pool_no_larger_than_the_committee_is_the_electorate_written_as_before():
    few = SCORERS[:7]
    g = committee_goal(scorers=few)
    assert g.params.electorate == tuple(sorted(few)) and g.params.committee == 0 and g.params.pool == ()
    plain = Goal(title=g.title, params=PlanParams.of(few, max_depth=2, max_children=4, max_rounds=2))
    assert ev(USER, g, 0).raw == ev(USER, plain, 0).raw  # same bytes: small swarms are unchanged
    assert b"pool" not in ev(USER, g, 0).raw and b"committee" not in ev(USER, g, 0).raw


def test_a_goal_naming_its_friends_out_of_the_pool_is_refused():
    g = committee_goal()
    p = g.params
    friend = next(s for s in p.pool if s not in p.electorate)
    packed = tuple(sorted(p.electorate[1:] + (friend,)))
    forged = g.model_copy(update={"params": p.model_copy(update={"electorate": packed})})
    assert refusal(forged) is Reason.BAD_ELECTORATE


def test_the_draw_is_bound_to_its_author_and_its_words():
    g = committee_goal()
    other = ident("someone-else")
    theirs = committee_goal(who=other)
    if theirs.params.electorate != g.params.electorate:
        assert refusal(g, who=other) is Reason.BAD_ELECTORATE  # another author's copy
    reworded = g.model_copy(update={"title": "Plan a two-week trip to Japan in May"})
    if committee_goal(title=reworded.title).params.electorate != g.params.electorate:
        assert refusal(reworded) is Reason.BAD_ELECTORATE
    # at least one of the two really differs (400 scorers' worth of luck otherwise)
    assert (theirs.params.electorate != g.params.electorate
            or committee_goal(title=reworded.title).params.electorate != g.params.electorate)


def test_the_author_may_sit_on_its_own_committee_and_nobody_else_besides():
    me = ident("page-person")
    g = committee_goal(who=me, scorers=SCORERS + [me.peer_id])
    assert me.peer_id in g.params.electorate and len(g.params.electorate) == 8 and g.params.quorum == 5
    assert refusal(g, who=me) is None
    stranger = ident("stranger").peer_id
    with pytest.raises(ValueError):  # two outside the pool: not a committee
        g.params.model_copy(update={"electorate": tuple(sorted(g.params.electorate + (stranger,)))}).__class__(
            **{**g.params.model_dump(), "electorate": tuple(sorted(g.params.electorate + (stranger,))),
               "quorum": 5})
    swapped = tuple(sorted(set(g.params.electorate) - {me.peer_id} | {stranger}))
    forged = g.model_copy(update={"params": g.params.model_copy(update={"electorate": swapped})})
    assert refusal(forged, who=me) is Reason.BAD_ELECTORATE


def test_a_pool_for_a_committee_it_cannot_fill_is_malformed():
    with pytest.raises(ValueError, match="pool"):
        PlanParams(electorate=tuple(sorted(SCORERS[:3])), quorum=2, max_depth=1, max_children=3, max_rounds=1,
                   pool=tuple(sorted(SCORERS[:3])), committee=3)
    with pytest.raises(ValueError, match="committee"):
        PlanParams(electorate=tuple(sorted(SCORERS[:3])), quorum=2, max_depth=1, max_children=3, max_rounds=1,
                   pool=tuple(sorted(SCORERS)))


# ----------------------------------------------------------------- home decomposers
def _ready(beh, evs, now):
    t = derive(fold(evs), now)
    out = beh.poll(t, now)
    sync = next(e for e in out if isinstance(e, SyncPeers))
    return beh.answered(sync.ticket, SyncDone(0, 2), t, now)


def test_a_node_not_mine_waits_for_its_home_decomposers_then_proposes_if_none_did():
    from builders import goal

    decs = [ident(f"home-dec-{i}") for i in range(6)]
    g = goal(USER, scorers=3)
    hellos = [hello(d, "decomposer") for d in decs]
    tm = Timing(startup_sync_ms=1000, decomposers_per_node=2, foreign_split_after_ms=30_000)
    home = set(rendezvous.top(g.id, [d.peer_id for d in decs], 2))
    away = [d for d in decs if d.peer_id not in home]
    at_home = [d for d in decs if d.peer_id in home]
    evs = [g, *hellos]

    d = Decomposer(away[0].peer_id, tm, seed=1)
    assert not [e for e in _ready(d, evs, T0 + 10) if isinstance(e, Ask)]  # not mine: wait
    assert not [e for e in d.poll(derive(fold(evs), T0 + 20_000), T0 + 20_000) if isinstance(e, Ask)]
    late = d.poll(derive(fold(evs), T0 + 30_011), T0 + 30_011)  # nobody proposed: I do
    assert [e for e in late if isinstance(e, Ask)]

    answered = evs + [ev(at_home[0], proposal(at_home[0], g.id, ["Flights", "Hotels"]).body, 50)]
    d2 = Decomposer(away[1].peer_id, tm, seed=1)
    _ready(d2, answered, T0 + 10)
    assert not [e for e in d2.poll(derive(fold(answered), T0 + 60_000), T0 + 60_000) if isinstance(e, Ask)]

    h = Decomposer(at_home[1].peer_id, tm, seed=1)  # a home decomposer proposes at once
    assert [e for e in _ready(h, evs, T0 + 10) if isinstance(e, Ask)]


# ----------------------------------------------------------------- the simulator
def _sim(seed, **kw):
    sim = Simulation(SimConfig(seed=seed, **kw))
    stats = sim.run()
    return sim, stats


@pytest.mark.parametrize("seed", [3, 8])
def test_a_swarm_of_15_scorers_and_8_decomposers_plans_with_a_committee_of_5(seed):
    sim, stats = _sim(seed, scorers=15, decomposers=8, committee=5, faults=Faults.parse("all"))
    assert sim.checker.ok, sim.checker.violations
    assert stats.done_ms is not None
    plan = sim.agents[-1].intake.plan
    electorate = set(sim.params.electorate)
    assert len(electorate) == 5 and len(sim.params.pool) >= 15
    voters = {e.author for e in plan.events.values() if e.type in ("vote", "score", "review")}
    honest = {a.me for a in sim.agents if a.role == "scorer"}
    assert voters & honest <= electorate  # scorers off the committee never judge nor vote
    for node in {e.body.node for e in plan.events.values() if e.type == "proposal"}:
        authors = {e.author for e in plan.events.values() if e.type == "proposal" and e.body.node == node}
        assert len(authors) <= 3 + 1, (node, len(authors))  # home decomposers (a fallback at most)


def test_committee_members_dying_leave_the_goal_decidable():
    """A committee of 5 (quorum 3) with two of its members dead from the start still plans."""
    probe = Simulation(SimConfig(seed=5, scorers=12, committee=5))
    dead = [a for a in probe.agents if a.me in probe.params.electorate][:2]
    script = tuple((1_000, "crash", a.name) for a in dead)
    sim = Simulation(SimConfig(seed=5, scorers=12, committee=5, script=script))
    assert sim.params == probe.params
    stats = sim.run()
    assert sim.checker.ok, sim.checker.violations
    assert stats.done_ms is not None
    plan = sim.agents[-1].intake.plan
    voters = {e.author for e in plan.events.values() if e.type == "vote"}
    assert not voters & {a.me for a in dead} and len(voters) == 3


# ----------------------------------------------------------------- executors per task
def test_another_executors_task_is_taken_over_by_its_next_few_only_then_by_anyone():
    from agent.behaviour import Executor
    from agent.behaviour.effects import Publish
    from agent.core.events import Claim
    from builders import goal

    execs = [ident(f"task-exec-{i}") for i in range(8)]
    tm = Timing(startup_sync_ms=1000, steal_after_ms=3000, executors_per_task=3, foreign_claim_after_ms=30_000)
    hellos = [hello(e, "executor", wall=1) for e in execs]
    g = goal(USER, max_depth=0, wall=1990)  # the goal itself is the task
    peers = sorted(e.peer_id for e in execs)
    ranked = rendezvous.top(g.id, peers, 8)
    next_few = [e for e in execs if e.peer_id in ranked[1:3]]  # the home (ranked[0]) is busy
    far = [e for e in execs if e.peer_id in ranked[3:]]

    def claims(who, now):
        x = Executor(who.peer_id, tm, seed=1)
        _ready(x, hellos, T0 + 10)
        evs = hellos + [g]
        x.poll(derive(fold(evs), T0 + 2000), T0 + 2000)  # it sees the task ready
        out = x.poll(derive(fold(evs), now), now)
        return [e for e in out if isinstance(e, Publish) and isinstance(e.body, Claim)]

    assert all(claims(e, T0 + 5_100) for e in next_few)  # ready for 3.1 s: its next two take it
    assert not any(claims(e, T0 + 5_100) for e in far)  # the other five wait
    assert all(claims(e, T0 + 32_100) for e in far)  # ready for 30 s: anyone


def test_the_committee_bench_reports_fewer_judgments_per_decision_than_every_scorer_voting():
    from agent.bench.committees import run, table

    every = run(11, 0, [1])
    five = run(11, 5, [1])
    assert every.failed == five.failed == 0 and every.electorate == 11 and five.electorate == 5
    assert five.judgments_per_decision < every.judgments_per_decision * 0.75
    assert five.deliveries_per_decision < every.deliveries_per_decision
    assert "| 11 | " in table([every, five]) and "| all |" in table([every])
