"""Derive the plan tree from a Plan's indexes (pure; ``now_ms`` only decides lease liveness)."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any, Iterable, Iterator

from .consensus import LEAF, NIL, Tally
from .events import REJECT, Event, PlanParams, canonical
from .leases import ClaimState
from .plan import MEMBERS, Plan, child_id
from .slots import brief_slot, review_slot, task_key


class NodeState(StrEnum):
    OPEN = "open"  # no proposal yet
    VOTING = "voting"  # proposals and votes, nothing decided
    SPLIT = "split"  # a split was decided; children not all done
    WAITING = "waiting"  # a task whose earlier subgoals (the ones it follows) are not done yet
    READY = "ready"  # a task (leaf, or synthesis of done children) nobody holds
    CLAIMED = "claimed"  # a task under a live lease
    REVIEW = "review"  # the attempt's result awaits the electorate's review
    DONE = "done"  # the task has its result (accepted, or the last attempt's)


class TaskKind(StrEnum):
    LEAF = "leaf"  # execute the node itself
    SYNTHESIS = "synthesis"  # summarise the done children into the node's answer


@dataclass
class ScoreView:
    author: str
    specificity: float
    non_overlap: float
    coverage: float
    acceptable: bool
    feedback: str
    wall: int
    tokens: tuple[int, int] = (0, 0)  # (prompt, completion) the judgment cost

    @property
    def overall(self) -> float:
        return (self.specificity + self.non_overlap + self.coverage) / 3


@dataclass
class ReviewView:
    author: str
    result: str
    accept: bool
    problems: list[str]
    feedback: str
    wall: int
    tokens: tuple[int, int] = (0, 0)


@dataclass
class BriefView:
    id: str
    author: str
    wall: int
    facts: dict[str, str]
    tokens: tuple[int, int] = (0, 0)


@dataclass
class ProposalView:
    id: str
    author: str
    strategy: str
    refines: str | None
    wall: int
    subgoals: list[dict[str, Any]]
    scores: list[ScoreView] = field(default_factory=list)  # one per scorer, earliest first
    tokens: tuple[int, int] = (0, 0)  # (prompt, completion) the split cost
    ranks: dict[str, int] = field(default_factory=dict)  # scorer -> its place for this split

    def mean_score(self, electorate: Iterable[str] | None = None) -> float:
        """The mean of its scores; of the electorate's alone when given (a score from anyone
        else, a scorer outside the goal's committee or a person's page, is advice, not a vote)."""
        who = None if electorate is None else set(electorate)
        xs = [s.overall for s in self.scores if who is None or s.author in who]
        return sum(xs) / len(xs) if xs else 0.0

    def feedback(self) -> list[str]:
        return [s.feedback for s in self.scores if s.feedback]


@dataclass
class NodeView:
    id: str
    root: str
    depth: int
    title: str
    description: str
    atomic: bool  # the proposer's hint
    params: PlanParams
    parent: str | None
    state: NodeState = NodeState.OPEN
    leaf: bool = False
    leaf_reason: str | None = None  # "max_depth" | "voted"
    task: TaskKind | None = None
    proposals: list[ProposalView] = field(default_factory=list)
    tally: Tally | None = None
    decided: str | None = None  # proposal id or LEAF
    decided_round: int | None = None
    children: list["NodeView"] = field(default_factory=list)
    claims: list[ClaimState] = field(default_factory=list)
    holder: ClaimState | None = None  # the claim whose lease is alive now
    collisions: int = 0
    takeovers: int = 0
    executed_twice: int = 0
    late_results: int = 0  # finished after the lease lapsed: never counted
    result: dict[str, Any] | None = None
    after: tuple[int, ...] = ()  # 1-based positions of the earlier siblings it follows
    attempt: int = 1  # the task's current attempt
    history: list[dict[str, Any]] = field(default_factory=list)  # earlier attempts, rejected
    candidate: dict[str, Any] | None = None  # the current attempt's result, under review
    reviews: list[ReviewView] = field(default_factory=list)  # of the candidate
    review_tally: Tally | None = None
    # goals only: when it was set, and the working assumptions every prompt below carries
    since: int = 0
    brief: dict[str, str] | None = None
    brief_id: str | None = None
    brief_settled: bool = True
    briefs: list[BriefView] = field(default_factory=list)
    brief_tally: Tally | None = None
    spent: dict[str, tuple[int, int]] = field(default_factory=dict)  # LLM kind -> (prompt, completion)
    budget_phase: str = "open"  # goals only (agent.core.budget): open | no_splits | spent
    # to_json's answer, per value of ``cut``: a view never changes once derived, and an
    # incremental derivation shares the unchanged ones, so the digest rebuilds only what changed
    _json: dict[bool, dict[str, Any]] = field(default_factory=dict, repr=False, compare=False)

    @property
    def review_slot(self) -> str:
        return review_slot(self.id, self.attempt)

    @property
    def task_key(self) -> str:
        return task_key(self.id, self.attempt)

    def walk(self) -> Iterator["NodeView"]:
        yield self
        for c in self.children:
            yield from c.walk()

    def walk_active(self) -> Iterator["NodeView"]:
        """Like walk, without done subtrees (under a done node everything is done: no role
        has anything left to do there), so a role's poll costs what is still open."""
        if self.state is NodeState.DONE:
            return
        yield self
        for c in self.children:
            yield from c.walk_active()

    def proposal(self, pid: str) -> ProposalView | None:
        return next((p for p in self.proposals if p.id == pid), None)

    @property
    def first_proposal_wall(self) -> int | None:
        return min((p.wall for p in self.proposals), default=None)

    def tokens(self) -> tuple[int, int]:
        """(prompt, completion) tokens the LLM spent on this node and everything under it: its
        splits, their judgments and its counted result (losing splits are part of the cost)."""
        p = c = 0
        for pv in self.proposals:
            p, c = p + pv.tokens[0], c + pv.tokens[1]
            for s in pv.scores:
                p, c = p + s.tokens[0], c + s.tokens[1]
        if self.result:
            p, c = p + self.result.get("prompt_tokens", 0), c + self.result.get("completion_tokens", 0)
        for past in self.history:
            r = past.get("result") or {}
            p, c = p + r.get("prompt_tokens", 0), c + r.get("completion_tokens", 0)
        for rv in self.reviews + [rv for past in self.history for rv in past.get("reviews_v", ())]:
            p, c = p + rv.tokens[0], c + rv.tokens[1]
        for b in self.briefs:
            p, c = p + b.tokens[0], c + b.tokens[1]
        for child in self.children:
            cp, cc = child.tokens()
            p, c = p + cp, c + cc
        return p, c

    def to_json(self, cut: bool | None = None) -> dict[str, Any]:
        cut = self.budget_phase == "spent" if cut is None else cut
        got = self._json.get(cut)
        if got is None:
            got = self._json[cut] = self._to_json(cut)
        return got

    def _to_json(self, cut: bool) -> dict[str, Any]:
        rounds = _rounds_json(self.tally)
        extra: dict[str, Any] = {}
        if self.depth == 0 and (self.briefs or self.brief is not None or not self.brief_settled):
            extra["brief"] = self.brief
            extra["brief_id"] = self.brief_id
            extra["brief_settled"] = self.brief_settled
            extra["briefs"] = [{"id": b.id, "author": b.author, "facts": b.facts} for b in self.briefs]
            extra["brief_rounds"] = _rounds_json(self.brief_tally)
        if self.depth == 0 and (self.params.token_budget or self.spent):
            extra["budget"] = {"tokens": self.params.token_budget, "phase": self.budget_phase,
                               "spent": {k: list(v) for k, v in sorted(self.spent.items())},
                               "spent_total": sum(p + c for p, c in self.spent.values())}
        if cut and self.state is not NodeState.DONE and self.holder is None:
            extra["unfinished"] = True  # the goal's budget ran out before this got its result
        if self.task is not None and (self.params.attempts > 1 or self.after):
            extra["after"] = list(self.after)
            extra["attempt"] = self.attempt
            extra["history"] = [{k: v for k, v in h.items() if k != "reviews_v"} for h in self.history]
            extra["candidate"] = self.candidate
            extra["reviews"] = [_review_json(r) for r in self.reviews]
            extra["review_rounds"] = _rounds_json(self.review_tally)
        return {**extra, **{
            "id": self.id,
            "title": self.title,
            "description": self.description,
            "depth": self.depth,
            "state": self.state.value,
            "leaf": self.leaf,
            "leaf_reason": self.leaf_reason,
            "task": self.task.value if self.task else None,
            "atomic_hint": self.atomic,
            "decided": self.decided,
            "decided_round": self.decided_round,
            "proposals": [
                {
                    "id": p.id,
                    "author": p.author,
                    "strategy": p.strategy,
                    "refines": p.refines,
                    "subgoals": [s["title"] for s in p.subgoals],
                    "scores": [
                        {"author": s.author, "specificity": s.specificity, "non_overlap": s.non_overlap,
                         "coverage": s.coverage, "acceptable": s.acceptable, "feedback": s.feedback,
                         **({"rank": p.ranks[s.author]} if s.author in p.ranks else {})}
                        for s in p.scores
                    ],
                    **({"after": [list(sg.get("after", ())) for sg in p.subgoals]}
                       if any(sg.get("after") for sg in p.subgoals) else {}),
                }
                for p in self.proposals
            ],
            "rounds": rounds,
            "claims": [{"id": c.id, "author": c.author, "start": c.start, "end": c.end} for c in self.claims],
            "holder": None if self.holder is None else self.holder.id,
            "collisions": self.collisions,
            "takeovers": self.takeovers,
            "executed_twice": self.executed_twice,
            "late_results": self.late_results,
            "result": self.result,
            "tokens": dict(zip(("prompt", "completion"), self.tokens())),
            "children": [c.to_json(cut) for c in self.children],
        }}


