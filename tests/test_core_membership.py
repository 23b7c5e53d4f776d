"""Membership in the fold, one rule at a time: credentials in hellos, what each role may author,
expiry judged by stamps, electorates of credentialed scorers, revocations; then the log's
rules that bind authors (claims only after their node became a task, a lease budget per
author) and the intake's bounds on what any author can make a peer hold."""

import pytest

from agent.core.events import EVENT_TYPES, Hello
from agent.core.intake import Intake, IntakeConfig, Status
from agent.core.membership import ROLES_FOR, Membership, credential_problem, issue_credential
from agent.core.plan import Plan, child_id, fold
from agent.core.slots import review_slot
from agent.core.reasons import Reason, Rejected
from agent.core.tree import NodeState, derive
from builders import (
    AUTHORITY, SWARM, T0, claim, credential, ev, goal, ident, member_hello, membership, precommit,
    prevote, proposal, release, renew, result, revoke, score, vote,
)

U, D, E1, E2, X = ident("user"), ident("dec"), ident("ex1"), ident("ex2"), ident("mallory")
S = [ident(f"s{i}") for i in range(3)]  # builders' default electorate
ELECT = [s.peer_id for s in S]


def hellos(wall=0):
    return ([member_hello(U, "submitter", wall), member_hello(D, "decomposer", wall),
             member_hello(E1, "executor", wall), member_hello(E2, "executor", wall)]
            + [member_hello(s, "scorer", wall) for s in S])


def mplan(*evs):
    plan = Plan(membership())
    for e in evs:
        plan.apply(e)
    return plan


def refused(plan, e) -> Reason:
    with pytest.raises(Rejected) as ei:
        plan.apply(e)
    return ei.value.reason


def decide(node, value, wall=100):
    return ([prevote(s, node, value, wall=wall + i) for i, s in enumerate(S[:2])]
            + [precommit(s, node, value, wall=wall + 10 + i) for i, s in enumerate(S[:2])])


# ----------------------------------------------------------------- credentials
def test_a_credential_is_the_authoritys_word_for_one_peer_swarm_and_time():
    cfg = membership()
    c = credential(E1, ["executor"])
    assert credential_problem(c, cfg) is None
    assert "authority" in credential_problem(credential(E1, ["executor"], authority=X), cfg)
    assert "swarm" in credential_problem(credential(E1, ["executor"], swarm="other"), cfg)
    forged = c.model_copy(update={"roles": ("executor", "scorer")})
    assert "signature" in credential_problem(forged, cfg)
    with pytest.raises(ValueError):
        issue_credential(AUTHORITY, E1.peer_id, ["king"], SWARM, T0, T0 + 1)
    with pytest.raises(ValueError):
        issue_credential(AUTHORITY, E1.peer_id, ["executor"], SWARM, T0 + 5, T0 + 5)


def test_a_hello_is_judged_by_its_own_credential_at_once():
    plan = mplan()
    assert refused(plan, ev(X, Hello(role="scorer"), 0)) is Reason.NOT_MEMBER
    stolen = credential(E1, ["executor"])
    assert refused(plan, member_hello(X, "executor", cred=stolen)) is Reason.BAD_CREDENTIAL
    assert refused(plan, member_hello(X, "executor", cred=credential(X, ["executor"], authority=X))) \
        is Reason.BAD_CREDENTIAL
    assert refused(plan, member_hello(X, "executor", role="scorer")) is Reason.ROLE_NOT_ALLOWED
    assert refused(plan, member_hello(X, "executor", wall=500, expires=400)) is Reason.CREDENTIAL_EXPIRED
    plan.apply(member_hello(X, "executor"))
    assert plan.roles[X.peer_id] == {"executor"}


def test_every_kind_of_event_has_its_roles_in_the_table():
    """A new event type needs one line in ROLES_FOR, or a swarm with an authority refuses it."""
    assert set(ROLES_FOR) == set(EVENT_TYPES) - {"hello", "revoke"}


def test_open_swarm_checks_nothing():
    g = goal(X, max_depth=0)
    plan = Plan()
    plan.apply(ev(X, Hello(role="scorer"), 0))
    plan.apply(g)
    plan.apply(claim(X, g.id, 50))
    assert len(plan) == 3


