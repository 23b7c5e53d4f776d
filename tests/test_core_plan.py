import pytest

from agent.core import plan as plan_mod
from agent.core.plan import Plan, child_id, fold
from agent.core.reasons import Reason, Rejected
from builders import (
    T0, claim, goal, hello, ident, proposal, release, renew, result, vote,
)

U = ident("user")
D1, D2 = ident("d1"), ident("d2")
S = [ident(f"s{i}") for i in range(5)]
E1, E2, E3 = ident("e1"), ident("e2"), ident("e3")


def base(scorers=3, quorum=2, **kw):
    g = goal(U, scorers=scorers, quorum=quorum, **kw)
    evs = [g] + [hello(s, "scorer") for s in S[:scorers]]
    return g, evs


def plan_of(evs):
    p = Plan()
    for e in evs:
        p.apply(e)
    return p


def rejected(p, e):
    with pytest.raises(Rejected) as ei:
        p.apply(e)
    return ei.value.reason


# ------------------------------------------------------------------ rejection reasons
def test_duplicate():
    g, evs = base()
    p = plan_of(evs)
    assert rejected(p, g) is Reason.DUPLICATE


def test_unknown_parent_waits_then_applies():
    g, evs = base()
    p = Plan()
    prop = proposal(D1, g.id, ["Tokyo", "Kyoto"])
    r = p.apply(prop)
    assert r.pending and r.waiting_for == "event:" + g.id and prop.id not in p
    assert rejected(p, prop) is Reason.DUPLICATE  # still pending: a replay is a duplicate
    out = p.apply(g)
    assert [e.id for e in out.accepted] == [g.id, prop.id]
    assert p.pending_count == 0


def test_vote_from_non_scorer_waits_and_never_counts():
    g, evs = base()
    prop = proposal(D1, g.id, ["Tokyo", "Kyoto"])
    p = plan_of(evs + [prop, hello(D1, "decomposer")])
    r = p.apply(vote(D1, g.id, prop.id))
    assert r.pending and r.waiting_for == "scorer:" + D1.peer_id
    assert p.tree().node(g.id).rounds == {}


def test_too_deep_and_too_many_children():
    g, evs = base(max_depth=1, max_children=3)
    prop = proposal(D1, g.id, ["Tokyo", "Kyoto"])
    p = plan_of(evs + [prop])
    assert rejected(p, proposal(D1, child_id(prop.id, 0), ["Shibuya", "Asakusa"])) is Reason.TOO_DEEP
    assert rejected(p, proposal(D2, g.id, ["a1", "b2", "c3", "d4"])) is Reason.TOO_MANY_CHILDREN


def test_unknown_subgoal_index_is_rejected():
    g, evs = base()
    prop = proposal(D1, g.id, ["Tokyo", "Kyoto"])
    p = plan_of(evs + [prop])
    assert rejected(p, proposal(D1, child_id(prop.id, 7), ["x1", "y2"])) is Reason.UNKNOWN_DEPENDENCY


def test_bad_round_and_wrong_node():
    g, evs = base(max_rounds=2)
    g2 = goal(U, wall=5, title="Another goal")
    prop = proposal(D1, g.id, ["Tokyo", "Kyoto"])
    p = plan_of(evs + [g2, prop])
    assert rejected(p, vote(S[0], g.id, prop.id, rnd=4)) is Reason.BAD_ROUND
    assert rejected(p, vote(S[0], g2.id, prop.id)) is Reason.WRONG_NODE
    assert rejected(p, proposal(D2, g2.id, ["x1", "y2"], refines=prop.id)) is Reason.WRONG_NODE


def test_not_claimant_and_wrong_node_for_claims():
    g, evs = base(max_depth=0)
    g2 = goal(U, wall=5, title="Another goal", max_depth=0)
    c = claim(E1, g.id, 100)
    p = plan_of(evs + [g2, c])
    assert rejected(p, result(E2, g.id, c.id, 200)) is Reason.NOT_CLAIMANT
    assert rejected(p, renew(E2, g.id, c.id, 200)) is Reason.NOT_CLAIMANT
    assert rejected(p, result(E1, g2.id, c.id, 200)) is Reason.WRONG_NODE


