"""The central baseline: a third driver of the very same behaviour objects, as a central
orchestrator would run them.

One process, one event log, no network and no windows: every agent's behaviour (decomposers,
scorers, executors, each with its own key, so the electorate and the scripted LLM's answers are
those of a swarm with the same keys) reads the one shared plan, and what one publishes the
others see at once. Every LLM call runs concurrently with the others (each behaviour keeps its
own at-most-one-job rule, as in the swarm), so decomposers and scorers are asked in parallel.
Windows that only wait for the network are zero: no startup sync, no settle, no pull before
work (there are no peers to miss); timeouts that a round ends by are never reached, because a
round phase ends as soon as the whole electorate has voted. What is left is the LLM work and
the protocol's own call pattern: the benchmark's baseline (``python -m agent bench``).

Like the simulator it copies no policy: it only executes effects.
"""

from __future__ import annotations

import hashlib
import time
from dataclasses import dataclass, field
from typing import Any

import trio

from agent.behaviour import Timing, make as make_behaviour, strategy_for
from agent.behaviour.base import Behaviour
from agent.behaviour.effects import (
    Ask, Cancel, Count, Effect, LLMReply, Log, Observe, Publish, SyncDone, SyncPeers, WakeAt,
)
from agent.core.events import Event, Goal, Hello, PlanParams
from agent.core.identity import Identity
from agent.core.intake import Intake
from agent.core.tree import Tree
from agent.llm.base import LLM, LLMError
from agent.shell import AgentShell, Tally, route
from agent.store import MemoryLog

NEVER_MS = 3_600_000  # a timeout the central run never reaches


def bench_identity(name: str, tag: str = "bench") -> Identity:
    """The key an agent called ``name`` gets in a benchmark (the swarm's processes get the same
    keys, so both runs share an electorate and the scripted LLM gives both the same answers)."""
    return Identity(hashlib.sha256(f"{tag}:{name}".encode()).digest())


def central_timing() -> Timing:
    return Timing(
        # all decomposers are asked at once and every one answers: scorers wait for all of them
        proposal_window_min_ms=NEVER_MS, proposal_window_max_ms=NEVER_MS,
        prevote_timeout_ms=NEVER_MS, precommit_timeout_ms=NEVER_MS, round_timeout_ms=NEVER_MS,
        settle_ms=0, startup_sync_ms=0, lease_ms=120_000, lease_margin_ms=0, review_window_ms=NEVER_MS,
    )


@dataclass
class CallRecord:
    agent: str
    role: str
    kind: str
    node: str | None
    start_ms: float
    end_ms: float | None = None
    outcome: str = "running"  # answered | cancelled | error
    prompt_tokens: int = 0
    completion_tokens: int = 0
    tokens_per_second: float | None = None  # the server's generation rate for it, when it says
    cached_tokens: int | None = None  # prompt tokens the server took from its cache, when it says


@dataclass
class _Agent:
    name: str
    role: str
    identity: Identity
    behaviour: Behaviour


@dataclass
class CentralResult:
    goal_id: str
    makespan_s: float
    events: list[Event]
    calls: list[CallRecord]
    tree: Tree
    names: dict[str, str] = field(default_factory=dict)  # peer id -> agent name
    metrics: dict[str, float] = field(default_factory=dict)  # the behaviours' metric totals


def wall_ms() -> float:
    return time.time_ns() / 1e6