def _rounds_json(tally: Tally | None) -> list[dict[str, Any]]:
    return tally.to_json() if tally is not None else []


def _review_json(r: ReviewView) -> dict[str, Any]:
    return {"author": r.author, "result": r.result, "accept": r.accept, "problems": r.problems,
            "feedback": r.feedback}


def _result_json(ev: Event) -> dict[str, Any]:
    b = ev.body
    return {"id": ev.id, "author": ev.author, "claim": b.claim, "output": b.output,
            "prompt_tokens": b.prompt_tokens, "completion_tokens": b.completion_tokens}


@dataclass
class Tree:
    roots: list[NodeView]
    now_ms: int
    index: dict[str, NodeView]
    members: dict[str, frozenset[str]] = field(default_factory=dict)  # peer -> announced roles
    valid_until: int = 2**62  # the tree is the same for any now in [now_ms, valid_until)
    _digest: str | None = field(default=None, repr=False, compare=False)
    # for an incremental derivation from this tree: the plan and its version it was derived
    # from, and the nodes whose view changes with time alone (node -> when it next changes)
    _plan: Any = field(default=None, repr=False, compare=False)
    _version: int = field(default=-1, repr=False, compare=False)
    _timed: dict[str, int] = field(default_factory=dict, repr=False, compare=False)
    _generation: int = field(default=0, repr=False, compare=False)  # plan.generation derived from

    def count_role(self, role: str) -> int:
        return sum(1 for roles in self.members.values() if role in roles)

    def with_role(self, role: str) -> list[str]:
        """The peers that announced ``role``, sorted."""
        return sorted(p for p, roles in self.members.items() if role in roles)

    def node(self, node_id: str) -> NodeView | None:
        return self.index.get(node_id)

    def walk(self) -> Iterator[NodeView]:
        for r in self.roots:
            yield from r.walk()

    def walk_active(self) -> Iterator[NodeView]:
        for r in self.roots:
            yield from r.walk_active()

    def to_json(self) -> dict[str, Any]:
        body = {"goals": [r.to_json() for r in self.roots]}
        return {**body, "digest": hashlib.sha256(canonical(body)).hexdigest()}

    @property
    def digest(self) -> str:
        if self._digest is None:
            self._digest = self.to_json()["digest"]
        return self._digest

    def counts(self) -> dict[str, int]:
        out = {s.value: 0 for s in NodeState}
        for n in self.walk():
            out[n.state.value] += 1
        return out

    def is_done(self, goal_id: str | None = None) -> bool:
        """The goal has its answer, or its budget ran out and nothing is in flight any more."""
        roots = self.roots if goal_id is None else [r for r in self.roots if r.id == goal_id]
        return bool(roots) and all(r.state is NodeState.DONE or (
            r.budget_phase == "spent" and not any(n.state is NodeState.CLAIMED for n in r.walk()))
            for r in roots)

    def path(self, node: NodeView) -> list[NodeView]:
        """From the goal down to ``node``."""
        out = []
        cur: NodeView | None = node
        while cur is not None:
            out.append(cur)
            cur = self.index.get(cur.parent) if cur.parent else None
        return out[::-1]