# ----------------------------------------------------------------- roles
def test_each_kind_comes_only_from_a_role_that_may_author_it():
    intake = Intake(IntakeConfig(member_ttl_ms=1000), Plan(membership()))
    for e in hellos():
        assert intake.offer(e, "peer", T0).ok
    g, g0 = goal(U, wall=10, max_depth=1), goal(U, wall=12, max_depth=0, title="a leaf goal")
    assert intake.offer(g, "peer", T0 + 10).ok and intake.offer(g0, "peer", T0 + 12).ok
    a = proposal(D, g.id, ["Tokyo", "Kyoto"], wall=20)
    wrong = [
        goal(D, wall=11, title="a decomposer's goal"),              # not a submitter
        proposal(S[0], g.id, ["Osaka", "Nara"], wall=21),            # not a decomposer
        claim(S[0], g0.id, 30),                                      # not an executor
        vote(E1, g.id, "leaf", wall=40),                             # not a scorer (nor elector)
        score(E1, g.id, a.id, wall=41),                              # not a scorer
    ]
    assert intake.offer(a, "peer", T0 + 20).ok
    for e in wrong:
        assert intake.offer(e, "peer", T0 + 50).status is Status.PENDING  # a credential may come
    out = intake.due(T0 + 2000)
    assert sorted(o.reason.value for o in out) == ["role_not_allowed"] * 5
    assert all(e.id not in intake.plan for e in wrong)
    assert intake.offer(claim(E1, g0.id, 60), "peer", T0 + 60).ok  # the executor may


def test_an_author_without_a_credential_waits_for_its_hello_whatever_the_order():
    g = goal(U, wall=10, max_depth=0)
    c = claim(E1, g.id, 50)
    evs = hellos() + [g, c]
    for order in (evs, evs[::-1]):
        plan = fold(order, membership())
        assert c.id in plan and g.id in plan
    plan = fold([e for e in evs if e.type != "hello" or e.author != E1.peer_id], membership())
    assert plan.is_pending(c.id)


def test_expiry_is_judged_by_the_events_stamp_and_a_renewed_credential_admits_later_ones():
    g = goal(U, wall=10, max_depth=0)
    first = member_hello(E1, "executor", wall=5, expires=1000)
    late = claim(E1, g.id, 1500)
    evs = [e for e in hellos() if e.author != E1.peer_id] + [g, first, late]
    plan = fold(evs, membership())
    assert plan.is_pending(late.id)  # stamped after its credential expired
    renewed = member_hello(E1, "executor", wall=900, issued=800, expires=10_000)
    for order in (evs + [renewed], [renewed] + evs):
        assert late.id in fold(order, membership())


def test_a_goals_electorate_must_be_credentialed_scorers():
    intake = Intake(IntakeConfig(member_ttl_ms=1000), Plan(membership()))
    for e in hellos():
        intake.offer(e, "peer", T0)
    packed = goal(U, wall=10, electorate=[X.peer_id, ident("sybil").peer_id, S[0].peer_id])
    assert intake.offer(packed, "peer", T0 + 10).status is Status.PENDING
    [out] = intake.due(T0 + 2000)
    assert out.reason is Reason.BAD_ELECTORATE and packed.id not in intake.plan
    assert intake.offer(goal(U, wall=20), "peer", T0 + 20).ok
    # an elector whose credential is an executor's is no scorer
    assert intake.offer(goal(U, wall=30, electorate=[E1.peer_id] + ELECT[:2]), "peer", T0 + 30).status \
        is Status.PENDING


# ----------------------------------------------------------------- revocation
def test_a_revocation_refuses_what_its_peer_stamps_after_it_in_any_order():
    g = goal(U, wall=10, max_depth=0)
    before = claim(E1, g.id, 50, lease_ms=10_000)
    before_result = result(E1, g.id, before.id, 60)
    g2 = goal(U, wall=70, title="a second goal", max_depth=0)
    after = claim(E1, g2.id, 300)
    rev = revoke(E1.peer_id, 200)
    evs = hellos() + [g, before, before_result, g2, after, rev]
    plans = [fold(evs, membership()), fold(evs[::-1], membership()), fold([rev] + evs[:-1], membership())]
    for p in plans:
        assert before.id in p and before_result.id in p and after.id not in p
        assert E1.peer_id not in p.roles  # no longer counted among the executors
    assert len({derive(p, T0 + 500).digest for p in plans}) == 1
    assert {frozenset(p.events) for p in plans} == {frozenset(plans[0].events)}


