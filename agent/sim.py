"""A deterministic in-memory run of the whole protocol: virtual time, a scripted LLM, a
simulated network with per-link delays, and optional executor crashes. Every agent folds its
own view and acts through the same decision functions as the network roles."""

from __future__ import annotations

import hashlib
import heapq
import random
from dataclasses import dataclass, field
from typing import Callable

from agent.core.decide import (
    ProposeTask, RefineTask, Timing, choose_votes, decomposer_tasks, holds_claim, is_done,
    ready_leaves, renewal_due, scorer_tasks,
)
from agent.core.events import (
    Claim, Event, Goal, Hello, PlanParams, Renew, Vote, decode_event, sign_event,
)
from agent.core.hlc import HybridClock
from agent.core.identity import Identity
from agent.core.plan import Plan
from agent.core.reasons import Rejected
from agent.llm.base import LLMBadOutput
from agent.llm.scripted import scripted_answer
from agent import work

START_MS = 1_767_225_600_000  # 2026-01-01, an arbitrary fixed origin for virtual time
TICK_MS = 50


@dataclass
class SimConfig:
    seed: int = 0
    goal: str = "Plan a two-week trip to Japan"
    decomposers: int = 3
    scorers: int = 5
    executors: int = 3
    quorum: int | None = None
    max_depth: int = 2
    max_children: int = 4
    max_rounds: int = 2
    crash_probability: float = 0.15  # per claim won, while another executor is alive
    timing: Timing = field(default_factory=lambda: Timing(1500, 20_000, 500, 10_000))
    limit_ms: int = 60 * 60 * 1000


@dataclass
class SimAgent:
    name: str
    role: str
    identity: Identity
    clock: HybridClock
    plan: Plan = field(default_factory=Plan)
    strategy: str = ""
    busy_until: int = 0
    busy: set[str] = field(default_factory=set)  # keys of work in flight
    claim: tuple[str, str, int] | None = None  # (node, claim id, settle deadline)
    running_until: int | None = None
    crashed: bool = False

    @property
    def me(self) -> str:
        return self.identity.peer_id


@dataclass
class SimStats:
    events: int = 0
    proposals: int = 0
    refinements: int = 0
    votes: int = 0
    max_round: int = 1
    claims: int = 0
    collisions: int = 0
    takeovers: int = 0
    crashes: int = 0
    llm_calls: int = 0
    virtual_ms: int = 0
    done: bool = False


