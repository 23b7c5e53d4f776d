"""The decomposer's and the executor's policies, without trio: propose once, refine after a
round closed, retry with fresh seeds then set aside; claim, settle, sync, lose cheaply,
renew, publish only while holding the lease, release on failure."""

from dataclasses import replace

from agent.behaviour import Decomposer, Executor, Timing
from agent.behaviour.timing import NetView
from agent.behaviour.effects import (
    Ask, Cancel, Count, LLMReply, Metric, Publish, PublishFailed, SyncDone, SyncPeers, WakeAt,
)
from agent.behaviour import work
from agent.core.consensus import LEAF, NIL
from agent.core.events import Claim, Proposal, Release, Renew, Result
from agent.core.plan import child_id, fold
from agent.core.tree import derive
from agent.llm.base import LLMBadOutput, LLMUnavailable
from agent.llm.scripted import scripted_answer
from builders import T0, claim, ev, goal, hello, ident, precommit, prevote, proposal, result, score

U = ident("user")
ME = ident("me")
D2 = ident("d2")
S = [ident(f"s{i}") for i in range(3)]
E2 = ident("e2")
TM = Timing(startup_sync_ms=1000, settle_ms=500, lease_ms=6000, lease_margin_ms=1000, set_aside_ms=5000,
            attempts=3)


def started(beh, evs, now):
    """Past the startup sync barrier."""
    t = derive(fold(evs), now)
    out = beh.poll(t, now)
    sync = next(e for e in out if isinstance(e, SyncPeers))
    return beh.answered(sync.ticket, SyncDone(0, 2), t, now)


def answer(beh, evs, ask, reply, now):
    return beh.answered(ask.ticket, reply, derive(fold(evs), now), now)


def asks(effects):
    return [e for e in effects if isinstance(e, Ask)]


def pubs(effects, kind=None):
    return [e.body for e in effects if isinstance(e, Publish) and (kind is None or isinstance(e.body, kind))]


# ----------------------------------------------------------------- decomposer
def test_decomposer_proposes_once_per_open_node_and_refines_after_a_failed_round():
    g = goal(U, scorers=3)
    d = Decomposer(ME.peer_id, TM, seed=1, strategy="by phase")
    out = started(d, [g], T0 + 10)
    (a,) = asks(out)
    out = answer(d, [g], a, LLMReply(scripted_answer(a.request)), T0 + 20)
    (p,) = pubs(out, Proposal)
    mine = ev(ME, p, 30)
    evs = [g, mine, score(S[1], g.id, mine.id, wall=40, acceptable=False, feedback="too vague: name the steps")]
    assert not asks(d.poll(derive(fold(evs), T0 + 50), T0 + 50))  # proposed already
    evs += [precommit(s, g.id, NIL, 1, 60 + i) for i, s in enumerate(S)]  # round 1 closed
    (a,) = asks(d.poll(derive(fold(evs), T0 + 100), T0 + 100))
    assert "too vague: name the steps" in a.request.prompt  # the scorers' feedback
    out = answer(d, evs, a, LLMReply(scripted_answer(a.request)), T0 + 110)
    (ref,) = pubs(out, Proposal)
    assert ref.refines == mine.id
    evs.append(ev(ME, ref, 120))
    assert not asks(d.poll(derive(fold(evs), T0 + 130), T0 + 130))  # answered that round


def test_decomposer_retries_fresh_seeds_then_sets_aside_and_backs_off_when_down():
    g = goal(U)
    d = Decomposer(ME.peer_id, TM, seed=2)
    (a,) = asks(started(d, [g], T0))
    seeds = [a.request.seed]
    for i in range(2):
        out = answer(d, [g], a, LLMBadOutput("all subgoals alike"), T0 + 10 * (i + 1))
        (a,) = asks(out)
        seeds.append(a.request.seed)
    out = answer(d, [g], a, LLMBadOutput("all subgoals alike"), T0 + 40)
    assert not asks(out) and Count(Metric.SET_ASIDE) in out and len(set(seeds)) == 3
    assert not asks(d.poll(derive(fold([g]), T0 + 1000), T0 + 1000))
    assert asks(d.poll(derive(fold([g]), T0 + 5100), T0 + 5100))  # set aside for 5 s
    d2 = Decomposer(ME.peer_id, TM, seed=3)
    (a,) = asks(started(d2, [g], T0))
    out = answer(d2, [g], a, LLMUnavailable("connection refused"), T0 + 10)
    assert not asks(out) and not asks(d2.poll(derive(fold([g]), T0 + 20), T0 + 20))


