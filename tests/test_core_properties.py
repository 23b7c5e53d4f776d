"""Property tests of the fold: convergence, incrementality, quorum safety, claim order."""

from hypothesis import HealthCheck, find, given, settings, strategies as st

from agent.core.plan import Plan, child_id, fold
from agent.core.reasons import Rejected
from builders import T0, claim, goal, hello, ident, proposal, release, renew, result, vote

USERS = [ident(f"user{i}") for i in range(2)]
DECOMP = [ident(f"dec{i}") for i in range(3)]
SCORERS = [ident(f"sc{i}") for i in range(5)]
EXECS = [ident(f"ex{i}") for i in range(3)]
WORDS = ["Tokyo", "Kyoto", "Osaka", "Food", "Temples", "Rail pass", "Budget", "Hotels", "Day one"]
SETTINGS = settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@st.composite
def event_sets(draw, majority=False):
    scorers = draw(st.integers(1, 5))
    quorum = scorers // 2 + 1 if majority else draw(st.integers(1, scorers))
    max_rounds = draw(st.integers(1, 3))
    g = goal(draw(st.sampled_from(USERS)), wall=draw(st.integers(0, 5)), scorers=scorers,
             quorum=quorum, max_depth=draw(st.integers(0, 2)), max_children=4, max_rounds=max_rounds)
    evs = [g]
    # The quorum's safety assumes no more scorers than configured: only announced scorers' votes count.
    for s in SCORERS[: draw(st.integers(0, scorers if majority else 5))]:
        evs.append(hello(s, "scorer", wall=draw(st.integers(0, 50))))
    if draw(st.booleans()):
        evs.append(hello(DECOMP[0], "decomposer"))
    nodes = [g.id]
    props = []
    for _ in range(draw(st.integers(0, 5))):
        node = draw(st.sampled_from(nodes))
        titles = draw(st.lists(st.sampled_from(WORDS), min_size=2, max_size=4, unique=True))
        refines = draw(st.sampled_from([None] + [p.id for p in props if p.body.node == node]))
        p = proposal(draw(st.sampled_from(DECOMP)), node, titles, wall=draw(st.integers(10, 500)),
                     refines=refines, atomic=tuple(draw(st.sets(st.integers(0, 3), max_size=2))))
        props.append(p)
        evs.append(p)
        nodes += [child_id(p.id, i) for i in range(len(titles))]
    for _ in range(draw(st.integers(0, 25))):
        if not props:
            break
        p = draw(st.sampled_from(props + [None]))
        node = p.body.node if p is not None else draw(st.sampled_from(nodes))
        evs.append(vote(draw(st.sampled_from(SCORERS)), node, p.id if p else None,
                        rnd=draw(st.integers(1, max_rounds + 1)), approve=draw(st.booleans()),
                        wall=draw(st.integers(20, 2000)), logical=draw(st.integers(0, 2))))
    claims = []
    for _ in range(draw(st.integers(0, 8))):
        node = draw(st.sampled_from(nodes))
        c = claim(draw(st.sampled_from(EXECS)), node, wall=draw(st.integers(100, 5000)),
                  lease_ms=draw(st.sampled_from([500, 1000, 3000])), logical=draw(st.integers(0, 2)))
        claims.append(c)
        evs.append(c)
    for _ in range(draw(st.integers(0, 6))):
        if not claims:
            break
        c = draw(st.sampled_from(claims))
        kind = draw(st.sampled_from(["renew", "release", "result"]))
        wall = c.hlc.wall - T0 + draw(st.integers(0, 3000))
        mk = {"renew": lambda: renew(c_author(c), c.body.node, c.id, wall, lease_ms=1000),
              "release": lambda: release(c_author(c), c.body.node, c.id, wall),
              "result": lambda: result(c_author(c), c.body.node, c.id, wall)}[kind]
        evs.append(mk())
    return evs


def c_author(c):
    return next(e for e in EXECS if e.peer_id == c.author)


def digests(plan, nows=(T0 + 300, T0 + 1500, T0 + 9000)):
    return [plan.tree(n).digest for n in nows]


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
@given(event_sets(majority=True))
def test_majority_quorum_never_accepts_two_splits_in_a_round(evs):
    tree = fold(evs).tree()
    for n in tree.walk():
        for rv in n.rounds.values():
            reaching = [t for t, v in rv.approvals.items() if len(v) >= n.params.quorum]
            assert len(reaching) <= 1
            counted = sum(len(v) for v in rv.approvals.values())
            assert counted <= len(rv.voters)  # at most one approval per scorer per round


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
        n = fold(order).tree(T0 + 500).node(g.id)
        assert n.claim.claim == expected.id
        assert n.collisions == len({c.id for c in claims}) - 1


def test_generator_produces_accepted_splits_and_takeovers():
    """Guard against a generator too weak to exercise the interesting paths."""
    find(event_sets(majority=True), lambda evs: any(n.accepted for n in fold(evs).tree().walk()),
         settings=settings(max_examples=2000, deadline=None))
    find(event_sets(), lambda evs: any(n.takeovers for n in fold(evs).tree(T0 + 9000).walk()),
         settings=settings(max_examples=2000, deadline=None))
