"""Scorer (an elector): judges every split of a node once (deterministic checks + an LLM),
publishes its scores as feedback, and votes in two-phase rounds (see agent.core.consensus).

The voting rules that make a decision final live here, and only timing is local judgment:
- prevote in round r: a polka (quorum of prevotes) seen for a value in a round at or after my
  lock (up to r itself) -> that value; else my locked value; else, when rounds ran out, LEAF; else my
  own choice among the splits on the table (round 1 waits for competing splits first);
- precommit in round r only a value that has a polka in round r (then I am locked on it), or
  NIL once a quorum prevoted without agreeing and a short timeout passed;
- move to round r + 1 once a quorum precommitted in r without deciding and a timeout passed,
  or jump to a round where enough electors already vote.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from agent.core.consensus import LEAF, NIL
from agent.core.events import Score, Vote
from agent.core.scoring import Verdict
from agent.core.tree import NodeView, Tree
from agent.llm.base import LLMBadOutput, LLMError

from . import work
from .base import Behaviour, wake_at
from .effects import Ask, Cancel, Count, Effect, LLMReply, Metric, Observe, Publish, log
from .timing import Timing
from .votes import fallback_value, jump_round, my_lock, my_top_round, my_vote, public_leader

APPROVE_TIE = 0.02  # verdicts this close count as a tie (broken by the lower id)


@dataclass
class _Obs:
    """What this scorer saw of a node, and when (local time: windows never trust stamps)."""

    seen: int
    first_proposal: int | None = None
    entered: dict[int, int] = field(default_factory=dict)  # round -> when I entered it
    prevote_quorum: dict[int, int] = field(default_factory=dict)  # round -> when seen
    precommit_quorum: dict[int, int] = field(default_factory=dict)


@dataclass
class _Job:
    ticket: int
    node: str
    proposal: str | None  # None: the judgment whether the node can be done as it is


class Scorer(Behaviour):
    role = "scorer"

    def __init__(self, me: str, timing: Timing | None = None, seed: int = 0,
                 decomposers: int = 1) -> None:
        super().__init__(me, timing, seed)
        self.decomposers = decomposers  # competing splits to wait for in round 1, at least
        self.known_decomposers = 0  # decomposers that announced themselves
        self.verdicts: dict[str, Verdict] = {}
        self.atomic: dict[str, bool] = {}  # node -> can it be done as it is, in one sitting?
        self.obs: dict[str, _Obs] = {}
        self.job: _Job | None = None

    # ------------------------------------------------------------------ poll
    def votable(self, n: NodeView) -> bool:
        return (not n.leaf and n.decided is None and n.depth < n.params.max_depth
                and self.me in n.params.electorate)

    def _poll(self, tree: Tree, now: int) -> list[Effect]:
        out: list[Effect] = []
        wake: list[int] = []
        if self.job is not None:
            n = tree.node(self.job.node)
            if n is None or not self.votable(n):
                out += [Cancel(self.job.ticket), Count(Metric.LLM_CANCELLED),
                        log("info", "node decided; scoring stopped", node=self.job.node)]
                self.job = None
        self.known_decomposers = tree.count_role("decomposer")
        for n in tree.walk_active():
            if self.votable(n):
                out += self._step(n, now, wake)
        if self.job is None:
            if self.backoff.blocked(now):
                wake.append(self.backoff.until_ms)
            else:
                out += self._next_job(tree)
        return out + wake_at(wake)

    def _obs(self, n: NodeView, now: int) -> _Obs:
        o = self.obs.get(n.id)
        if o is None:
            o = self.obs[n.id] = _Obs(seen=now)
        if o.first_proposal is None and n.proposals:
            o.first_proposal = now
        return o

    def _current_round(self, n: NodeView, o: _Obs, now: int, wake: list[int]) -> int:
        t = n.tally
        assert t is not None
        top = my_top_round(t, self.me)
        cur = max(1, top)
        if top and my_vote(t, self.me, top, "precommit") is not None:
            rt = t.rounds[top]
            if len(rt.precommitters) >= t.quorum:
                at = o.precommit_quorum.setdefault(top, now)
                # the whole electorate precommitted without deciding: no vote can still come
                # (one per elector and round), so waiting out the timeout buys nothing
                everyone = len(rt.precommitters) >= len(n.params.electorate)
                if everyone or now >= at + self.timing.precommit_timeout_ms:
                    cur = top + 1
                else:
                    wake.append(at + self.timing.precommit_timeout_ms)
        jump = jump_round(t, len(n.params.electorate), cur)
        if jump is not None:
            cur = jump
        o.entered.setdefault(cur, now)
        return cur

    def _step(self, n: NodeView, now: int, wake: list[int]) -> list[Effect]:
        o = self._obs(n, now)
        t = n.tally
        assert t is not None
        r = self._current_round(n, o, now, wake)
        if my_vote(t, self.me, r, "prevote") is None:
            value = self._prevote_choice(n, o, r, now, wake)
            if value is None:
                return []
            out: list[Effect] = [Publish(Vote(node=n.id, round=r, phase="prevote", value=value)),
                                 log("info", "prevote", node=n.id, round=r, value=value)]
            if r == 1:
                out.append(Observe(Metric.PROPOSALS_SCORED, len(n.proposals)))
            return out
        if my_vote(t, self.me, r, "precommit") is None:
            rt = t.round(r)
            polka = rt.polka(t.quorum)
            if polka is not None:
                return [Publish(Vote(node=n.id, round=r, phase="precommit", value=polka)),
                        log("info", "precommit", node=n.id, round=r, value=polka)]
            if len(rt.prevoters) >= t.quorum:
                at = o.prevote_quorum.setdefault(r, now)
                # every elector prevoted and no value has a quorum: no polka can form any more
                # (a NIL precommit never locks, so it is safe whenever it is cast)
                everyone = len(rt.prevoters) >= len(n.params.electorate)
                if everyone or now >= at + self.timing.prevote_timeout_ms:
                    return [Publish(Vote(node=n.id, round=r, phase="precommit", value=NIL)),
                            log("info", "precommit", node=n.id, round=r, value=NIL,
                                why="prevotes split")]
                wake.append(at + self.timing.prevote_timeout_ms)
        return []

    # ------------------------------------------------------------------ choosing a prevote
    def _prevote_choice(self, n: NodeView, o: _Obs, r: int, now: int, wake: list[int]) -> str | None:
        t = n.tally
        assert t is not None
        lock = my_lock(t, self.me)
        # a polka in an earlier round, or already in this one, at or after my lock round
        polka = t.latest_polka(before=r + 1)
        if polka is not None and (lock is None or polka[0] >= lock[0]):
            return polka[1]
        if lock is not None:
            return lock[1]
        if r > n.params.max_rounds:
            return fallback_value(n)  # rounds ran out: converge on what every peer can compute
        if r == 1 and self.leaf_ok(n):
            return LEAF  # what the splits score cannot change it (see _best): no need to judge them
        if not self._table_ready(n, o, r, now, wake):
            return None
        if any(p.id not in self.verdicts for p in n.proposals) or self._needs_atomic(n):
            return None  # still judging: the decision is taken with every split on the table
        return self._best(n, r)

    def _table_ready(self, n: NodeView, o: _Obs, r: int, now: int, wake: list[int]) -> bool:
        """Has the competition had its chance? Round 1 waits for every known decomposer's split
        or a window scaled to how long the first split took; later rounds wait the same way
        for refinements."""
        tm = self.timing
        if not n.proposals:
            if self.atomic.get(n.id) and r == 1:
                return True  # judged doable as it is: no need to wait for splits
            if now >= o.seen + tm.open_timeout_ms:
                return True  # nobody proposes: vote anyway, rounds run out into LEAF
            wake.append(o.seen + tm.open_timeout_ms)
            return False
        assert o.first_proposal is not None
        took = max(0, o.first_proposal - o.seen)
        window = int(min(tm.proposal_window_max_ms, max(tm.proposal_window_min_ms, tm.proposal_window_ratio * took)))
        authors = {p.author for p in n.proposals}
        if r == 1:
            if len(authors) >= max(self.decomposers, self.known_decomposers):
                return True
            start = o.first_proposal
        else:
            # every proposer has answered round r - 1's feedback (r proposals each)?
            per_author = {a: sum(1 for p in n.proposals if p.author == a) for a in authors}
            if all(c >= r for c in per_author.values()):
                return True
            start = o.entered.get(r, now)
        if now >= start + window:
            return True
        wake.append(start + window)
        return False

    def _best(self, n: NodeView, r: int) -> str:
        if r == 1 and self.leaf_ok(n):
            return LEAF  # judged doable in one sitting: splitting it further would not help
        ok = [p.id for p in n.proposals if self.verdicts[p.id].acceptable]
        if r > 1:
            leader = public_leader(n, r)
            if leader is not None and leader in ok:
                return leader
        if ok:
            top = max(self.verdicts[p].overall for p in ok)
            return min((p for p in ok if self.verdicts[p].overall >= top - APPROVE_TIE),
                       key=lambda p: (-self.verdicts[p].overall, p))
        if self.leaf_ok(n):
            return LEAF
        return NIL

    def _needs_atomic(self, n: NodeView) -> bool:
        """Below the goal, every elector judges for itself whether a node can be done as it is
        (the proposer's word is not trusted: small models call everything atomic)."""
        return n.depth >= 1 and n.id not in self.atomic

    def _needs_scores(self, n: NodeView) -> bool:
        """Whether my next prevote on ``n`` depends on how its splits score: not while round 1
        is mine to vote LEAF in, nor once I am locked (I prevote my lock or a later polka)."""
        if not self.leaf_ok(n):
            return True
        t = n.tally
        if t is None or my_vote(t, self.me, 1, "precommit") is None:
            return False
        return my_lock(t, self.me) is None

    def leaf_ok(self, n: NodeView) -> bool:
        """Whether this node can be executed as it is: this scorer's own judgment (never the
        goal itself)."""
        return n.depth >= 1 and self.atomic.get(n.id, False)

    # ------------------------------------------------------------------ scoring
    def _next_job(self, tree: Tree) -> list[Effect]:
        for n in tree.walk_active():
            if not self.votable(n):
                continue
            if self._needs_atomic(n):
                self.job = _Job(self.ticket(), n.id, None)
                return [Ask(self.job.ticket, work.atomic_req(tree, n, None), n.id)]
            if not self._needs_scores(n):
                continue
            for p in n.proposals:
                if p.id not in self.verdicts:
                    req = work.score_req(tree, n, p, self.me, None)
                    self.job = _Job(self.ticket(), n.id, p.id)
                    return [Ask(self.job.ticket, req, n.id)]
        return []

    def _answered(self, ticket: int, answer: Any, tree: Tree, now: int) -> list[Effect]:
        job = self.job
        if job is None or job.ticket != ticket:
            return []
        self.job = None
        n = tree.node(job.node)
        if n is not None and job.proposal is None:
            return self._judged_atomic(n, answer, tree, now)
        p = n.proposal(job.proposal) if n is not None else None
        if n is None or p is None:
            return []
        out: list[Effect] = []
        if isinstance(answer, LLMReply):
            try:
                verdict = work.verdict_from(answer.value, n, p, tree)
                self.backoff.reset()
            except LLMBadOutput as exc:
                answer = exc
        if isinstance(answer, LLMBadOutput):
            out += [Count(Metric.LLM_BAD_OUTPUT),
                    log("info", "LLM judgment unusable; scoring on the checks alone", node=n.id,
                        proposal=p.id, error=str(answer)[:200])]
            verdict = work.verdict_without_llm(n, p, tree)
        elif isinstance(answer, LLMError):
            delay = self.backoff.failed(now)
            return [log("warning", "LLM unavailable; backing off", node=n.id, error=str(answer)[:300],
                        retry_in_ms=delay)]
        elif not isinstance(answer, LLMReply):
            raise TypeError(f"unexpected answer {answer!r}")
        self.verdicts[p.id] = verdict
        spent = (answer.prompt_tokens, answer.completion_tokens) if isinstance(answer, LLMReply) else (0, 0)
        out.append(Publish(Score(node=n.id, proposal=p.id, specificity=verdict.specificity,
                                 non_overlap=verdict.non_overlap, coverage=verdict.coverage,
                                 acceptable=verdict.acceptable, feedback=verdict.feedback,
                                 prompt_tokens=spent[0], completion_tokens=spent[1])))
        return out + self._poll(tree, now)

    def _judged_atomic(self, n: NodeView, answer: Any, tree: Tree, now: int) -> list[Effect]:
        if isinstance(answer, LLMReply):
            try:
                self.atomic[n.id] = work.atomic_from(answer.value)
                self.backoff.reset()
            except LLMBadOutput:
                answer = LLMBadOutput("unusable")
        if isinstance(answer, LLMBadOutput):
            self.atomic[n.id] = False  # when in doubt, split: a leaf too big is the worse error
        elif isinstance(answer, LLMError):
            delay = self.backoff.failed(now)
            return [log("warning", "LLM unavailable; backing off", node=n.id, error=str(answer)[:300],
                        retry_in_ms=delay)]
        elif not isinstance(answer, LLMReply):
            raise TypeError(f"unexpected answer {answer!r}")
        return [log("info", "judged", node=n.id, atomic=self.atomic[n.id])] + self._poll(tree, now)