def test_decomposer_abandons_a_node_decided_while_it_thinks():
    g = goal(U)
    other = proposal(D2, g.id, ["Prepare", "Run"], wall=5)
    d = Decomposer(ME.peer_id, TM, seed=4)
    (a,) = asks(started(d, [g, other], T0 + 10))
    evs = [g, other] + [precommit(s, g.id, other.id, 1, 20 + i) for i, s in enumerate(S[:2])]
    out = d.poll(derive(fold(evs), T0 + 40), T0 + 40)
    assert any(isinstance(e, Cancel) and e.ticket == a.ticket for e in out)
    assert not pubs(answer(d, evs, a, LLMReply(scripted_answer(a.request)), T0 + 50))


def _root_with_a_polka():
    """The goal, my split and another split of it, a quorum of prevotes on the other one (a
    polka) but no decision yet: my real work is done, the other split is likely decided."""
    g = goal(U, scorers=3)
    d = Decomposer(ME.peer_id, TM, seed=5, strategy="by phase")
    (a,) = asks(started(d, [g], T0 + 10))
    (p,) = pubs(answer(d, [g], a, LLMReply(scripted_answer(a.request)), T0 + 20), Proposal)
    other = proposal(D2, g.id, ["Flights — Japan", "Rail pass — Japan", "Ryokan nights — Japan"], wall=25)
    evs = [g, ev(ME, p, 30), other] + [prevote(s, g.id, other.id, 1, 40 + i) for i, s in enumerate(S[:2])]
    return d, g, other, evs


def test_decomposer_works_ahead_on_a_polka_and_proposes_once_it_is_decided():
    d, g, other, evs = _root_with_a_polka()
    (a,) = asks(d.poll(derive(fold(evs), T0 + 50), T0 + 50))
    kid = child_id(other.id, 0)
    assert a.node == kid and a.request.context["title"] == "Flights — Japan"
    # nothing is published about a child that may never exist: the answer waits
    out = answer(d, evs, a, LLMReply(scripted_answer(a.request)), T0 + 60)
    assert not pubs(out)
    (a2,) = asks(out)  # free meanwhile: the next child
    assert a2.node == child_id(other.id, 1)
    evs += [precommit(s, g.id, other.id, 1, 70 + i) for i, s in enumerate(S[:2])]  # decided
    t = derive(fold(evs), T0 + 80)
    (p,) = pubs(d.poll(t, T0 + 80), Proposal)
    assert p.node == kid
    # the request made ahead is the one made for the child once it exists (seed aside)
    real = work.decompose_req(t, t.node(kid), "by phase", a.request.seed)
    assert real.context == a.request.context and real.prompt == a.request.prompt
    # the job running ahead goes on as an ordinary one
    (p2,) = pubs(answer(d, evs, a2, LLMReply(scripted_answer(a2.request)), T0 + 90), Proposal)
    assert p2.node == child_id(other.id, 1)
    assert not d.held and not d.ahead  # nothing kept about a decided split


def test_an_unusable_answer_worked_out_ahead_is_dropped_and_the_child_split_as_usual():
    d, g, other, evs = _root_with_a_polka()
    (a,) = asks(d.poll(derive(fold(evs), T0 + 50), T0 + 50))
    out = answer(d, evs, a, LLMBadOutput("all subgoals alike"), T0 + 60)
    (a2,) = asks(out)  # the next child meanwhile
    evs += [precommit(s, g.id, other.id, 1, 70 + i) for i, s in enumerate(S[:2])]
    out = d.poll(derive(fold(evs), T0 + 80), T0 + 80)
    assert Count(Metric.LLM_BAD_OUTPUT) in out and not pubs(out)
    (p2,) = pubs(answer(d, evs, a2, LLMReply(scripted_answer(a2.request)), T0 + 90), Proposal)
    assert p2.node == child_id(other.id, 1)
    (again,) = [x for x in asks(d.poll(derive(fold(evs), T0 + 100), T0 + 100))]
    assert again.node == child_id(other.id, 0)  # wanted like any open node


