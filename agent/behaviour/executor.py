"""Executor: claims a task (a ready leaf, or a split node whose children are done: its
synthesis; a later attempt of either once the electors sent a result back), waits a settle window and pulls its peers' logs so a lost race costs no LLM work,
renews the lease while the LLM works, and publishes the result only while it still holds the
lease; otherwise it releases the task and drops the work (counted)."""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from agent.core import rendezvous
from agent.core.events import Claim, Release, Renew
from agent.core.tree import NodeState, NodeView, TaskKind, Tree
from agent.llm.base import LLMBadOutput, LLMError

from . import work
from .base import Behaviour, wake_at
from .effects import (
    Ask, Cancel, Count, Effect, LLMReply, Metric, Observe, Publish, PublishFailed, SyncDone,
    SyncPeers, log,
)



def home_of(node: str, executors: list[str]) -> str:
    """The executor a task belongs to first (rendezvous hashing over the announced executors):
    every peer computes the same one, so executors spread over the ready tasks instead of
    racing for the same one."""
    return rendezvous.first(node, executors)


class Phase(StrEnum):
    IDLE = "idle"
    CLAIMING = "claiming"  # claim published (or being published), settling
    WORKING = "working"  # the LLM is on it


@dataclass
class _Task:
    node: str
    key: str  # the attempt's task key (the node, or "<node>#<k>")
    claim_ticket: int
    claim: str | None = None
    claim_wall: int = 0  # our claim's stamp: its lease starts there
    ready: Any = None  # a result waiting for our clock to reach our claim's stamp again
    settle_until: int = 0
    sync_ticket: int | None = None
    synced: bool = False
    unanswered: int = 0  # pulls before work that no peer answered
    unstored: int = 0  # pulls before work that found our claim in no peer's store
    ask_ticket: int | None = None
    attempt: int = 0
    started: int = 0
    renewed_at: int = 0
    prompt: bool = False  # a home task claimed before anyone may take it over: no race is possible
    spent: tuple[int, int] = (0, 0)  # tokens of this task's attempts so far (its result carries them)
    best: Any = None  # the checked-out try with the fewest problems (work.CheckedOut): the last try's rival