def test_bad_params():
    p = Plan()
    assert rejected(p, goal(U, scorers=3, quorum=4)) is Reason.BAD_PARAMS


def test_pending_overflow(monkeypatch):
    monkeypatch.setattr(plan_mod, "MAX_PENDING", 2)
    g = goal(U)
    p = Plan()
    p.apply(proposal(D1, g.id, ["a1", "b2"]))
    p.apply(proposal(D2, g.id, ["c3", "d4"]))
    assert rejected(p, proposal(D1, g.id, ["e5", "f6"], wall=11)) is Reason.PENDING_OVERFLOW


# ------------------------------------------------------------------ rounds and acceptance
def test_quorum_accepts_and_children_appear():
    g, evs = base()
    a = proposal(D1, g.id, ["Tokyo", "Kyoto", "Osaka"])
    b = proposal(D2, g.id, ["Food", "Temples"], strategy="by activity")
    p = plan_of(evs + [a, b, vote(S[0], g.id, a.id), vote(S[1], g.id, b.id), vote(S[2], g.id, a.id, wall=30)])
    root = p.tree().node(g.id)
    assert root.accepted == a.id and root.accepted_round == 1 and root.state == "split"
    assert [c.title for c in root.children] == ["Tokyo", "Kyoto", "Osaka"]
    assert all(c.depth == 1 and c.state == "open" for c in root.children)


def test_split_vote_needs_second_round_and_lower_round_outranks():
    g, evs = base(scorers=5, quorum=3)
    a = proposal(D1, g.id, ["Tokyo", "Kyoto"])
    b = proposal(D2, g.id, ["Food", "Temples"])
    r1 = [vote(S[0], g.id, a.id), vote(S[1], g.id, a.id), vote(S[2], g.id, b.id),
          vote(S[3], g.id, b.id), vote(S[4], g.id, a.id, approve=False)]
    p = plan_of(evs + [a, b] + r1)
    assert p.tree().node(g.id).accepted is None
    r2 = [vote(s, g.id, b.id, rnd=2, wall=100) for s in S[:3]]
    p2 = plan_of(evs + [a, b] + r1 + r2)
    assert p2.tree().node(g.id).accepted == b.id
    late_r1 = vote(S[4], g.id, a.id, wall=500)  # round-1 quorum completed late still outranks round 2
    p3 = plan_of(evs + [a, b] + r1[:4] + r2 + [late_r1])
    n = p3.tree().node(g.id)
    assert (n.accepted, n.accepted_round) == (a.id, 1)


def test_equivocating_scorer_is_void_in_that_round():
    g, evs = base(scorers=3, quorum=2)
    a = proposal(D1, g.id, ["Tokyo", "Kyoto"])
    b = proposal(D2, g.id, ["Food", "Temples"])
    p = plan_of(evs + [a, b, vote(S[0], g.id, a.id), vote(S[0], g.id, b.id, wall=21), vote(S[1], g.id, a.id)])
    n = p.tree().node(g.id)
    assert n.accepted is None and S[0].peer_id in n.rounds[1].equivocators
    # the same scorer approving the same proposal twice is not equivocation
    p = plan_of(evs + [a, vote(S[0], g.id, a.id), vote(S[0], g.id, a.id, wall=22), vote(S[1], g.id, a.id)])
    assert p.tree().node(g.id).accepted == a.id


def test_leaf_vote_makes_node_a_leaf():
    g, evs = base(max_rounds=1)
    a = proposal(D1, g.id, ["Tokyo", "Kyoto"])
    p = plan_of(evs + [a, vote(S[0], g.id, None, rnd=2), vote(S[1], g.id, None, rnd=2)])
    n = p.tree().node(g.id)
    assert n.leaf and n.leaf_reason == "vote" and n.state == "ready"