def test_decomposer_drops_work_ahead_when_another_value_is_decided():
    d, g, other, evs = _root_with_a_polka()
    (a,) = asks(d.poll(derive(fold(evs), T0 + 50), T0 + 50))
    out = answer(d, evs, a, LLMReply(scripted_answer(a.request)), T0 + 60)
    (a2,) = asks(out)
    # round 1 ends NIL, round 2 decides LEAF: neither held nor running work may be published
    evs += [precommit(s, g.id, NIL, 1, 70 + i) for i, s in enumerate(S)]
    evs += [prevote(s, g.id, LEAF, 2, 80 + i) for i, s in enumerate(S)]
    evs += [precommit(s, g.id, LEAF, 2, 90 + i) for i, s in enumerate(S)]
    out = d.poll(derive(fold(evs), T0 + 100), T0 + 100)
    assert any(isinstance(e, Cancel) and e.ticket == a2.ticket for e in out) and not pubs(out)
    assert not d.held and d.job is None
    assert not pubs(answer(d, evs, a2, LLMReply(scripted_answer(a2.request)), T0 + 110))


# ----------------------------------------------------------------- executor
def leaf_goal():
    return goal(U, max_depth=0)


def test_executor_claims_settles_syncs_then_works_renews_and_publishes():
    g = leaf_goal()
    x = Executor(ME.peer_id, TM, seed=1)
    out = started(x, [g], T0 + 10)
    (c,) = [e for e in out if isinstance(e, Publish)]
    assert isinstance(c.body, Claim) and c.body.lease_ms == 6000
    mine = ev(ME, c.body, 20)
    out = x.answered(c.ticket, mine, derive(fold([g, mine]), T0 + 20), T0 + 20)
    assert WakeAt(T0 + 520) in out
    evs = [g, mine]
    assert not asks(x.poll(derive(fold(evs), T0 + 300), T0 + 300))  # settling
    (sync,) = [e for e in x.poll(derive(fold(evs), T0 + 600), T0 + 600) if isinstance(e, SyncPeers)]
    out = x.answered(sync.ticket, SyncDone(0, 3), derive(fold(evs), T0 + 650), T0 + 650)
    (a,) = asks(out)
    assert Count(Metric.CLAIMS_WON) in out
    out = x.poll(derive(fold(evs), T0 + 3100), T0 + 3100)
    assert [type(b) for b in pubs(out)] == [Renew]  # half the lease left
    evs.append(ev(ME, pubs(out)[0], 3100))
    out = answer(x, evs, a, LLMReply(scripted_answer(a.request), 100, 40), T0 + 4000)
    (r,) = pubs(out, Result)
    assert r.claim == mine.id and r.completion_tokens == 40


def _home_claim_after(busy_ms, delay_ms=100):
    """The settle window of my claim on a home task I could not take for ``busy_ms`` after
    it became ready (I was held back), at a measured gossip delay of ``delay_ms``."""
    hellos = [hello(ME, "executor", wall=1)]
    x = Executor(ME.peer_id, TM, seed=1)
    x.net = NetView(delay_ms=delay_ms, gossip_healthy=True)
    started(x, hellos, T0 + 10)  # primed: what becomes ready from now on is fresh
    evs = hellos + [goal(U, max_depth=0, wall=1990)]
    if busy_ms:
        x.backoff.until = T0 + 2000 + busy_ms
        assert not pubs(x.poll(derive(fold(evs), T0 + 2000), T0 + 2000))  # seen ready, held back
    now = T0 + 2000 + busy_ms
    (c,) = [e for e in x.poll(derive(fold(evs), now), now) if isinstance(e, Publish)]
    mine = ev(ME, c.body, now - T0)
    out = x.answered(c.ticket, mine, derive(fold(evs + [mine]), now), now)
    return min(e.at_ms for e in out if isinstance(e, WakeAt)) - now


