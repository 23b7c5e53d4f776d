"""Property tests of the fold: convergence, incrementality, decisions, claims, done-ness."""

from hypothesis import HealthCheck, find, given, settings, strategies as st

from agent.core.consensus import LEAF, NIL
from agent.core.events import REJECT
from agent.core.plan import Plan, child_id, fold
from agent.core.reasons import Rejected
from agent.core.slots import brief_slot, review_slot, task_key
from agent.core.tree import derive
from builders import (
    SCORERS, T0, brief, claim, goal, ident, precommit, prevote, proposal, release, renew, result, review, score,
)

USERS = [ident(f"user{i}") for i in range(2)]
DECOMP = [ident(f"dec{i}") for i in range(3)]
VOTERS = [ident(s) for s in SCORERS[:5]] + [ident("stranger")]  # the last is never an elector
EXECS = [ident(f"ex{i}") for i in range(3)]
WORDS = ["Tokyo", "Kyoto", "Osaka", "Food", "Temples", "Rail pass", "Budget", "Hotels", "Day one"]
SETTINGS = settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@st.composite
def event_sets(draw, honest_votes=False):
    scorers = draw(st.integers(1, 5))
    max_rounds = draw(st.integers(1, 3))
    user = draw(st.sampled_from(USERS))
    g = goal(user, wall=draw(st.integers(0, 5)), scorers=scorers, max_depth=draw(st.integers(0, 2)),
             max_children=4, max_rounds=max_rounds, brief=draw(st.sampled_from([False, False, True])),
             max_attempts=draw(st.sampled_from([0, 0, 2, 3])), token_budget=draw(st.sampled_from([0, 0, 40, 400])))
    evs = [g]
    nodes = [g.id]
    props = []
    briefs = []
    for _ in range(draw(st.integers(0, 3))):  # refused unless the goal settles a brief
        b = brief(draw(st.sampled_from(DECOMP + [user])), g.id, wall=draw(st.integers(5, 300)),
                  duration=draw(st.sampled_from(["14 days", "3 weeks"])))
        briefs.append(b)
        evs.append(b)
    for _ in range(draw(st.integers(0, 5))):
        node = draw(st.sampled_from(nodes))
        titles = draw(st.lists(st.sampled_from(WORDS), min_size=2, max_size=4, unique=True))
        refines = draw(st.sampled_from([None] + [p.id for p in props if p.body.node == node]))
        after = {i: (i - 1,) for i in range(2, len(titles) + 1) if draw(st.booleans())}
        p = proposal(draw(st.sampled_from(DECOMP)), node, titles, wall=draw(st.integers(10, 500)),
                     refines=refines, atomic=tuple(draw(st.sets(st.integers(0, 3), max_size=2))), after=after)
        props.append(p)
        evs.append(p)
        nodes += [child_id(p.id, i) for i in range(len(titles))]
        if draw(st.booleans()):
            evs.append(score(draw(st.sampled_from(VOTERS)), node, p.id, wall=draw(st.integers(500, 700)),
                             acceptable=draw(st.booleans())))
    used: set = set()
    for _ in range(draw(st.integers(0, 30))):
        node = draw(st.sampled_from(nodes + [brief_slot(g.id)]))
        values = [p.id for p in props if p.body.node == node] + [LEAF, NIL]
        if node == brief_slot(g.id):
            values = [b.id for b in briefs] + [LEAF, NIL]
        who = draw(st.sampled_from(VOTERS))
        rnd = draw(st.integers(1, max_rounds + 2))
        phase = draw(st.sampled_from(["prevote", "precommit"]))
        if honest_votes and (who.peer_id, node, rnd, phase) in used:
            continue  # an honest elector votes once per round and phase
        used.add((who.peer_id, node, rnd, phase))
        mk = prevote if phase == "prevote" else precommit
        evs.append(mk(who, node, draw(st.sampled_from(values)), rnd=rnd, wall=draw(st.integers(700, 2000))))
    if props and draw(st.booleans()):
        # a quorum of electors precommits one split (random votes alone rarely decide one, and
        # then done tasks below the root are too rare for the guard test to find)
        p = draw(st.sampled_from([q for q in props if q.body.node == g.id] or props))
        for i, who in enumerate(VOTERS[:scorers // 2 + 1]):
            if not honest_votes or (who.peer_id, p.body.node, 1, "precommit") not in used:
                used.add((who.peer_id, p.body.node, 1, "precommit"))
                evs.append(precommit(who, p.body.node, p.id, rnd=1, wall=1500 + i))
    claims = []
    if props and draw(st.booleans()):
        # and an executor claims one of its subgoals and answers it (done tasks under members
        # were about 1 in 150 sets without this)
        p = draw(st.sampled_from([q for q in props if q.body.node == g.id] or props))
        who = draw(st.sampled_from(EXECS))
        c = claim(who, task_key(child_id(p.id, 0), 1), wall=draw(st.integers(2000, 3000)), lease_ms=3000)
        claims.append(c)
        evs += [c, result(who, c.body.node, c.id, c.hlc.wall - T0 + draw(st.integers(1, 500)))]
    for _ in range(draw(st.integers(0, 8))):
        node = task_key(draw(st.sampled_from(nodes)), draw(st.sampled_from([1, 1, 2])))
        c = claim(draw(st.sampled_from(EXECS)), node, wall=draw(st.integers(2000, 5000)),
                  lease_ms=draw(st.sampled_from([500, 1000, 3000])), logical=draw(st.integers(0, 2)))
        claims.append(c)
        evs.append(c)
    for _ in range(draw(st.integers(0, 8))):
        if not claims:
            break
        c = draw(st.sampled_from(claims))
        kind = draw(st.sampled_from(["renew", "release", "result", "result"]))
        wall = c.hlc.wall - T0 + draw(st.integers(1, 3000))
        author = next(e for e in EXECS if e.peer_id == c.author)
        spent = draw(st.sampled_from([(0, 0), (30, 10)]))
        mk = {"renew": lambda: renew(author, c.body.node, c.id, wall, lease_ms=1000),
              "release": lambda: release(author, c.body.node, c.id, wall),
              "result": lambda: result(author, c.body.node, c.id, wall, tokens=spent)}[kind]
        evs.append(mk())
    # reviews of results and votes on their review slots (attempt 1; refused where not reviewed)
    results = [e for e in evs if e.type == "result"]
    for _ in range(draw(st.integers(0, 12)) if results else 0):
        r = draw(st.sampled_from(results))
        node = r.body.node.partition("#")[0]
        wall = r.hlc.wall - T0 + draw(st.integers(1, 500))
        if draw(st.booleans()):
            evs.append(review(draw(st.sampled_from(VOTERS)), node, r.id, accept=draw(st.booleans()), wall=wall))
            continue
        who = draw(st.sampled_from(VOTERS))
        rnd = draw(st.integers(1, max_rounds + 1))
        phase = draw(st.sampled_from(["prevote", "precommit"]))
        slot = review_slot(node, 1)
        if honest_votes and (who.peer_id, slot, rnd, phase) in used:
            continue
        used.add((who.peer_id, slot, rnd, phase))
        mk = prevote if phase == "prevote" else precommit
        evs.append(mk(who, slot, draw(st.sampled_from([r.id, REJECT, NIL])), rnd=rnd, wall=wall))
    return evs


def digests(plan, nows=(T0 + 300, T0 + 2500, T0 + 9000)):
    return [derive(plan, n).digest for n in nows]


@SETTINGS
@given(event_sets(), st.randoms(use_true_random=False), st.integers(0, 10))
def test_any_permutation_with_duplicates_folds_to_same_digest(evs, rnd, dups):
    base = digests(fold(evs))
    shuffled = evs + [rnd.choice(evs) for _ in range(dups)]
    rnd.shuffle(shuffled)
    assert digests(fold(shuffled)) == base


@SETTINGS
@given(event_sets(), st.randoms(use_true_random=False))
def test_incremental_equals_fold_from_scratch(evs, rnd):
    order = evs[:]
    rnd.shuffle(order)
    inc = Plan()
    for i, e in enumerate(order):
        try:
            inc.apply(e)
        except Rejected:
            pass
        if i % 4 == 3 or i == len(order) - 1:
            prefix = order[: i + 1]
            rnd.shuffle(prefix)
            assert digests(inc) == digests(fold(prefix))
            assert set(inc.events) == set(fold(prefix).events)


@SETTINGS
@given(event_sets(honest_votes=True))
def test_one_precommit_per_elector_and_round_never_decides_two_values_in_a_round(evs):
    plan = fold(evs)
    for node, ne in plan.by_node.items():
        t = plan.tally(node)
        for rt in t.rounds.values():
            reaching = [v for v, who in rt.precommits.items() if len(who) >= t.quorum and v != NIL]
            assert len(reaching) <= 1
        # only the goal's electorate is ever stored as a voter
        ref = plan.node_ref(node.partition("#")[0])
        if ref is not None and ne.votes:
            assert {v.author for v in ne.votes} <= set(plan.params(ref).electorate)


@SETTINGS
@given(event_sets(honest_votes=True), st.randoms(use_true_random=False))
def test_a_done_task_stays_done_whatever_arrives_later(evs, rnd):
    """Validity of a result depends only on its own claim and renewals: adding events can
    change which result counts (a partition's earlier one), never undo a done task, even a
    release its author stamped before its own result (the audit: that undid one, and the
    fold then depended on arrival order)."""
    order = evs[:]
    rnd.shuffle(order)
    plan = Plan()
    done: set[str] = set()
    for e in order:
        try:
            plan.apply(e)
        except Rejected:
            pass
        now_done = {n for n in plan.by_node if plan.by_node[n].claims and plan.is_done(n)}
        assert done <= now_done
        done = now_done


@SETTINGS
@given(st.lists(st.tuples(st.integers(0, 2), st.integers(100, 400), st.integers(0, 2)), min_size=1, max_size=8),
       st.randoms(use_true_random=False))
def test_claim_winner_is_order_independent(specs, rnd):
    g = goal(USERS[0], max_depth=0)
    claims = [claim(EXECS[e], g.id, wall, lease_ms=10_000, logical=lg) for e, wall, lg in specs]
    expected = min(claims, key=lambda c: (c.hlc.wall, c.hlc.logical, c.author, c.id))
    for _ in range(4):
        order = [g] + claims
        rnd.shuffle(order)
        n = derive(fold(order), T0 + 500).node(g.id)
        assert n.holder is not None and n.holder.id == expected.id
        # (every lease overlaps every other: a collision is a claim after another author's)
        ordered = sorted({c.id: c for c in claims}.values(), key=lambda c: (c.order, c.id))
        assert n.collisions == sum(1 for i, c in enumerate(ordered) if any(o.author != c.author for o in ordered[:i]))


def test_generator_produces_decisions_done_tasks_and_takeovers():
    """Guard against a generator too weak to exercise the interesting paths."""
    find(event_sets(honest_votes=True), lambda evs: any(n.decided for n in derive(fold(evs), T0).walk()),
         settings=settings(max_examples=3000, deadline=None))
    find(event_sets(), lambda evs: any(n.takeovers for n in derive(fold(evs), T0 + 9000).walk()),
         settings=settings(max_examples=3000, deadline=None))
    find(event_sets(), lambda evs: any(n.state.value == "done" and n.depth > 0 for n in derive(fold(evs), T0 + 9000).walk()),
         settings=settings(max_examples=3000, deadline=None))
    # the new paths: a settled brief, a result under review, a task waiting for the step it follows
    find(event_sets(), lambda evs: any(r.brief for r in derive(fold(evs), T0 + 9000).roots),
         settings=settings(max_examples=3000, deadline=None))
    find(event_sets(), lambda evs: any(e.type == "review" for e in fold(evs).events.values()),
         settings=settings(max_examples=3000, deadline=None))
    find(event_sets(), lambda evs: any(n.state.value == "waiting" for n in derive(fold(evs), T0 + 9000).walk()),
         settings=settings(max_examples=3000, deadline=None))


@SETTINGS
@given(event_sets(), st.randoms(use_true_random=False), st.lists(st.integers(0, 9000), min_size=1, max_size=6))
def test_incremental_derivation_equals_derivation_from_scratch(evs, rnd, steps):
    """derive(plan, now, prev=...) re-derives only what changed (touched nodes, leases that
    started or ended, their ancestors) and shares the rest with prev: it must equal a
    derivation from scratch after every event and as time moves on."""
    order = evs[:]
    rnd.shuffle(order)
    plan = Plan()
    prev = None
    now = T0
    times = sorted(T0 + s for s in steps)
    for i, e in enumerate(order):
        try:
            plan.apply(e)
        except Rejected:
            pass
        if times and i % max(1, len(order) // len(times)) == 0:
            now = max(now, times.pop(0))
        prev = derive(plan, now, prev=prev)
        scratch = derive(plan, now)
        assert prev.to_json() == scratch.to_json()
        assert prev.valid_until == scratch.valid_until
        assert prev.members == scratch.members
        assert {n.id for n in prev.walk()} == set(prev.index) == set(scratch.index)
    for later in (now + 500, now + 3000, now + 20000):  # time alone: leases lapse
        prev = derive(plan, later, prev=prev)
        assert prev.to_json() == derive(plan, later).to_json()


@SETTINGS
@given(event_sets(), st.randoms(use_true_random=False))
def test_spending_is_the_same_whatever_the_order_and_never_falls(evs, rnd):
    """A goal's spending (agent.core.budget) is a sum over the events the fold holds: the same
    in any order, and it never goes down as events arrive (the budget phase never goes back)."""
    order = evs[:]
    rnd.shuffle(order)
    plan = Plan()
    last, phases = 0, ["open"]
    for e in order:
        try:
            plan.apply(e)
        except Rejected:
            pass
        for gid in plan.goals:
            spent = plan.spent_total(gid)
            assert spent >= last
            last = spent
            phases.append(plan.budget_phase(gid))
    rank = {"open": 0, "no_splits": 1, "spent": 2}
    assert [rank[p] for p in phases] == sorted(rank[p] for p in phases)
    again = fold(evs)
    assert {g: again.spent_total(g) for g in again.goals} == {g: plan.spent_total(g) for g in plan.goals}


# ----------------------------------------------------------------- membership
ROLE_OF = {**{u.peer_id: "submitter" for u in USERS}, **{d.peer_id: "decomposer" for d in DECOMP},
           **{v.peer_id: "scorer" for v in VOTERS}, **{e.peer_id: "executor" for e in EXECS}}
EVERYONE = USERS + DECOMP + VOTERS + EXECS


@st.composite
def member_event_sets(draw):
    """event_sets plus credentials (some missing, some for the wrong role, some expiring, some
    renewed) carried in hellos, and revocations at random stamps: folded with an authority."""
    from builders import member_hello, revoke

    evs = list(draw(event_sets()))
    every = draw(st.booleans())
    if every:  # half the sets: every author a member for its own role
        evs += [member_hello(who, ROLE_OF[who.peer_id], wall=draw(st.integers(0, 200))) for who in EVERYONE]
    # a third of those keep that membership as it is: the stray, wrong-role and expiring
    # credentials below replace a member's good one in most sets, and members' done tasks were
    # then 1 to 27 in 1,000 sets (the guard below needs them)
    settled = every and draw(st.integers(0, 2)) == 0
    for who in EVERYONE:
        for _ in range(0 if settled else draw(st.sampled_from([0, 1, 1, 1, 2]))):
            role = ROLE_OF[who.peer_id] if draw(st.integers(0, 5)) else draw(st.sampled_from(sorted(set(ROLE_OF.values()))))
            issued = draw(st.sampled_from([0, 0, 0, 600, 2500]))
            expires = issued + draw(st.sampled_from([800, 3000, 10**9, 10**9]))
            evs.append(member_hello(who, role, wall=issued + draw(st.integers(0, 200)), issued=issued,
                                   expires=expires))
    for _ in range(draw(st.integers(0, 2))):
        evs.append(revoke(draw(st.sampled_from(EVERYONE)).peer_id, draw(st.integers(0, 6000))))
    return evs


def _admitted(plan, ev) -> bool:
    from agent.core.membership import ROLES_FOR

    m = plan.members
    if ev.type == "revoke":
        return ev.author == m.config.authority
    if m.revoked_at(ev.author, (ev.hlc.wall, ev.hlc.logical)):
        return False
    if ev.type == "hello":
        c = ev.body.credential
        return c is not None and c.peer == ev.author and c.issued <= ev.hlc.wall < c.expires
    if m.covering(ev.author, ROLES_FOR[ev.type], ev.hlc.wall) is None:
        return False
    if ev.type == "goal":
        return all(m.covering(e, {"scorer"}, ev.hlc.wall) for e in ev.body.params.electorate)
    return True


MSETTINGS = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@MSETTINGS
@given(member_event_sets(), st.randoms(use_true_random=False), st.integers(0, 10))
def test_with_membership_any_permutation_with_duplicates_folds_to_the_same_plan(evs, rnd, dups):
    from builders import membership

    base = fold(evs, membership())
    shuffled = evs + [rnd.choice(evs) for _ in range(dups)]
    rnd.shuffle(shuffled)
    other = fold(shuffled, membership())
    assert digests(other) == digests(base)
    assert set(other.events) == set(base.events)
    # (what still waits may differ by order: an event waits for its first missing dependency,
    # its author's credential or what it refers to, and one that can never be filed, e.g. under
    # a goal whose author was revoked, waits for one or the other; the intake's wait deadline
    # refuses it either way. What waits is never filed in the other order:)
    assert not ({e.id for e, _ in other.pending_events()} & set(base.events))
    assert not ({e.id for e, _ in base.pending_events()} & set(other.events))
    assert all(_admitted(base, e) for e in base.events.values())  # and only members' events


@MSETTINGS
@given(member_event_sets(), st.randoms(use_true_random=False), st.lists(st.integers(0, 9000), min_size=1, max_size=4))
def test_with_membership_incremental_folding_and_derivation_equal_from_scratch(evs, rnd, steps):
    """Revocations arriving late make the plan fold again (Plan.refold): the plan after every
    event, and every tree derived incrementally from the one before, equal those from scratch."""
    from builders import membership

    order = evs[:]
    rnd.shuffle(order)
    plan = Plan(membership())
    prev = None
    now = T0
    times = sorted(T0 + s for s in steps)
    for i, e in enumerate(order):
        try:
            plan.apply(e)
        except Rejected:
            pass
        if times and i % max(1, len(order) // len(times)) == 0:
            now = max(now, times.pop(0))
        prev = derive(plan, now, prev=prev)
        if i % 5 == 4 or i == len(order) - 1:
            scratch = fold(order[: i + 1], membership())
            assert set(plan.events) == set(scratch.events)
            assert prev.to_json() == derive(scratch, now).to_json()
            assert set(prev.index) == set(derive(scratch, now).index)
            assert prev.members == derive(scratch, now).members


def test_member_generator_produces_refolds_and_admitted_work():
    """Guard: the generator reaches revocations that refold a plan, and members' done tasks
    (sampled without shrinking, derandomized). Derandomized is not the same examples in every
    run: hypothesis (6.131 on) also draws constants found in the source of every local module
    loaded, so which test files pytest collects changes the sets (measured: 1 to 27 sets with a
    done task in 1,000 before the settled memberships above, and this guard failed when
    collected with test_web_app.py)."""
    from builders import membership

    seen = {"refold": 0, "done": 0}

    @settings(max_examples=1000, deadline=None, database=None, derandomize=True,
              suppress_health_check=[HealthCheck.too_slow])
    @given(member_event_sets())
    def probe(evs):
        plan = Plan(membership())
        for e in evs:
            try:
                plan.apply(e)
            except Rejected:
                pass
        seen["refold"] += plan.generation > 0
        seen["done"] += any(n.state.value == "done" for n in derive(plan, T0 + 9000).walk())

    probe()
    print("member sets: refolds", seen["refold"], "with a done task", seen["done"], "of 1,000")
    assert seen["refold"] >= 3 and seen["done"] >= 3, seen


def test_an_elector_that_precommits_two_splits_leaves_no_stale_subtree_in_an_incremental_tree():
    """Found by the property above (2026-12-07, one elector, quorum 1): its precommit of one
    split arrived, then of another with a lower id, which then stands; the incremental tree
    kept the first split's children in its index."""
    from builders import goal, ident, precommit, proposal

    me, d = ident("s0"), ident("d0")
    g = goal(ident("user"), scorers=1, quorum=1)
    a, b = proposal(d, g.id, ["Tokyo", "Kyoto"], wall=10), proposal(d, g.id, ["Osaka", "Nara", "Kobe"], wall=11)
    low, high = sorted((a, b), key=lambda e: e.id)
    plan, prev = Plan(), None
    for e in (g, a, b, precommit(me, g.id, high.id, wall=700), precommit(me, g.id, low.id, wall=1500)):
        plan.apply(e)
        prev = derive(plan, T0 + 2000, prev=prev)
        scratch = derive(plan, T0 + 2000)
        assert {n.id for n in prev.walk()} == set(prev.index) == set(scratch.index)
    assert prev.roots[0].decided == low.id
