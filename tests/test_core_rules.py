"""The fold's rules, one by one: intake (dependencies, electorate, causality, tasks, leases),
decisions (a quorum of precommits in one round, final whatever arrives later) and results
(valid only within their own lease; the earliest valid one counts)."""

import pytest

from agent.core.consensus import LEAF, NIL
from agent.core.intake import Intake, IntakeConfig, Status
from agent.core.plan import Plan, child_id, fold
from agent.core.reasons import Reason, Rejected
from agent.core.tree import NodeState, TaskKind, derive
from builders import (
    T0, claim, goal, ident, precommit, prevote, proposal, release, renew, result, score,
)

U = ident("user")
D1, D2 = ident("d1"), ident("d2")
S = [ident(f"s{i}") for i in range(7)]
E1, E2 = ident("e1"), ident("e2")
X = ident("stranger")


def apply_all(plan, evs):
    for e in evs:
        plan.apply(e)
    return plan


def refused(plan, e) -> Reason:
    with pytest.raises(Rejected) as ei:
        plan.apply(e)
    return ei.value.reason


def decide(node, value, voters, rnd=1, wall=100):
    out = []
    for i, s in enumerate(voters):
        out.append(prevote(s, node, value, rnd=rnd, wall=wall + i))
    for i, s in enumerate(voters):
        out.append(precommit(s, node, value, rnd=rnd, wall=wall + 10 + i))
    return out


# ----------------------------------------------------------------- decisions
def test_a_quorum_of_precommits_in_one_round_decides():
    g = goal(U, max_depth=2)
    a = proposal(D1, g.id, ["Tokyo", "Kyoto"], wall=10)
    plan = apply_all(Plan(), [g, a] + decide(g.id, a.id, S[:2])[:3])
    assert plan.decided(g.id) is None  # prevotes only count toward a polka, not a decision
    plan.apply(precommit(S[1], g.id, a.id, wall=200))
    assert plan.decided(g.id) == a.id
    t = derive(plan, T0 + 300)
    n = t.node(g.id)
    assert n.state is NodeState.SPLIT and n.decided_round == 1
    assert [c.id for c in n.children] == [child_id(a.id, 0), child_id(a.id, 1)]


def test_precommits_across_rounds_do_not_add_up():
    g = goal(U)
    a = proposal(D1, g.id, ["Tokyo", "Kyoto"], wall=10)
    plan = apply_all(Plan(), [g, a, precommit(S[0], g.id, a.id, rnd=1), precommit(S[1], g.id, a.id, rnd=2)])
    assert plan.decided(g.id) is None


def test_partition_flip_is_impossible_late_round_one_votes_never_overturn():
    """The audit's honest trigger: 3 scorers, quorum 2; in round 1 s1 prevotes X, s2 and s3
    prevote Y, but s3's votes are cut off by a partition; s1, s2 time out (precommit NIL); in
    round 2 both go for X and decide it. s3's round-1 votes arriving at heal change nothing
    (under the old 'lowest round wins' rule, Y took over after X's subtree was done)."""
    g = goal(U)
    x = proposal(D1, g.id, ["Tokyo", "Kyoto"], wall=10)
    y = proposal(D2, g.id, ["Food", "Temples"], wall=11)
    s1, s2, s3 = S[:3]
    seen = [g, x, y,
            prevote(s1, g.id, x.id, 1, 100), prevote(s2, g.id, y.id, 1, 101),
            precommit(s1, g.id, NIL, 1, 110), precommit(s2, g.id, NIL, 1, 111),
            prevote(s1, g.id, x.id, 2, 200), prevote(s2, g.id, x.id, 2, 201),
            precommit(s1, g.id, x.id, 2, 210), precommit(s2, g.id, x.id, 2, 211)]
    late = [prevote(s3, g.id, y.id, 1, 102), precommit(s3, g.id, y.id, 1, 112)]
    plan = apply_all(Plan(), seen)
    assert plan.decided(g.id) == x.id
    apply_all(plan, late)
    assert plan.decided(g.id) == x.id
    assert fold(late + seen).decided(g.id) == x.id