def test_a_home_task_is_claimed_without_settling_until_others_may_take_it_over():
    # others take it over once ready for steal_after (3 s): my claim reaches them first while
    # it has been ready for at most 3000 - 2 x 100 - 500 ms
    assert TM.steal_after_ms == 3000 and TM.prompt_margin_ms == 500
    assert _home_claim_after(0) == 0
    assert _home_claim_after(2200) == 0  # held back by another task: still no race possible
    assert _home_claim_after(2400) == 150  # too late for that: settle one delay + margin
    assert _home_claim_after(1000, delay_ms=1200) == 500  # gossip too slow for any prompt claim


def _claimed_beside_another_executor():
    """An executor that claimed a leaf while another executor is announced."""
    g = leaf_goal()
    evs = [g, hello(E2, "executor", wall=1)]
    x = Executor(ME.peer_id, TM, seed=1)
    (c,) = [e for e in started(x, evs, T0 + 10) if isinstance(e, Publish)]
    mine = ev(ME, c.body, 20)
    evs.append(mine)
    x.answered(c.ticket, mine, derive(fold(evs), T0 + 20), T0 + 20)
    return g, evs, x


def test_executor_pulls_again_when_no_peer_answered_before_spending_the_llm():
    """A pull no peer answered (gossip seconds behind on an overloaded machine) shows nothing:
    a rival's earlier claim may be on its way. Pull again after a longer wait; work only once
    a peer answered, or after the last attempt (the documented bound: a cut can cost a
    duplicate)."""
    g, evs, x = _claimed_beside_another_executor()
    (sync,) = [e for e in x.poll(derive(fold(evs), T0 + 600), T0 + 600) if isinstance(e, SyncPeers)]
    out = x.answered(sync.ticket, SyncDone(0, 0), derive(fold(evs), T0 + 650), T0 + 650)
    assert not asks(out) and Count(Metric.PULL_UNANSWERED) in out
    (wake,) = [e for e in out if isinstance(e, WakeAt)]
    assert wake.at_ms > T0 + 650 + TM.settle_ms  # waits longer than a settle window
    assert not [e for e in x.poll(derive(fold(evs), T0 + 700), T0 + 700) if isinstance(e, SyncPeers)]
    (sync,) = [e for e in x.poll(derive(fold(evs), wake.at_ms), wake.at_ms) if isinstance(e, SyncPeers)]
    # the second pull is answered and brings the rival's earlier claim: no LLM call
    rival = claim(E2, g.id, 15, lease_ms=6000)
    out = x.answered(sync.ticket, SyncDone(1, 2), derive(fold(evs + [rival]), wake.at_ms + 50), wake.at_ms + 50)
    assert not asks(out) and Count(Metric.CLAIMS_LOST) in out


def test_executor_works_after_the_last_unanswered_pull():
    g, evs, x = _claimed_beside_another_executor()
    now, out = T0 + 600, []
    for _ in range(TM.attempts):
        (sync,) = [e for e in x.poll(derive(fold(evs), now), now) if isinstance(e, SyncPeers)]
        out = x.answered(sync.ticket, SyncDone(0, 0), derive(fold(evs), now), now)
        waits = [e.at_ms for e in out if isinstance(e, WakeAt)]
        now = waits[0] if waits else now
    assert asks(out) and Count(Metric.PULL_UNANSWERED) in out


def test_executor_that_lost_the_race_spends_no_llm_call_and_releases():
    g = leaf_goal()
    x = Executor(ME.peer_id, TM, seed=1)
    (c,) = [e for e in started(x, [g], T0 + 10) if isinstance(e, Publish)]
    mine = ev(ME, c.body, 20)
    rival = claim(E2, g.id, 15, lease_ms=6000)  # earlier: it wins everywhere
    evs = [g, mine, rival]
    x.answered(c.ticket, mine, derive(fold(evs), T0 + 20), T0 + 20)
    (sync,) = [e for e in x.poll(derive(fold(evs), T0 + 600), T0 + 600) if isinstance(e, SyncPeers)]
    out = x.answered(sync.ticket, SyncDone(1, 3), derive(fold(evs), T0 + 650), T0 + 650)
    assert not asks(out) and Count(Metric.CLAIMS_LOST) in out
    (rel,) = pubs(out, Release)
    assert rel.claim == mine.id


