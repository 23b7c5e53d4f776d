"""The person voter (agent.web.person.PersonScorer), sans-I/O: a person's approval becomes the
page identity's prevote under the Scorer's rules; an absent person casts no vote; a rejection
of every split prevotes nil; where the page is not an elector only a Score is published; a
restarted page recalls what the person said from its own published scores."""

from agent.behaviour.effects import Publish, SyncDone, SyncPeers
from agent.behaviour.timing import Timing
from agent.core.consensus import NIL
from agent.core.events import Score, Vote
from agent.core.plan import Plan
from agent.core.tree import derive
from agent.web.person import Judgment, PersonScorer
from builders import T0, goal, ident, precommit, prevote, proposal, score

PERSON = ident("person")
S = [ident(f"s{i}") for i in range(3)]
TIMING = Timing(proposal_window_min_ms=100, prevote_timeout_ms=100, precommit_timeout_ms=100, startup_sync_ms=50)


def setup(elector=True, quorum=None):
    electorate = [s.peer_id for s in S] + ([PERSON.peer_id] if elector else [])
    plan = Plan()
    g = goal(ident("u"), electorate=electorate, quorum=quorum)
    a = proposal(ident("d1"), g.id, ["Tokyo and Kanto", "Kyoto and Kansai"], wall=10, strategy="by place")
    b = proposal(ident("d2"), g.id, ["Temples and shrines", "Food markets"], wall=12, strategy="by activity")
    for e in (g, a, b):
        plan.apply(e)
    return plan, g, a, b


def ready(person: PersonScorer, plan: Plan, now: int):
    effects = person.poll(derive(plan, now), now)
    sync = next(e for e in effects if isinstance(e, SyncPeers))
    return person.answered(sync.ticket, SyncDone(0, 1), derive(plan, now), now)


def published(effects, kind):
    return [e.body for e in effects if isinstance(e, Publish) and isinstance(e.body, kind)]


def apply_published(plan: Plan, who, effects, wall: int):
    from builders import ev

    for i, body in enumerate(published(effects, (Score, Vote))):
        plan.apply(ev(who, body, wall, i))


def test_an_absent_person_casts_no_vote_and_asks_no_llm():
    plan, g, a, b = setup()
    person = PersonScorer(PERSON.peer_id, TIMING)
    now = T0 + 10_000
    effects = ready(person, plan, now) + person.poll(derive(plan, now), now + 5_000)
    assert not published(effects, Vote) and not published(effects, Score)
    assert not [e for e in effects if type(e).__name__ == "Ask"]  # a person is never an LLM


def test_approval_is_published_as_a_score_then_becomes_the_prevote():
    plan, g, a, b = setup()
    person = PersonScorer(PERSON.peer_id, TIMING)
    now = T0 + 10_000
    ready(person, plan, now)
    person.judge(Judgment(g.id, b.id, True, "by activity reads better"))
    effects = person.poll(derive(plan, now), now)
    [sc] = published(effects, Score)
    assert sc.proposal == b.id and sc.acceptable and sc.feedback == "by activity reads better"
    apply_published(plan, PERSON, effects, 11_000)
    later = T0 + 12_000  # past the proposal window: every split is on the table
    effects = effects + person.poll(derive(plan, later), later)
    votes = published(effects, Vote)
    assert [(v.round, v.phase, v.value) for v in votes] == [(1, "prevote", b.id)]


def test_a_polka_for_the_approved_split_is_followed_to_the_precommit():
    """Safety rules are the Scorer's: a quorum prevoting A makes the page prevote and then
    precommit A, once the person approved A."""
    plan, g, a, b = setup()
    person = PersonScorer(PERSON.peer_id, TIMING)
    now = T0 + 10_000
    ready(person, plan, now)
    for i, s in enumerate(S):
        plan.apply(prevote(s, g.id, a.id, wall=9_000 + i))  # quorum 3 of 4 prevoted A
    person.judge(Judgment(g.id, a.id, True))
    effects = person.poll(derive(plan, now), now)
    apply_published(plan, PERSON, effects, 11_000)
    effects += person.poll(derive(plan, T0 + 12_000), T0 + 12_000)
    votes = [(v.phase, v.value) for v in published(effects, Vote)]
    assert votes[:2] == [("prevote", a.id), ("precommit", a.id)]


