"""Byzantine members for the simulator, within the documented bound: electors that equivocate
and back-date (fewer than 2q - n of them), an executor that squats on tasks, and an insider
(a credentialed executor with extra keys) that tries everything a member can."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from agent.behaviour import Executor, Scorer
from agent.behaviour.effects import Effect, Publish
from agent.core.consensus import LEAF, NIL
from agent.core.events import Claim, Goal, Hello, Release, Renew, Result, Vote
from agent.core.tree import NodeState, Tree


@dataclass(frozen=True)
class ForgedPublish(Publish):
    """Sign and send without the author's own checks, stamped ``backdate_ms`` in the past (or
    at exactly ``wall``, when given)."""

    backdate_ms: int = 0
    wall: int = 0


class EquivocatingScorer(Scorer):
    """Votes like an honest elector, and also for a different value in every phase it votes
    in, sometimes back-dated: what a lying elector can do to split the swarm."""

    def _lie(self, tree: Tree, effects: list[Effect]) -> list[Effect]:
        out: list[Effect] = []
        for eff in effects:
            out.append(eff)
            if isinstance(eff, Publish) and isinstance(eff.body, Vote):
                v = eff.body
                n = tree.node(v.node)
                options = [p.id for p in n.proposals] if n is not None else []
                options += [LEAF, NIL]
                others = [o for o in options if o != v.value]
                if others:
                    other = self.rng.choice(others)
                    back = self.rng.choice((0, 0, 5_000, 600_000))
                    out.append(ForgedPublish(Vote(node=v.node, round=v.round, phase=v.phase, value=other),
                                             backdate_ms=back))
        return out

    def _poll(self, tree: Tree, now: int) -> list[Effect]:
        return self._lie(tree, super()._poll(tree, now))

    def _answered(self, ticket: int, answer: Any, tree: Tree, now: int) -> list[Effect]:
        return self._lie(tree, super()._answered(ticket, answer, tree, now))


class SquatterExecutor(Executor):
    """Claims every ready task it sees with the longest lease the goal allows, renews it and
    never works: the lease cap and the claim race must keep the plan moving."""

    def __init__(self, *args: Any, active_until: int | None = None, **kw: Any) -> None:
        super().__init__(*args, **kw)
        self.held: dict[str, tuple[str, int]] = {}  # node -> (claim id, renewed at)
        self.active_until = active_until
        self._pending: dict[int, str] = {}

    def _poll(self, tree: Tree, now: int) -> list[Effect]:
        if self.active_until is not None and now >= self.active_until:
            return []
        out: list[Effect] = []
        for n in tree.walk():
            if n.task is not None and n.state is NodeState.READY and n.id not in self.held \
                    and n.id not in self._pending.values():
                t = self.ticket()
                self._pending[t] = n.id
                out.append(Publish(Claim(node=n.id, lease_ms=n.params.max_lease_ms), t))
        for node, (claim, at) in list(self.held.items()):
            n = tree.node(node)
            if n is None or n.state is NodeState.DONE:
                del self.held[node]
                continue
            if now - at >= n.params.max_lease_ms // 3:
                self.held[node] = (claim, now)
                out.append(Publish(Renew(node=node, claim=claim, lease_ms=n.params.max_lease_ms)))
        return out

    def _answered(self, ticket: int, answer: Any, tree: Tree, now: int) -> list[Effect]:
        node = self._pending.pop(ticket, None)
        if node is not None and hasattr(answer, "id"):
            self.held[node] = (answer.id, now)
        return []


class StrangerVoter(Scorer):
    """A member outside the goal's electorate that votes anyway, every phase, for anything:
    the fold must refuse every one of its votes (a Sybil, or a scorer added after the goal)."""

    cast: set

    def __init__(self, *args: Any, **kw: Any) -> None:
        super().__init__(*args, **kw)
        self.cast = set()

    def votable(self, n) -> bool:  # pretend to be an elector
        return not n.leaf and n.decided is None and n.depth < n.params.max_depth

    def idle(self, plan) -> bool:
        return False  # on no electorate by design: it votes anyway

    def _poll(self, tree: Tree, now: int) -> list[Effect]:
        out: list[Effect] = []
        for n in tree.walk():
            if not self.votable(n) or n.tally is None:
                continue
            rnd = max(1, n.tally.top_round)
            if (n.id, rnd) in self.cast:
                continue
            self.cast.add((n.id, rnd))
            options = [p.id for p in n.proposals] + [LEAF]
            value = self.rng.choice(options)
            for phase in ("prevote", "precommit"):
                out.append(ForgedPublish(Vote(node=n.id, round=rnd, phase=phase, value=value),
                                         backdate_ms=self.rng.choice((0, 60_000))))
            break
        return out

    def _answered(self, ticket: int, answer: Any, tree: Tree, now: int) -> list[Effect]:
        return []


@dataclass(frozen=True)
class SybilPublish:
    """Sign ``body`` with one of the insider's extra keys (no credential), stamped
    ``ahead_ms`` ahead of (or, negative, behind) its clock, and send it."""

    body: Any
    key: int  # which extra key
    ahead_ms: int = 0
    stolen: bool = False  # a hello carrying the insider's own credential


class InsiderExecutor(Executor):
    """A member with an executor's credential and extra keys of its own, doing what a key
    holder inside the swarm can try (issue 19), each bounded by a rule the honest peers fold:

    - squats: claims every ready task with the longest lease, renews, and re-claims back to
      back when the lease ends, releasing the claim before with a stamp just after it (the
      per-author budget, charged the lease granted, makes it yield after max_lease_ms);
    - pre-claims nodes that are not tasks yet (filed only if provably after: never);
    - back-dates results: stamped before its own claim, on honest executors' claims, and on
      its pre-claims (refused: backdated, not_claimant, unknown claim);
    - votes and scores with its executor credential (role_not_allowed);
    - floods: bursts of events stamped far ahead (held, bounded per author and in all) and of
      hellos from fresh keys without a credential (refused before they are held);
    - tries to pack an electorate: its extra keys announce themselves as scorers, and submit
      goals naming themselves as the electorate (not_member; bad_electorate).

    It never back-dates a claim *and* a result of its own to before an honest claim: that
    remains trust in executors (README, "Safety and threat model")."""

    def __init__(self, *args: Any, active_until: int | None = None, extra_keys: int = 4, **kw: Any) -> None:
        super().__init__(*args, **kw)
        self.active_until = active_until
        self.extra_keys = extra_keys
        self.held: dict[str, tuple[str, int, int]] = {}  # node -> (claim id, claimed at, renewed at)
        self.stamps: dict[str, int] = {}  # claim id -> its stamp (wall ms)
        self.pre: set[str] = set()  # nodes pre-claimed
        self._pending: dict[int, str] = {}
        self._floods = 0
        self._last_burst = -10**18

    def _poll(self, tree: Tree, now: int) -> list[Effect]:
        if self.active_until is not None and now >= self.active_until:
            return []
        out: list[Effect] = []
        for n in tree.walk():
            lease = n.params.max_lease_ms
            if n.task is not None and n.state is NodeState.READY and n.id not in self._pending.values():
                mine = self.held.get(n.id)
                if mine is None or now - mine[1] >= lease:
                    # squat: claim it, or re-claim back to back when its lease ran out, and
                    # then release the claim before, stamped just after it: its budget back?
                    t = self.ticket()
                    self._pending[t] = n.id
                    out.append(Publish(Claim(node=n.id, lease_ms=lease), t))
                    if mine is not None and mine[0] in self.stamps:
                        out.append(ForgedPublish(Release(node=n.id, claim=mine[0], reason="never held it"),
                                                 wall=self.stamps[mine[0]] + 1))
            elif n.task is None and n.state is not NodeState.DONE and n.id not in self.pre:
                # a pre-claim on a node that is not a task yet, and a result for it
                self.pre.add(n.id)
                out.append(ForgedPublish(Claim(node=n.id, lease_ms=lease)))
            for c in n.claims:  # back-dated or foreign results
                if c.author != self.me and self.rng.random() < 0.05:
                    out.append(ForgedPublish(Result(node=n.id, claim=c.id, output="PWNED: not my claim")))
        for node, (claim, at, renewed) in list(self.held.items()):
            n = tree.node(node)
            if n is None or n.state is NodeState.DONE:
                del self.held[node]
                continue
            lease = n.params.max_lease_ms
            if now - renewed >= lease // 3 and now - at < lease:
                self.held[node] = (claim, at, now)
                out.append(ForgedPublish(Renew(node=node, claim=claim, lease_ms=lease)))
            if self.rng.random() < 0.1 and claim in self.stamps:  # a result stamped before its own claim
                out.append(ForgedPublish(Result(node=node, claim=claim, output="PWNED: back-dated"),
                                         wall=self.stamps[claim] - 1_000))
        if now - self._last_burst >= 30_000:
            self._last_burst = now
            out += self._burst(tree)
        return out

    def _burst(self, tree: Tree) -> list[Effect]:
        """Floods and Sybils: ahead-stamped events, hellos of fresh keys, packed goals, votes."""
        self._floods += 1
        out: list[Effect] = []
        nodes = [n for n in tree.walk() if n.state is not NodeState.DONE]
        for i in range(30):  # stamped 50 s ahead: held (bounded), then refused or waiting
            n = self.rng.choice(nodes) if nodes else None
            if n is not None:
                out.append(ForgedPublish(Claim(node=n.id, lease_ms=n.params.max_lease_ms), backdate_ms=-50_000 - i))
        for k in range(self.extra_keys):  # fresh keys: hellos as scorers, claims, a packed goal
            key = self._floods * 1000 + k
            out.append(SybilPublish(Hello(role="scorer", name=f"sybil-{key}"), key, ahead_ms=55_000))
            out.append(SybilPublish(Hello(role="scorer", name=f"sybil-{key}"), key))
            out.append(SybilPublish(Hello(role="executor", name=f"sybil-{key}"), key, stolen=True))
            for i, n in enumerate((nodes * 12)[:12]):  # each key: 12 claims stamped 50 s ahead
                out.append(SybilPublish(Claim(node=n.id, lease_ms=n.params.max_lease_ms - i), key, ahead_ms=50_000))
        tasks = [n for n in nodes if n.task is not None]
        for i in range(40):  # a flood of claims on a task it may claim (rate-limited per author)
            if tasks:
                t = tasks[i % len(tasks)]
                out.append(ForgedPublish(Claim(node=t.id, lease_ms=t.params.max_lease_ms - i)))
        if nodes:
            p = nodes[0].params
            sybils = sorted({self._floods * 1000 + k for k in range(self.extra_keys)})
            out.append(SybilPublish(Goal(title="a goal of Sybils", params=p), sybils[0]))
            out.append(SybilPublish(PackedGoal(sybils), sybils[0]))
            n = nodes[0]
            if n.tally is not None and not n.leaf:
                out.append(ForgedPublish(Vote(node=n.id, round=1, phase="precommit", value=LEAF)))
        return out

    def _answered(self, ticket: int, answer: Any, tree: Tree, now: int) -> list[Effect]:
        node = self._pending.pop(ticket, None)
        if node is not None and hasattr(answer, "id"):
            self.held[node] = (answer.id, now, now)
            self.stamps[answer.id] = answer.hlc.wall
        return []


@dataclass(frozen=True)
class PackedGoal:
    """Marker: the simulator builds a goal whose electorate is these extra keys."""

    keys: list[int]

    @property
    def type(self) -> str:
        return "goal"