def test_executor_drops_the_work_when_its_lease_lapsed_while_it_was_paused():
    g = leaf_goal()
    x = Executor(ME.peer_id, TM, seed=1)
    (c,) = [e for e in started(x, [g], T0 + 10) if isinstance(e, Publish)]
    mine = ev(ME, c.body, 20)
    evs = [g, mine]
    x.answered(c.ticket, mine, derive(fold(evs), T0 + 20), T0 + 20)
    (sync,) = [e for e in x.poll(derive(fold(evs), T0 + 600), T0 + 600) if isinstance(e, SyncPeers)]
    (a,) = asks(x.answered(sync.ticket, SyncDone(0, 3), derive(fold(evs), T0 + 650), T0 + 650))
    # SIGSTOP for 14 s: no renewal went out; the answer arrives after the lease lapsed
    out = answer(x, evs, a, LLMReply(scripted_answer(a.request)), T0 + 14_000)
    assert not pubs(out, Result) and pubs(out, Release)
    # ...and a result too close to the end of the lease is not published either
    x2 = Executor(ME.peer_id, TM, seed=2)
    (c,) = [e for e in started(x2, [g], T0 + 10) if isinstance(e, Publish)]
    mine = ev(ME, c.body, 20)
    evs = [g, mine]
    x2.answered(c.ticket, mine, derive(fold(evs), T0 + 20), T0 + 20)
    (sync,) = [e for e in x2.poll(derive(fold(evs), T0 + 600), T0 + 600) if isinstance(e, SyncPeers)]
    (a,) = asks(x2.answered(sync.ticket, SyncDone(0, 3), derive(fold(evs), T0 + 650), T0 + 650))
    out = answer(x2, evs, a, LLMReply(scripted_answer(a.request)), T0 + 5500)  # lease ends at 6020
    assert not pubs(out, Result) and Count(Metric.WORK_DROPPED) in out


def test_executor_cancels_when_another_result_counts_and_releases_when_the_llm_is_down():
    g = leaf_goal()
    x = Executor(ME.peer_id, TM, seed=1)
    (c,) = [e for e in started(x, [g], T0 + 10) if isinstance(e, Publish)]
    mine = ev(ME, c.body, 20)
    evs = [g, mine]
    x.answered(c.ticket, mine, derive(fold(evs), T0 + 20), T0 + 20)
    (sync,) = [e for e in x.poll(derive(fold(evs), T0 + 600), T0 + 600) if isinstance(e, SyncPeers)]
    (a,) = asks(x.answered(sync.ticket, SyncDone(0, 3), derive(fold(evs), T0 + 650), T0 + 650))
    other = claim(E2, g.id, 10, lease_ms=6000)  # a partition hid this earlier claim
    evs += [other, result(E2, g.id, other.id, 1000)]
    out = x.poll(derive(fold(evs), T0 + 1100), T0 + 1100)
    assert any(isinstance(e, Cancel) and e.ticket == a.ticket for e in out)
    x2 = Executor(ME.peer_id, TM, seed=2)
    (c,) = [e for e in started(x2, [g], T0 + 10) if isinstance(e, Publish)]
    mine = ev(ME, c.body, 20)
    evs = [g, mine]
    x2.answered(c.ticket, mine, derive(fold(evs), T0 + 20), T0 + 20)
    (sync,) = [e for e in x2.poll(derive(fold(evs), T0 + 600), T0 + 600) if isinstance(e, SyncPeers)]
    (a,) = asks(x2.answered(sync.ticket, SyncDone(0, 3), derive(fold(evs), T0 + 650), T0 + 650))
    out = answer(x2, evs, a, LLMUnavailable("down"), T0 + 700)
    assert pubs(out, Release) and Count(Metric.TASK_RELEASED) in out
    assert not [e for e in x2.poll(derive(fold(evs), T0 + 800), T0 + 800) if isinstance(e, Publish)]


