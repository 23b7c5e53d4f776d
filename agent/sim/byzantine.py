"""Byzantine members for the simulator, within the documented bound: electors that equivocate
and back-date (fewer than 2q - n of them), and an executor that squats on tasks."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from agent.behaviour import Executor, Scorer
from agent.behaviour.effects import Effect, Publish
from agent.core.consensus import LEAF, NIL
from agent.core.events import Claim, Renew, Vote
from agent.core.tree import NodeState, Tree


@dataclass(frozen=True)
class ForgedPublish(Publish):
    """Sign and send without the author's own checks, stamped ``backdate_ms`` in the past."""

    backdate_ms: int = 0


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