def derive(plan: Plan, now_ms: int, prev: Tree | None = None) -> Tree:
    """The tree of ``plan`` at ``now_ms``. With ``prev`` (a tree derived earlier from the same
    plan object, at a time not after ``now_ms``) only what changed is derived again: the nodes
    the events filed since touched, the nodes whose leases started or ended since, and their
    ancestors; every other node's view is shared with ``prev`` (views are never changed once
    built). Either way the result equals a derivation from scratch (property-tested)."""
    if prev is not None and prev._plan is plan and prev._version <= plan.version and now_ms >= prev.now_ms \
            and prev._generation == plan.generation:
        return _derive_incremental(plan, now_ms, prev)
    index: dict[str, NodeView] = {}
    timed: dict[str, int] = {}
    roots = []
    for gid, goal in sorted(plan.goals.items(), key=lambda kv: (kv[1].order, kv[0])):
        roots.append(_derive_root(plan, gid, goal, now_ms, index, timed, None, None))
    return _tree(plan, roots, now_ms, index, timed, _members(plan))


def _members(plan: Plan) -> dict[str, frozenset[str]]:
    return {peer: frozenset(roles) for peer, roles in plan.roles.items()}


def _tree(plan: Plan, roots: list[NodeView], now_ms: int, index: dict[str, NodeView], timed: dict[str, int],
          members: dict[str, frozenset[str]]) -> Tree:
    return Tree(roots, now_ms, index, members, min(timed.values(), default=2**62),
                _plan=plan, _version=plan.version, _timed=timed, _generation=plan.generation)