def test_a_goal_may_not_name_an_elector_revoked_before_it_in_any_order():
    """A decommissioned scorer keeps its filed hello (and a credential valid for months): the
    revocation, not the credential, is what takes it out of later electorates."""
    rev = revoke(S[2].peer_id, 100)
    late = goal(U, wall=150)  # names S[2], revoked at 100
    early = goal(U, wall=50, title="named before the revocation")
    evs = hellos() + [early, late, rev]
    for order in (evs, evs[::-1], [rev] + evs[:-1]):
        p = fold(order, membership())
        assert early.id in p and late.id not in p
    assert refused(mplan(*hellos(), rev), late) is Reason.BAD_ELECTORATE
    # a revocation arriving after the goal was filed takes the goal out again
    plan = mplan(*hellos(), late)
    assert late.id in plan
    out = plan.apply(rev)
    assert late.id not in plan and late.id in {e.id for e, _ in out.dropped}


def test_a_late_revocation_folds_the_plan_again_and_drops_what_depended_on_the_revoked():
    g = goal(U, wall=10, max_depth=1)
    bad = proposal(D, g.id, ["Tokyo", "Kyoto"], wall=300)  # stamped after the revocation
    plan = mplan(*hellos(), g, bad, *decide(g.id, bad.id, wall=310))
    assert plan.decided(g.id) == bad.id
    gen, version = plan.generation, plan.version
    prev = derive(plan, T0 + 400)
    out = plan.apply(revoke(D.peer_id, 200))
    assert plan.generation == gen + 1 and plan.version > version
    assert bad.id not in plan and plan.decided(g.id) is None
    assert {e.id for e, _ in out.dropped} >= {bad.id}
    again = derive(plan, T0 + 400, prev=prev)  # never reuses views of the plan before
    assert again.to_json() == derive(plan, T0 + 400).to_json()
    assert again.node(g.id).state is NodeState.OPEN and set(again.index) == {g.id}


def test_only_the_authority_revokes_and_an_open_swarm_has_none():
    assert refused(mplan(), revoke(E1.peer_id, 5, by=X)) is Reason.NOT_AUTHORITY
    assert refused(Plan(), revoke(E1.peer_id, 5)) is Reason.NOT_AUTHORITY


def test_intake_forgets_waits_a_refold_resolved():
    intake = Intake(IntakeConfig(), Plan(membership()))
    for e in hellos():
        intake.offer(e, "peer", T0)
    g = goal(U, wall=10, max_depth=0)
    intake.offer(g, "peer", T0 + 10)
    orphan = renew(E1, g.id, "0" * 64, 400)
    assert intake.offer(orphan, "peer", T0 + 400).status is Status.PENDING and intake.pending_count == 1
    intake.offer(claim(E1, g.id, 100), "peer", T0 + 400)
    intake.offer(revoke(E1.peer_id, 50), "peer", T0 + 400)
    assert intake.pending_count == 0 and not intake.plan.is_pending(orphan.id)


# ----------------------------------------------------------------- claims after tasks
def test_a_pre_claim_never_wins_and_is_refused_as_backdated():
    """N1: a claim stamped before its node was decided was parked, then filed with its early
    stamp, and won over the honest claim made after the decision."""
    intake = Intake(IntakeConfig(pending_ttl_ms=5_000))
    g = goal(U, wall=0, max_depth=1)
    a = proposal(D, g.id, ["Tokyo", "Kyoto"], wall=10)
    leaf = child_id(a.id, 0)
    for e in (g, a):
        intake.offer(e, "peer", T0 + 10)
    pre = claim(X, leaf, 50, lease_ms=300_000)
    assert intake.offer(pre, "peer", T0 + 50).status is Status.PENDING
    for e in decide(g.id, a.id, wall=100):
        intake.offer(e, "peer", T0 + 120)
    honest = claim(E1, leaf, 130)
    assert intake.offer(honest, "peer", T0 + 130).ok
    assert derive(intake.plan, T0 + 200).node(leaf).holder.id == honest.id
    [out] = intake.due(T0 + 6_000)
    assert out.reason is Reason.BACKDATED and pre.id not in intake.plan