def test_executor_claims_within_the_goals_lease_cap():
    """Audit: a goal made with SWARM_MAX_LEASE_SECONDS below the executor's lease had every
    claim refused by the executor's own fold (lease_too_long): no task of it ever ran."""
    g = goal(U, max_depth=0, max_lease_ms=2_000)
    x = Executor(ME.peer_id, TM, seed=1)  # TM.lease_ms: 6 s
    (c,) = [e for e in started(x, [g], T0 + 10) if isinstance(e, Publish)]
    assert isinstance(c.body, Claim) and c.body.lease_ms == 2_000
    mine = ev(ME, c.body, 20)
    plan = fold([g, mine])
    assert mine.id in plan  # filed, not refused
    x.answered(c.ticket, mine, derive(plan, T0 + 20), T0 + 20)
    (sync,) = [e for e in x.poll(derive(plan, T0 + 600), T0 + 600) if isinstance(e, SyncPeers)]
    (a,) = asks(x.answered(sync.ticket, SyncDone(0, 3), derive(plan, T0 + 650), T0 + 650))
    out = x.poll(derive(plan, T0 + 1_100), T0 + 1_100)
    # its lease already ends at the goal's cap: a renewal would extend nothing, and waking at a
    # time already past would poll in a loop (the review), so it sleeps until the lease ends
    assert not pubs(out) and [e.at_ms for e in out if isinstance(e, WakeAt)] == [T0 + 2_020]
    g6 = goal(U, max_depth=0, max_lease_ms=6_000, wall=1)
    y = Executor(ME.peer_id, replace(TM, lease_ms=4_000), seed=1)
    (c,) = [e for e in started(y, [g6], T0 + 10) if isinstance(e, Publish)]
    mine = ev(ME, c.body, 20)
    plan = fold([g6, mine])
    y.answered(c.ticket, mine, derive(plan, T0 + 20), T0 + 20)
    (sync,) = [e for e in y.poll(derive(plan, T0 + 600), T0 + 600) if isinstance(e, SyncPeers)]
    asks(y.answered(sync.ticket, SyncDone(0, 3), derive(plan, T0 + 650), T0 + 650))
    (r,) = pubs(y.poll(derive(plan, T0 + 2_100), T0 + 2_100), Renew)  # half of 4 s left
    assert r.lease_ms == 4_000
    plan = fold([g6, mine, ev(ME, r, 2_100)])
    out = y.poll(derive(plan, T0 + 2_200), T0 + 2_200)
    assert not pubs(out) and all(e.at_ms > T0 + 2_200 for e in out if isinstance(e, WakeAt))


def test_executor_releases_nothing_when_its_claim_is_not_filed_any_more():
    """Audit: after a revocation's refold a filed claim can wait again (a child it built on was
    the revoked author's result); the executor dropped its work and published a release of
    that claim, which its own fold refused: `sign` raised and the role restarted."""
    g = leaf_goal()
    x = Executor(ME.peer_id, TM, seed=1)
    (c,) = [e for e in started(x, [g], T0 + 10) if isinstance(e, Publish)]
    mine = ev(ME, c.body, 20)
    evs = [g, mine]
    x.answered(c.ticket, mine, derive(fold(evs), T0 + 20), T0 + 20)
    (sync,) = [e for e in x.poll(derive(fold(evs), T0 + 600), T0 + 600) if isinstance(e, SyncPeers)]
    (a,) = asks(x.answered(sync.ticket, SyncDone(0, 3), derive(fold(evs), T0 + 650), T0 + 650))
    out = x.poll(derive(fold([g]), T0 + 700), T0 + 700)  # the tree without our claim
    assert any(isinstance(e, Cancel) and e.ticket == a.ticket for e in out)
    assert not pubs(out) and x.task is None


def test_executor_retries_unusable_results_and_takes_the_last_schema_valid_answer():
    g = leaf_goal()
    x = Executor(ME.peer_id, TM, seed=1)
    (c,) = [e for e in started(x, [g], T0 + 10) if isinstance(e, Publish)]
    mine = ev(ME, c.body, 20)
    evs = [g, mine]
    x.answered(c.ticket, mine, derive(fold(evs), T0 + 20), T0 + 20)
    (sync,) = [e for e in x.poll(derive(fold(evs), T0 + 600), T0 + 600) if isinstance(e, SyncPeers)]
    (a,) = asks(x.answered(sync.ticket, SyncDone(0, 3), derive(fold(evs), T0 + 650), T0 + 650))
    digits = LLMReply({"actions": [{"do": f"1234567890 123456789{i}", "cost": "", "when": ""} for i in range(3)]})
    seeds = set()
    for i in range(2):
        seeds.add(a.request.seed)
        (a,) = asks(answer(x, evs, a, digits, T0 + 700 + i))
    seeds.add(a.request.seed)
    out = answer(x, evs, a, digits, T0 + 800)
    (r,) = pubs(out, Result)  # the last attempt takes any schema-valid answer: no stall
    assert len(seeds) == 3