class Central:
    def __init__(self, llm: LLM, *, decomposers: int = 3, scorers: int = 3, executors: int = 2,
                 max_depth: int = 2, max_children: int = 4, max_rounds: int = 2,
                 brief: bool = True, max_attempts: int = 2, token_budget: int = 0,
                 timing: Timing | None = None, tag: str = "bench", seed: int = 0) -> None:
        self.llm = llm
        self.timing = timing or central_timing()
        # one intake and one log for every agent: what one publishes the others see at once
        self.shell = AgentShell(Intake(), MemoryLog())
        self.intake = self.shell.intake
        self.tally = Tally()
        self.agents: list[_Agent] = []
        for role, count in (("decomposer", decomposers), ("scorer", scorers), ("executor", executors)):
            for i in range(count):
                name = f"{role}-{i + 1}"
                ident = bench_identity(name, tag)
                beh = make_behaviour(role, ident.peer_id, self.timing, seed + i, strategy=strategy_for(i),
                                     decomposers=decomposers, sync_before_work=False)
                self.agents.append(_Agent(name, role, ident, beh))
        self.submitter = bench_identity("submitter", tag)
        electorate = tuple(sorted(a.identity.peer_id for a in self.agents if a.role == "scorer"))
        self.params = PlanParams.of(electorate, max_depth=max_depth, max_children=max_children,
                                    max_rounds=max_rounds, brief=brief, max_attempts=max_attempts,
                                    token_budget=token_budget)
        self.calls: list[CallRecord] = []
        self._live: dict[tuple[int, int], tuple[trio.CancelScope, CallRecord]] = {}
        self._wake: dict[int, float] = {}
        self._send, self._recv = trio.open_memory_channel[tuple[int, int, Any]](1000)

    # ------------------------------------------------------------------ the shared log
    def now(self) -> int:
        return time.time_ns() // 1_000_000

    def tree(self) -> Tree:
        return self.shell.tree(self.now())

    def _publish(self, ident: Identity, body: Any) -> Event:
        signed = self.shell.sign(ident, body, self.now())
        for e in signed:
            self.shell.log.append(e.raw)
        return signed[0]

    # ------------------------------------------------------------------ running
    async def run(self, goal: str, timeout: float = 3600.0, description: str = "") -> CentralResult:
        for a in self.agents:
            self._publish(a.identity, Hello(role=a.role, name=a.name))
        g = self._publish(self.submitter, Goal(title=goal, description=description, params=self.params))
        t0 = time.monotonic()
        with trio.fail_after(timeout):
            async with trio.open_nursery() as nursery:
                self._nursery = nursery
                while True:
                    self._settle_all()
                    if self.tree().is_done(g.id):
                        break
                    await self._next_input()
                nursery.cancel_scope.cancel()
        makespan = time.monotonic() - t0
        events = sorted(self.intake.plan.events.values(), key=lambda e: (e.order, e.id))
        names = {a.identity.peer_id: a.name for a in self.agents}
        names[self.submitter.peer_id] = "submitter"
        return CentralResult(g.id, makespan, events, self.calls, self.tree(), names, dict(self.tally.totals))

    def _settle_all(self) -> None:
        """Poll every behaviour until none publishes anything more (everything is instant)."""
        for _ in range(10_000):
            before = self.intake.plan.version
            for i, a in enumerate(self.agents):
                if a.behaviour.idle(self.intake.plan):
                    continue
                now = self.now()
                self._execute(i, a.behaviour.poll(self.tree(), now))
            if self.intake.plan.version == before:
                return
        raise RuntimeError("behaviours keep publishing without end")

    async def _next_input(self) -> None:
        wake = min(self._wake.values(), default=None)
        timeout = 3600.0 if wake is None else max(0.0, (wake - self.now()) / 1000)
        with trio.move_on_after(timeout):
            idx, ticket, answer = await self._recv.receive()
            self._answer(idx, ticket, answer)
            while True:  # everything else that is already there
                try:
                    idx, ticket, answer = self._recv.receive_nowait()
                except trio.WouldBlock:
                    break
                self._answer(idx, ticket, answer)
        now = self.now()
        for i, at in list(self._wake.items()):
            if at <= now:
                del self._wake[i]

    def _answer(self, idx: int, ticket: int, answer: Any) -> None:
        live = self._live.pop((idx, ticket), None)
        if live is None:
            return  # cancelled meanwhile
        a = self.agents[idx]
        self._execute(idx, a.behaviour.answered(ticket, answer, self.tree(), self.now()))

    def _execute(self, idx: int, effects: list[Effect]) -> None:
        for eff in effects:
            getattr(self, route(eff))(idx, eff)

    # ------------------------------------------------------------------ effects (agent.shell.effects)
    def on_publish(self, idx: int, eff: Publish) -> None:
        a = self.agents[idx]
        ev = self._publish(a.identity, eff.body)
        if eff.ticket is not None:
            self._execute(idx, a.behaviour.answered(eff.ticket, ev, self.tree(), self.now()))

    def on_ask(self, idx: int, eff: Ask) -> None:
        a = self.agents[idx]
        rec = CallRecord(a.name, a.role, eff.request.kind, eff.node, wall_ms())
        self.calls.append(rec)
        scope = trio.CancelScope()
        self._live[(idx, eff.ticket)] = (scope, rec)
        self._nursery.start_soon(self._ask, idx, eff.ticket, eff.request, scope, rec)

    def on_cancel(self, idx: int, eff: Cancel) -> None:
        live = self._live.pop((idx, eff.ticket), None)
        if live is not None:
            scope, rec = live
            scope.cancel()
            rec.end_ms, rec.outcome = wall_ms(), "cancelled"

    def on_sync(self, idx: int, eff: SyncPeers) -> None:
        # no peers: nothing to pull; answered at once
        others = len(self.agents) - 1  # one store: every event published is in it
        done = SyncDone(0, others, None if eff.confirm is None else others)
        self._execute(idx, self.agents[idx].behaviour.answered(eff.ticket, done, self.tree(), self.now()))

    def on_wake(self, idx: int, eff: WakeAt) -> None:
        cur = self._wake.get(idx)
        self._wake[idx] = eff.at_ms if cur is None else min(cur, eff.at_ms)

    def on_metric(self, idx: int, eff: Count | Observe) -> None:
        self.tally.record(eff)

    def on_log(self, idx: int, eff: Log) -> None:
        pass  # the baseline measures time and calls; the behaviours' lines are the swarm's

    async def _ask(self, idx: int, ticket: int, req: Any, scope: trio.CancelScope, rec: CallRecord) -> None:
        with scope:
            try:
                complete = getattr(self.llm, "complete", None)
                if complete is not None:
                    ans = await complete(req)
                    answer: Any = LLMReply(ans.value, ans.prompt_tokens, ans.completion_tokens)
                    rec.prompt_tokens, rec.completion_tokens = ans.prompt_tokens, ans.completion_tokens
                else:
                    answer = LLMReply(await self.llm.generate(req))
                rec.outcome = "answered"
            except LLMError as exc:
                answer = exc
                rec.outcome = "error"
            rec.end_ms = wall_ms()
            await self._send.send((idx, ticket, answer))


async def run_central(goal: str, latency: float, **kw: Any) -> CentralResult:
    from agent.llm.scripted import ScriptedLLM

    return await Central(ScriptedLLM(latency), **kw).run(goal)


__all__ = ["Central", "CentralResult", "CallRecord", "bench_identity", "central_timing", "run_central"]