def test_a_claim_waits_for_the_precommits_stamped_before_it_in_any_order():
    """Peers may hold different quorums of one decision: a claim made after a quorum its author
    saw is filed once those precommits arrive, whichever came first."""
    g = goal(U, wall=0, max_depth=1, scorers=5, quorum=3)  # the root is voted a leaf
    s = [ident(f"s{i}") for i in range(5)]
    early = [precommit(x, g.id, "leaf", wall=10 + i) for i, x in enumerate(s[:3])]
    late = [precommit(s[3], g.id, "leaf", wall=100)]
    c = claim(E1, g.id, 50)
    plan = fold([g, c] + late + early[:2])
    assert plan.decided(g.id) == "leaf" and plan.is_pending(c.id)  # by s0, s1 (before 50) and s3
    plan.apply(early[2])
    assert c.id in plan
    plan = fold([g] + early[1:] + late + [c])
    assert plan.decided(g.id) == "leaf" and plan.is_pending(c.id)  # decided, but only after 50
    plan.apply(early[0])
    assert c.id in plan


def test_a_synthesis_claim_made_before_the_children_were_done_never_counts():
    g = goal(U, wall=0, max_depth=1)
    a = proposal(D, g.id, ["Tokyo", "Kyoto"], wall=10)
    k0, k1 = child_id(a.id, 0), child_id(a.id, 1)
    c0, c1 = claim(E1, k0, 200), claim(E2, k1, 200)
    r0, r1 = result(E1, k0, c0.id, 300), result(E2, k1, c1.id, 400)
    pre = claim(X, g.id, 350)
    ok = claim(E2, g.id, 450)
    plan = fold([g, a, *decide(g.id, a.id), c0, c1, r0, r1, pre, ok])
    assert plan.is_pending(pre.id) and ok.id in plan


def test_a_claim_on_a_step_made_before_the_step_it_follows_was_done_never_counts():
    """A subgoal that follows another is a task only once that one is done: a claim stamped
    before then is a pre-claim, like one stamped before its node was decided."""
    g = goal(U, wall=0, max_depth=1)
    a = proposal(D, g.id, ["Book flights", "Book hotels"], wall=10, after={2: (1,)})
    k0, k1 = child_id(a.id, 0), child_id(a.id, 1)
    c0 = claim(E1, k0, 200)
    r0 = result(E1, k0, c0.id, 300)
    pre = claim(X, k1, 250, lease_ms=300_000)
    ok = claim(E2, k1, 350)
    for order in ([g, a, *decide(g.id, a.id), c0, pre, r0, ok], [ok, r0, pre, c0, *decide(g.id, a.id), a, g]):
        plan = fold(order)
        assert plan.is_pending(pre.id) and ok.id in plan
        assert derive(plan, T0 + 400).node(k1).holder.id == ok.id


def test_a_synthesis_claim_is_filed_on_the_review_that_made_a_child_done():
    """Seed 6259: a store that had the review accepting a child's result, but not yet the
    renewals that kept the result's lease alive, read the child as done (by the review) and
    its result as invalid (by the lease): the synthesis claim made on that tree waited, and an
    executor's own claim was refused. A reviewed attempt is done by its review alone."""
    g = goal(U, wall=0, max_depth=1, max_attempts=2)
    a = proposal(D, g.id, ["Tokyo", "Kyoto"], wall=10)
    k0, k1 = child_id(a.id, 0), child_id(a.id, 1)
    c0 = claim(E1, k0, 200, lease_ms=1_000)
    keep = renew(E1, k0, c0.id, 1_100, lease_ms=1_000)
    r0 = result(E1, k0, c0.id, 1_500)  # valid only with the renewal
    c1 = claim(E2, k1, 200)
    r1 = result(E2, k1, c1.id, 500)
    done = [c0, r0, *decide(review_slot(k0, 1), r0.id, wall=2_000),
            c1, r1, *decide(review_slot(k1, 1), r1.id, wall=600)]
    syn = claim(E2, g.id, 3_000)
    partial = fold([g, a, *decide(g.id, a.id), *done])
    assert partial.leases(k0).counted is None and partial.is_done(k0)
    partial.apply(syn)
    assert syn.id in partial
    early = claim(X, g.id, 1_800)  # after the result, before the review accepted it
    plan = fold([g, a, *decide(g.id, a.id), *done, keep, early])
    assert plan.leases(k0).counted.id == r0.id and plan.is_pending(early.id)


