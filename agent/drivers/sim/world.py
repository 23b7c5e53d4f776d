"""A deterministic, fault-injecting simulation of a whole swarm in virtual time.

The agents are the real thing below the I/O line: the same shell (`agent.shell`: intake, log,
tree, net view) and the same behaviour objects (`agent.behaviour`) as the trio runtime; this
module holds the agents and is their second driver (it executes their effects in virtual
time). The rest is split by who owns it: who the agents are (`cast.py`: roles, keys,
credentials, which members are Byzantine and what each runs), the network (`network.py`:
gossip delays with long tails, loss, duplication, reordering, partitions that heal,
anti-entropy sync), the fault plan (`faults.py`: when partitions, crashes and pauses happen; `byzantine.py`:
the lying members' behaviours; `forge.py`: what they sign without their own checks),
the LLM (`llm.py`: slow, failing and garbage-answering), what a run measured (`stats.py`).
Here stay the agents' lives and their scheduling: one event queue in virtual time, what a
fault does to an agent (crashes and restarts from the stored log, with a torn last write;
pauses longer than a lease; per-agent clock skew), and the execution of their effects. One
seed gives one run; `agent.drivers.sim.checker` checks the invariants after every step.
"""

from __future__ import annotations

import heapq
import random
from dataclasses import dataclass, field
from typing import Any

from agent.behaviour import strategy_for
from agent.behaviour.base import Behaviour
from agent.behaviour.effects import (
    Ask, Cancel, Count, Effect, Log, Observe, Publish, PublishFailed, SyncDone,
    SyncPeers, WakeAt,
)
from agent.core.events import Credential, Event, Goal, Hello
from agent.core.identity import Identity
from agent.core.intake import Intake, IntakeConfig, Status
from agent.core.plan import Plan
from agent.core.reasons import Reason, Rejected
from agent.core.skew import ClockCorrection, counts_for_clock, counts_peer_for_clock, hold_back_until
from agent.core.tree import Tree
from agent.shell import AgentShell, route
from agent.store import MemoryLog

from .byzantine import ForgedPublish, SybilPublish
from .cast import Cast, sim_identity
from .checker import Checker
from .config import START_MS, SimConfig
from .faults import schedule_faults
from .forge import Forger
from .llm import SimLLM
from .network import SimNetwork
from .stats import SimStats

# how often a runtime re-estimates its clock (agent.drivers.real.runtime housekeeping)
CLOCK_CHECK_MS = 500


@dataclass
class SimAgent:
    idx: int
    name: str
    role: str
    identity: Identity
    # its intake, log, tree and measure of gossip: what every driver keeps (a restart makes a
    # new one over the same log)
    shell: AgentShell = field(default_factory=lambda: AgentShell(Intake(), MemoryLog()))
    behaviour: Behaviour | None = None
    epoch: int = 0
    crashed: bool = False
    paused_until: int | None = None
    buffered: list[tuple[str, Any]] = field(default_factory=list)  # deliveries while paused
    skew: int = 0
    # its runtime's clock correction (agent.core.skew), and effects held back meanwhile: its
    # driver does not go on while a publish waits for its stamps to be within the bound
    clock: ClockCorrection = field(default_factory=lambda: ClockCorrection(IntakeConfig().max_ahead_ms))
    clock_checked: int = 0
    deferred: list[Effect] = field(default_factory=list)
    byzantine: bool = False
    asks: dict[int, str] = field(default_factory=dict)  # live LLM tickets -> request kind
    wake_at: int | None = None
    dirty: bool = True
    strategy: str = "by phase"
    ids_hash: int = 0  # xor of event-id hashes: a cheap fingerprint of the event set
    cursors: dict[int, int] = field(default_factory=dict)  # peer -> how far its log was pulled
    pulls: dict[int, int] = field(default_factory=dict)  # peer -> syncs from it (RESCAN_EVERY)
    # a restart's view is provisional until a sync answered: it may lack received events the
    # crash lost (a torn last line, events held in memory while the disk was full)
    synced: bool = True
    credential: Credential | None = None  # its membership credential (None: a stranger)

    @property
    def me(self) -> str:
        return self.identity.peer_id

    @property
    def up(self) -> bool:
        return not self.crashed and self.paused_until is None

    @property
    def intake(self) -> Intake:
        return self.shell.intake

    @property
    def log(self) -> MemoryLog:
        return self.shell.log  # type: ignore[return-value]  (the simulator gives every agent one)

    def tree(self, now: int) -> Tree:
        return self.shell.tree(now)