class Executor(Behaviour):
    role = "executor"

    def __init__(self, *args: Any, sync_before_work: bool = True, **kw: Any) -> None:
        super().__init__(*args, **kw)
        self.phase = Phase.IDLE
        self.task: _Task | None = None
        self.sync_before_work = sync_before_work
        self.seen_ready: dict[str, int] = {}  # task -> when I first saw it ready (my clock)
        self._primed = False

    # ------------------------------------------------------------------ poll
    def _poll(self, tree: Tree, now: int) -> list[Effect]:
        # a goal whose budget is spent starts no new task (what is claimed may finish)
        ready = [n for r in tree.roots if r.budget_phase != "spent" for n in r.walk_active()
                 if n.task is not None and n.state is NodeState.READY and self._winnable(n)]
        first_poll = not self._primed
        self._primed = True
        for n in ready:
            # noted while busy too (a task that became ready while I worked on another is not
            # fresh when I get to it), and what was ready before I could see it at all counts
            # as old (a restart must not take a task for fresh and skip the settle window)
            self.seen_ready.setdefault(n.task_key, now - self.timing.steal_after_ms if first_poll else now)
        if len(self.seen_ready) > 4 * len(ready) + 64:  # forget tasks that are long gone
            live = {n.task_key for n in ready}
            self.seen_ready = {k: v for k, v in self.seen_ready.items() if k in live}
        if self.task is not None:
            return self._tend(tree, now)
        if self.backoff.blocked(now):
            return wake_at([self.backoff.until_ms])
        if not ready:
            return []
        executors = sorted(set(tree.with_role("executor")) | {self.me})
        home = [n for n in ready if home_of(n.task_key, executors) == self.me]
        if home:
            target = home[0]
            # the no-race argument needs the gossip delay known and well inside the windows;
            # an overloaded network (delays of seconds) gets the settle window and the pull
            d = self.net.delay_ms
            tm = self.timing
            prompt = (d is not None
                      and now - self.seen_ready[target.task_key] <= tm.steal_after_ms - 2 * d - tm.prompt_margin_ms)
        else:
            # another executor's task: taken over only once it has been visibly ready for a
            # while (its home executor, if idle, claims well before), spread by my own ranking
            due = {n.task_key: self.seen_ready[n.task_key] + self.steal_after(n.task_key, executors) for n in ready}
            stale = [n for n in ready if now >= due[n.task_key]]
            if not stale:
                return wake_at([min(due.values())])
            target = max(stale, key=lambda n: rendezvous.weight(n.task_key, self.me))
            prompt = False
        t = self.task = _Task(target.id, target.task_key, self.ticket(), prompt=prompt)
        self.phase = Phase.CLAIMING
        return [Publish(Claim(node=t.key, lease_ms=self.lease_ms(target)), t.claim_ticket)]

    def steal_after(self, task: str, executors: list[str]) -> int:
        """How long another executor's ready task waits before I take it over: steal_after_ms
        if I am among its first ``executors_per_task`` (rendezvous hashing; all of us in a
        small swarm), foreign_claim_after_ms otherwise."""
        tm = self.timing
        k = tm.executors_per_task
        if k <= 0 or len(executors) <= k or self.me in rendezvous.top(task, executors, k):
            return tm.steal_after_ms
        return max(tm.steal_after_ms, tm.foreign_claim_after_ms)

    def _winnable(self, n: NodeView) -> bool:
        """Whether a claim of mine could hold this ready task. A task whose holder yields (its
        author held it for ``max_lease_ms`` in all) reads as ready to everyone, but once my own
        claims have held it that long too, mine yields as well and the earlier claim keeps it:
        claiming would lose, release and claim again without end (seen with LLM calls slower
        than the lease budget on an overloaded machine: thousands of claims a minute). Such a
        task waits until that holder's lease ends."""
        h = n.holder
        if h is None or h.author == self.me:
            return True
        mine = sum(c.granted - c.start for c in n.claims if c.author == self.me)  # the fold's budget
        return mine < n.params.max_lease_ms

    def settle_ms(self) -> int:
        """The settle window: long enough for an earlier competing claim to reach me (the
        gossip delay nearly every event from my peers beat, plus a margin), never more than
        the configured window, which also stands while the delay is unknown.

        A home task claimed promptly needs none: another executor takes a task over only after
        it has been visibly ready for ``steal_after_ms``, and a prompt claim reaches it before
        that (see timing.py), so no earlier claim can exist."""
        tm = self.timing
        d = self.net.delay_ms
        if d is None:
            return tm.settle_ms
        return int(min(tm.settle_ms, max(tm.settle_min_ms, tm.settle_delay_factor * d + tm.settle_margin_ms)))

    def _mine(self, n: NodeView) -> tuple[int, int] | None:
        """(start, end) of my claim's lease if my claim is the one holding the task now."""
        t = self.task
        assert t is not None
        if n.holder is not None and n.holder.id == t.claim:
            return n.holder.start, n.holder.end
        return None

    def _tend(self, tree: Tree, now: int) -> list[Effect]:
        t = self.task
        assert t is not None
        if t.claim is None:
            return []  # the claim is being published
        n = tree.node(t.node)
        if n is None or n.state in (NodeState.DONE, NodeState.REVIEW) or n.task_key != t.key:
            return self._drop(n, "task done by another executor", release=False)
        lease = self._mine(n)
        if lease is None and now < t.claim_wall:
            # never judge our claim before its own stamp: our clock stepped back below it (a
            # correction to the peers' clock that shrank or ended, agent.core.skew), and a
            # lease cannot hold before it starts. Judged lost, the work was dropped and done
            # again under a new claim (the simulator, seed 64 with --faults skew: a 2.1 s step)
            return wake_at([t.claim_wall])
        if self.phase is Phase.CLAIMING:
            if now < t.settle_until:
                return wake_at([t.settle_until])
            # the pull before work is insurance against gossip that lost a competing claim;
            # while gossip missed nothing lately it would find nothing, so it is skipped
            skip = self.net.gossip_healthy and self.net.delay_ms is not None \
                and self.net.delay_ms < self.timing.settle_ms
            if self.sync_before_work and not t.synced and not skip:
                if t.sync_ticket is None:
                    t.sync_ticket = self.ticket()
                    return [SyncPeers(t.sync_ticket, confirm=t.claim)]
                return []
            if lease is None:
                self.task, self.phase = None, Phase.IDLE
                return [Count(Metric.CLAIMS_LOST), *self._release(n, t, "lost the claim race"),
                        log("info", "lost the claim race; moving on", node=n.id, event_id=t.claim)]
            self.phase = Phase.WORKING
            t.started = now
            return [Count(Metric.CLAIMS_WON), *self._ask(tree, n)]
        # WORKING
        if lease is None:
            return self._drop(n, "lease lost while working")
        if t.ready is not None:
            return self._finish(n, lease, now)
        if lease[1] >= lease[0] + n.params.max_lease_ms:
            # at the goal's cap a renewal extends nothing (the review: renewing anyway, and
            # waking at a time already past, polled in a loop until the lease ended)
            return wake_at([lease[1]])
        half = self.lease_ms(n) // 2
        if lease[1] - now <= half:
            if now - t.renewed_at >= half // 2:
                t.renewed_at = now
                return [Publish(Renew(node=t.key, claim=t.claim, lease_ms=self.lease_ms(n)))]
            return wake_at([t.renewed_at + half // 2])
        return wake_at([lease[1] - half])

    def _finish(self, n: NodeView, lease: tuple[int, int] | None, now: int) -> list[Effect]:
        """Publish the result that is ready, while our lease holds with a margin to spare."""
        t = self.task
        assert t is not None and t.ready is not None
        margin = min(self.timing.lease_margin_ms, self.lease_ms(n) // 4)
        if lease is None or lease[1] - now < margin:
            return self._drop(n, "lease lapsed before the result was ready")
        self.task, self.phase = None, Phase.IDLE
        return [Publish(t.ready), Observe(Metric.TASK_SECONDS, (now - t.started) / 1000),
                log("info", "task done", node=n.id, event_id=t.claim, kind=n.task.value if n.task else None)]

    def _ask(self, tree: Tree, n: NodeView) -> list[Effect]:
        t = self.task
        assert t is not None
        seed = self.rng.randrange(2**31)
        req = work.synthesis_req(tree, n, seed) if n.task is TaskKind.SYNTHESIS else work.execute_req(tree, n, seed)
        t.ask_ticket = self.ticket()
        return [Ask(t.ask_ticket, req, n.id)]

    def _drop(self, n: NodeView | None, why: str, release: bool = True) -> list[Effect]:
        t = self.task
        assert t is not None
        working = self.phase is Phase.WORKING
        self.task, self.phase = None, Phase.IDLE
        out: list[Effect] = [log("info", f"{why}; work dropped", node=t.node, event_id=t.claim)]
        if t.ask_ticket is not None:
            out.append(Cancel(t.ask_ticket))
        if working:
            out.append(Count(Metric.WORK_DROPPED))
        if release and t.claim is not None and n is not None:
            out += self._release(n, t, why)
        return out

    def lease_ms(self, n: NodeView) -> int:
        """My lease, within the goal's cap (a claim longer than it is refused by every fold,
        my own included: a goal made with a shorter SWARM_MAX_LEASE_SECONDS)."""
        return min(self.timing.lease_ms, n.params.max_lease_ms)

    def _release(self, n: NodeView, t: "_Task", why: str, tokens: tuple[int, int] = (0, 0)) -> list[Effect]:
        """A release of my claim, while the fold still files it: a revocation's refold can send
        a filed claim back to waiting (a child it built on was the revoked author's result),
        and a release of a claim that waits is refused by my own fold too."""
        if t.claim is None or not any(c.id == t.claim for c in n.claims):
            return [log("info", "our claim is not filed any more; nothing to release", node=n.id, event_id=t.claim)]
        return [Publish(Release(node=t.key, claim=t.claim, reason=why[:200],
                                prompt_tokens=tokens[0], completion_tokens=tokens[1]))]

    # ------------------------------------------------------------------ answers
    def _answered(self, ticket: int, answer: Any, tree: Tree, now: int) -> list[Effect]:
        t = self.task
        if t is None:
            return []
        if ticket == t.claim_ticket:
            if isinstance(answer, PublishFailed):
                self.task, self.phase = None, Phase.IDLE
                delay = self.backoff.failed(now)
                return [log("warning", "could not publish a claim; backing off", node=t.node,
                            error=answer.error, retry_in_ms=delay)]
            t.claim, t.claim_wall = answer.id, answer.hlc.wall
            settle = 0 if t.prompt else self.settle_ms()
            # never judge a claim before its own stamp: a clock dragged ahead (within the
            # clock bound) stamps it later than now, and a lease cannot hold before it starts
            t.settle_until = max(now + settle, answer.hlc.wall)
            return [log("info", "claimed; settling", node=t.node, settle_ms=settle, delay_ms=self.net.delay_ms,
                        gossip_healthy=self.net.gossip_healthy), *wake_at([t.settle_until])]
        if ticket == t.sync_ticket:
            assert isinstance(answer, SyncDone)
            t.sync_ticket = None
            others = [p for p in tree.with_role("executor") if p != self.me]
            if answer.peers == 0 and others and self.timing.may_retry(t.unanswered + 1):
                # nobody answered (gossip lagging by seconds, an overloaded machine, a cut):
                # a competing claim may be on its way, so pull again before spending the LLM
                t.unanswered += 1
                t.settle_until = now + self.settle_ms() * (2 ** t.unanswered)
                return [Count(Metric.PULL_UNANSWERED),
                        log("info", "no peer answered the pull before work; pulling again", node=t.node,
                            event_id=t.claim, attempt=t.unanswered, retry_at_ms=t.settle_until),
                        *wake_at([t.settle_until])]
            if answer.peers and answer.holders == 0:
                # peers answered and none stored our claim (held: our clock runs ahead of
                # theirs, or it was lost): work done now would not count anywhere yet
                t.unstored += 1
                if self.timing.may_retry(t.unstored):
                    t.settle_until = now + self.settle_ms() * (2 ** t.unstored)
                    return [Count(Metric.CLAIM_UNSTORED),
                            log("info", "no peer has stored our claim; waiting before work", node=t.node,
                                event_id=t.claim, peers=answer.peers, attempt=t.unstored,
                                retry_at_ms=t.settle_until),
                            *wake_at([t.settle_until])]
                return [Count(Metric.CLAIM_UNSTORED),
                        *self._drop(tree.node(t.node), "no peer stored our claim")]
            if answer.peers == 0 and others:
                out = [Count(Metric.PULL_UNANSWERED),
                       log("warning", "no peer answered the pull before work; working on what gossip showed",
                           node=t.node, event_id=t.claim, attempts=t.unanswered + 1)]
            else:
                out = []
            t.synced = True
            return out + self._poll(tree, now)
        if ticket != t.ask_ticket:
            return []
        t.ask_ticket = None
        n = tree.node(t.node)
        if n is None or n.state in (NodeState.DONE, NodeState.REVIEW) or n.task_key != t.key:
            return self._drop(n, "task done by another executor", release=False)
        assert t.claim is not None
        if isinstance(answer, LLMReply):
            last = not self.timing.may_retry(t.attempt + 1)
            t.spent = (t.spent[0] + answer.prompt_tokens, t.spent[1] + answer.completion_tokens)
            try:
                synthesis = n.task is TaskKind.SYNTHESIS
                body = work.result_from(answer.value, tree, n, t.claim, strict=not last, synthesis=synthesis,
                                        prompt_tokens=t.spent[0], completion_tokens=t.spent[1], key=t.key)
            except LLMBadOutput as exc:
                if isinstance(exc, work.CheckedOut) and (t.best is None or exc.problems < t.best.problems):
                    t.best = exc
                answer = exc
            else:
                body = work.best_of(tree, n, body, t.best, synthesis=synthesis)
                self.backoff.reset()
                t.ready = body
                lease = self._mine(n)
                if lease is None and now < t.claim_wall:  # (our clock stepped back: see _tend)
                    return wake_at([t.claim_wall])
                return self._finish(n, lease, now)
        if isinstance(answer, LLMBadOutput):
            t.attempt += 1
            out: list[Effect] = [Count(Metric.LLM_BAD_OUTPUT),
                                 log("info", "unusable result; trying another seed", node=n.id,
                                     attempt=t.attempt, error=str(answer)[:200])]
            if self.timing.may_retry(t.attempt):
                return out + self._ask(tree, n)
            self.task, self.phase = None, Phase.IDLE
            self.backoff.failed(now)
            return out + [Count(Metric.TASK_RELEASED), *self._release(n, t, "no usable result", t.spent),
                          log("warning", "no usable result; task released", node=n.id)]
        if isinstance(answer, LLMError):
            delay = self.backoff.failed(now)
            out = [Count(Metric.TASK_RELEASED),
                   log("warning", "LLM unavailable; task released, backing off", node=n.id,
                       error=str(answer)[:300], retry_in_ms=delay)]
            self.task, self.phase = None, Phase.IDLE
            return out + self._release(n, t, str(answer))
        raise TypeError(f"unexpected answer {answer!r}")