def _derive_root(plan: Plan, gid: str, goal: Any, now_ms: int, index: dict[str, NodeView],
                 timed: dict[str, int], reuse: dict[str, NodeView] | None, dirty: set[str] | None) -> NodeView:
    g = goal.body
    root = NodeView(gid, gid, 0, g.title, g.description, False, g.params, None, since=goal.hlc.wall,
                    budget_phase=plan.budget_phase(gid))
    root.spent = {k: (v[0], v[1]) for k, v in plan.spent.get(gid, {}).items()}
    root.budget_phase = plan.budget_phase(gid)
    if g.params.brief:
        root.brief_settled = plan.brief_settled(gid)
        settled = plan.brief(gid)
        if settled is not None:
            root.brief, root.brief_id = settled.body.facts(), settled.id
        root.brief_tally = plan.tally(brief_slot(gid))
        briefs = plan.briefs.get(gid, ())
        key = ("briefs", gid, len(briefs))
        views = plan.memo.get(key)
        if views is None:
            views = plan.memo[key] = [BriefView(e.id, e.author, e.hlc.wall, e.body.facts(),
                                                (e.body.prompt_tokens, e.body.completion_tokens))
                                      for e in sorted(briefs, key=lambda e: (e.order, e.id))]
        root.briefs = list(views)
    _derive_node(plan, root, now_ms, index, timed, reuse, dirty)
    return root


