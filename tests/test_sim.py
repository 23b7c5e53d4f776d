"""The simulator: reproducible runs, a checker that can fail (planted bugs behind test-only
switches), a seed sweep with every fault, regressions pinned to seeds, and the audit's
scenarios run through the real behaviours."""

from dataclasses import replace

import pytest

from agent.behaviour import executor as executor_mod
from agent.behaviour import scorer as scorer_mod
from agent.core import consensus, leases as leases_mod
from agent.core.tree import derive
from agent.drivers.sim import Faults, SimConfig, Simulation
from agent.drivers.sim.sweep import run_seed, summarize, sweep

FAST = dict(limit_ms=60 * 60 * 1000)


def run(cfg: SimConfig) -> Simulation:
    sim = Simulation(cfg)
    sim.run()
    return sim


def invariants(sim: Simulation) -> set[str]:
    return {v.invariant for v in sim.checker.violations}


def test_one_seed_gives_one_run():
    cfg = SimConfig(seed=11, faults=Faults.all())
    a, b = run(cfg), run(cfg)
    logs = [sorted(e.raw for e in s.agents[-1].intake.plan.events.values()) for s in (a, b)]
    assert logs[0] == logs[1] and a.stats.injected == b.stats.injected
    assert run(replace(cfg, seed=12)).agents[-1].intake.plan.events.keys() != a.agents[-1].intake.plan.events.keys()


def test_fault_free_run_finishes_exactly_once_with_competition():
    sim = run(SimConfig(seed=3))
    assert sim.checker.ok, sim.checker.violations
    tree = derive(sim.agents[-1].intake.plan, sim.now)
    assert tree.is_done(sim.goal_id) and tree.node(sim.goal_id).result is not None
    assert sum(n.executed_twice for n in tree.walk()) == 0
    assert max(n.depth for n in tree.walk()) == 2
    assert all(t >= 2 for t in sim.stats.first_round_tables[:1])


def test_all_faults_are_injected_and_reported():
    sim = run(SimConfig(seed=4, faults=Faults.all()))
    text = "\n".join(sim.stats.injected)
    for what in ("partition", "crash", "restart", "pause", "clock"):
        assert what in text
    assert sim.stats.lost and sim.stats.duplicated
    assert sim.stats.rejected.get("not_elector", 0) + sim.stats.rejected.get("backdated", 0) > 0
    assert sim.checker.ok, sim.checker.violations


@pytest.mark.timeout(1500)  # about 3 minutes on 2 idle cores (a plan is about 1,000 events now)
def test_seed_sweep_with_every_fault_breaks_no_invariant():
    """The make-test sweep (make sweep runs thousands): every fault at once, 100 seeds (about 3 min on 2 cores)."""
    results = sweep(range(100), SimConfig(faults=Faults.all()), processes=2)
    s = summarize(results, 1.0)
    assert not s.failed, [(r.seed, r.violations[:2], r.error) for r in s.failed[:5]]


@pytest.mark.parametrize("seed", [1, 58, 77, 1694, 2861, 3560, 4668, 6239, 6259, 6645])
def test_regression_seeds(seed):
    """Seeds that failed while the simulator was built (a restart from a torn log lost a
    received event: the checker treated the agent's new view as a regression). 4668, 6239, 6645 (the
    10,000-seed sweep): an executor 30 s ahead took a task over and finished it; the earlier
    valid result reached it and counted; its crash tore that received result, so its restored
    view counted its own later one until its first sync pulled the earlier one back. A
    restarted view is provisional until a sync answered (its roles wait for that sync). 1694
    (the insider sweep): the checker held the insider's own store to the honest peers'; it kept
    76 claims of its own that they all refused. 2861 (the sweep on c99c60a): a scorer 30 s
    ahead held its first prevote back; the hold ran out while it was paused, and the replay on
    resume dropped it, so every later publish of that honest elector queued behind it: the
    brief's quorum needed it and the goal stalled for 2 hours (a simulator bug, the real
    runtime sleeps). 3560 (the same sweep): an insider's valid claims beyond its rate were
    stored by the honest observer and refused by every other honest peer, whose cursors then
    never offered them again; quiescence now lets rates refill and the real sync reads each
    peer from the start every RESCAN_EVERY-th pull. 6259 (the sweep on 09b68d5): the insider's
    store had a review accepting a child's result but not yet the renewals that kept the
    result's lease alive, so its tree read the child done (by the review) while the claim rule
    read it not done (by the lease), and refused the synthesis claim the tree offered; the
    claim rule now takes a reviewed attempt as done by its review (``core/tasks.py``). Pinned."""
    r = run_seed(seed, SimConfig(faults=Faults.all()))
    assert r.ok, r.violations