# ----------------------------------------------------------------- a lease budget per author
def test_re_claims_hold_a_task_for_max_lease_in_all_then_yield_to_others():
    """N1: four back-to-back claims held a leaf for 45 s on a 15 s cap."""
    g = goal(U, max_depth=0, max_lease_ms=15_000)
    squats = [claim(X, g.id, 100 + i * 15_000, lease_ms=15_000) for i in range(4)]
    plan = fold([g] + squats)
    for at in (5_000, 14_000):
        assert derive(plan, T0 + at).node(g.id).state is NodeState.CLAIMED
    for at in (16_000, 30_000, 44_000):
        n = derive(plan, T0 + at).node(g.id)
        assert n.state is NodeState.READY and n.holder.author == X.peer_id  # it yields
    honest = claim(E1, g.id, 20_000, lease_ms=6_000)
    plan.apply(honest)
    n = derive(plan, T0 + 21_000).node(g.id)
    assert n.holder.id == honest.id and n.state is NodeState.CLAIMED
    plan.apply(result(E1, g.id, honest.id, 25_000))
    assert derive(plan, T0 + 26_000).node(g.id).state is NodeState.DONE


def test_a_budget_counts_the_lease_granted_and_a_release_ends_only_the_holding():
    g = goal(U, max_depth=0, max_lease_ms=10_000)
    c1 = claim(E1, g.id, 100, lease_ms=6_000)
    rel = release(E1, g.id, c1.id, 2_100)  # gave it back after 2 s: others may take it now
    assert derive(fold([g, c1, rel]), T0 + 2_500).node(g.id).state is NodeState.READY
    c2 = claim(E1, g.id, 3_000, lease_ms=6_000)
    n = derive(fold([g, c1, rel, c2]), T0 + 5_000).node(g.id)
    assert n.state is NodeState.CLAIMED and n.holder.yield_from == T0 + 3_000 + 4_000  # 6 s of 10 spent
    n = derive(fold([g, c1, rel, c2]), T0 + 7_500).node(g.id)
    assert n.state is NodeState.READY and n.holder.id == c2.id  # a lone executor still holds it


def test_a_release_stamped_early_gives_no_time_back():
    """Audit: a release published late but stamped 1 ms after its claim made every peer count
    that claim as held for 1 ms, so each re-claim got the whole budget again: one executor held
    a task for 69 s of 69 on a 10 s cap."""
    cap = 10_000
    g = goal(U, max_depth=0, max_lease_ms=cap)

    def published(by: int) -> list:
        """Each re-claim comes with a release of the claim before, stamped 1 ms after it."""
        evs, prev = [g], None
        for i in range(6):
            at = 100 + i * (cap - 100)
            if at > by:
                break
            c = claim(X, g.id, at, lease_ms=cap)
            evs.append(c)
            if prev is not None:
                evs.append(release(X, g.id, prev.id, prev.hlc.wall - T0 + 1))
            prev = c
        return evs

    for at in range(cap + 500, 5 * cap, 1_000):
        n = derive(fold(published(at)), T0 + at).node(g.id)
        assert n.state is NodeState.READY, at  # its re-claims yield: anyone else may take it
    honest = claim(E1, g.id, 3 * cap)
    n = derive(fold(published(3 * cap) + [honest]), T0 + 3 * cap + 500).node(g.id)
    assert n.holder.id == honest.id and n.state is NodeState.CLAIMED


def test_a_release_stamped_before_its_authors_result_does_not_undo_a_done_task():
    """Audit: such a release made a counted result invalid, so a synthesis claim filed while
    the child was done stayed filed where it came first and waited where the release came
    first: two stores of one event set with different trees."""
    g = goal(U, wall=0, max_depth=1)
    a = proposal(D, g.id, ["Tokyo", "Kyoto"], wall=10)
    k0, k1 = child_id(a.id, 0), child_id(a.id, 1)
    c0, c1 = claim(E1, k0, 200, lease_ms=10_000), claim(E2, k1, 200, lease_ms=10_000)
    r0, r1 = result(E1, k0, c0.id, 300), result(E2, k1, c1.id, 300)
    syn = claim(E2, g.id, 400)
    rel = release(E1, k0, c0.id, 250)
    base = [g, a, *decide(g.id, a.id), c0, r0, c1, r1]
    first, last = fold(base + [syn, rel]), fold(base + [rel, syn])
    for plan in (first, last):
        assert plan.is_done(k0) and syn.id in plan
    assert derive(first, T0 + 500).digest == derive(last, T0 + 500).digest