class Simulation:
    def __init__(self, cfg: SimConfig) -> None:
        self.cfg = cfg
        self.rng = random.Random(cfg.seed)
        self.now = START_MS
        self.queue: list[tuple[int, int, int, bytes]] = []  # (time, seq, agent index, raw)
        self.seq = 0
        self.log: list[Event] = []
        self.timers: list[tuple[int, int, Callable[[], None]]] = []
        self.stats = SimStats()
        self.agents: list[SimAgent] = []
        strategies = work.DEFAULT_STRATEGIES
        for role, count in (("decomposer", cfg.decomposers), ("scorer", cfg.scorers),
                            ("executor", cfg.executors), ("observer", 1)):
            for i in range(count):
                name = f"{role}-{i + 1}"
                seed = hashlib.sha256(f"{cfg.seed}:{name}".encode()).digest()
                a = SimAgent(name, role, Identity(seed), HybridClock())
                a.strategy = strategies[i % len(strategies)]
                self.agents.append(a)
        self.observer = self.agents[-1]

    # -------------------------------------------------------------- plumbing
    def publish(self, a: SimAgent, body: object) -> Event:
        ev = sign_event(a.identity, a.clock.send(self.now), body)
        self.log.append(ev)
        self.stats.events += 1
        self._deliver_local(a, ev)
        for j, other in enumerate(self.agents):
            if other is not a:
                delay = self.rng.randint(2, 40) + (self.rng.randint(50, 400) if self.rng.random() < 0.05 else 0)
                self.seq += 1
                heapq.heappush(self.queue, (self.now + delay, self.seq, j, ev.raw))
        return ev

    def _deliver_local(self, a: SimAgent, ev: Event) -> None:
        try:
            a.plan.apply(ev)
        except Rejected:
            pass

    def later(self, at: int, fn: Callable[[], None]) -> None:
        self.seq += 1
        heapq.heappush(self.timers, (at, self.seq, fn))

    def llm_latency(self) -> int:
        return self.rng.randint(300, 2500)

    # -------------------------------------------------------------- run
    def run(self) -> SimStats:
        cfg = self.cfg
        for a in self.agents:
            if a.role != "observer":
                self.publish(a, Hello(role=a.role, name=a.name))
        quorum = cfg.quorum or cfg.scorers // 2 + 1
        params = PlanParams(scorers=cfg.scorers, quorum=quorum, max_depth=cfg.max_depth,
                            max_children=cfg.max_children, max_rounds=cfg.max_rounds)
        self.now += 200
        self.goal = self.publish(self.agents[0], Goal(title=cfg.goal, params=params))
        end = self.now + cfg.limit_ms
        while self.now < end:
            self.now += TICK_MS
            while self.queue and self.queue[0][0] <= self.now:
                _, _, j, raw = heapq.heappop(self.queue)
                agent = self.agents[j]
                if agent.crashed:
                    continue
                ev = decode_event(raw)
                agent.clock.receive(ev.hlc, self.now)
                self._deliver_local(agent, ev)
            while self.timers and self.timers[0][0] <= self.now:
                _, _, fn = heapq.heappop(self.timers)
                fn()
            for a in self.agents:
                if not a.crashed:
                    self.step(a)
            if is_done(self.observer.plan.tree(self.now), self.goal.id) and not self.queue:
                self.stats.done = True
                break
        self._final_stats()
        return self.stats

    def _final_stats(self) -> None:
        tree = self.observer.plan.tree(self.now)
        for n in tree.walk():
            self.stats.collisions += n.collisions
            self.stats.takeovers += n.takeovers
            if n.rounds:
                self.stats.max_round = max(self.stats.max_round, max(n.rounds))
        self.stats.virtual_ms = self.now - START_MS

    # -------------------------------------------------------------- roles
    def step(self, a: SimAgent) -> None:
        if a.role == "decomposer":
            self.step_decomposer(a)
        elif a.role == "scorer":
            self.step_scorer(a)
        elif a.role == "executor":
            self.step_executor(a)

    def step_decomposer(self, a: SimAgent) -> None:
        if a.busy:
            return
        tree = a.plan.tree(self.now)
        for task in decomposer_tasks(tree, a.me, self.cfg.timing, self.now):
            key = task.node.id if isinstance(task, ProposeTask) else task.previous
            a.busy.add(key)
            seed = self.rng.randint(0, 2**31)

            def finish(a: SimAgent = a, task: ProposeTask | RefineTask = task, key: str = key, seed: int = seed) -> None:
                a.busy.discard(key)
                tree2 = a.plan.tree(self.now)
                req = work.decompose_req(tree2, task, a.strategy, seed)
                self.stats.llm_calls += 1
                try:
                    body = work.proposal_from(scripted_answer(req), task, a.strategy)
                except LLMBadOutput:
                    return
                self.publish(a, body)
                self.stats.proposals += 1
                self.stats.refinements += isinstance(task, RefineTask)

            self.later(self.now + self.llm_latency(), finish)
            return  # one LLM call at a time

    def step_scorer(self, a: SimAgent) -> None:
        if a.busy:
            return
        tree = a.plan.tree(self.now)
        for task in scorer_tasks(tree, a.me, self.cfg.timing, self.now):
            key = f"{task.node.id}#{task.round}"
            a.busy.add(key)

            def finish(a: SimAgent = a, task=task, key: str = key) -> None:
                a.busy.discard(key)
                verdicts = {}
                for p in task.node.proposals:
                    if p.id in task.proposals:
                        req = work.score_req(a.plan.tree(self.now), task.node, p, a.me, None)
                        self.stats.llm_calls += 1
                        verdicts[p.id] = work.verdict_from(scripted_answer(req), task.node, p)
                for d in choose_votes(task, verdicts):
                    self.publish(a, Vote(node=task.node.id, proposal=d.proposal, round=task.round,
                                         specificity=d.specificity, non_overlap=d.non_overlap,
                                         coverage=d.coverage, approve=d.approve, feedback=d.feedback))
                    self.stats.votes += 1

            cost = 0 if task.leaf_round else self.llm_latency() // 2 * max(1, len(task.proposals))
            self.later(self.now + cost, finish)
            return

    def step_executor(self, a: SimAgent) -> None:
        t = self.cfg.timing
        if a.claim is not None:
            node_id, claim_id, settle_at = a.claim
            if self.now < settle_at or a.running_until is not None:
                if a.running_until is not None:
                    tree = a.plan.tree(self.now)
                    if renewal_due(tree, node_id, claim_id, t, self.now):
                        self.publish(a, Renew(node=node_id, claim=claim_id, lease_ms=t.lease_ms))
                return
            tree = a.plan.tree(self.now)
            if not holds_claim(tree, node_id, claim_id):
                a.claim = None  # lost the race: no LLM work was spent
                return
            alive = [x for x in self.agents if x.role == "executor" and not x.crashed]
            if len(alive) > 1 and self.rng.random() < self.cfg.crash_probability:
                a.crashed = True  # dies holding the lease; another executor must take over
                self.stats.crashes += 1
                return
            node = tree.node(node_id)
            assert node is not None
            req = work.execute_req(tree, node, None)
            a.running_until = self.now + self.llm_latency()

            def finish(a: SimAgent = a, node=node, claim_id: str = claim_id, req=req) -> None:
                a.running_until = None
                a.claim = None
                if a.crashed:
                    return
                self.stats.llm_calls += 1
                self.publish(a, work.result_from(scripted_answer(req), node, claim_id))

            self.later(a.running_until, finish)
            return
        ready = ready_leaves(a.plan.tree(self.now))
        if not ready:
            return
        # Executors mostly go for the first ready leaf (so races happen), sometimes a random one.
        target = ready[0] if self.rng.random() < 0.7 else self.rng.choice(ready)
        ev = self.publish(a, Claim(node=target.id, lease_ms=t.lease_ms))
        self.stats.claims += 1
        a.claim = (target.id, ev.id, self.now + t.settle_ms)


def simulate(cfg: SimConfig) -> tuple[list[Event], SimStats, Plan]:
    sim = Simulation(cfg)
    stats = sim.run()
    return sim.log, stats, sim.observer.plan