def test_honest_stores_are_held_to_converge_and_a_byzantine_one_is_not():
    """Seed 1694 (the insider's store held 76 claims of its own that every honest peer had
    refused for its rate, until quiescence let rates refill): a Byzantine store that differs
    is not a violation, an honest store that differs is."""
    sim = Simulation(SimConfig(seed=1694, faults=Faults.all()))
    sim.run()
    honest = [a for a in sim.agents if not a.byzantine]
    insider = next(a for a in sim.agents if "insider" in a.name)
    assert len({frozenset(a.intake.plan.events) for a in honest}) == 1
    assert sim.checker.ok, sim.checker.violations
    mine = next(e for e in insider.intake.plan.events.values() if e.author == insider.me)
    del insider.intake.plan.events[mine.id]  # the insider's store now differs: not checked
    sim.checker.at_end()
    assert sim.checker.ok, sim.checker.violations
    victim = honest[-1]  # drop one event from an honest store: convergence must fail
    dropped = next(iter(victim.intake.plan.events))
    del victim.intake.plan.events[dropped]
    sim.checker.at_end()
    assert any(v.invariant == "convergence" for v in sim.checker.violations)


@pytest.mark.parametrize("seed", [4, 9, 64])
def test_the_skew_fault_alone_wastes_no_work(seed):
    """Every clock off by up to 1.5 s and one 30 s ahead (an executor's in 4 and 9), no other
    fault: the checker holds the run to the fault-free bound, watched after every step (no task
    attempt worked on under two claims, no counted result changed at any agent). 64: a
    correction that ended stepped an executor's clock back 2.1 s below its own fresh claim,
    which it then judged lost; it dropped its work and did the task again under a new claim.
    Pinned."""
    r = run_seed(seed, SimConfig(faults=Faults.parse("skew")))
    assert r.ok, r.violations


def test_regression_busy_executor_did_not_see_its_home_task_go_stale():
    """Seed 41 without faults: an executor busy on one task noted another task as ready only
    when it got to it, took it for fresh and claimed it without settling, while another
    executor had already taken it over: LLM work from two claims. Pinned."""
    r = run_seed(41, SimConfig())
    assert r.ok, r.violations


# ----------------------------------------------------------------- the checker can fail
def _first_failing(base: SimConfig, seeds, invariant: str, *, try_first: tuple[int, ...] = ()) -> int | None:
    """The first seed whose run breaks ``invariant``. ``try_first`` holds the seeds that showed
    it last: which seeds do moves with every prompt the scripted model hashes, and searching
    from 0 to them cost minutes of the suite; when they no longer show it the range is searched."""
    for seed in (*try_first, *(s for s in seeds if s not in try_first)):
        sim = Simulation(replace(base, seed=seed))
        try:
            sim.run()
        except AssertionError:
            continue
        if invariant in invariants(sim):
            return seed
    return None


def test_checker_catches_divergent_folds(monkeypatch):
    def arrival_order(claims, follow_ups, cap):  # the claim race judged in arrival order
        out = leases_mod.Leases()
        for c in claims:
            end = leases_mod.lease_end(c, follow_ups.get(c.id, ()), cap)
            out.claims.append(leases_mod.ClaimState(c.id, c.author, c.hlc.wall, end, c.order, granted=end))
            out.results += [e for e in follow_ups.get(c.id, ()) if e.body.type == "result"]
        return out

    monkeypatch.setattr("agent.core.plan.leases", arrival_order)
    base = SimConfig(faults=Faults(slow=0.3, dup=0.1), executors=3)
    assert _first_failing(base, range(0, 200), "convergence") is not None