def test_votes_only_from_the_goals_electorate():
    g = goal(U, scorers=3)
    a = proposal(D1, g.id, ["Tokyo", "Kyoto"])
    plan = apply_all(Plan(), [g, a])
    # Sybil voters: fresh keys, back-dated round-1 approvals
    assert refused(plan, prevote(X, g.id, a.id, 1, 20)) is Reason.NOT_ELECTOR
    assert refused(plan, precommit(ident("sybil2"), g.id, a.id, 1, 21)) is Reason.NOT_ELECTOR
    assert refused(plan, precommit(S[5], g.id, a.id, 1, 22)) is Reason.NOT_ELECTOR  # a later scorer
    plan.apply(precommit(S[0], g.id, a.id, 1, 23))


def test_votes_on_a_node_at_the_depth_limit_are_refused():
    g = goal(U, max_depth=1)
    a = proposal(D1, g.id, ["Tokyo", "Kyoto"])
    plan = apply_all(Plan(), [g, a])
    assert refused(plan, prevote(S[0], child_id(a.id, 0), LEAF, 1, 30)) is Reason.TOO_DEEP


def test_equivocation_is_recorded_and_both_count():
    g = goal(U, scorers=4, quorum=3)
    a = proposal(D1, g.id, ["Tokyo", "Kyoto"])
    b = proposal(D2, g.id, ["Food", "Temples"])
    plan = apply_all(Plan(), [g, a, b, prevote(S[0], g.id, a.id), prevote(S[0], g.id, b.id, wall=21)])
    rt = plan.tally(g.id).rounds[1]
    assert S[0].peer_id in rt.equivocators
    assert S[0].peer_id in rt.prevotes[a.id] and S[0].peer_id in rt.prevotes[b.id]


def test_leaf_decision_makes_a_task():
    g = goal(U, max_depth=2)
    plan = apply_all(Plan(), [g] + decide(g.id, LEAF, S[:2]))
    n = derive(plan, T0 + 500).node(g.id)
    assert n.leaf and n.leaf_reason == "voted" and n.task is TaskKind.LEAF and n.state is NodeState.READY


# ----------------------------------------------------------------- intake
def test_events_wait_for_what_they_refer_to_and_are_never_backdated():
    g = goal(U)
    a = proposal(D1, g.id, ["Tokyo", "Kyoto"], wall=10)
    plan = Plan()
    assert plan.apply(a).pending
    sc = score(S[0], g.id, a.id)
    assert plan.apply(sc).pending
    out = plan.apply(g)
    assert {e.id for e in out.accepted} == {g.id, a.id, sc.id} and plan.pending_count == 0
    early = proposal(D2, g.id, ["Food", "Temples"], wall=-5)  # stamped before the goal
    assert refused(plan, early) is Reason.BACKDATED
    assert refused(plan, prevote(S[0], g.id, a.id, 1, wall=5)) is Reason.BACKDATED


def test_proposal_bounds():
    g = goal(U, max_depth=1, max_children=3)
    a = proposal(D1, g.id, ["Tokyo", "Kyoto"])
    plan = apply_all(Plan(), [g, a])
    assert refused(plan, proposal(D1, g.id, ["A1", "B2", "C3", "D4"], wall=11)) is Reason.TOO_MANY_CHILDREN
    assert refused(plan, proposal(D1, child_id(a.id, 0), ["A1", "B2"], wall=12)) is Reason.TOO_DEEP
    other = goal(U, wall=1, title="Another goal")
    b = proposal(D1, other.id, ["Peru", "Chile"], wall=13)
    apply_all(plan, [other, b])
    assert refused(plan, proposal(D2, g.id, ["X1", "Y2"], wall=14, refines=b.id)) is Reason.WRONG_NODE


def test_claims_only_on_tasks_within_the_lease_cap():
    g = goal(U, max_depth=1, max_lease_ms=60_000)
    a = proposal(D1, g.id, ["Tokyo", "Kyoto"], wall=10)
    plan = apply_all(Plan(), [g, a])
    # the root is not a task while it is being voted on: the claim waits, and is dropped if
    # it never becomes one (100 claims on the root were stored everywhere before)
    on_root = claim(E1, g.id, 50)
    assert plan.apply(on_root).pending
    leaf = child_id(a.id, 0)
    after = claim(E2, leaf, 125)  # stamped after the deciding precommits (110, 111)
    assert plan.apply(after).pending  # not in the tree until the split is decided
    pre = claim(E1, leaf, 60)  # a pre-claim: stamped before the split was decided
    assert plan.apply(pre).pending
    out = None
    for e in decide(g.id, a.id, S[:2], wall=100):
        out = plan.apply(e)
    assert out is not None and [e.id for e in out.accepted if e.body.type == "claim"] == [after.id]
    assert plan.is_pending(pre.id)  # never filed with its early stamp (it won every race before)
    assert plan.is_pending(on_root.id)  # the root becomes a task only when its children are done
    assert refused(plan, claim(E2, leaf, 200, lease_ms=3_600_000)) is Reason.LEASE_TOO_LONG
    intake = Intake(IntakeConfig(pending_ttl_ms=1000))
    for e in [g, a]:
        intake.offer(e, "t", T0)
    assert intake.offer(claim(E1, g.id, 50), "t", T0).status is Status.PENDING
    dropped = intake.due(T0 + 2000)
    assert [o.reason for o in dropped] == [Reason.NOT_CLAIMABLE]


