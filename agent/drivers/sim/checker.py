"""The invariants, checked by code after every simulation step (never by eye):

- convergence: agents holding the same events have the same digest; after healing and
  quiescence every agent holds the same events and the same digest;
- finality: at most one decided value per node, everywhere, and once an honest agent has seen
  a node decided it never sees it undecided or decided otherwise;
- electorate: every stored vote is from the goal's electorate;
- stable results: a task's counted result never changes once every honest agent has it; a
  done task never becomes undone at any agent; and in a run whose only faults are clocks (a
  clock off is no fault, README), a counted result never changes at any agent, watched after
  every step while the plan runs;
- exactly-once: without faults (clocks off included) no task attempt gets LLM work from two
  claims, watched after every step, nor two valid results (under faults the count is reported);
- budget: a goal spends at most its token budget plus one call per LLM agent in flight when it
  ran out (agent.core.budget);
- liveness: after the faults end the goal is done within the time limit; and no author's
  claims hold a task (without yielding) for more than the goal's max_lease_ms in all;
- membership: every event an honest agent filed is admitted by its author's credential (a
  role that may author it, stamped within the credential, not revoked), every goal's
  electorate is credentialed scorers (with a committee: the committee its pool draws), and
  nothing signed by an insider's extra keys is filed;
- memory bounded: held (ahead-stamped) and waiting events stay within the intake's bounds,
  per author (tighter for authors without a credential) and in all;
- no behaviour raises (the simulator lets exceptions through; the sweep reports them).
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any

from agent.core import committee

from agent.core.slots import base_node
from agent.core.tree import derive

from .config import START_MS


@dataclass(frozen=True)
class Violation:
    invariant: str
    detail: str
    at_ms: int

    def __str__(self) -> str:
        return f"{self.invariant} at {self.at_ms} ms: {self.detail}"


INVARIANTS = ("convergence", "finality", "electorate", "stable_results", "exactly_once", "liveness", "budget",
              "lease_bound", "membership", "memory_bounded", "no_raise")


@dataclass
class Checker:
    sim: Any  # the Simulation being checked (it holds the checker: no import back)
    convergence_every: int = 25
    violations: list[Violation] = field(default_factory=list)
    decided: dict[str, str] = field(default_factory=dict)  # node -> value (first seen anywhere)
    seen_decided: dict[tuple[int, int, str], str] = field(default_factory=dict)  # (agent, epoch, node)
    done_at: dict[tuple[int, int, str], str] = field(default_factory=dict)  # -> counted result id
    settled: dict[str, str] = field(default_factory=dict)  # node -> result every honest agent counts
    _versions: dict[int, int] = field(default_factory=dict)
    _plans: dict[int, Any] = field(default_factory=dict)  # agent -> the plan object last checked
    _steps: int = 0
    _admitted: dict[tuple[int, int], int] = field(default_factory=dict)  # (agent, epoch) -> events checked
    peak_held: int = 0
    peak_waiting: int = 0
    _twice_seen: set = field(default_factory=set)  # task attempts already reported as run twice
    # (agent, epoch, task) -> (when last checked, each author's spans holding it without
    # yielding as that view read them); (agent, epoch, task, author) -> ms seen holding it
    _hold_views: dict = field(default_factory=dict)
    _held_seen: dict = field(default_factory=dict)

    def __post_init__(self) -> None:
        cfg = self.sim.cfg
        # no fault but clocks (README: a clock off by up to the drift bound is no fault once the
        # agent heard two peers): the fault-free bound holds, watched while the plan runs
        self.faultless = cfg.faults == type(cfg.faults)() and not cfg.script
        self.clocks_only = replace(cfg.faults, skew_ms=0, fast_clock_ms=0) == type(cfg.faults)() and not cfg.script

    def fail(self, invariant: str, detail: str) -> None:
        if len(self.violations) < 50:
            self.violations.append(Violation(invariant, detail, self.sim.now - START_MS))

    # ------------------------------------------------------------------ per step
    def after_step(self) -> None:
        self._steps += 1
        sim = self.sim
        changed = []
        for a in sim.agents:
            v = a.intake.plan.version
            if self._versions.get(a.idx) != v:
                changed.append((a, self._versions.get(a.idx)))
                self._versions[a.idx] = v
        for a, before in changed:
            if not a.byzantine:
                self._check_agent(a, before)
                self._check_members(a)
        if self._steps % 5 == 0:  # (bounds hold at every step; sampled, to keep the sweep fast)
            for a in sim.agents:
                if not a.byzantine:
                    self._check_memory(a)
        if changed:
            self._check_settled()
        if self.clocks_only:
            self._check_executions()
        if self._steps % self.convergence_every == 0:
            self._check_convergence()

    def _keys(self, a, before: int | None):
        """The slots and task keys the agent's plan changed since version ``before`` (all of
        them for a plan not checked before: a new agent, or one restarted from its log)."""
        plan = a.intake.plan
        if before is None or self._plans.get(a.idx) is not plan or before > plan.version:
            self._plans[a.idx] = plan
            return list(plan.by_node.items())
        out = []
        for node in set(plan.changes[before:]):
            for key in (node, f"{node}#b", *(f"{node}#v{i}" for i in range(1, 10)),
                        *(f"{node}#{i}" for i in range(2, 10))):
                ne = plan.by_node.get(key)
                if ne is not None:
                    out.append((key, ne))
        return out

    def _check_agent(self, a, before: int | None = None) -> None:
        plan = a.intake.plan
        for node, ne in self._keys(a, before):
            if ne.votes:
                value = plan.decided(node)
                key = (a.idx, a.epoch, node)  # a restart may lose a torn last write: a new view
                before = self.seen_decided.get(key)
                if before is not None and value != before:
                    self.fail("finality", f"{a.name} saw node {node[:12]} decided {before[:12]}, now {str(value)[:12]}")
                if value is not None:
                    self.seen_decided[key] = value
                    first = self.decided.setdefault(node, value)
                    if first != value:
                        self.fail("finality", f"node {node[:12]} decided {first[:12]} at one agent, {value[:12]} at {a.name}")
                    ref = plan.node_ref(base_node(node))
                    if ref is not None:
                        electorate = set(plan.params(ref).electorate)
                        stray = {v.author for v in ne.votes} - electorate
                        if stray:
                            self.fail("electorate", f"{a.name} stored votes on {node[:12]} from non-electors")
            if ne.claims:
                self._check_lease_bound(a, plan, node)
            if ne.claims and a.synced:
                # (a restarted agent's view is provisional until its first sync: a crash may have
                # lost a received result, so a later one counts there until it is pulled again;
                # the roles do not act before that sync either)
                counted = plan.leases(node).counted
                key = (a.idx, a.epoch, node)
                if counted is None:
                    if key in self.done_at:
                        self.fail("stable_results", f"{a.name}: task {node[:12]} was done, is undone")
                else:
                    was = self.done_at.get(key)
                    if self.clocks_only and was is not None and was != counted.id:
                        self.fail("stable_results", f"{a.name}: task {node[:12]} counted {was[:12]}, now "
                                                    f"{counted.id[:12]}, with no fault but clocks")
                    self.done_at[key] = counted.id
                    settled = self.settled.get(node)
                    if settled is not None and settled != counted.id:
                        self.fail("stable_results", f"{a.name}: task {node[:12]} counted {settled[:12]} "
                                                    f"everywhere, now {counted.id[:12]}")

    def _check_lease_bound(self, a, plan, node: str) -> None:
        ref = plan.node_ref(node)
        if ref is None:
            return
        cap = plan.params(ref).max_lease_ms
        spans: dict[str, list[tuple[int, int]]] = {}
        for c in plan.leases(node).claims:  # the time each claim held the task without yielding
            spans.setdefault(c.author, []).append((c.start, min(c.end, c.yield_from)))
        for author, ss in spans.items():
            held = _union(ss)
            if held > cap:
                self.fail("lease_bound", f"{a.name}: {author[-6:]} holds task {node[:12]} for {held} ms in all, "
                                         f"max {cap}")
        # ...and as the agent saw it while it went: the view in force since the last change
        # held the task for each author over that stretch of the agent's clock. The final set
        # alone cannot show a squatter whose releases, published late and stamped early, made
        # each claim look short afterwards (the audit: 69 s held of 69 on a 10 s cap)
        now = self.sim.local(a)
        key = (a.idx, a.epoch, node)
        last = self._hold_views.get(key)
        if last is not None:
            since, seen = last
            now = max(now, since)  # a clock correction steps the agent's clock back: not twice
            for author, ss in seen.items():
                held = _union([(max(x, since), min(y, now)) for x, y in ss])
                if held:
                    total = self._held_seen[key + (author,)] = self._held_seen.get(key + (author,), 0) + held
                    if total > cap:
                        self.fail("lease_bound", f"{a.name} saw {author[-6:]} hold task {node[:12]} without "
                                                 f"yielding for {total} ms of its clock, max {cap}")
        self._hold_views[key] = (now, spans)

    def _check_members(self, a) -> None:
        from agent.core.membership import ROLES_FOR

        plan = a.intake.plan
        m = plan.members
        if not m.closed:
            return
        key = (a.idx, a.epoch)
        events = list(plan.events.values())
        start = self._admitted.get(key, 0)
        if start > len(events):
            start = 0  # (a refold reordered the plan's events)
        for ev in events[start:]:
            if ev.id in self.sim.forger.sybil_ids:
                self.fail("membership", f"{a.name} filed a {ev.type} of an insider's extra key")
                continue
            if ev.type == "revoke":
                continue
            stamp = (ev.hlc.wall, ev.hlc.logical)
            if m.revoked_at(ev.author, stamp):
                self.fail("membership", f"{a.name} filed a {ev.type} its author stamped after its revocation")
            if ev.type == "hello":
                c = ev.body.credential
                if c is None or c.peer != ev.author:
                    self.fail("membership", f"{a.name} filed a hello without its author's credential")
                continue
            if m.covering(ev.author, ROLES_FOR[ev.type], ev.hlc.wall) is None:
                self.fail("membership", f"{a.name} filed a {ev.type} from {ev.author[-6:]}, whose credentials "
                                        f"do not grant it")
            if ev.type == "goal":
                stray = [e for e in ev.body.params.electorate
                         if m.covering(e, {"scorer"}, ev.hlc.wall) is None or m.revoked_at(e, stamp)]
                if stray:
                    self.fail("electorate", f"{a.name} filed a goal naming {len(stray)} uncredentialed electors")
                p = ev.body.params
                if p.committee and committee.problem(ev.author, ev.body.title, ev.body.description,
                                                     p.electorate, p.pool, p.committee):
                    self.fail("electorate", f"{a.name} filed a goal whose electorate is not its drawn committee")
        self._admitted[key] = len(events)

    def _check_memory(self, a) -> None:
        intake = a.intake
        cfg = intake.config
        held, held_one, waiting, waiting_one = intake.holding()
        self.peak_held = max(self.peak_held, held)
        self.peak_waiting = max(self.peak_waiting, waiting)
        if held > cfg.held_max or held_one > cfg.held_per_author:
            self.fail("memory_bounded", f"{a.name} holds {held} ahead-stamped events, {held_one} from one author")
        if waiting_one > cfg.pending_per_author:
            self.fail("memory_bounded", f"{a.name} keeps {waiting_one} waiting events of one author")
        if not intake.plan.members.closed:
            return
        for who in [b.me for b in self._strangers()] + sorted(self.sim.forger.sybil_authors):
            if intake.held_from(who) > max(1, cfg.held_per_author // 8) or \
                    intake.waiting_from(who) > cfg.pending_per_stranger:
                self.fail("memory_bounded", f"{a.name} holds more of {who[-6:]} (no credential) than a stranger may")

    def _strangers(self) -> list:
        got = getattr(self, "_stranger_list", None)
        if got is None:
            got = self._stranger_list = [b for b in self.sim.agents if b.credential is None]
        return got

    def _check_settled(self) -> None:
        honest = [a for a in self.sim.agents if not a.byzantine]
        nodes = {node for (_idx, _epoch, node) in self.done_at}
        for node in nodes:
            if node in self.settled:
                continue
            results = {self.done_at.get((a.idx, a.epoch, node)) for a in honest}
            if len(results) == 1 and None not in results:
                self.settled[node] = results.pop()

    def _check_executions(self) -> None:
        """Executions per task attempt as they happen: a claim that spent LLM work on a task
        attempt another claim also worked on (sim.stats.executions, filled at each call)."""
        ex = self.sim.stats.executions
        if len(self._twice_seen) == len(ex):
            return
        for task, claims in ex.items():
            if len(claims) > 1 and task not in self._twice_seen:
                self._twice_seen.add(task)
                self.fail("exactly_once", f"task {str(task)[:12]} got LLM work from {len(claims)} claims, "
                                          f"with no fault but clocks")

    def _check_convergence(self) -> None:
        groups: dict[tuple[int, int], list] = {}
        for a in self.sim.agents:
            groups.setdefault((a.ids_hash, len(a.intake.plan)), []).append(a)
        now = self.sim.now
        for members in groups.values():
            if len(members) < 2:
                continue
            digests = {a.tree(now).digest for a in members}
            if len(digests) > 1:
                self.fail("convergence", f"{', '.join(a.name for a in members)} hold the same events but "
                                         f"{len(digests)} digests")

    # ------------------------------------------------------------------ at the end
    def at_end(self) -> None:
        sim = self.sim
        self.after_step()
        now = sim.now
        # the honest agents converge; a Byzantine member keeps what its own checks let through
        # (seed 1694: the insider, cut off alone, stored 76 claims of its own that every honest
        # peer refused when the partition healed, as rate-limited or back-dated)
        honest = [a for a in sim.agents if not a.byzantine]
        ids = {a.name: set(a.intake.plan.events) for a in honest}
        first = next(iter(ids.values()))
        for name, s in ids.items():
            if s != first:
                self.fail("convergence", f"after quiescence {name} holds {len(s)} events, others {len(first)}")
                break
        digests = {derive(a.intake.plan, now).digest for a in honest}
        if len(digests) > 1:
            self.fail("convergence", f"after quiescence {len(digests)} different digests")
        tree = derive(sim.agents[-1].intake.plan, now)
        self._check_budget(sim.agents[-1].intake.plan)
        if not tree.is_done(sim.goal_id):
            counts = ", ".join(f"{k}={v}" for k, v in tree.counts().items() if v)
            self.fail("liveness", f"goal not done after {sim.cfg.limit_ms // 1000} s ({counts})")
        twice = sum(n.executed_twice for n in tree.walk())
        # the documented bound under faults: a task runs at most once per side of each
        # partition and once more per holder paused past its lease (then its result is late)
        splits = sum(1 for line in sim.stats.injected if ": partition" in line)
        pauses = sum(1 for line in sim.stats.injected if ": pause" in line)
        bound = 1 + splits + pauses
        for n in tree.walk():
            if n.task is not None and 1 + n.executed_twice > bound * n.attempt:
                self.fail("exactly_once", f"task {n.id[:12]} has {1 + n.executed_twice} valid results; "
                                          f"the bound for {splits} partitions and {pauses} pauses is {bound}")
        if self.clocks_only and twice:  # (LLM work from two claims: _check_executions, each step)
            self.fail("exactly_once", f"without any fault {'but clocks ' if not self.faultless else ''}"
                                      f"{twice} task(s) have more than one valid result")

    def _check_budget(self, plan) -> None:
        goal = plan.goals.get(self.sim.goal_id)
        budget = goal.body.params.token_budget if goal is not None else 0
        if not budget:
            return
        # each LLM agent has at most one call in flight when the budget runs out; the event it
        # then publishes carries that call (and the attempts before it, for a result)
        biggest: dict[str, int] = {}
        for e in plan.events.values():
            cost = getattr(e.body, "prompt_tokens", 0) + getattr(e.body, "completion_tokens", 0)
            biggest[e.author] = max(biggest.get(e.author, 0), cost)
        spent = plan.spent_total(self.sim.goal_id)
        bound = budget + sum(biggest.values())
        if spent > bound:
            self.fail("budget", f"spent {spent} tokens on a budget of {budget}; the bound is {bound}")

    @property
    def ok(self) -> bool:
        return not self.violations


def _union(spans: list[tuple[int, int]]) -> int:
    """The length of the union of [start, end) spans."""
    total, reach = 0, None
    for start, end in sorted(spans):
        if reach is not None and start < reach:
            start = reach
        if end > start:
            total += end - start
            reach = end
    return total