def _derive_incremental(plan: Plan, now_ms: int, prev: Tree) -> Tree:
    touched: set[str] = set()
    members_changed = False
    for key in plan.changes[prev._version:]:
        if key == MEMBERS:
            members_changed = True
        else:
            touched.add(key)
    for nid, at in prev._timed.items():
        if at <= now_ms:
            touched.add(nid)  # a lease started or ended: time alone changed this node
    for nid in list(touched):  # a subgoal done may make the siblings that follow it tasks
        touched.update(plan.dependents(nid))
    members = _members(plan) if members_changed else prev.members
    if not touched:
        t = Tree(prev.roots, now_ms, prev.index, members, prev.valid_until, prev._digest,
                 _plan=plan, _version=plan.version, _timed=prev._timed, _generation=plan.generation)
        return t
    dirty: set[str] = set()
    for nid in touched:  # a node's view depends on its children's: re-derive up to the goal
        cur: str | None = nid
        while cur is not None and cur not in dirty:
            dirty.add(cur)
            ref = plan.node_ref(cur)
            cur = None if ref is None or ref.proposal is None else plan.proposals[ref.proposal].body.node
    index = dict(prev.index)
    timed = {nid: at for nid, at in prev._timed.items() if nid not in dirty}
    if any(gid not in prev.index for gid in plan.goals):
        goals = sorted(plan.goals.items(), key=lambda kv: (kv[1].order, kv[0]))
    else:
        goals = [(r.id, plan.goals[r.id]) for r in prev.roots]
    roots = []
    for gid, goal in goals:
        if gid in dirty or gid not in prev.index:
            roots.append(_derive_root(plan, gid, goal, now_ms, index, timed, prev.index, dirty))
        else:
            roots.append(prev.index[gid])
    # a split decided again otherwise (only past the safety bound: an elector that precommits
    # two splits, the lowest id with a quorum standing) leaves the old split's subtree behind
    for nid in dirty:
        old, new = prev.index.get(nid), index.get(nid)
        if old is None or new is None or old is new:
            continue
        kept = {c.id for c in new.children}
        for c in old.children:
            if c.id not in kept:
                for gone in c.walk():
                    if index.get(gone.id) is gone:
                        del index[gone.id]
                        timed.pop(gone.id, None)
    return _tree(plan, roots, now_ms, index, timed, members)


def _scores(plan: Plan, node: str) -> dict[str, list[ScoreView]]:
    ne = plan.by_node.get(node)
    if ne is None or not ne.scores:
        return {}
    key = ("scores", node, len(ne.scores))  # scores only accumulate: the count is a version
    got = plan.memo.get(key)
    if got is None:
        got = plan.memo[key] = _score_views(ne.scores)
    return got


def _score_views(events: list) -> dict[str, list[ScoreView]]:
    out: dict[str, list[ScoreView]] = {}
    seen: set[tuple[str, str]] = set()
    for s in sorted(events, key=lambda e: (e.order, e.id)):
        b = s.body
        if (s.author, b.proposal) in seen:
            continue  # a scorer's first judgment of a proposal stands
        seen.add((s.author, b.proposal))
        out.setdefault(b.proposal, []).append(ScoreView(
            s.author, b.specificity, b.non_overlap, b.coverage, b.acceptable, b.feedback, s.hlc.wall,
            (b.prompt_tokens, b.completion_tokens)))
    return out


def _reviews(plan: Plan, node: str) -> dict[str, list[ReviewView]]:
    ne = plan.by_node.get(node)
    if ne is None or not ne.reviews:
        return {}
    key = ("reviews", node, len(ne.reviews))  # reviews only accumulate: the count is a version
    got = plan.memo.get(key)
    if got is None:
        got = plan.memo[key] = _review_views(ne.reviews)
    return got


def _review_views(events: list) -> dict[str, list[ReviewView]]:
    out: dict[str, list[ReviewView]] = {}
    seen: set[tuple[str, str]] = set()
    for e in sorted(events, key=lambda e: (e.order, e.id)):
        b = e.body
        if (e.author, b.result) in seen:
            continue  # an elector's first reading of a result stands
        seen.add((e.author, b.result))
        out.setdefault(b.result, []).append(ReviewView(
            e.author, b.result, b.accept, list(b.problems), b.feedback, e.hlc.wall,
            (b.prompt_tokens, b.completion_tokens)))
    return out


def _ranks(plan: Plan, node: str) -> dict[str, dict[str, int]]:
    """proposal -> scorer -> the place that scorer's first judgment gave it."""
    ne = plan.by_node.get(node)
    if ne is None or not ne.scores:
        return {}
    key = ("ranks", node, len(ne.scores))
    got = plan.memo.get(key)
    if got is not None:
        return got  # type: ignore[return-value]
    out: dict[str, dict[str, int]] = {}
    plan.memo[key] = out
    seen: set[tuple[str, str]] = set()
    for e in sorted(ne.scores, key=lambda e: (e.order, e.id)):
        if (e.author, e.body.proposal) in seen:
            continue
        seen.add((e.author, e.body.proposal))
        if e.body.rank is not None:
            out.setdefault(e.body.proposal, {})[e.author] = e.body.rank
    return out