def test_executor_backs_off_when_a_claim_cannot_be_stored():
    g = leaf_goal()
    x = Executor(ME.peer_id, TM, seed=1)
    (c,) = [e for e in started(x, [g], T0 + 10) if isinstance(e, Publish)]
    out = x.answered(c.ticket, PublishFailed("disk full"), derive(fold([g]), T0 + 20), T0 + 20)
    assert not pubs(out)
    assert not pubs(x.poll(derive(fold([g]), T0 + 30), T0 + 30))


def test_executor_spends_no_llm_call_on_a_claim_no_peer_stored():
    """The pull before work also asks the peers that answer whether they stored our claim.
    None did (every peer holds it: our clock runs ahead of theirs): work now would count
    nowhere. Wait and pull again; after the last attempt drop the task (releasing the claim)
    without an LLM call. Once a peer has it, work."""
    g, evs, x = _claimed_beside_another_executor()
    mine = evs[-1]
    now, out = T0 + 600, []
    for k in range(TM.attempts):
        (sync,) = [e for e in x.poll(derive(fold(evs), now), now) if isinstance(e, SyncPeers)]
        assert sync.confirm == mine.id
        out = x.answered(sync.ticket, SyncDone(0, 2, holders=0), derive(fold(evs), now), now)
        assert not asks(out) and Count(Metric.CLAIM_UNSTORED) in out
        waits = [e.at_ms for e in out if isinstance(e, WakeAt)]
        if k < TM.attempts - 1:
            assert waits and waits[0] > now + TM.settle_ms
            now = waits[0]
    releases = [e.body for e in out if isinstance(e, Publish) and isinstance(e.body, Release)]
    assert releases and releases[0].claim == mine.id and x.task is None

    g, evs, x = _claimed_beside_another_executor()
    (sync,) = [e for e in x.poll(derive(fold(evs), T0 + 600), T0 + 600) if isinstance(e, SyncPeers)]
    out = x.answered(sync.ticket, SyncDone(0, 2, holders=1), derive(fold(evs), T0 + 650), T0 + 650)
    assert asks(out)


def test_executor_does_not_judge_its_claim_before_its_stamp_when_its_clock_steps_back():
    """A correction to the peers' clock that shrinks or ends steps the executor's clock back
    (agent.core.skew: by up to the bound, 2 s): its own claim is then stamped 'in the future'
    and holds no lease yet. Neither lost nor won: it waits for its clock to reach the stamp,
    keeps the work, and publishes the result then. (Judged lost, the work was dropped and done
    again under a new claim: the simulator, seed 64 with --faults skew.)"""
    g = leaf_goal()
    x = Executor(ME.peer_id, TM, seed=1)
    (c,) = [e for e in started(x, [g], T0 + 10) if isinstance(e, Publish)]
    mine = ev(ME, c.body, 20)
    evs = [g, mine]
    x.answered(c.ticket, mine, derive(fold(evs), T0 + 20), T0 + 20)
    (sync,) = [e for e in x.poll(derive(fold(evs), T0 + 600), T0 + 600) if isinstance(e, SyncPeers)]
    (a,) = asks(x.answered(sync.ticket, SyncDone(0, 3), derive(fold(evs), T0 + 650), T0 + 650))
    back = T0 + 700 - 2_100  # the clock steps back 2.1 s, below the claim's stamp
    out = x.poll(derive(fold(evs), back), back)
    assert out == [WakeAt(mine.hlc.wall)], out  # no release, no cancel of the LLM call
    out = answer(x, evs, a, LLMReply(scripted_answer(a.request)), back + 400)
    assert not pubs(out) and WakeAt(mine.hlc.wall) in out  # the result waits for the stamp
    out = x.poll(derive(fold(evs), T0 + 20), T0 + 20)
    (r,) = pubs(out, Result)
    assert r.claim == mine.id and Count(Metric.WORK_DROPPED) not in out and x.task is None