def test_checker_catches_a_squatter_whose_early_stamped_releases_give_its_budget_back(monkeypatch):
    """The audit: a release published late but stamped just after its claim handed the
    insider's lease budget back, re-claim after re-claim; the final set shows each claim held
    for 1 ms, so only the holding each agent saw while it went shows it."""
    def with_releases(claim, follow_ups, cap):  # the rule before: a release took time back
        end = min(claim.hlc.wall + cap, claim.hlc.wall + claim.body.lease_ms)
        for e in sorted(follow_ups, key=lambda e: (e.order, e.id)):
            if e.hlc.wall >= end:
                break
            if e.body.type == "renew":
                end = min(claim.hlc.wall + cap, max(end, e.hlc.wall + e.body.lease_ms))
            elif e.body.type == "release":
                return min(end, e.hlc.wall)
        return end

    monkeypatch.setattr("agent.core.leases.granted_end", with_releases)
    assert _first_failing(SimConfig(faults=Faults.all()), range(0, 30), "lease_bound") is not None


def test_checker_catches_a_non_final_decision(monkeypatch):
    real_tally = consensus.tally

    def decide_on_prevotes(votes, quorum):  # the old rule's spirit: any quorum, lowest round
        t = consensus.Tally({}, quorum)
        real = real_tally(votes, quorum)
        t.rounds = real.rounds
        for r in sorted(real.rounds):
            v = real.rounds[r].polka(quorum)
            if v is not None and v != consensus.NIL:
                t.decided, t.decided_round = v, r
                break
        return t

    monkeypatch.setattr("agent.core.plan.tally", decide_on_prevotes)
    base = SimConfig(faults=Faults(slow=0.1, very_slow=0.05, partitions=2))
    # the seeds that show it move with every prompt change (the scripted LLM hashes the prompt):
    # 2026-12-07's criteria prompt moved the first from under 200 to 328
    assert _first_failing(base, range(0, 1000), "finality", try_first=(328,)) is not None


def test_checker_catches_a_counted_result_that_changes(monkeypatch):
    """The old claim chain: a result stops counting when an earlier claim (delayed in a
    partition) turns its claim into a 'collision'; a done task became undone."""
    real_leases = leases_mod.leases

    def chain_rule(claims, follow_ups, cap):
        ls = real_leases(claims, follow_ups, cap)
        ok, busy = set(), None
        for c in ls.claims:
            if busy is None or c.start >= busy:
                ok.add(c.id)
            busy = c.end if busy is None else max(busy, c.end)
        ls.results = [r for r in ls.results if r.body.claim in ok]
        return ls

    monkeypatch.setattr("agent.core.plan.leases", chain_rule)
    # the delayed earlier claim came from clocks off by up to the skew fault: with clocks
    # corrected to the peers' (agent.core.skew) no seed of 0..59 showed it, so they are not
    from agent.core.skew import ClockCorrection
    monkeypatch.setattr("agent.drivers.sim.world.ClockCorrection",
                        lambda bound_ms: ClockCorrection(10**9))
    # the chain rule also livelocks some tasks (results that never count are redone); a run
    # cut at 5 min of virtual time shows the change during the fault phase in seconds, where
    # the 2-hour default made one seed run for more than ten minutes
    base = SimConfig(faults=Faults.all(), executors=3, limit_ms=5 * 60_000)
    # which seeds show it moves with every change to a prompt the scripted model hashes (seed
    # 14 before the drafts asked for paperwork; 76, 84, 130 after; 71 on 2026-12-07): the first
    # of 200 is enough
    assert _first_failing(base, range(0, 200), "stable_results", try_first=(71,)) is not None


def test_checker_catches_double_execution_without_faults(monkeypatch):
    def always_mine(self, n):  # an executor that never checks who holds the task
        t = self.task
        return (0, 2**62) if t is not None and t.claim is not None else None

    monkeypatch.setattr(executor_mod.Executor, "_mine", always_mine)
    assert _first_failing(SimConfig(executors=3), range(0, 200), "exactly_once") is not None


def test_checker_catches_work_an_uncorrected_fast_clock_wastes(monkeypatch):
    """The simulator's skew fault alone is no fault (README), so the checker holds it to the
    fault-free bound while the plan runs. With clocks never corrected and the pull before work
    not asking who stored the claim (the code before issue 23), the executor 30 s ahead in seed
    4 works on claims every peer holds: a task worked on under two claims, and a counted
    result that changed on an agent."""
    from agent.behaviour.effects import SyncPeers
    from agent.core.skew import ClockCorrection

    monkeypatch.setattr("agent.drivers.sim.world.ClockCorrection",
                        lambda bound_ms: ClockCorrection(10**9))
    monkeypatch.setattr(executor_mod, "SyncPeers", lambda ticket, confirm=None: SyncPeers(ticket))
    sim = run(SimConfig(seed=4, faults=Faults.parse("skew")))
    assert "clock: executor-1 runs 30000 ms ahead" in sim.stats.injected
    assert {"exactly_once", "stable_results"} <= invariants(sim), sim.checker.violations


