"""Scorer (an elector): settles a goal's brief, judges a node's splits side by side (one ranking
of all of them, blended with deterministic checks), judges whether a node is one step, reviews
every result before the last attempt, and votes on each of those slots in two-phase rounds (see
agent.core.consensus).

The voting rules that make a decision final are the same on every slot, and only timing is
local judgment:
- prevote in round r: a polka (quorum of prevotes) seen for a value in a round at or after my
  lock (up to r itself) -> that value; else my locked value; else, when rounds ran out, what
  every peer can compute (``fallback``); else my own choice (round 1 waits for competition);
- precommit in round r only a value that has a polka in round r (then I am locked on it), or
  NIL once a quorum prevoted without agreeing and a short timeout passed;
- move to round r + 1 once a quorum precommitted in r without deciding and a timeout passed,
  or jump to a round where enough electors already vote.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable

from agent.core import rendezvous
from agent.core.consensus import LEAF, NIL, Tally
from agent.core.events import REJECT, Review, Score, Vote
from agent.core.scoring import Verdict
from agent.core.slots import brief_slot
from agent.core.tree import NodeState, NodeView, TaskKind, Tree
from agent.llm.base import LLMBadOutput, LLMError

from . import work
from .base import Behaviour, wake_at
from .effects import Ask, Cancel, Count, Effect, LLMReply, Metric, Observe, Publish, log
from .timing import Timing
from .votes import fallback_value, public_leader

APPROVE_TIE = 0.02  # verdicts this close count as a tie (broken by the lower id)
CRITERIA_RETRIES = 1  # unusable criteria answers asked again before judging on the checks alone


@dataclass
class _Obs:
    """What this scorer saw of a slot, and when (local time: windows never trust stamps)."""

    seen: int
    first_proposal: int | None = None
    entered: dict[int, int] = field(default_factory=dict)  # round -> when I entered it
    prevote_quorum: dict[int, int] = field(default_factory=dict)  # round -> when seen
    precommit_quorum: dict[int, int] = field(default_factory=dict)


@dataclass
class _Job:
    ticket: int
    node: str
    kind: str  # "atomic" | "rank" (my criteria for a node's splits) | "review"
    covers: tuple[str, ...] = ()  # review: the result


@dataclass
class _Ballot:
    """One slot as this elector votes on it: its tally and electorate, and how it chooses."""

    slot: str
    node: NodeView
    tally: Tally
    choose: Callable[[_Obs, int, int, list[int]], str | None]  # (obs, round, now, wake) -> value
    fallback: Callable[[], str]


def rapporteur(slot: str, electorate: tuple[str, ...]) -> str:
    """The elector whose LLM reads a result for everyone (rendezvous hashing: every peer
    computes the same one; the others vote on their own checks and its reading)."""
    return rendezvous.first(slot, electorate)


class Scorer(Behaviour):
    role = "scorer"

    def __init__(self, me: str, timing: Timing | None = None, seed: int = 0,
                 decomposers: int = 1) -> None:
        super().__init__(me, timing, seed)
        self.decomposers = decomposers  # competing splits to wait for in round 1, at least
        self.known_decomposers = 0  # decomposers that announced themselves
        self.slowest_entry_ms = 0  # the longest a slot of mine waited for its first entry
        self.verdicts: dict[str, Verdict] = {}
        # node -> my criteria for its splits (the essential work it needs; () when my LLM's
        # answer was unusable: the checks alone)
        self.criteria: dict[str, tuple[str, ...]] = {}
        self.criteria_asked: dict[str, int] = {}  # node -> unusable criteria answers so far
        self.atomic: dict[str, bool] = {}  # node -> can it be done as it is, as one step?
        self.readings: dict[str, tuple[bool, list[str], str]] = {}  # result -> my review
        self._checks: dict[str, list[str]] = {}  # result -> what the deterministic checks found
        self.obs: dict[str, _Obs] = {}
        self.job: _Job | None = None

    # ------------------------------------------------------------------ what I vote on
    def votable(self, n: NodeView) -> bool:
        return (not n.leaf and n.decided is None and n.depth < n.params.max_depth
                and self.me in n.params.electorate and (n.depth > 0 or n.brief_settled))

    def brief_votable(self, n: NodeView) -> bool:
        return (n.depth == 0 and n.params.brief and not n.brief_settled
                and self.me in n.params.electorate)

    reads_results = True  # a rapporteur reads the result with its LLM (the page's agent has none)

    def reviewable(self, n: NodeView) -> bool:
        return (n.state is NodeState.REVIEW and n.candidate is not None and n.review_tally is not None
                and n.review_tally.decided is None and self.me in n.params.electorate)

    # ------------------------------------------------------------------ poll
    def _phase(self, n: NodeView) -> str:
        root = self._tree.node(n.root) if self._tree is not None else None
        return (root or n).budget_phase

    _tree: Tree | None = None
    _elector_key: tuple[int, int] = (-1, -1)
    _elector = True

    def idle(self, plan: Any) -> bool:
        """On no goal's electorate (committees leave most scorers of a large swarm off each
        goal's): nothing to judge or vote, so no tree to derive."""
        if not self.ready or self.job is not None or not plan.goals:
            return False  # (before the first goal a poll costs nothing: no tree to speak of)
        key = (plan.generation, len(plan.goals))
        if key != self._elector_key:  # a goal's electorate never changes: look again per new goal
            self._elector_key = key
            self._elector = any(self.me in g.body.params.electorate for g in plan.goals.values())
        return not self._elector

    def _poll(self, tree: Tree, now: int) -> list[Effect]:
        self._tree = tree
        out: list[Effect] = []
        wake: list[int] = []
        if self.job is not None and not self._job_wanted(tree, self.job):
            out += [Cancel(self.job.ticket),
                    log("info", "slot decided; judging stopped", node=self.job.node, kind=self.job.kind)]
            self.job = None
        self.known_decomposers = tree.count_role("decomposer")
        for n in tree.roots:
            if self.brief_votable(n):
                out += self._step(self._brief_ballot(n), now, wake)
        for n in tree.walk_active():
            if self.votable(n):
                out += self._judge(tree, n, now)
                ballot = _Ballot(n.id, n, n.tally,
                                 lambda o, r, now, wake, n=n: self._split_choice(n, o, r, now, wake),
                                 lambda n=n: fallback_value(n))
                out += self._step(ballot, now, wake)
            if self.reviewable(n):
                out += self._review_step(tree, n, now, wake)
        if self.job is None:
            if self.backoff.blocked(now):
                wake.append(self.backoff.until_ms)
            else:
                out += self._next_job(tree, now)
        return out + wake_at(wake)

    def _job_wanted(self, tree: Tree, job: _Job) -> bool:
        n = tree.node(job.node)
        if n is None:
            return False
        if job.kind == "review":
            return self.reviewable(n) and n.candidate is not None and n.candidate["id"] in job.covers
        return self.votable(n)

    def _obs(self, slot: str, n: NodeView, now: int, first: bool) -> _Obs:
        o = self.obs.get(slot)
        if o is None:
            o = self.obs[slot] = _Obs(seen=now)
        if o.first_proposal is None and first:
            self._first_entry(o, now)
        return o

    def _first_entry(self, o: _Obs, now: int) -> None:
        o.first_proposal = now
        self.slowest_entry_ms = max(self.slowest_entry_ms, now - o.seen)

    def open_timeout_ms(self) -> int:
        """How long a slot with no entry waits before it is voted on anyway: the fixed timeout,
        stretched to how slowly entries have been coming (see Timing.open_timeout_ratio)."""
        tm = self.timing
        return int(min(tm.open_timeout_max_ms,
                       max(tm.open_timeout_ms, tm.open_timeout_ratio * self.slowest_entry_ms)))

    # ------------------------------------------------------------------ the rounds (every slot)
    def _current_round(self, b: _Ballot, o: _Obs, now: int, wake: list[int]) -> int:
        t = b.tally
        electorate = b.node.params.electorate
        top = t.top_round_of(self.me)
        cur = max(1, top)
        if top and t.vote_of(self.me, top, "precommit") is not None:
            rt = t.rounds[top]
            if len(rt.precommitters) >= t.quorum:
                at = o.precommit_quorum.setdefault(top, now)
                # the whole electorate precommitted without deciding: no vote can still come
                # (one per elector and round), so waiting out the timeout buys nothing
                everyone = len(rt.precommitters) >= len(electorate)
                if everyone or now >= at + self.timing.precommit_timeout_ms:
                    cur = top + 1
                else:
                    wake.append(at + self.timing.precommit_timeout_ms)
        jump = t.jump_round(len(electorate), cur)
        if jump is not None:
            cur = jump
        o.entered.setdefault(cur, now)
        return cur

    def _step(self, b: _Ballot, now: int, wake: list[int]) -> list[Effect]:
        n, t = b.node, b.tally
        o = self._obs(b.slot, n, now, bool(n.proposals) if b.slot == n.id else False)
        r = self._current_round(b, o, now, wake)
        if t.vote_of(self.me, r, "prevote") is None:
            value = self._prevote_choice(b, o, r, now, wake)
            if value is None:
                return []
            spent = self.pay(b.slot)  # the judgment behind it (whether the node is one step)
            out: list[Effect] = [Publish(Vote(node=b.slot, round=r, phase="prevote", value=value,
                                              prompt_tokens=spent[0], completion_tokens=spent[1])),
                                 log("info", "prevote", node=n.id, slot=b.slot, round=r, value=value)]
            if r == 1 and b.slot == n.id:
                out.append(Observe(Metric.PROPOSALS_SCORED, len(n.proposals)))
            if r > n.params.max_rounds and value == LEAF and b.slot == n.id and t.lock_of(self.me) is None:
                out.append(Count(Metric.LEAF_BY_FALLBACK))
            return out
        if t.vote_of(self.me, r, "precommit") is None:
            rt = t.round(r)
            polka = rt.polka(t.quorum)
            if polka is not None:
                return [Publish(Vote(node=b.slot, round=r, phase="precommit", value=polka)),
                        log("info", "precommit", node=n.id, slot=b.slot, round=r, value=polka)]
            if len(rt.prevoters) >= t.quorum:
                at = o.prevote_quorum.setdefault(r, now)
                # every elector prevoted and no value has a quorum: no polka can form any more
                # (a NIL precommit never locks, so it is safe whenever it is cast)
                everyone = len(rt.prevoters) >= len(n.params.electorate)
                # the wait grows with every round past the regular ones (Tendermint's timeouts
                # do the same): an elector whose votes always come late (a clock far ahead: its
                # events are held; a slow link) is heard in the end, where a fixed wait gave
                # up on it every round and a quorum that needed it never formed
                wait = self.timing.prevote_timeout_ms << min(6, max(0, r - n.params.max_rounds))
                if everyone or now >= at + wait:
                    return [Publish(Vote(node=b.slot, round=r, phase="precommit", value=NIL)),
                            log("info", "precommit", node=n.id, slot=b.slot, round=r, value=NIL,
                                why="prevotes split")]
                wake.append(at + wait)
        return []

    def _prevote_choice(self, b: _Ballot, o: _Obs, r: int, now: int, wake: list[int]) -> str | None:
        t = b.tally
        lock = t.lock_of(self.me)
        # a polka in an earlier round, or already in this one, at or after my lock round
        polka = t.latest_polka(before=r + 1)
        if polka is not None and (lock is None or polka[0] >= lock[0]):
            return polka[1]
        if lock is not None:
            return lock[1]
        if r > b.node.params.max_rounds:
            return b.fallback()  # rounds ran out: converge on what every peer can compute
        return b.choose(o, r, now, wake)

    # ------------------------------------------------------------------ splits
    def _split_choice(self, n: NodeView, o: _Obs, r: int, now: int, wake: list[int]) -> str | None:
        if self._phase(n) != "open" and n.depth > 0:
            return LEAF  # the budget is for executing what is there: split nothing further
        if r == 1 and self.leaf_ok(n):
            return LEAF  # what the splits score cannot change it (see _best): no need to judge them
        if not self._table_ready(n, o, r, now, wake):
            return None
        if any(p.id not in self.verdicts for p in n.proposals) or self._needs_atomic(n):
            return None  # still judging: the decision is taken with every split on the table
        return self._best(n, r)

    def _table_ready(self, n: NodeView, o: _Obs, r: int, now: int, wake: list[int],
                     authored: list[tuple[str, int, str | None]] | None = None) -> bool:
        """Has the competition had its chance? Round 1 waits for every known decomposer's
        entry or a window scaled to how long the first took; later rounds wait the same way for
        refinements. ``authored``: (author, wall, refines) of the entries (a node's splits by
        default, a goal's briefs for the brief slot)."""
        tm = self.timing
        entries = authored if authored is not None else [(p.author, p.wall, p.refines) for p in n.proposals]
        if not entries:
            if authored is None and self.atomic.get(n.id) and r == 1:
                return True  # judged doable as it is: no need to wait for splits
            if now >= o.seen + self.open_timeout_ms():
                return True  # nobody proposes: vote anyway, rounds run out into LEAF
            wake.append(o.seen + self.open_timeout_ms())
            return False
        if o.first_proposal is None:
            self._first_entry(o, now)
        took = max(0, o.first_proposal - o.seen)
        window = int(min(tm.proposal_window_max_ms, max(tm.proposal_window_min_ms, tm.proposal_window_ratio * took)))
        authors = {a for a, _w, _r in entries}
        if r == 1:
            want = max(self.decomposers, self.known_decomposers)
            if tm.decomposers_per_node > 0:
                want = min(want, tm.decomposers_per_node)  # a node's home decomposers propose
            if len(authors) >= want:
                return True
            start = o.first_proposal
        else:
            # every proposer has answered round r - 1's feedback (r proposals each)?
            per_author = {a: sum(1 for b, _w, _r in entries if b == a) for a in authors}
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
            lead = public_leader(n, r)
            if lead is not None and lead in ok:
                return lead
        def key(p: str) -> tuple:
            v = self.verdicts[p]
            return (v.rank or 99, -v.overall, p)

        if ok:
            return min(ok, key=key)
        if self.leaf_ok(n):
            return LEAF
        usable = [p.id for p in n.proposals if self.verdicts[p.id].usable]
        if usable and r >= n.params.max_rounds:
            # the refinements had their rounds: the best split there is, rather than the goal
            # done as one step (what the fallback would otherwise come to)
            return min(usable, key=key)
        return NIL

    def _needs_atomic(self, n: NodeView) -> bool:
        """Below the goal, every elector judges for itself whether a node can be done as it is
        (the proposer's word is not trusted: small models call everything atomic)."""
        return n.depth >= 1 and n.id not in self.atomic and self._phase(n) == "open"

    def _needs_scores(self, n: NodeView) -> bool:
        """Whether my next prevote on ``n`` depends on how its splits score: not while round 1
        is mine to vote LEAF in, nor once I am locked (I prevote my lock or a later polka)."""
        if not self.leaf_ok(n):
            return True
        t = n.tally
        if t is None or t.vote_of(self.me, 1, "precommit") is None:
            return False
        return t.lock_of(self.me) is None

    def leaf_ok(self, n: NodeView) -> bool:
        """Whether this node can be executed as it is: this scorer's own judgment (never the
        goal itself)."""
        return n.depth >= 1 and self.atomic.get(n.id, False)

    # ------------------------------------------------------------------ the brief
    def _brief_ballot(self, n: NodeView) -> _Ballot:
        assert n.brief_tally is not None
        return _Ballot(brief_slot(n.id), n, n.brief_tally,
                       lambda o, r, now, wake, n=n: self._brief_choice(n, o, r, now, wake),
                       lambda n=n: self._brief_fallback(n))

    def _brief_choice(self, n: NodeView, o: _Obs, r: int, now: int, wake: list[int]) -> str | None:
        entries = [(b.author, b.wall, None) for b in n.briefs]
        if not self._table_ready(n, o, r, now, wake, authored=entries):
            return None
        if r > 1:
            lead = n.brief_tally.leader(r, exclude=(NIL,))
            if lead is not None:
                return lead
        return work.best_brief(n) or LEAF

    def _brief_fallback(self, n: NodeView) -> str:
        t = n.brief_tally
        value = t.most_prevoted(n.params.max_rounds, exclude=(NIL,)) if t is not None else None
        return value or LEAF  # no brief was agreed on: plan without one

    # ------------------------------------------------------------------ reviews
    def _review_step(self, tree: Tree, n: NodeView, now: int, wake: list[int]) -> list[Effect]:
        cand = n.candidate
        assert cand is not None and n.review_tally is not None
        out: list[Effect] = []
        mine = self.readings.get(cand["id"])
        rap = rapporteur(n.review_slot, n.params.electorate)
        spent = self._phase(n) == "spent"  # the budget is gone: no new attempt, accept as it is
        if mine is None:
            o = self._obs(n.review_slot, n, now, False)
            checks = [] if spent else self._result_checks(tree, n, cand)
            theirs = next((r for r in n.reviews if r.author == rap and r.result == cand["id"]), None)
            if rap == self.me and self.reads_results and not spent:
                return out  # my own LLM reading comes first (see _next_job)
            if theirs is None and not spent and now < o.seen + self.timing.review_window_ms:
                wake.append(o.seen + self.timing.review_window_ms)
                return out  # the rapporteur's reading is on its way
            problems = list(dict.fromkeys(list(checks) + (list(theirs.problems) if theirs is not None
                                                          and not theirs.accept else [])))
            accept = not problems
            self.readings[cand["id"]] = (accept, problems, "")
            out.append(Publish(Review(node=n.id, result=cand["id"], accept=accept,
                                      problems=tuple(p[:200] for p in problems[:5]))))
            out.append(log("info", "reviewed", node=n.id, attempt=n.attempt, accept=accept,
                           problems=problems[:3], rapporteur=theirs is not None))
        verdict = self.readings[cand["id"]][0]
        ballot = _Ballot(n.review_slot, n, n.review_tally,
                         lambda o, r, now, wake: self._review_choice(n, r, verdict),
                         lambda: cand["id"])
        return out + self._step(ballot, now, wake)

    def _result_checks(self, tree: Tree, n: NodeView, cand: dict) -> list[str]:
        got = self._checks.get(cand["id"])
        if got is None:
            got = self._checks[cand["id"]] = work.result_checks(tree, n, cand["output"],
                                                                synthesis=n.task is TaskKind.SYNTHESIS)
        return got

    def _review_choice(self, n: NodeView, r: int, accept: bool) -> str:
        if r > 1:
            lead = n.review_tally.leader(r, exclude=(NIL,))
            if lead is not None:
                return lead
        return n.candidate["id"] if accept else REJECT

    # ------------------------------------------------------------------ LLM jobs
    def _next_job(self, tree: Tree, now: int) -> list[Effect]:
        for n in tree.walk_active():
            if self.reviewable(n) and n.candidate is not None and n.candidate["id"] not in self.readings \
                    and rapporteur(n.review_slot, n.params.electorate) == self.me and self._phase(n) != "spent":
                self.job = _Job(self.ticket(), n.id, "review", (n.candidate["id"],))
                return [Ask(self.job.ticket, work.review_req(tree, n, n.candidate["output"], None), n.id)]
            if not self.votable(n):
                continue
            if self._needs_atomic(n):
                self.job = _Job(self.ticket(), n.id, "atomic")
                return [Ask(self.job.ticket, work.atomic_req(tree, n, None), n.id)]
            if not self._needs_scores(n) or n.id in self.criteria or (self._phase(n) != "open" and n.depth > 0):
                continue
            # my yardstick for the node's splits, asked as soon as the node is open: it does not
            # depend on the splits, so it is ready when they arrive
            self.job = _Job(self.ticket(), n.id, "rank")
            return [Ask(self.job.ticket, work.rank_req(tree, n, self.me, None), n.id)]
        return []

    def _answered(self, ticket: int, answer: Any, tree: Tree, now: int) -> list[Effect]:
        self._tree = tree
        job = self.job
        if job is None or job.ticket != ticket:
            return []
        self.job = None
        n = tree.node(job.node)
        if n is None:
            return []
        if isinstance(answer, LLMError) and not isinstance(answer, LLMBadOutput):
            delay = self.backoff.failed(now)
            return [log("warning", "LLM unavailable; backing off", node=n.id, error=str(answer)[:300],
                        retry_in_ms=delay)]
        if not isinstance(answer, (LLMReply, LLMBadOutput)):
            raise TypeError(f"unexpected answer {answer!r}")
        if job.kind == "atomic":
            return self._judged_atomic(n, answer, tree, now)
        if job.kind == "review":
            return self._read_result(n, job, answer, tree, now)
        return self._ranked(n, job, answer, tree, now)

    def _ranked(self, n: NodeView, job: _Job, answer: Any, tree: Tree, now: int) -> list[Effect]:
        out: list[Effect] = []
        criteria: tuple[str, ...] = ()
        if isinstance(answer, LLMReply):
            self.owe(n.id + "#rank", answer)  # carried by my first score of the node's splits
            try:
                criteria = work.criteria_from(answer.value, n.title)
                self.backoff.reset()
            except LLMBadOutput as exc:
                answer = exc
        if not criteria:
            out.append(Count(Metric.LLM_BAD_OUTPUT))
            tries = self.criteria_asked[n.id] = self.criteria_asked.get(n.id, 0) + 1
            if tries <= CRITERIA_RETRIES:
                # asked again (another seed): a scorer without criteria ranks on the checks
                # alone, and in both Japan runs of 2026-12-07 one of three had none
                return out + [log("info", "LLM criteria unusable; asking again", node=n.id,
                                  error=str(answer)[:200], attempt=tries)] + self._poll(tree, now)
            out.append(log("info", "LLM criteria unusable; judging on the checks alone", node=n.id,
                           error=str(answer)[:200]))
        self.criteria[n.id] = criteria
        return out + [log("info", "criteria", node=n.id, essential=list(criteria))] + self._poll(tree, now)

    def _judge(self, tree: Tree, n: NodeView, now: int) -> list[Effect]:
        """Verdicts for every split on the table, side by side against my criteria (pure:
        judged again whenever a split arrives), once the competition had its chance (as the
        prevote waits); my first judgment of a split is published as my score of it, its rank
        among the splits then on the table (feedback for the refinements)."""
        if n.id not in self.criteria or not n.proposals:
            return []
        if all(p.id in self.verdicts for p in n.proposals):
            return []
        o = self._obs(n.id, n, now, True)
        r = max(1, n.tally.top_round_of(self.me)) if n.tally is not None else 1
        if not self._table_ready(n, o, r, now, []):
            return []
        props = list(n.proposals)
        judged = work.judge_splits(self.criteria[n.id], tree, n, props)
        out: list[Effect] = []
        for p, v in zip(props, judged.verdicts):
            first = p.id not in self.verdicts and not any(s.author == self.me for s in p.scores)
            self.verdicts[p.id] = v
            if first:  # a scorer's first judgment of a split is the one shown and counted
                spent = self.pay(n.id + "#rank")  # the criteria call's cost is carried once
                out.append(Publish(Score(node=n.id, proposal=p.id, specificity=v.specificity,
                                         non_overlap=v.non_overlap, coverage=v.coverage,
                                         acceptable=v.acceptable, feedback=v.feedback, rank=v.rank,
                                         missing=v.missing, prompt_tokens=spent[0],
                                         completion_tokens=spent[1])))
        return out

    def _read_result(self, n: NodeView, job: _Job, answer: Any, tree: Tree, now: int) -> list[Effect]:
        cand = n.candidate
        if cand is None or cand["id"] not in job.covers:
            return []
        checks = self._result_checks(tree, n, cand)
        accept_llm, problems_llm = True, []
        spent = (answer.prompt_tokens, answer.completion_tokens) if isinstance(answer, LLMReply) else (0, 0)
        out: list[Effect] = []
        if isinstance(answer, LLMReply):
            try:
                accept_llm, problems_llm = work.review_from(answer.value, cand["output"])
                self.backoff.reset()
            except LLMBadOutput as exc:
                out += [Count(Metric.LLM_BAD_OUTPUT),
                        log("info", "LLM review unusable; reviewing on the checks alone", node=n.id,
                            error=str(exc)[:200])]
        else:
            out.append(Count(Metric.LLM_BAD_OUTPUT))
        problems = list(dict.fromkeys(list(checks) + ([] if accept_llm else problems_llm)))
        accept = not problems
        self.readings[cand["id"]] = (accept, problems, "")
        out += [Publish(Review(node=n.id, result=cand["id"], accept=accept,
                               problems=tuple(p[:200] for p in problems[:5]),
                               prompt_tokens=spent[0], completion_tokens=spent[1])),
                log("info", "reviewed", node=n.id, attempt=n.attempt, accept=accept, problems=problems[:3],
                    rapporteur=True)]
        return out + self._poll(tree, now)

    def _judged_atomic(self, n: NodeView, answer: Any, tree: Tree, now: int) -> list[Effect]:
        self.owe(n.id, answer)  # carried by my next vote on the node
        if isinstance(answer, LLMReply):
            try:
                self.atomic[n.id] = work.atomic_from(answer.value)
                self.backoff.reset()
            except LLMBadOutput:
                answer = LLMBadOutput("unusable")
        if isinstance(answer, LLMBadOutput):
            self.atomic[n.id] = False  # when in doubt, split: a leaf too big is the worse error
        return [log("info", "judged", node=n.id, atomic=self.atomic[n.id])] + self._poll(tree, now)