def test_a_polka_for_a_split_the_person_did_not_approve_gets_no_vote_from_the_page():
    """The person approved B; a quorum prevoted A. The protocol would have the page prevote A:
    it abstains instead (safe: the others decide A without it), and says so in its log."""
    plan, g, a, b = setup()
    person = PersonScorer(PERSON.peer_id, TIMING)
    now = T0 + 10_000
    ready(person, plan, now)
    for i, s in enumerate(S):
        plan.apply(prevote(s, g.id, a.id, wall=9_000 + i))
    person.judge(Judgment(g.id, b.id, True))
    effects = person.poll(derive(plan, now), now)
    apply_published(plan, PERSON, effects, 11_000)
    for t in (12_000, 13_000, 20_000):
        effects += person.poll(derive(plan, T0 + t), T0 + t)
    assert not published(effects, Vote)
    notes = [e for e in effects if type(e).__name__ == "Log" and "abstains" in str(e)]
    assert len(notes) == 1, effects  # said once, not on every poll


def _fallback_setup():
    """Electors S0-S2 and the person (quorum 3), one regular round. The person approved A and
    prevoted it; S0 and S1 prevoted B, S2 nil: no polka; everyone precommits nil. The fallback
    round (2) converges on round 1's most prevoted split: B, which the person never judged."""
    electorate = [s.peer_id for s in S] + [PERSON.peer_id]
    plan = Plan()
    g = goal(ident("u"), electorate=electorate, quorum=3, max_rounds=1)
    a = proposal(ident("d1"), g.id, ["Tokyo and Kanto", "Kyoto and Kansai"], wall=10, strategy="by place")
    b = proposal(ident("d2"), g.id, ["Temples and shrines", "Food markets"], wall=12, strategy="by activity")
    for e in (g, a, b):
        plan.apply(e)
    person = PersonScorer(PERSON.peer_id, TIMING)
    now = T0 + 10_000
    ready(person, plan, now)
    person.judge(Judgment(g.id, a.id, True, "by place"))
    effects = person.poll(derive(plan, now), now)
    apply_published(plan, PERSON, effects, 10_500)
    later = person.poll(derive(plan, now + 2_000), now + 2_000)
    apply_published(plan, PERSON, later, 11_000)
    effects += later
    assert [(v.round, v.phase, v.value) for v in published(effects, Vote)] == [(1, "prevote", a.id)]
    for i, (s, value) in enumerate(zip(S, (b.id, b.id, NIL))):
        plan.apply(prevote(s, g.id, value, wall=11_500 + i))
        plan.apply(precommit(s, g.id, NIL, wall=11_600 + i))
    effects = person.poll(derive(plan, now + 3_000), now + 3_000)
    assert [(v.round, v.phase, v.value) for v in published(effects, Vote)] == [(1, "precommit", NIL)]
    apply_published(plan, PERSON, effects, 12_000)
    return plan, g, a, b, person, now + 4_000


def test_the_fallback_round_votes_nothing_the_person_did_not_approve():
    plan, g, a, b, person, t = _fallback_setup()
    effects = []
    for dt in (0, 1_000, 5_000, 60_000):
        effects += person.poll(derive(plan, t + dt), t + dt)
    assert not published(effects, Vote), published(effects, Vote)  # B never voted in the person's name
    assert any("abstains" in str(e) for e in effects)