def test_checker_catches_a_stall(monkeypatch):
    monkeypatch.setattr(scorer_mod.Scorer, "_step", lambda self, n, now, wake: [])
    sim = run(replace(SimConfig(seed=1), limit_ms=20 * 60 * 1000))
    assert "liveness" in invariants(sim)


def test_checker_catches_a_vote_from_outside_the_electorate(monkeypatch):
    from agent.core import plan as plan_mod
    from agent.core.slots import base_node

    real_check = plan_mod.Plan._check

    def no_electorate(self, ev):
        if ev.body.type == "vote" and ev.author not in self.params(self.node_ref(base_node(ev.body.node))).electorate:
            return
        real_check(self, ev)

    monkeypatch.setattr(plan_mod.Plan, "_check", no_electorate)
    # (without an authority: with one, a stranger's votes are refused as not a member's first)
    sim = run(SimConfig(seed=2, faults=Faults(strangers=1), membership=False))
    assert "electorate" in invariants(sim)


INSIDER = dict(faults=Faults(insider=True, slow=0.05), **FAST)


def test_the_insider_is_refused_everywhere_and_the_plan_completes():
    sim = run(SimConfig(seed=7, **INSIDER))
    assert sim.checker.ok, sim.checker.violations
    r = sim.stats.rejected
    for reason in ("not_member", "bad_credential", "role_not_allowed", "held_overflow", "backdated",
                   "not_claimant"):
        assert r.get(reason, 0) > 0, (reason, r)
    assert sim.stats.done_ms is not None
    honest = [a for a in sim.agents if not a.byzantine]
    assert all(not (set(a.intake.plan.events) & sim.forger.sybil_ids) for a in honest)


def test_checker_catches_an_event_the_authors_role_does_not_allow(monkeypatch):
    from agent.core import membership as membership_mod

    monkeypatch.setattr(membership_mod.Members, "gate", lambda self, ev: None)  # anyone may author anything
    assert "membership" in invariants(run(SimConfig(seed=7, **INSIDER)))


def test_checker_catches_an_uncredentialed_electorate(monkeypatch):
    from agent.core import membership as membership_mod

    real_gate = membership_mod.Members.gate

    def goals_unchecked(self, ev):
        return None if ev.body.type == "goal" else real_gate(self, ev)

    monkeypatch.setattr(membership_mod.Members, "gate", goals_unchecked)
    assert "electorate" in invariants(run(SimConfig(seed=7, **INSIDER)))


def test_checker_catches_a_squatter_that_never_yields(monkeypatch):
    real_leases = leases_mod.leases

    def no_budget(claims, follow_ups, cap):  # the cap binds single claims, not authors
        ls = real_leases(claims, follow_ups, cap)
        ls.claims = [replace(c, yield_from=2**62) for c in ls.claims]
        return ls

    monkeypatch.setattr("agent.core.plan.leases", no_budget)
    cfg = SimConfig(seed=7, max_lease_ms=30_000, **INSIDER)
    assert "lease_bound" in invariants(run(cfg))


def test_checker_catches_unbounded_holding(monkeypatch):
    from agent.core import intake as intake_mod

    monkeypatch.setattr(intake_mod.Intake, "_member", lambda self, author: True)  # keys get a member's room
    assert "memory_bounded" in invariants(run(SimConfig(seed=7, **INSIDER)))


def test_sweep_reports_a_behaviour_that_raises(monkeypatch):
    def boom(self, tree, now):
        raise RuntimeError("planted bug")

    monkeypatch.setattr(executor_mod.Executor, "_poll", boom)
    r = run_seed(0, SimConfig())
    assert not r.ok and "planted bug" in r.violations[0] and r.error


# ----------------------------------------------------------------- the audit's scenarios
def test_scorer_partitioned_through_round_one_never_overturns_a_decision():
    script = ((2_000, "partition", [["scorer-3"], ["submitter-1", "decomposer-1", "decomposer-2", "decomposer-3",
                                                    "scorer-1", "scorer-2", "executor-1", "executor-2", "observer-1"]]),
              (150_000, "heal", None))
    for seed in range(4):
        sim = run(SimConfig(seed=seed, script=script))
        assert sim.checker.ok, (seed, sim.checker.violations)
        root = derive(sim.agents[-1].intake.plan, sim.now).node(sim.goal_id)
        assert root.decided is not None and root.depth == 0


