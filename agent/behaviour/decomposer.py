"""Decomposer: proposes a brief (the working assumptions) for every new goal that settles one,
then, once the brief is settled, a split of every open node with its own strategy; after a
round ends without a decision it refines its newest split with the scorers' feedback.

Work ahead: once a quorum prevoted a split (a polka) that is not decided yet, an idle
decomposer starts on that split's children, so the LLM works while the precommits travel. The
answer is held until the split is decided: it becomes a proposal only for a child that exists
(nothing is published about a node that may never be), and is dropped if another value is
decided or the polka is overtaken. Real open nodes always come first."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from agent.core import rendezvous
from agent.core.plan import child_id
from agent.core.tree import NodeView, Tree
from agent.llm.base import LLMBadOutput, LLMError

from . import work
from .base import Behaviour, wake_at
from .effects import Ask, Cancel, Count, Effect, LLMReply, Metric, Publish, log
from .timing import Timing
from .votes import closed_rounds, likely_split


@dataclass
class _Job:
    ticket: int
    node: str
    refines: str | None
    attempt: int
    closed: int  # the rounds closed when the job started: what it answers
    parent: str | None = None  # work ahead: the node whose split ``split`` is not decided yet
    split: str | None = None
    brief: bool = False  # a brief for the goal ``node``, not a split


class Decomposer(Behaviour):
    role = "decomposer"

    def __init__(self, me: str, timing: Timing | None = None, seed: int = 0, strategy: str = "by phase") -> None:
        super().__init__(me, timing, seed)
        self.strategy = strategy
        self.job: _Job | None = None
        self.set_aside: dict[str, int] = {}
        self.answered_closed: dict[str, int] = {}  # node -> closed rounds my newest split answers
        self.ahead: dict[str, tuple[str, set[int]]] = {}  # undecided split -> (its node, children I started on)
        self.held: dict[str, tuple[_Job, Any]] = {}  # child -> its job and answer, until decided
        self.first_seen: dict[str, int] = {}  # slot not mine -> when I first saw it want a split

    # ------------------------------------------------------------------ what to do
    _tree: Tree | None = None

    def _phase(self, n: NodeView) -> str:
        root = self._tree.node(n.root) if self._tree is not None else None
        return (root or n).budget_phase

    def _brief_wanted(self, n: NodeView) -> bool:
        return (n.depth == 0 and n.params.brief and not n.brief_settled and n.budget_phase != "spent"
                and not any(b.author == self.me for b in n.briefs))

    def _wanted(self, n: NodeView) -> tuple[bool, str | None, int]:
        """(wanted, proposal to refine, rounds closed) for node ``n``."""
        if n.leaf or n.decided is not None or n.depth >= n.params.max_depth:
            return False, None, 0
        if n.depth == 0 and not n.brief_settled:
            return False, None, 0  # the tree grows once its working assumptions are settled
        if self._phase(n) != "open":
            return False, None, 0  # the goal's budget goes to executing what is there
        closed = closed_rounds(n)
        if closed >= n.params.max_rounds:
            return False, None, closed  # the next rounds vote LEAF: splits no longer help
        mine = [p for p in n.proposals if p.author == self.me]
        if not mine:
            return True, None, closed
        # after a restart, assume the newest split answers what had closed by then
        done = self.answered_closed.setdefault(n.id, closed)
        if closed > done:
            newest = max(mine, key=lambda p: (p.wall, p.id))
            return True, newest.id, closed
        return False, None, closed

    def _ahead_stands(self, tree: Tree, parent_id: str, split: str) -> bool:
        parent = tree.node(parent_id)
        return parent is not None and likely_split(parent) == split

    def _poll(self, tree: Tree, now: int) -> list[Effect]:
        self._tree = tree
        # a split decided or overtaken needs no memory: its children exist, or never will
        self.ahead = {s: v for s, v in self.ahead.items() if self._ahead_stands(tree, v[0], s)}
        out: list[Effect] = self._release_held(tree, now)
        job = self.job
        if job is not None and job.parent is not None:
            if tree.node(job.node) is not None:
                job.parent = job.split = None  # decided meanwhile: an ordinary job from now on
            elif self._ahead_stands(tree, job.parent, job.split or ""):
                return out  # the LLM works ahead of the decision
            else:
                self.job = None
                out += [Cancel(job.ticket),
                        log("info", "split not decided; work ahead abandoned", node=job.node)]
        if self.job is not None:
            n = tree.node(self.job.node)
            if n is None or not (self._brief_wanted(n) if self.job.brief else self._wanted(n)[0]):
                out += [Cancel(self.job.ticket),
                        log("info", "node moved on; split abandoned", node=self.job.node)]
                self.job = None
            else:
                return out
        if self.backoff.blocked(now):
            return out + wake_at([self.backoff.until_ms])
        wake = []
        for n in tree.roots:
            if self._brief_wanted(n):
                away = self._away(tree, n.id + "#b", bool(n.briefs), now)
                if away < 0:
                    continue
                until = max(self.set_aside.get(n.id + "#b", 0), away)
                if until > now:
                    wake.append(until)
                    continue
                return out + self._start_brief(tree, n, 0)
        for n in tree.walk_active():
            until = self.set_aside.get(n.id, 0)
            wanted, refines, closed = self._wanted(n)
            if not wanted:
                continue
            if refines is None:
                away = self._away(tree, n.id, bool(n.proposals), now)
                if away < 0:
                    continue
                until = max(until, away)
            if until > now:
                wake.append(until)
                continue
            return out + self._start(tree, n, refines, closed, 0)
        return out + self._work_ahead(tree) + wake_at(wake)

    def _release_held(self, tree: Tree, now: int) -> list[Effect]:
        """Answers that came before their split was decided: a proposal once the child exists,
        dropped once another value is decided or the polka is overtaken."""
        out: list[Effect] = []
        for kid, (job, answer) in list(self.held.items()):
            if tree.node(kid) is not None:
                del self.held[kid]
                job.parent = job.split = None
                out += self._finish(job, answer, tree, now, retry=False)
            elif not self._ahead_stands(tree, job.parent or "", job.split or ""):
                del self.held[kid]
                out.append(log("info", "split not decided; work ahead dropped", node=kid))
        return out

    def home(self, tree: Tree, slot: str) -> bool:
        """Whether I am one of ``slot``'s home decomposers (always, if the swarm has no more
        announced decomposers than a node takes)."""
        k = self.timing.decomposers_per_node
        ds = set(tree.with_role("decomposer")) | {self.me}
        return k <= 0 or len(ds) <= k or self.me in rendezvous.top(slot, ds, k)

    def _away(self, tree: Tree, slot: str, answered: bool, now: int) -> int:
        """0 when I may propose for ``slot`` now; a time to look again when it is not mine
        and its home decomposers may still answer; -1 when it is not mine and they did."""
        if self.home(tree, slot):
            return 0
        if answered:
            self.first_seen.pop(slot, None)
            return -1
        since = self.first_seen.setdefault(slot, now)
        until = since + self.timing.foreign_split_after_ms
        return until if until > now else 0

    def _work_ahead(self, tree: Tree) -> list[Effect]:
        for n in tree.walk_active():
            if self._phase(n) != "open":
                continue
            split = likely_split(n)
            if split is None or n.depth + 1 >= n.params.max_depth:
                continue
            p = n.proposal(split)
            assert p is not None
            done = self.ahead.setdefault(split, (n.id, set()))[1]
            for i in range(len(p.subgoals)):
                if i in done:
                    continue
                done.add(i)
                kid = child_id(split, i)
                if not self.home(tree, kid):
                    continue
                req = work.decompose_req_ahead(tree, n, p, i, self.strategy, self.rng.randrange(2**31))
                self.job = _Job(self.ticket(), kid, None, 0, 0, parent=n.id, split=split)
                return [Ask(self.job.ticket, req, kid), log("debug", "working ahead of a decision", node=kid)]
        return []

    def _start_brief(self, tree: Tree, n: NodeView, attempt: int) -> list[Effect]:
        req = work.brief_req(tree, n, self.rng.randrange(2**31))
        self.job = _Job(self.ticket(), n.id, None, attempt, 0, brief=True)
        return [Ask(self.job.ticket, req, n.id)]

    def _finish_brief(self, job: _Job, answer: Any, tree: Tree, now: int) -> list[Effect]:
        n = tree.node(job.node)
        if n is None or not self._brief_wanted(n):
            return [log("info", "brief settled while thinking; dropped", node=job.node)]
        if isinstance(answer, LLMReply):
            self.owe(n.id + "#b", answer)
            try:
                body = work.brief_from(answer.value, tree, n, *self.unpaid.get(n.id + "#b", (0, 0)),
                                       strict=self.timing.may_retry(job.attempt + 1))
            except LLMBadOutput as exc:
                answer = exc
            else:
                self.backoff.reset()
                self.pay(n.id + "#b")
                return [Publish(body), log("info", "brief proposed", node=n.id, **body.facts())]
        if isinstance(answer, LLMBadOutput):
            out: list[Effect] = [Count(Metric.LLM_BAD_OUTPUT),
                                 log("info", "unusable brief; trying another seed", node=n.id,
                                     attempt=job.attempt + 1, error=str(answer)[:200])]
            if self.timing.may_retry(job.attempt + 1):
                return out + self._start_brief(tree, n, job.attempt + 1)
            self.set_aside[n.id + "#b"] = now + self.timing.set_aside_ms
            return out + [Count(Metric.SET_ASIDE), log("warning", "no usable brief; set aside", node=n.id,
                                                       retry_in_ms=self.timing.set_aside_ms)]
        if isinstance(answer, LLMError):
            delay = self.backoff.failed(now)
            return [log("warning", "LLM unavailable; backing off", node=n.id, error=str(answer)[:300],
                        retry_in_ms=delay)]
        raise TypeError(f"unexpected answer {answer!r}")

    def _start(self, tree: Tree, n: NodeView, refines: str | None, closed: int, attempt: int) -> list[Effect]:
        prev = n.proposal(refines) if refines else None
        req = work.decompose_req(tree, n, self.strategy, self.rng.randrange(2**31), prev)
        self.job = _Job(self.ticket(), n.id, refines, attempt, closed)
        return [Ask(self.job.ticket, req, n.id)]

    # ------------------------------------------------------------------ answers
    def _answered(self, ticket: int, answer: Any, tree: Tree, now: int) -> list[Effect]:
        self._tree = tree
        job = self.job
        if job is None or job.ticket != ticket:
            return []
        self.job = None
        if job.brief:
            return self._finish_brief(job, answer, tree, now)
        if job.parent is not None and tree.node(job.node) is None:
            self.held[job.node] = (job, answer)  # published once the split is decided
            return self._poll(tree, now)
        return self._finish(job, answer, tree, now)

    def _finish(self, job: _Job, answer: Any, tree: Tree, now: int, retry: bool = True) -> list[Effect]:
        """``retry``: an unusable answer is asked again (not for an answer held while I may be
        busy with another job: the node is then wanted as any other)."""
        n = tree.node(job.node)
        if n is None or not self._wanted(n)[0]:
            return [log("info", "node moved on while thinking; split dropped", node=job.node)]
        if isinstance(answer, LLMReply):
            self.owe(n.id, answer)
            try:
                body = work.proposal_from(answer.value, n, self.strategy, job.refines, tree,
                                          *self.unpaid.get(n.id, (0, 0)))
            except LLMBadOutput as exc:
                answer = exc
            else:
                self.backoff.reset()
                self.pay(n.id)
                self.answered_closed[n.id] = job.closed
                return [Publish(body), log("info", "split proposed", node=n.id, refines=job.refines,
                                           subgoals=len(body.subgoals))]
        if isinstance(answer, LLMBadOutput):
            if not retry or self.job is not None:  # the node is wanted again like any other
                return [Count(Metric.LLM_BAD_OUTPUT),
                        log("info", "unusable split worked out ahead; dropped", node=n.id,
                            error=str(answer)[:200])]
            out: list[Effect] = [Count(Metric.LLM_BAD_OUTPUT),
                                 log("info", "unusable split; trying another seed", node=n.id,
                                     attempt=job.attempt + 1, error=str(answer)[:200])]
            if self.timing.may_retry(job.attempt + 1):
                return out + self._start(tree, n, job.refines, job.closed, job.attempt + 1)
            self.set_aside[n.id] = now + self.timing.set_aside_ms
            return out + [Count(Metric.SET_ASIDE), log("warning", "no usable split; node set aside", node=n.id,
                                                       retry_in_ms=self.timing.set_aside_ms)]
        if isinstance(answer, LLMError):
            delay = self.backoff.failed(now)
            return [log("warning", "LLM unavailable; backing off", node=n.id, error=str(answer)[:300],
                        retry_in_ms=delay)]
        raise TypeError(f"unexpected answer {answer!r}")