def test_only_the_claimant_renews_releases_or_reports():
    g = goal(U, max_depth=0)
    c = claim(E1, g.id, 100)
    plan = apply_all(Plan(), [g, c])
    assert refused(plan, result(E2, g.id, c.id, 150)) is Reason.NOT_CLAIMANT
    assert refused(plan, renew(X, g.id, c.id, 150)) is Reason.NOT_CLAIMANT
    assert refused(plan, result(E1, g.id, c.id, 90)) is Reason.BACKDATED
    plan.apply(result(E1, g.id, c.id, 200))
    assert refused(plan, renew(E1, g.id, c.id, 300)) is Reason.AFTER_RESULT
    assert refused(plan, release(E1, g.id, c.id, 300)) is Reason.AFTER_RESULT


# ----------------------------------------------------------------- claims and results
def test_earliest_live_claim_holds_and_collisions_are_counted():
    g = goal(U, max_depth=0)
    c1, c2 = claim(E1, g.id, 100, lease_ms=1000), claim(E2, g.id, 150, lease_ms=1000)
    t = derive(fold([g, c2, c1]), T0 + 200)
    n = t.node(g.id)
    assert n.holder.id == c1.id and n.state is NodeState.CLAIMED and n.collisions == 1


def test_lapsed_lease_makes_the_task_claimable_and_the_next_claim_takes_over():
    g = goal(U, max_depth=0)
    c1 = claim(E1, g.id, 100, lease_ms=1000)
    plan = apply_all(Plan(), [g, c1, renew(E1, g.id, c1.id, 900, lease_ms=1000)])
    assert derive(plan, T0 + 1500).node(g.id).state is NodeState.CLAIMED  # renewed to 1900
    assert derive(plan, T0 + 1950).node(g.id).state is NodeState.READY
    c2 = claim(E2, g.id, 2000, lease_ms=1000)
    plan.apply(c2)
    n = derive(plan, T0 + 2100).node(g.id)
    assert n.holder.id == c2.id and n.takeovers == 1


def test_paused_executor_result_after_its_lease_lapsed_never_counts():
    """SIGSTOP past the lease: the resumed executor's result is stamped after its lease ended;
    the rival who took over keeps the counted result (it used to switch back)."""
    g = goal(U, max_depth=0)
    c1 = claim(E1, g.id, 100, lease_ms=6000)
    c2 = claim(E2, g.id, 7000, lease_ms=6000)
    r2 = result(E2, g.id, c2.id, 9000, output="the rival's work")
    plan = apply_all(Plan(), [g, c1, c2, r2])
    assert derive(plan, T0 + 9500).node(g.id).result["output"] == "the rival's work"
    plan.apply(result(E1, g.id, c1.id, 14_100, output="late work"))
    n = derive(plan, T0 + 15_000).node(g.id)
    assert n.result["output"] == "the rival's work" and n.late_results == 1 and n.executed_twice == 0


def test_a_release_ends_the_holding_not_the_lease_its_result_is_judged_by():
    g = goal(U, max_depth=0)
    c1 = claim(E1, g.id, 100, lease_ms=5000)
    plan = apply_all(Plan(), [g, c1, release(E1, g.id, c1.id, 300)])
    assert derive(plan, T0 + 400).node(g.id).state is NodeState.READY
    plan.apply(result(E1, g.id, c1.id, 500))
    # its author's word cannot take back time every peer saw it granted: a release stamped
    # before a result that arrived first would otherwise undo a done task
    assert plan.is_done(g.id)
    late = claim(E2, g.id, 100)
    plan = apply_all(Plan(), [g, late, result(E2, g.id, late.id, 1_200)])
    assert not plan.is_done(g.id)  # past its lease (1 s): never counts