class Simulation:
    def __init__(self, cfg: SimConfig) -> None:
        self.cfg = cfg
        self.rng = random.Random(cfg.seed)
        self.now = START_MS
        self.seq = 0
        self.heap: list[tuple[int, int, str, int, Any]] = []
        self.stats = SimStats()
        self.agents: list[SimAgent] = []
        # what the world does to the agents, each drawing from the one generator above
        self.net = SimNetwork(cfg, self.rng, self.stats, self.agents, lambda: self.now, self.at)
        self.llm = SimLLM(cfg, self.rng, lambda: self.now)
        self.retracted: set[str] = set()  # own events torn before they were published
        self.origin: dict[str, int] = {}  # event id -> publishing agent
        self.trace: list[tuple[int, str, str, dict]] = []
        self.goal_id: str | None = None
        self.checker: Any = None
        self.cast = Cast(cfg, self.rng)  # who the agents are; this class runs them
        self.membership = self.cast.membership
        self.intake_config = IntakeConfig(pending_ttl_ms=120_000)
        self._build()

    # ------------------------------------------------------------------ set-up
    def _build(self) -> None:
        f = self.cfg.faults
        counts: dict[str, int] = {}
        for i, role in enumerate(self.cast.roles()):
            counts[role] = counts.get(role, 0) + 1
            name = f"{role}-{counts[role]}"
            a = SimAgent(i, name, role, self.cast.identity(name), self._new_shell())
            a.credential = self.cast.credential(a)
            a.strategy = strategy_for(counts[role] - 1)
            if f.skew_ms:
                a.skew = self.rng.randint(-f.skew_ms, f.skew_ms)
            self.agents.append(a)
        self.cast.mark_byzantine(self.agents)
        if f.fast_clock_ms:
            honest = [a for a in self.agents if a.role in ("decomposer", "scorer", "executor") and not a.byzantine]
            fast = self.rng.choice(honest)
            fast.skew = f.fast_clock_ms
            self.stats.injected.append(f"clock: {fast.name} runs {f.fast_clock_ms} ms ahead")
        for a in self.agents:
            a.behaviour = self.cast.behaviour(a)
        self.params = self.cast.params((a.me for a in self.agents if a.role == "scorer"), self.agents[0].me)
        self.forger = Forger(self.cfg.seed, self.params)  # what Byzantine members sign

    def _new_shell(self, log: MemoryLog | None = None) -> AgentShell:
        return AgentShell(Intake(self.intake_config, Plan(self.membership)), log or MemoryLog())

    def local(self, a: SimAgent) -> int:
        """The agent's clock as its runtime stamps by: skewed, then corrected to its peers'."""
        return self.now + a.skew - a.clock.correction_ms

    def _to_virtual(self, a: SimAgent, at_ms: int) -> int:
        return at_ms - a.skew + a.clock.correction_ms

    def _sample_clock(self, a: SimAgent, ev: Event) -> None:
        """A fresh event of a peer: its stamp against our uncorrected clock
        (agent.drivers.real.runtime)."""
        raw_now = self.now + a.skew
        a.clock.observe(ev.author, ev.hlc.wall, ev.hlc.logical, raw_now)
        if raw_now - a.clock_checked >= CLOCK_CHECK_MS:  # the runtime re-estimates every 0.5 s
            a.clock_checked = raw_now
            a.clock.update(raw_now)

    # ------------------------------------------------------------------ scheduling
    def at(self, when: int, kind: str, idx: int, payload: Any = None) -> None:
        self.seq += 1
        heapq.heappush(self.heap, (when, self.seq, kind, idx, payload))

    # ------------------------------------------------------------------ publishing
    def publish(self, a: SimAgent, body: Any) -> Event:
        now = self.local(a)
        if isinstance(body, Hello) and a.credential is not None:
            body = body.model_copy(update={"credential": a.credential})
        signed = a.shell.sign(a.identity, body, now)
        for e in signed:
            self._stored(a, e)
        ev = signed[0]
        self.stats.events_published += 1
        self.origin[ev.id] = a.idx
        self.net.gossip(a, ev.raw)
        return ev

    def _stored(self, a: SimAgent, ev: Event) -> None:
        a.log.append(ev.raw)
        a.ids_hash ^= int(ev.id[:16], 16)
        a.dirty = True

    def offer(self, b: SimAgent, raw: bytes, source: str) -> bool:
        ev = self.net.decode(raw)
        if ev is None or ev.id in self.retracted:
            return False
        now = self.local(b)
        offer = b.intake.offer(ev, source, now)
        if offer.status in (Status.ACCEPTED, Status.HELD) and source != "self" and not source.startswith("sync") \
                and ev.author != b.me and counts_for_clock(b.intake.plan.members, ev):
            # (a pending event's stamp is not checked yet: agent.drivers.real.runtime)
            self._sample_clock(b, ev)
        if ev in offer.accepted and source != "self":
            b.shell.delivered(ev, source, now)
        return self._took(b, offer)

    def _took(self, b: SimAgent, offer: Any) -> bool:
        if offer.status is Status.REJECTED and offer.reason is not None:
            key = offer.reason.value
            self.stats.rejected[key] = self.stats.rejected.get(key, 0) + 1
        for e in offer.accepted:
            self._stored(b, e)
        return offer.status is Status.ACCEPTED

    # ------------------------------------------------------------------ running
    def start(self) -> None:
        for a in self.agents:
            if a.role == "stranger":
                self._forge(a, ForgedPublish(Hello(role="scorer", name=a.name)))
            elif a.role != "observer":
                self.publish(a, Hello(role=a.role, name=a.name))
        self.now += 200
        sub = self.agents[0]
        for b in self.agents[1:]:  # the submitter pulls everyone's hellos, as if it synced
            for raw in b.log.records:
                self.offer(sub, raw, "sync:" + b.me)
        self._post_goal()
        for a in self.agents:
            self.at(self.now + self.rng.randint(0, self.cfg.sync_interval_ms), "antientropy", a.idx)
        schedule_faults(self.cfg, self.rng, self.now, self.agents, self.at)

    def _post_goal(self) -> None:
        """The submitter publishes the goal once it holds every elector's hello (a real one
        names only scorers whose hellos it holds: agent.goals); one stamped ahead by a fast
        clock is held until due, and the goal waits for it."""
        sub = self.agents[0]
        now = self.local(sub)
        for offer in sub.intake.due(now):
            self._took(sub, offer)
        m = sub.intake.plan.members
        if m.closed and any(m.covering(e, {"scorer"}, now) is None for e in self.params.electorate):
            nxt = sub.intake.next_due()
            self.at(max(self.now + 1, self._to_virtual(sub, nxt) if nxt is not None else self.now + 1_000),
                    "script", -1, ("goal", None))
            return
        self.goal_id = self.publish(sub, Goal(title=self.cfg.goal, params=self.params)).id

    def by_name(self, name: str) -> SimAgent:
        return next(a for a in self.agents if a.name == name)

    def run(self) -> SimStats:
        if self.checker is None:
            self.checker = Checker(self)
        self.start()
        limit = START_MS + self.cfg.limit_ms
        while self.heap:
            when = self.heap[0][0]
            if when > limit:
                break
            self.now = max(self.now, when)
            changed = set()
            while self.heap and self.heap[0][0] <= self.now:
                _, _, kind, idx, payload = heapq.heappop(self.heap)
                self._handle(kind, idx, payload)
                if idx >= 0:
                    changed.add(idx)
            self._poll_dirty()
            self.stats.steps += 1
            if self.stats.steps % self.cfg.check_every == 0:
                self.checker.after_step()
            if self._finished():
                break
        self.stats.virtual_ms = self.now - START_MS
        self.quiesce()
        self.checker.at_end()
        return self.stats

    def _finished(self) -> bool:
        if self.stats.done_ms is None:
            obs = self.agents[-1]
            if obs.up and obs.tree(self.local(obs)).is_done(self.goal_id):
                self.stats.done_ms = self.now - START_MS
        if self.now < START_MS + self.cfg.fault_phase_ms or self.stats.done_ms is None:
            return False
        honest = [a for a in self.agents if not a.byzantine and a.up]
        return all(a.tree(self.local(a)).is_done(self.goal_id) for a in honest)

    def quiesce(self) -> None:
        """Heal everything and let every agent pull every other's log until nothing is new:
        what the real swarm's anti-entropy reaches given time."""
        self.net.partition = None
        for a in self.agents:
            if a.crashed:
                self._restart(a)
            a.paused_until = None
            for kind, payload in a.buffered:
                self._deliver(a, kind, payload)
            a.buffered.clear()
        # let time pass: events stamped by a fast clock are held until they are due
        self.now += max(a.intake.config.max_drift_ms for a in self.agents)
        for a in self.agents:
            for offer in a.intake.due(self.local(a)):
                self._took(a, offer)
        # an author's rate refills between passes: what one pass refused for now (the author
        # over its rate) is offered again later, as the real sync's rescans do (RESCAN_EVERY)
        refill = max(int(1000 * max(c.author_burst / c.author_rate, c.claim_burst / c.claim_rate))
                     for c in {a.intake.config for a in self.agents})
        for _ in range(20):
            # every stored event once, with its first holder (agents in order, each log in
            # order): nothing is published while logs are pulled, so this is every log's union
            # for the whole pass, and each agent walks it once (not every other agent's log:
            # O(N x events), not O(N^2 x events), at a thousand agents)
            union: dict[str, tuple[bytes, SimAgent]] = {}
            for b in self.agents:
                for raw in b.log.records:
                    ev = self.net.decode(raw)
                    if ev is not None and ev.id not in union:
                        union[ev.id] = (raw, b)
            new = 0
            limited = self.stats.rejected.get(Reason.RATE_LIMITED.value, 0)
            for a in self.agents:
                for eid, (raw, b) in union.items():
                    if b is not a and not a.intake.knows(eid):
                        new += self.offer(a, raw, "sync:" + b.me)
            if not new and self.stats.rejected.get(Reason.RATE_LIMITED.value, 0) == limited:
                break
            self.now += refill
            for a in self.agents:
                for offer in a.intake.due(self.local(a)):
                    self._took(a, offer)

    def _scripted(self, action: str, args: Any) -> None:
        if action == "goal":
            self._post_goal()
        elif action == "partition":
            groups = {a.idx: 2 for a in self.agents}  # anyone unnamed sits alone in group 2
            for g, names in enumerate(args):
                for name in names:
                    groups[self.by_name(name).idx] = g
            self.net.partition = groups
            self.stats.injected.append(f"{self.now - START_MS} ms: partition {args}")
        elif action == "heal":
            self._handle("heal", -1, None)
        elif action in ("crash", "restart"):
            self._handle(action, self.by_name(args).idx, None)
        elif action == "pause":
            name, ms = args
            self._handle("pause", self.by_name(name).idx, ms)
        elif action == "join":
            role, count = args
            for _ in range(count):
                n = sum(1 for a in self.agents if a.role == role) + 1
                name = f"{role}-{n}"
                a = SimAgent(len(self.agents), name, role, self.cast.identity(name), self._new_shell())
                a.credential = self.cast.credential(a)
                a.behaviour = self.cast.behaviour(a)
                self.agents.insert(len(self.agents) - 1, a)  # the observer stays last
                for i, b in enumerate(self.agents):
                    b.idx = i
                if self.net.partition is not None:
                    self.net.partition = {b.idx: self.net.partition.get(b.idx, 0) for b in self.agents}
                self.stats.injected.append(f"{self.now - START_MS} ms: {name} joins")
                self.publish(a, Hello(role=role, name=name))
                self.net.request_sync(a, [b for b in self.agents if b is not a and b.up], None)
                self.at(self.now + self.cfg.sync_interval_ms, "antientropy", a.idx)
        else:
            raise ValueError(f"unknown scripted action {action!r}")

    def _handle(self, kind: str, idx: int, payload: Any) -> None:
        if kind == "script":
            self._scripted(*payload)
            return
        if kind == "partition":
            groups = {a.idx: self.rng.randint(0, 1) for a in self.agents}
            self.net.partition = groups
            self.stats.injected.append(f"{self.now - START_MS} ms: partition "
                                       + " | ".join(",".join(a.name for a in self.agents if groups[a.idx] == g) for g in (0, 1)))
            return
        if kind == "heal":
            if self.net.partition is not None:
                self.net.partition = None
                self.stats.injected.append(f"{self.now - START_MS} ms: heal")
            return
        a = self.agents[idx]
        if kind == "crash":
            if not a.crashed:
                self._crash(a)
            return
        if kind == "restart":
            if a.crashed:
                self._restart(a)
            return
        if kind == "pause":
            if a.up:
                a.paused_until = self.now + payload
                self.stats.injected.append(f"{self.now - START_MS} ms: pause {a.name} for {payload} ms")
                self.at(a.paused_until, "resume", a.idx, None)
            return
        if kind == "resume":
            if a.paused_until is not None and not a.crashed:
                a.paused_until = None
                buffered, a.buffered = a.buffered, []
                for k, p in buffered:
                    if k == "held_back":
                        # its hold ran out during the pause: released now (replayed as a
                        # delivery it was dropped, and the agent's every later publish queued
                        # behind it for good: seed 2861, an honest elector mute for 2 hours)
                        self._release_held(a, p)
                    else:
                        self._deliver(a, k, p)
                a.dirty = True
            return
        if kind == "held_back":
            if a.paused_until is not None and not a.crashed:
                a.buffered.append((kind, payload))
                return
            self._release_held(a, payload)
            return
        if kind == "antientropy":
            self.at(self.now + self.cfg.sync_interval_ms, "antientropy", a.idx)
        if a.crashed:
            return
        if a.paused_until is not None:
            if kind != "antientropy":  # a paused process does not pull
                a.buffered.append((kind, payload))
            return
        self._deliver(a, kind, payload)

    def _release_held(self, a: SimAgent, epoch: int) -> None:
        """The publishes held back until the agent's stamps were within the bound: the first
        goes now, it waited its time (``_run``)."""
        if epoch == a.epoch and a.deferred and not a.crashed:
            effects, a.deferred = a.deferred, []
            self._run(a, effects, held=True)

    def _deliver(self, a: SimAgent, kind: str, payload: Any) -> None:
        if a.crashed:
            return
        if kind == "deliver":
            raw, src = payload
            if not self.net.reachable(src, a.idx):
                self.stats.lost += 1
                return
            self.stats.deliveries += 1
            self.offer(a, raw, self._sender(src))
        elif kind == "antientropy":
            self.net.antientropy(a)
        elif kind == "sync_done":
            epoch, ticket, raws, peers, holders, trips = payload
            if epoch != a.epoch:
                return
            raw_now = self.now + a.skew
            members = a.intake.plan.members
            for peer, sent, peer_ms in trips:
                if counts_peer_for_clock(members, peer, peer_ms):
                    a.clock.round_trip(peer, sent, peer_ms, raw_now)
            new = sum(self.offer(a, raw, "sync:" + self.agents[src].me) for raw, src in raws)
            a.synced = a.synced or peers > 0
            if ticket is not None and a.behaviour is not None:
                self._answer(a, ticket, SyncDone(new, peers, holders))
        elif kind == "llm":
            epoch, ticket, req = payload
            if epoch != a.epoch or ticket not in a.asks:
                if epoch == a.epoch:
                    self.stats.llm_wasted += 1
                return
            del a.asks[ticket]
            self._answer(a, ticket, self.llm.answer(req))
        elif kind == "wake":
            epoch = payload
            if epoch == a.epoch:
                a.wake_at = None
                a.dirty = True
        a.dirty = True
        for offer in a.intake.due(self.local(a)):
            self._took(a, offer)

    # ------------------------------------------------------------------ crashes
    def _crash(self, a: SimAgent) -> None:
        a.crashed = True
        a.epoch += 1
        a.asks.clear()
        a.deferred = []
        torn = ""
        if a.log.records and self.rng.random() < self.cfg.faults.torn:
            last = self.net.decode(a.log.records[-1])
            # our runtime stores an event of ours before publishing it: a torn own event was
            # never published, unless a peer has it already (then the crash came later)
            if last is not None and (self.origin.get(last.id) != a.idx or not self._seen_elsewhere(a, last.id)):
                a.log.tear_last()
                torn = " (torn last write)"
                if self.origin.get(last.id) == a.idx:
                    self.retracted.add(last.id)
        self.stats.injected.append(f"{self.now - START_MS} ms: crash {a.name}{torn}")

    def _seen_elsewhere(self, a: SimAgent, event_id: str) -> bool:
        return any(b is not a and b.intake.knows(event_id) for b in self.agents)

    def _restart(self, a: SimAgent) -> None:
        a.crashed = False
        a.synced = False
        a.paused_until = None
        a.buffered.clear()
        a.shell = AgentShell(Intake(a.intake.config, Plan(self.membership)), a.log)
        a.cursors, a.pulls = {}, {}
        events = [e for raw in a.log.records if (e := self.net.decode(raw)) is not None]
        a.intake.restore(events, self.local(a))
        a.ids_hash = 0
        for e in a.intake.plan.events.values():
            a.ids_hash ^= int(e.id[:16], 16)
        a.behaviour = self.cast.behaviour(a)
        a.clock, a.clock_checked = ClockCorrection(a.intake.config.max_ahead_ms), 0  # a new process
        a.wake_at = None
        a.dirty = True
        self.stats.injected.append(f"{self.now - START_MS} ms: restart {a.name} from {len(a.log)} stored events")

    # ------------------------------------------------------------------ behaviours
    def _poll_dirty(self) -> None:
        for _ in range(50):  # effects answered at once can dirty agents again
            dirty = [a for a in self.agents if a.dirty and a.up and a.behaviour is not None and not a.deferred]
            if not dirty:
                return
            for a in dirty:
                a.dirty = False
                if a.behaviour.idle(a.intake.plan):
                    continue
                now = self.local(a)
                a.shell.hand_net_view(a.behaviour, now)
                effects = a.behaviour.poll(a.tree(now), now)
                self._run(a, effects)
            for a in self.agents:
                if a.role in ("submitter", "observer"):
                    a.dirty = False

    def _answer(self, a: SimAgent, ticket: int, answer: Any) -> None:
        assert a.behaviour is not None
        now = self.local(a)
        a.shell.hand_net_view(a.behaviour, now)
        self._run(a, a.behaviour.answered(ticket, answer, a.tree(now), now))

    def _run(self, a: SimAgent, effects: list[Effect], held: bool = False) -> None:
        if a.deferred:  # a publish before these waits: they come after it, in order
            a.deferred.extend(effects)
            return
        for k, eff in enumerate(effects):
            if type(eff) is Publish and not a.byzantine and not (held and k == 0):
                until = hold_back_until(a.intake.clock.wall, self.local(a), a.intake.config.max_ahead_ms)
                if until is not None:
                    a.deferred = list(effects[k:])
                    self.stats.held_back += 1
                    wait = min(until - self.local(a), a.intake.config.max_drift_ms)
                    self.at(self.now + max(1, wait), "held_back", a.idx, a.epoch)
                    return
            if a.deferred:  # an answered ticket below held back: the rest wait too
                a.deferred.extend(effects[k:])
                return
            if isinstance(eff, SybilPublish):  # the simulator's own effect: no driver has it
                self._sybil(a, eff)
            else:
                getattr(self, route(eff))(a, eff)

    # ------------------------------------------------------------------ effects (agent.shell.effects)
    def on_publish(self, a: SimAgent, eff: Publish) -> None:
        if isinstance(eff, ForgedPublish):
            self._forge(a, eff)
            return
        try:
            ev = self.publish(a, eff.body)
        except Rejected as exc:
            # a behaviour published what its own fold refuses: a bug, surfaced
            raise AssertionError(f"{a.name} published an invalid {eff.body.type}: {exc}") from exc
        if eff.ticket is not None:
            self._answer(a, eff.ticket, ev)

    def on_ask(self, a: SimAgent, eff: Ask) -> None:
        task = getattr(a.behaviour, "task", None)
        if task is not None and getattr(task, "claim", None) is not None:
            self.stats.executions.setdefault(getattr(task, "key", task.node), set()).add(task.claim)
        kind = eff.request.kind
        a.asks[eff.ticket] = kind
        self.stats.llm_calls[kind] = self.stats.llm_calls.get(kind, 0) + 1
        self.at(self.now + self.llm.latency_ms(kind), "llm", a.idx, (a.epoch, eff.ticket, eff.request))

    def on_cancel(self, a: SimAgent, eff: Cancel) -> None:
        if a.asks.pop(eff.ticket, None) is not None:
            self.stats.llm_cancelled += 1

    def on_sync(self, a: SimAgent, eff: SyncPeers) -> None:
        self.net.request_sync(a, self.net.peers_of(a), eff.ticket, eff.confirm)

    def on_wake(self, a: SimAgent, eff: WakeAt) -> None:
        at = self._to_virtual(a, eff.at_ms)
        if a.wake_at is None or at < a.wake_at or a.wake_at <= self.now:
            a.wake_at = max(at, self.now + 1)
            self.at(a.wake_at, "wake", a.idx, a.epoch)

    def on_metric(self, a: SimAgent, eff: Count | Observe) -> None:
        self.stats.tally.record(eff)

    def on_log(self, a: SimAgent, eff: Log) -> None:
        if self.cfg.trace:
            self.trace.append((self.now - START_MS, a.name, eff.event, dict(eff.fields)))

    def _forge(self, a: SimAgent, eff: ForgedPublish) -> None:
        """A Byzantine member's event (``forge.py``): filed in its own log if its fold takes it,
        and sent."""
        now = self.local(a)
        ev = self.forger.forged(a.identity, a.intake.clock, eff, now)
        self._sent(a, ev)
        offer = a.intake.offer(ev, "self", now)
        if offer.ok:
            for e in offer.accepted:  # ours first, then what it unblocked
                self._stored(a, e)
        self.net.gossip(a, ev.raw)

    def _sybil(self, a: SimAgent, eff: SybilPublish) -> None:
        """One of an insider's extra keys (no credential) signs ``eff.body``; it is only sent."""
        ev = self.forger.sybil(a.name, a.credential, eff, self.local(a))
        self._sent(a, ev)
        self.net.gossip(a, ev.raw)

    def _sent(self, a: SimAgent, ev: Event) -> None:
        self.origin[ev.id] = a.idx
        self.stats.events_published += 1

    def _sender(self, idx: int) -> str:
        return self.agents[idx].me



def simulate(cfg: SimConfig) -> Simulation:
    sim = Simulation(cfg)
    sim.run()
    return sim


__all__ = ["START_MS", "SimAgent", "SimStats", "Simulation", "sim_identity", "simulate", "PublishFailed"]