def test_depth_limit_and_atomic_make_leaves_and_composite_done():
    g, evs = base(max_depth=1)
    a = proposal(D1, g.id, ["Tokyo", "Kyoto"])
    p = plan_of(evs + [a, vote(S[0], g.id, a.id), vote(S[1], g.id, a.id)])
    kids = p.tree().node(g.id).children
    assert all(k.leaf and k.leaf_reason == "max_depth" and k.state == "ready" for k in kids)
    more = []
    for i, k in enumerate(kids):
        c = claim(E1, k.id, 100 + i * 10)
        more += [c, result(E1, k.id, c.id, 105 + i * 10)]
    p2 = plan_of(evs + [a, vote(S[0], g.id, a.id), vote(S[1], g.id, a.id)] + more[:2])
    assert p2.tree().node(g.id).state == "split"
    p3 = plan_of(evs + [a, vote(S[0], g.id, a.id), vote(S[1], g.id, a.id)] + more)
    assert p3.tree().node(g.id).state == "done"
    g2, evs2 = base(max_depth=2)
    b = proposal(D1, g2.id, ["Book flights", "Tokyo"], atomic=(0,))
    t = plan_of(evs2 + [b, vote(S[0], g2.id, b.id), vote(S[1], g2.id, b.id)]).tree()
    k0, k1 = t.node(g2.id).children
    assert (k0.leaf, k0.leaf_reason) == (True, "atomic") and not k1.leaf


def test_claims_on_non_leaf_are_ignored():
    g, evs = base()
    p = plan_of(evs + [claim(E1, g.id, 100)])
    n = p.tree().node(g.id)
    assert n.state == "open" and n.claim is None


# ------------------------------------------------------------------ claims and leases
def leaf_plan(*extra):
    g, evs = base(max_depth=0)
    return g, plan_of(evs + list(extra))


def test_earliest_claim_wins_and_collisions_counted():
    g, _ = base(max_depth=0)
    c1, c2, c3 = claim(E2, g.id, 100), claim(E1, g.id, 100), claim(E3, g.id, 150)
    _, p = leaf_plan(c3, c1, c2)
    n = p.tree(T0 + 200).node(g.id)
    winner = min([(E1.peer_id, c2.id), (E2.peer_id, c1.id)])  # same HLC: lower peer id wins
    assert n.claim.holder == winner[0] and n.claim.claim == winner[1]
    assert n.collisions == 2 and n.state == "claimed"


def test_lease_expiry_makes_task_claimable_and_takeover():
    g, _ = base(max_depth=0)
    c1 = claim(E1, g.id, 100, lease_ms=1000)
    _, p = leaf_plan(c1)
    assert p.tree(T0 + 1099).node(g.id).state == "claimed"
    assert p.tree(T0 + 1100).node(g.id).state == "ready"
    c2 = claim(E2, g.id, 1200, lease_ms=1000)
    _, p = leaf_plan(c1, c2)
    n = p.tree(T0 + 1300).node(g.id)
    assert n.claim.holder == E2.peer_id and n.takeovers == 1 and n.collisions == 0


def test_renewal_extends_but_cannot_revive():
    g, _ = base(max_depth=0)
    c1 = claim(E1, g.id, 100, lease_ms=1000)
    _, p = leaf_plan(c1, renew(E1, g.id, c1.id, 900, lease_ms=1000))
    assert p.tree(T0 + 1800).node(g.id).state == "claimed"
    assert p.tree(T0 + 1900).node(g.id).state == "ready"
    _, p = leaf_plan(c1, renew(E1, g.id, c1.id, 1200, lease_ms=5000))
    assert p.tree(T0 + 1500).node(g.id).state == "ready"


def test_release_ends_lease():
    g, _ = base(max_depth=0)
    c1 = claim(E1, g.id, 100, lease_ms=10_000)
    _, p = leaf_plan(c1, release(E1, g.id, c1.id, 300))
    assert p.tree(T0 + 400).node(g.id).state == "ready"


def test_result_marks_done_and_blocks_takeover():
    g, _ = base(max_depth=0)
    c1 = claim(E1, g.id, 100, lease_ms=1000)
    r = result(E1, g.id, c1.id, 500, output="Itinerary")
    late = claim(E2, g.id, 5000)
    _, p = leaf_plan(c1, r, late)
    n = p.tree(T0 + 9000).node(g.id)
    assert n.state == "done" and n.result["output"] == "Itinerary" and n.collisions == 1


def test_fold_skips_invalid():
    g, evs = base()
    p = fold(evs + [goal(U, scorers=1, quorum=2, wall=3), g])
    assert len(p) == len(evs)