def test_squatting_is_bounded_by_the_lease_cap():
    g = goal(U, max_depth=0, max_lease_ms=10_000)
    c = claim(X, g.id, 100, lease_ms=10_000)
    evs = [g, c] + [renew(X, g.id, c.id, 100 + i * 3000, lease_ms=10_000) for i in range(1, 10)]
    plan = apply_all(Plan(), evs)
    assert derive(plan, T0 + 10_050).node(g.id).state is NodeState.CLAIMED
    assert derive(plan, T0 + 10_150).node(g.id).state is NodeState.READY


def test_partition_double_execution_counts_the_earliest_valid_result():
    g = goal(U, max_depth=0)
    c1, c2 = claim(E1, g.id, 100, lease_ms=5000), claim(E2, g.id, 120, lease_ms=5000)
    r1, r2 = result(E1, g.id, c1.id, 3000, "side A"), result(E2, g.id, c2.id, 2000, "side B")
    n = derive(fold([g, c1, c2, r1, r2]), T0 + 4000).node(g.id)
    assert n.result["output"] == "side B" and n.executed_twice == 1


def test_synthesis_task_once_children_are_done():
    g = goal(U, max_depth=1)
    a = proposal(D1, g.id, ["Tokyo", "Kyoto"], wall=10)
    plan = apply_all(Plan(), [g, a] + decide(g.id, a.id, S[:2], wall=100))
    early = claim(E1, g.id, 300)
    assert plan.apply(early).pending
    k0, k1 = child_id(a.id, 0), child_id(a.id, 1)
    c0, c1 = claim(E1, k0, 400), claim(E2, k1, 400)
    synth = claim(E2, g.id, 650)  # stamped after both children's results
    apply_all(plan, [c0, c1, result(E1, k0, c0.id, 500)])
    assert plan.apply(synth).pending
    assert derive(plan, T0 + 600).node(g.id).state is NodeState.SPLIT
    out = plan.apply(result(E2, k1, c1.id, 600))
    assert [e.id for e in out.accepted if e.body.type == "claim"] == [synth.id]
    assert plan.is_pending(early.id)  # claimed before the children were done: never filed
    n = derive(plan, T0 + 700).node(g.id)
    assert n.task is TaskKind.SYNTHESIS and n.state is NodeState.CLAIMED and n.holder.id == synth.id


# ----------------------------------------------------------------- clocks
def test_an_event_from_a_fast_clock_is_held_until_due_and_does_not_drag_our_clock():
    intake = Intake(IntakeConfig(max_ahead_ms=2000, max_drift_ms=60_000))
    g = goal(U)
    assert intake.offer(g, "t", T0 + 10).ok
    future = proposal(D1, g.id, ["Tokyo", "Kyoto"], wall=30_000)
    off = intake.offer(future, "peer", T0 + 100)
    assert off.status is Status.HELD and future.id not in intake.plan
    assert intake.clock.last.wall < T0 + 1000  # not dragged 30 s ahead
    assert intake.offer(future, "peer", T0 + 100).reason is Reason.DUPLICATE
    assert intake.due(T0 + 20_000) == []
    released = intake.due(T0 + 28_000)
    assert [o.status for o in released] == [Status.ACCEPTED] and future.id in intake.plan
    far = proposal(D2, g.id, ["Food", "Temples"], wall=120_000)
    assert intake.offer(far, "peer", T0 + 100).reason is Reason.CLOCK_DRIFT


def test_own_events_are_stamped_after_what_we_have_seen():
    intake = Intake()
    g = goal(U, wall=5000)
    intake.offer(g, "t", T0 + 5000)
    ev = intake.sign(D1, proposal(D1, g.id, ["Tokyo", "Kyoto"]).body, T0 + 1000)  # our clock is behind
    assert ev.hlc > g.hlc and ev.id in intake.plan


def test_restore_reaccepts_own_events_ahead_of_a_clock_that_went_back():
    intake = Intake()
    g = goal(U, wall=50_000)
    restored = Intake()
    assert restored.restore([g], T0) == []
    assert g.id in restored.plan and restored.clock.last.wall >= g.hlc.wall
    assert intake.offer(g, "t", T0).status is Status.HELD  # while as news it would be held