def _derive_node(plan: Plan, n: NodeView, now_ms: int, index: dict[str, NodeView], timed: dict[str, int],
                 reuse: dict[str, NodeView] | None, dirty: set[str] | None) -> None:
    index[n.id] = n
    ne = plan.by_node.get(n.id)
    if ne is not None and ne.proposals:
        scores = _scores(plan, n.id)
        ranks = _ranks(plan, n.id)
        for p in sorted(ne.proposals, key=lambda e: (e.order, e.id)):
            b = p.body
            n.proposals.append(ProposalView(
                p.id, p.author, b.strategy, b.refines, p.hlc.wall,
                plan.subgoal_dicts(p.id), scores.get(p.id, []), (b.prompt_tokens, b.completion_tokens),
                ranks.get(p.id, {}),
            ))
    if n.depth >= n.params.max_depth:
        n.leaf, n.leaf_reason = True, "max_depth"
    else:
        t = n.tally = plan.tally(n.id)
        n.decided, n.decided_round = t.decided, t.decided_round
        if n.decided == LEAF:
            n.leaf, n.leaf_reason = True, "voted"
    if not n.leaf:
        if n.decided is None:
            n.state = NodeState.VOTING if (n.proposals or (n.tally and n.tally.rounds)) else NodeState.OPEN
            return
        prop = plan.proposals[n.decided]
        for i, s in enumerate(prop.body.subgoals):
            cid = child_id(prop.id, i)
            if reuse is not None and dirty is not None and cid not in dirty and cid in reuse:
                n.children.append(reuse[cid])  # nothing under it changed: its whole subtree stands
                continue
            child = NodeView(cid, n.root, n.depth + 1, s.title, s.description, s.atomic, n.params, n.id,
                             after=tuple(s.after))
            _derive_node(plan, child, now_ms, index, timed, reuse, dirty)
            n.children.append(child)
        if not all(c.state is NodeState.DONE for c in n.children):
            n.state = NodeState.SPLIT
            return
    n.task = TaskKind.LEAF if n.leaf else TaskKind.SYNTHESIS
    k = n.attempt = plan.attempt(n.id)
    reviews = _reviews(plan, n.id) if n.params.attempts > 1 else {}
    for j in range(1, k):  # the attempts before: each result rejected, with the reviews why
        past = plan.leases(task_key(n.id, j))
        n.executed_twice += past.executed_twice
        n.collisions, n.takeovers = n.collisions + past.collisions, n.takeovers + past.takeovers
        c = past.counted
        rv = reviews.get(c.id, []) if c is not None else []
        n.history.append({"attempt": j, "result": _result_json(c) if c is not None else None,
                          "verdict": REJECT, "reviews": [_review_json(r) for r in rv], "reviews_v": rv})
    ls = plan.leases(task_key(n.id, k))
    n.claims = list(ls.claims)
    n.collisions, n.takeovers = n.collisions + ls.collisions, n.takeovers + ls.takeovers
    n.executed_twice, n.late_results = n.executed_twice + ls.executed_twice, ls.invalid_results
    counted = ls.counted
    if k < n.params.attempts:
        n.review_tally = plan.tally(review_slot(n.id, k))
    accepted = plan.accepted(n.id)
    if accepted is not None:
        n.result = _result_json(accepted)
        n.reviews = reviews.get(accepted.id, [])
        n.state = NodeState.DONE
        return
    if counted is not None:  # an attempt before the last: its result awaits the review
        n.candidate = _result_json(counted)
        n.reviews = reviews.get(counted.id, [])
        n.state = NodeState.REVIEW
        return
    if any(not plan.is_done(d) for d in plan.after(n.id)):
        n.state = NodeState.WAITING
        return
    n.holder = ls.holder(now_ms)
    # a yielding holder (its author held the task long enough: leases.py) keeps it only until
    # someone else claims: to everyone the task is ready
    n.state = NodeState.CLAIMED if n.holder is not None and n.holder.holds(now_ms) else NodeState.READY
    nxt = 2**62  # when a lease starts, yields or ends: the only way time changes the tree
    for c in ls.claims:
        if c.start > now_ms:
            nxt = min(nxt, c.start)
        elif c.end > now_ms:
            nxt = min(nxt, c.end, c.yield_from if c.yield_from > now_ms else 2**62)
    if nxt < 2**62:
        timed[n.id] = nxt


__all__ = ["NIL", "BriefView", "NodeState", "NodeView", "ProposalView", "ReviewView", "ScoreView",
           "TaskKind", "Tree", "derive"]