def test_an_executor_past_its_lease_budget_does_not_claim_a_task_another_yielding_claim_holds():
    # both executors have held the task for max_lease_ms in all (LLM calls slower than the
    # budget on an overloaded machine): E2's claim yields, so the task reads ready, but a claim
    # of mine would yield too and lose to E2's earlier one: claim, lose, release, without end
    g = goal(U, max_depth=0, max_lease_ms=2000)
    mine0 = claim(ME, g.id, 10, lease_ms=2000)  # held 2 s: my budget on it is spent
    first = claim(E2, g.id, 2100, lease_ms=1000)  # E2 held it 1 s, then claimed again:
    theirs = claim(E2, g.id, 3200, lease_ms=2000)  # yields from 4200 on, lasts to 5200
    evs = [g, hello(E2, "executor", wall=1), mine0, first, theirs]
    t = derive(fold(evs), T0 + 4500)
    assert t.node(g.id).state.value == "ready" and t.node(g.id).holder.id == theirs.id
    x = Executor(ME.peer_id, TM, seed=1)
    out = started(x, evs, T0 + 4500)
    out += x.poll(derive(fold(evs), T0 + 5100), T0 + 5100)
    assert not pubs(out, Claim)
    # once that lease has ended, the task is mine to take (a lone executor may still retry)
    out = x.poll(derive(fold(evs), T0 + 5300), T0 + 5300)
    out += x.poll(derive(fold(evs), T0 + 9000), T0 + 9000)
    assert pubs(out, Claim)
    # an executor with budget left claims it from a yielding holder at once
    y = Executor(ident("e3").peer_id, TM, seed=2)
    out = started(y, evs + [hello(ident("e3"), "executor", wall=1)], T0 + 4500)
    out += y.poll(derive(fold(evs), T0 + 5100), T0 + 5100)
    assert pubs(out, Claim)


def test_the_last_try_publishes_the_best_of_the_tries_with_every_tries_tokens():
    # the last try takes any usable answer (no stall), but an earlier try the checks found
    # fewer problems in is the better result: a home office's last try dated its steps
    # "2027-12-05 to 2027-02-02" and counted as it was
    g = leaf_goal()
    x = Executor(ME.peer_id, TM, seed=1)
    (c,) = [e for e in started(x, [g], T0 + 10) if isinstance(e, Publish)]
    mine = ev(ME, c.body, 20)
    evs = [g, mine]
    x.answered(c.ticket, mine, derive(fold(evs), T0 + 20), T0 + 20)
    (sync,) = [e for e in x.poll(derive(fold(evs), T0 + 600), T0 + 600) if isinstance(e, SyncPeers)]
    (a,) = asks(x.answered(sync.ticket, SyncDone(0, 3), derive(fold(evs), T0 + 650), T0 + 650))
    acts = ["I booked a ryokan in Kyoto for two nights", "Take the Shinkansen to Osaka", "Visit the Fushimi Inari shrine"]
    near = LLMReply({"actions": [{"do": d, "cost": "", "when": ""} for d in acts]}, 100, 10)
    worse = LLMReply({"actions": [{"do": d + " ...", "cost": "", "when": ""} for d in acts]}, 100, 10)
    tree = derive(fold(evs), T0 + 700)
    node = tree.node(g.id)
    first = work.result_from(near.value, tree, node, mine.id, strict=False)
    last = work.result_from(worse.value, tree, node, mine.id, strict=False)
    n_first, n_last = (len(work.result_checks(tree, node, r.output, synthesis=False)) for r in (first, last))
    assert 0 < n_first < n_last  # both go back while tries remain; the first has fewer problems
    (a,) = asks(answer(x, evs, a, near, T0 + 700))
    (a,) = asks(answer(x, evs, a, worse, T0 + 701))
    (r,) = pubs(answer(x, evs, a, worse, T0 + 800), Result)
    assert r.output == first.output and (r.prompt_tokens, r.completion_tokens) == (300, 30)