def test_restarted_scorer_syncs_before_it_votes():
    script = ((30_000, "crash", "scorer-1"), (40_000, "restart", "scorer-1"),
              (45_000, "crash", "scorer-2"), (90_000, "restart", "scorer-2"))
    for seed in range(4):
        sim = run(SimConfig(seed=seed, script=script, faults=Faults(torn=1.0)))
        assert sim.checker.ok, (seed, sim.checker.violations)


def test_fewer_live_electors_than_the_quorum_waits_without_errors_then_finishes():
    """The leaf-round liveness bug: scorers computed a round the fold refused and restarted
    forever. Now nothing computes an invalid round; with 1 of 3 electors the node waits (no
    decision is possible without a quorum), and finishes when they are back."""
    script = ((3_000, "crash", "scorer-2"), (3_000, "crash", "scorer-3"),
              (400_000, "restart", "scorer-2"), (400_000, "restart", "scorer-3"))
    sim = run(SimConfig(seed=5, script=script, fault_phase_ms=400_000))
    assert sim.checker.ok, sim.checker.violations
    assert sim.stats.done_ms is not None and sim.stats.done_ms > 400_000


def test_paused_executor_past_its_lease_does_not_change_the_counted_result():
    for seed in range(6):
        script = tuple((t, "pause", (f"executor-{1 + seed % 2}", 45_000)) for t in (150_000, 250_000))
        sim = run(SimConfig(seed=seed, script=script, executors=2))
        assert sim.checker.ok, (seed, sim.checker.violations)


def test_fast_clock_does_not_slow_the_honest_swarm():
    """One scorer 30 s ahead: its votes are held until due at everyone, and the honest pace
    (first prevote on a split after the first proposal; the brief is voted before any proposal)
    is what it is without it."""
    def pace(skew):
        sim = Simulation(SimConfig(seed=8))
        sim.by_name("scorer-3").skew = skew
        sim.run()
        obs = sim.agents[-1].intake.plan
        first_prop = min(e.hlc.wall for e in obs.events.values() if e.type == "proposal")
        honest = {sim.by_name(n).me for n in ("scorer-1", "scorer-2")}
        first_vote = min(e.hlc.wall for e in obs.events.values()
                         if e.type == "vote" and e.author in honest and "#" not in e.body.node)
        return first_vote - first_prop, sim

    base, _ = pace(0)
    skewed, sim = pace(30_000)
    assert sim.checker.ok
    assert skewed <= base + 1_000, (base, skewed)


def test_competition_with_slow_decomposers():
    """Real models take 5-40 s to split: the first round waits, so at least 2 splits are judged
    side by side on at least 80% of voted nodes (fault-free)."""
    results = sweep(range(24), SimConfig(), processes=2)
    s = summarize(results, 1.0)
    assert not s.failed
    assert s.competition >= 0.8, s.competition
    # no scorer chose with a split on the table it had not judged (joining a quorum's polka is
    # the voting rule; a split stamped just before a vote may still be in flight to its scorer)
    assert s.unscored <= 1, s.unscored


def test_scorers_scaled_up_mid_plan_never_vote_on_the_running_goal():
    script = ((20_000, "join", ("scorer", 4)),)
    sim = run(SimConfig(seed=6, script=script))
    assert sim.checker.ok, sim.checker.violations
    late = {a.me for a in sim.agents if a.role == "scorer"} - set(sim.params.electorate)
    assert len(late) == 4
    assert not any(e.author in late for e in sim.agents[-1].intake.plan.events.values() if e.type == "vote")


def test_restarted_view_that_lost_a_received_result_converges_after_its_sync():
    """Seed 4668 in detail: before its sync, the restarted executor counts another result for
    the task (the checker ignores that provisional view); after it, the settled one again."""
    from agent.drivers.sim.world import Simulation

    sim = Simulation(SimConfig(seed=4668, faults=Faults.all()))
    seen = []
    orig = sim._restart

    def restart(a):
        orig(a)
        seen.append((a, a.synced))

    sim._restart = restart
    sim.run()
    assert sim.checker.ok, sim.checker.violations
    assert seen and all(synced is False for _, synced in seen)
    ex = next(a for a, _ in seen if a.name == "executor-1")
    assert ex.synced
    obs = sim.agents[-1].intake.plan
    for node, ne in obs.by_node.items():
        if ne.claims:
            assert ex.intake.plan.leases(node).counted.id == obs.leases(node).counted.id


