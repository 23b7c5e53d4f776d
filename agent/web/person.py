"""A person as a voter: a Scorer whose verdicts come from the web page instead of an LLM.

The page's identity is one more elector wherever a goal's electorate names it (the submit form
can add it). The person judges splits (approve or reject, with written feedback). The page's
agent casts no vote on a node until the person judged one of its splits; from then on the
Scorer's rules decide when to vote and what the protocol allows (the table is ready, a polka
or a lock comes first, precommit only after a polka, NIL on a split round, moving rounds, the
fallback once rounds ran out), with one more rule on top: **the page votes only what the person
approved**. A prevote or precommit for a split the person did not approve (a polka for another
split, the fallback round's split) or for LEAF is not cast: the page abstains, which is always
safe (an absent elector never makes two values pass) and never blocks a quorum the other
electors can reach. NIL (rejecting every split; a round without agreement) is cast as usual:
it chooses nothing. The card says so, and the person can still approve the split the others
converge on, which then becomes the page's vote. A goal's brief and its results' reviews are
not the person's to judge: there the page votes under every elector's rules, without a model,
so that a quorum which counts the page is not blocked.

Where the page's identity is not an elector, the judgment is still published as a ``Score``:
shown to everyone, and fed back to the decomposers for their refinements, but not counted.

Sans-I/O like every behaviour: ``judge()`` only queues; ``poll`` turns the queue into effects.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from agent.behaviour.effects import Effect, Publish, log
from agent.behaviour.scorer import Scorer
from agent.core.consensus import NIL
from agent.core.events import Score, Vote
from agent.core.scoring import Verdict
from agent.core.tree import NodeView, Tree

MAX_FEEDBACK = 400  # Score.feedback


@dataclass(frozen=True)
class Judgment:
    node: str
    proposal: str
    approve: bool
    feedback: str = ""


def verdict_of(j: Judgment) -> Verdict:
    x = 1.0 if j.approve else 0.0
    return Verdict(x, x, x, j.feedback[:MAX_FEEDBACK], hard_fail=False)


def _not_chosen() -> Verdict:
    return Verdict(0.0, 0.0, 0.0, "", hard_fail=True)


class PersonScorer(Scorer):
    """Scorer subclass driven by a person. No LLM is ever asked."""

    def __init__(self, me: str, timing: Any = None, seed: int = 0, decomposers: int = 1) -> None:
        super().__init__(me, timing, seed, decomposers=decomposers)
        self.inbox: list[Judgment] = []
        self.abstained: set[tuple[str, int, str, str]] = set()  # (node, round, phase, value)

    # ------------------------------------------------------------------ from the page
    def judge(self, j: Judgment) -> None:
        """Queue a person's judgment; the next poll publishes it (and votes, if it may)."""
        self.inbox.append(j)

    def judged(self, tree: Tree, node_id: str, proposal_id: str) -> bool:
        n = tree.node(node_id)
        p = n.proposal(proposal_id) if n is not None else None
        return proposal_id in self.verdicts or (p is not None and any(s.author == self.me for s in p.scores))

    @staticmethod
    def problem(tree: Tree, j: Judgment) -> str | None:
        """Why this judgment cannot be taken (the page shows it), or None."""
        n = tree.node(j.node)
        if n is None:
            return "no such node in the plan"
        if n.proposal(j.proposal) is None:
            return "no such split for this node"
        if len(j.feedback) > MAX_FEEDBACK:
            return f"feedback is {len(j.feedback)} characters; at most {MAX_FEEDBACK}"
        return None

    # ------------------------------------------------------------------ behaviour
    def _poll(self, tree: Tree, now: int) -> list[Effect]:
        out = self._drain(tree)
        self._recall(tree)
        return out + super()._poll(tree, now)

    def _drain(self, tree: Tree) -> list[Effect]:
        out: list[Effect] = []
        inbox, self.inbox = self.inbox, []
        for j in inbox:
            why = self.problem(tree, j)
            if why is None and self.judged(tree, j.node, j.proposal):
                why = "already judged (a scorer's first judgment of a split stands)"
            if why is not None:
                out.append(log("info", "person's judgment refused", node=j.node, proposal=j.proposal, why=why))
                continue
            v = verdict_of(j)
            self.verdicts[j.proposal] = v
            n = tree.node(j.node)
            assert n is not None
            out += [Publish(Score(node=j.node, proposal=j.proposal, specificity=v.specificity,
                                  non_overlap=v.non_overlap, coverage=v.coverage, acceptable=j.approve,
                                  feedback=v.feedback)),
                    log("info", "person judged a split", node=j.node, proposal=j.proposal,
                        approve=j.approve, counted=self.me in n.params.electorate)]
        return out

    def votable(self, n: NodeView) -> bool:
        """The person's agent votes on a node only once the person judged one of its splits
        (an absent person casts no vote); from then on it follows the protocol like any elector."""
        return super().votable(n) and any(p.id in self.verdicts for p in n.proposals)

    def _recall(self, tree: Tree) -> None:
        """Verdicts from my own published scores: a restarted page keeps what the person said."""
        for n in tree.walk():
            if not Scorer.votable(self, n):
                continue
            for p in n.proposals:
                if p.id in self.verdicts:
                    continue
                mine = next((s for s in p.scores if s.author == self.me), None)
                if mine is not None:
                    self.verdicts[p.id] = Verdict(mine.specificity, mine.non_overlap, mine.coverage,
                                                  mine.feedback, hard_fail=not mine.acceptable)

    def approved(self, value: str) -> bool:
        """May the page vote this value in the person's name? NIL (it chooses nothing) or a
        split the person approved; never LEAF or a split the person did not approve."""
        if value == NIL:
            return True
        v = self.verdicts.get(value)
        return v is not None and v.acceptable

    # The person judges splits only. A goal's working assumptions and the reviews of its results
    # are settled by the same electorate, and a quorum may need the page's vote (four electors,
    # quorum four): there the page's agent votes as every elector does, without a model (the
    # brief the shared rule picks; the shared checks plus the rapporteur's reading). The person
    # can still amend the brief as the goal's author. The page says so (app.js, #goal-vote).

    reads_results = False  # as the rapporteur it waits the review window, then the checks decide

    def _judged_by_person(self, slot: str, n: NodeView) -> bool:
        return slot == n.id  # a split ballot; brief and review ballots have slots of their own

    def _step(self, b: Any, now: int, wake: list[int]) -> list[Effect]:
        out = super()._step(b, now, wake)
        vote = next((e.body for e in out if isinstance(e, Publish) and isinstance(e.body, Vote)), None)
        if vote is None or not self._judged_by_person(b.slot, b.node) or self.approved(vote.value):
            return out
        n = b.node
        key = (b.slot, vote.round, vote.phase, vote.value)
        if key in self.abstained:
            return []
        self.abstained.add(key)
        return [log("info", "person's page abstains: the person did not approve this value",
                    node=n.id, round=vote.round, phase=vote.phase, value=vote.value)]

    def _split_choice(self, n: NodeView, o: Any, r: int, now: int, wake: list[int]) -> str | None:
        # A person need not judge every split: approving one is choosing it, so the splits the
        # person left unjudged count as not chosen. Nothing judged yet: no choice (the polka and
        # lock rules in Scorer still apply first).
        mine = {p.id: self.verdicts[p.id] for p in n.proposals if p.id in self.verdicts}
        if any(v.acceptable for v in mine.values()):
            saved = self.verdicts
            self.verdicts = {**saved, **{p.id: _not_chosen() for p in n.proposals if p.id not in mine}}
            try:
                return super()._split_choice(n, o, r, now, wake)
            finally:
                self.verdicts = saved
        return super()._split_choice(n, o, r, now, wake)

    def leaf_ok(self, n: NodeView) -> bool:
        return False  # a person rejecting every split asks for better ones (NIL), never LEAF

    def _next_job(self, tree: Tree, now: int) -> list[Effect]:
        return []  # the person is the judge: no LLM request, ever

    def _answered(self, ticket: int, answer: Any, tree: Tree, now: int) -> list[Effect]:
        return []


__all__ = ["Judgment", "PersonScorer", "verdict_of"]