def test_approving_the_fallback_split_makes_it_the_persons_vote():
    plan, g, a, b, person, t = _fallback_setup()
    person.poll(derive(plan, t), t)
    person.judge(Judgment(g.id, b.id, True, "fine, B"))  # the person can still choose it
    effects = person.poll(derive(plan, t + 1_000), t + 1_000)
    assert [(v.round, v.phase, v.value) for v in published(effects, Vote)] == [(2, "prevote", b.id)]


def test_rejecting_every_split_prevotes_nil():
    plan, g, a, b = setup()
    person = PersonScorer(PERSON.peer_id, TIMING)
    now = T0 + 10_000
    ready(person, plan, now)
    person.judge(Judgment(g.id, a.id, False, "too coarse"))
    person.judge(Judgment(g.id, b.id, False, "misses transport"))
    effects = person.poll(derive(plan, now), now)
    assert [s.acceptable for s in published(effects, Score)] == [False, False]
    apply_published(plan, PERSON, effects, 11_000)
    effects += person.poll(derive(plan, T0 + 12_000), T0 + 12_000)
    assert [(v.phase, v.value) for v in published(effects, Vote)] == [("prevote", NIL)]


def test_a_non_elector_only_scores_and_a_judgment_stands_once():
    plan, g, a, b = setup(elector=False)
    person = PersonScorer(PERSON.peer_id, TIMING)
    now = T0 + 10_000
    ready(person, plan, now)
    person.judge(Judgment(g.id, a.id, False, "add a day for transport"))
    effects = person.poll(derive(plan, now), now)
    assert len(published(effects, Score)) == 1
    apply_published(plan, PERSON, effects, 11_000)
    person.judge(Judgment(g.id, a.id, True, "changed my mind"))  # refused: first judgment stands
    person.judge(Judgment(g.id, "ab" * 32, True))  # no such split
    effects = person.poll(derive(plan, T0 + 12_000), T0 + 12_000)
    assert not published(effects, Score) and not published(effects, Vote)
    assert {e.fields.get("why", "")[:7] for e in effects if type(e).__name__ == "Log"} >= {"already", "no such"}
    tree = derive(plan, T0 + 12_000)
    assert [s.feedback for s in tree.node(g.id).proposal(a.id).scores] == ["add a day for transport"]


def test_a_restarted_page_recalls_the_persons_judgment_from_its_scores():
    plan, g, a, b = setup()
    plan.apply(score(PERSON, g.id, b.id, wall=11_000, acceptable=True, x=1.0, feedback="this one"))
    person = PersonScorer(PERSON.peer_id, TIMING)  # a fresh object: nothing in memory
    now = T0 + 12_000
    effects = ready(person, plan, now)
    apply_published(plan, PERSON, effects, 12_100)
    effects += person.poll(derive(plan, now + 200), now + 200)
    assert [(v.phase, v.value) for v in published(effects, Vote)] == [("prevote", b.id)]
    assert not published(effects, Score)  # it does not score the same split twice


def test_the_page_votes_the_brief_without_the_person_but_no_split():
    """A goal whose quorum needs every elector, the page among them: the page's agent settles
    the brief under the electors' rules (no model), so the plan can start; it casts no split
    vote until the person judged a split."""
    from agent.core.plan import brief_slot
    from builders import brief

    electorate = [s.peer_id for s in S] + [PERSON.peer_id]
    plan = Plan()
    g = goal(ident("u"), electorate=electorate, quorum=4, brief=True)
    b = brief(ident("d1"), g.id, wall=10, duration="14 days")
    for e in (g, b):
        plan.apply(e)
    person = PersonScorer(PERSON.peer_id, TIMING)
    now = T0 + 10_000
    effects = ready(person, plan, now)
    apply_published(plan, PERSON, effects, 10_500)
    effects += person.poll(derive(plan, now + 2_000), now + 2_000)
    votes = published(effects, Vote)
    assert [(v.node, v.round, v.phase, v.value) for v in votes] == [(brief_slot(g.id), 1, "prevote", b.id)]
    assert not [e for e in effects if type(e).__name__ == "Ask"]