def test_competition_counts_choices_among_splits_not_leaf_judgments():
    """A first-round LEAF prevote is the elector's judgment of the node (it does not wait for
    the splits to be scored): it neither makes a node 'voted' nor counts unjudged splits."""
    from agent.core.consensus import LEAF
    from agent.core.plan import fold
    from agent.drivers.sim.measure import competition
    from builders import goal, ident, prevote, proposal, score

    u, d1, d2 = ident("user"), ident("d1"), ident("d2")
    s0, s1 = ident("s0"), ident("s1")
    g = goal(u, scorers=3)
    p1 = proposal(d1, g.id, ["A one", "A two", "A three"], wall=10)
    p2 = proposal(d2, g.id, ["B one", "B two", "B three"], wall=11)
    leaf_only = [g, p1, p2, prevote(s0, g.id, LEAF, 1, 20)]
    assert competition(fold(leaf_only)) == competition(fold([g, p1, p2]))
    assert competition(fold(leaf_only)).voted == 0
    judged = leaf_only + [score(s1, g.id, p1.id, wall=30), score(s1, g.id, p2.id, wall=31),
                          prevote(s1, g.id, p1.id, 1, 40)]
    c = competition(fold(judged))
    assert (c.voted, c.judged_two, c.unscored) == (1, 1, 0)
    unjudged = leaf_only + [score(s1, g.id, p1.id, wall=30), prevote(s1, g.id, p1.id, 1, 40)]
    c = competition(fold(unjudged))
    assert (c.voted, c.judged_two, c.unscored) == (1, 0, 1)


def _skewed_executor_run(seed: int, skew_ms: int, corrects: bool,
                         pulls: bool = True) -> tuple[Simulation, int, int]:
    """One executor's clock ``skew_ms`` off, no other fault: (the run, tasks more than one
    claim spent LLM work on, tasks whose counted result changed on some agent while the plan
    ran: each agent's stored log replayed in its order)."""
    from agent.core.skew import ClockCorrection
    from support.chaos import counted_history, decode_all

    sim = Simulation(SimConfig(seed=seed, executors=2))
    fast = sim.by_name("executor-2")
    fast.skew = skew_ms
    if not corrects:  # the clock as it was before agent.core.skew: never corrected
        fast.clock = ClockCorrection(bound_ms=10**9)
    if not pulls:  # nor a pull before work (which finds the claim in no peer's store)
        fast.behaviour.sync_before_work = False
    sim.run()
    twice = sum(1 for claims in sim.stats.executions.values() if len(claims) > 1)
    changed = set()
    for a in sim.agents:
        events, _ = decode_all(a.log.records)
        changed |= {node for node, h in counted_history(events).items() if len(h) > 1}
    return sim, twice, len(changed)


@pytest.mark.parametrize("skew_ms", [30_000, -30_000, 5_000])
def test_a_skewed_executor_corrects_its_clock_and_wastes_no_work(skew_ms):
    """The clock bound (README): without faults a task runs once, a skewed clock included.
    The skewed executor estimates its offset from its peers' stamps (agent.core.skew) and holds
    back what it would stamp beyond what peers accept: no task is worked on under two claims
    and no counted result changes on any agent. The same runs with the correction and the pull
    before work switched off show that the check can fail (tasks run twice, counted results
    changed); the pull alone (its claim stored by no peer: no LLM call) also wastes nothing."""
    wasted_without = 0
    for seed in range(4):
        sim, twice, changed = _skewed_executor_run(seed, skew_ms, corrects=True)
        assert sim.checker.ok, (seed, sim.checker.violations)
        assert sim.stats.done_ms is not None, seed
        assert (twice, changed) == (0, 0), (seed, twice, changed)
        if abs(skew_ms) > 10_000:
            _, twice, changed = _skewed_executor_run(seed, skew_ms, corrects=False, pulls=False)
            wasted_without += twice + changed
            if skew_ms > 0:
                _, twice, changed = _skewed_executor_run(seed, skew_ms, corrects=False)
                assert (twice, changed) == (0, 0), (seed, "the pull alone", twice, changed)
    if abs(skew_ms) > 10_000:
        assert wasted_without > 0, "the uncorrected clock wasted nothing: the check cannot fail"