# ----------------------------------------------------------------- intake bounds
def test_held_events_are_bounded_per_author_and_in_all():
    intake = Intake(IntakeConfig(held_per_author=3, held_max=5))
    g = goal(U)
    intake.offer(g, "peer", T0)
    ahead = [score(S[i % 3], g.id, "a" * 64, wall=30_000 + i) for i in range(7)]
    got = [intake.offer(e, "peer", T0).status for e in ahead]
    assert got[:5] == [Status.HELD] * 5 and intake.held_count == 5
    assert intake.stats.rejected["held_overflow"] == 2
    more = [score(S[0], g.id, "b" * 64, wall=30_100 + i) for i in range(2)]
    intake.due(T0 + 40_000)
    assert intake.held_count == 0
    assert [intake.offer(e, "peer", T0).status for e in more] == [Status.HELD] * 2


def test_hellos_without_a_credential_are_refused_before_they_are_held():
    """N5: 3,000 hellos from fresh keys stamped 59 s ahead were all held, then stored."""
    intake = Intake(IntakeConfig(), Plan(membership()))
    fresh = [ev(ident(f"sybil{i}"), Hello(role="scorer"), 59_000) for i in range(300)]
    got = [intake.offer(e, f"peer{i}", T0) for i, e in enumerate(fresh)]
    assert {o.reason for o in got} == {Reason.NOT_MEMBER} and intake.held_count == 0


def test_waiting_events_are_bounded_per_author_and_tighter_for_strangers():
    intake = Intake(IntakeConfig(pending_per_author=4, pending_per_stranger=2), Plan(membership()))
    for e in hellos():
        intake.offer(e, "peer", T0)
    g = goal(U)
    intake.offer(g, "peer", T0)
    mine = [score(S[0], g.id, f"{i:064x}", wall=10 + i) for i in range(6)]
    got = [intake.offer(e, "peer", T0 + 10).status for e in mine]
    assert got == [Status.PENDING] * 4 + [Status.REJECTED] * 2
    strange = [score(X, g.id, f"{i:064x}", wall=10 + i) for i in range(4)]
    got = [intake.offer(e, "peer", T0 + 10).status for e in strange]
    assert got == [Status.PENDING] * 2 + [Status.REJECTED] * 2
    assert intake.stats.rejected["pending_overflow"] == 4


def test_a_rate_per_author_and_what_is_exempt():
    cfg = IntakeConfig(author_rate=10, author_burst=20, fresh_window_ms=60_000, old_cost=0.1)
    intake = Intake(cfg)
    g = goal(U, max_depth=0)
    intake.offer(g, "peer", T0)
    flood = [score(X, g.id, f"{i:064x}", wall=100 + i) for i in range(40)]
    got = [intake.offer(e, "peer", T0 + 200).status for e in flood]
    assert got.count(Status.REJECTED) == 20 and intake.stats.rejected["rate_limited"] == 20
    # a second later: 10 more tokens
    got = [intake.offer(e, "peer", T0 + 1200).status for e in flood[20:]]
    assert got.count(Status.REJECTED) == 10
    # relayed by another peer's sync it costs a twentieth here (old_cost), no longer nothing: a
    # member relaying its other keys' floods passed any rate while relays were free; from the
    # author's own sync it costs in full
    later = T0 + 2200  # 10 tokens again
    relayed = [score(X, g.id, f"{i:064x}", wall=300 + i) for i in range(100, 250)]
    got = [intake.offer(e, "sync:someone", later).status for e in relayed]
    assert got.count(Status.PENDING) == 100 and got.count(Status.REJECTED) == 50
    own = [score(X, g.id, f"{i:064x}", wall=300 + i) for i in range(300, 305)]
    assert all(intake.offer(e, "sync:" + X.peer_id, later).reason is Reason.RATE_LIMITED for e in own)
    # an event that came by gossip is a duplicate when sync relays it: not charged again
    seen = score(E1, g.id, f"{999:064x}", wall=400)
    assert intake.offer(seen, "peer", later).status is Status.PENDING
    assert intake.offer(seen, "sync:someone", later).reason is Reason.DUPLICATE
    # claims have a bucket of their own on top (an executor works on one task at a time)
    claims = Intake(IntakeConfig(claim_rate=1, claim_burst=5))
    claims.offer(g, "peer", T0)
    got = [claims.offer(claim(X, g.id, 100 + i), "peer", T0 + 200).status for i in range(8)]
    assert got.count(Status.REJECTED) == 3 and claims.stats.rejected["rate_limited"] == 3
    # history (stamped long before our clock) costs a twentieth
    old = [score(E1, g.id, f"{i:064x}", wall=100 + i) for i in range(300, 450)]
    got = [intake.offer(e, "sync:" + E1.peer_id, T0 + 200_000).status for e in old]
    assert got.count(Status.REJECTED) == 0
