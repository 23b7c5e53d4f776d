"""The fold's intake: a set of verified events filed into indexes.

`Plan.apply()` files an event (or parks it until what it refers to arrives) after checking the
rules that can be judged from the event and what it depends on; `agent.core.tree.derive`
derives the tree from the indexes alone. Nothing derived is stored, so the same set of events
in any order, with any duplicates, gives the same tree and digest, and applying one event at a
time equals folding from scratch.

Intake rules (each refusal has a named reason, see `reasons.py`):
- every reference must resolve: a node's goal or proposal, a refined proposal, a voted
  proposal, a renewed/released/reported claim; until then the event waits (pending);
- nothing is stamped before what it depends on (``backdated``);
- votes come only from the goal's electorate, never on a node that is a leaf by depth;
- proposals respect the goal's depth and width;
- a claim names a node that is a task (a leaf, or a split node whose children are all done,
  once the earlier subgoals it follows are done; a later attempt once the previous attempt's
  result was rejected) and a lease within the goal's cap; a claim on a node that is not (yet) a
  task waits, and is dropped if it never becomes one;
- a brief is for a goal that settles one; a review names a result of its node; a vote on a
  brief slot names a brief of that goal (or LEAF: no brief), on a review slot a result of
  that attempt (or REJECT), and only attempts before the last are reviewed;
- only a claim's author renews, releases or reports it, and nobody renews or releases a claim
  after its own result (events that can never matter are not stored);
- with an authority, only members author events, each of a kind its role allows
  (`membership.py`), and a claim is filed only once it is provably stamped after its node
  became a task (`tasks.py`).
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field
from typing import Iterable

from .consensus import LEAF, NIL, Tally, tally
from .events import (
    REJECT, Brief, Claim, Event, Goal, Hello, PlanParams, Proposal, Release, Renew, Result, Review,
    Score, Vote,
)
from . import budget, committee
from .leases import Leases, leases
from .membership import Members, Membership
from .reasons import Reason, Rejected
from .slots import base_node, brief_slot, parse_slot, parse_task, review_slot, task_key
from .tasks import claim_wait

MAX_PENDING = 10_000
MEMBERS = "@members"  # the change a hello makes (no node has this id)


@dataclass(frozen=True)
class NodeRef:
    """Where a node sits: its goal, depth, and the proposal/index that created it."""

    id: str
    root: str
    depth: int
    proposal: str | None
    index: int
    creator: str  # the event that created the node (goal or proposal)


@dataclass
class NodeEvents:
    proposals: list[Event] = field(default_factory=list)
    scores: list[Event] = field(default_factory=list)
    votes: list[Event] = field(default_factory=list)  # keyed by slot: a node's, or "#b"/"#v<k>"
    claims: list[Event] = field(default_factory=list)  # keyed by task key: a node's, or "#<k>"
    reviews: list[Event] = field(default_factory=list)


@dataclass
class Applied:
    accepted: list[Event] = field(default_factory=list)  # this event and any it unparked
    pending: bool = False
    waiting_for: str | None = None
    dropped: list[tuple[Event, Rejected]] = field(default_factory=list)  # unparked, then refused


def child_id(proposal_id: str, index: int) -> str:
    return f"{proposal_id}/{index}"


class Plan:
    def __init__(self, membership: Membership | None = None) -> None:
        self.members = Members(membership)  # who may author what (None: an open swarm)
        self.generation = 0  # bumps when a revocation made the plan fold its events again
        self.events: dict[str, Event] = {}
        self.goals: dict[str, Event] = {}
        self.proposals: dict[str, Event] = {}
        self.claims: dict[str, Event] = {}
        self.briefs: dict[str, list[Event]] = defaultdict(list)  # goal -> briefs proposed for it
        # goal -> LLM kind -> [prompt, completion] tokens its events carry (agent.core.budget)
        self.spent: dict[str, dict[str, list[int]]] = defaultdict(dict)
        self.roles: dict[str, set[str]] = defaultdict(set)
        self.by_node: dict[str, NodeEvents] = defaultdict(NodeEvents)
        self.by_claim: dict[str, list[Event]] = defaultdict(list)
        self._pending: dict[str, dict[str, Event]] = defaultdict(dict)  # missing key -> events
        self._pending_ids: dict[str, str] = {}
        self._tallies: dict[str, Tally] = {}  # caches, invalidated by node
        self._leases: dict[str, Leases] = {}
        self._subgoals: dict[str, list[dict]] = {}
        self._refs: dict[str, NodeRef] = {}
        self.memo: dict[tuple, object] = {}  # derivation caches keyed by what they depend on
        self.version = 0  # bumps on every accepted event (callers cache on it)
        # what each version changed: changes[v - 1] is the node the v-th event filed touched
        # (a goal's id for a goal, MEMBERS for a hello), so an incremental derivation re-derives
        # only those nodes and their ancestors (agent.core.tree.derive with prev=)
        self.changes: list[str] = []

    # ------------------------------------------------------------------ intake
    def __len__(self) -> int:
        return len(self.events)

    def __contains__(self, event_id: object) -> bool:
        return event_id in self.events

    def is_pending(self, event_id: str) -> bool:
        return event_id in self._pending_ids

    def pending_key(self, event_id: str) -> str | None:
        """What a waiting event waits for (None if it does not wait)."""
        return self._pending_ids.get(event_id)

    @property
    def pending_count(self) -> int:
        return len(self._pending_ids)

    def apply(self, ev: Event) -> Applied:
        """File one verified event. Raises Rejected for events that can never be valid;
        returns pending=True when it waits for a dependency (then it is not yet in the log)."""
        if ev.id in self.events or ev.id in self._pending_ids:
            raise Rejected(Reason.DUPLICATE, ev.id)
        if ev.body.type == "revoke":
            return self._revoke(ev)
        missing = self._missing(ev)
        if missing is not None:
            self._park(ev, missing)
            return Applied(pending=True, waiting_for=missing)
        self._check(ev)
        out = Applied()
        self._file(ev, out)
        return out

    def _park(self, ev: Event, key: str) -> None:
        if len(self._pending_ids) >= MAX_PENDING:
            raise Rejected(Reason.PENDING_OVERFLOW, f"{MAX_PENDING} events already wait")
        self._pending[key][ev.id] = ev
        self._pending_ids[ev.id] = key

    def drop_pending(self, event_id: str) -> tuple[Event, str] | None:
        key = self._pending_ids.pop(event_id, None)
        if key is None:
            return None
        ev = self._pending[key].pop(event_id)
        if not self._pending[key]:
            del self._pending[key]
        return ev, key

    def pending_events(self) -> list[tuple[Event, str]]:
        return [(ev, key) for key, evs in self._pending.items() for ev in evs.values()]

    def _file(self, ev: Event, out: Applied) -> None:
        stack = [ev]
        while stack:
            e = stack.pop()
            if e is not ev:
                # an unparked event is checked when it is filed, against everything filed
                # before it (so the outcome never depends on the order things were unparked)
                try:
                    missing = self._missing(e)
                    if missing is not None:
                        self._park(e, missing)
                        continue
                    self._check(e)
                except Rejected as exc:
                    out.dropped.append((e, exc))
                    continue
            self._index(e)
            out.accepted.append(e)
            for key in self._keys_provided(e):
                for waiting in list(self._pending.pop(key, {}).values()):
                    del self._pending_ids[waiting.id]
                    stack.append(waiting)

    # ------------------------------------------------------------------ dependencies
    def node_ref(self, node: str) -> NodeRef | None:
        """The node a node id, a task key (``<node>#<k>``) or a slot (``<node>#v<k>``, ``#b``)
        belongs to."""
        ref = self._refs.get(node)
        if ref is not None:
            return ref
        if "#" in node:
            return self.node_ref(base_node(node))
        if "/" not in node:
            ref = NodeRef(node, node, 0, None, 0, node) if node in self.goals else None
        else:
            pid, _, idx = node.partition("/")
            prop = self.proposals.get(pid)
            if prop is None:
                return None
            i = int(idx)
            if i >= len(prop.body.subgoals):
                return None
            parent = self.node_ref(prop.body.node)
            if parent is None:
                return None
            ref = NodeRef(node, parent.root, parent.depth + 1, pid, i, pid)
        if ref is not None:
            self._refs[node] = ref  # where a node sits never changes once known
        return ref

    def params(self, ref: NodeRef) -> PlanParams:
        return self.goals[ref.root].body.params

    def _missing(self, ev: Event) -> str | None:
        """The key of the first thing ``ev`` refers to that is not here yet."""
        member = self.members.gate(ev)
        if member is not None:
            return member
        b = ev.body
        if isinstance(b, (Hello, Goal)):
            return None
        if isinstance(b, (Renew, Release, Result)):
            return None if b.claim in self.claims else "event:" + b.claim
        if isinstance(b, Proposal) and b.refines is not None and b.refines not in self.proposals:
            return "event:" + b.refines
        if isinstance(b, Score) and b.proposal not in self.proposals:
            return "event:" + b.proposal
        if isinstance(b, Review) and b.result not in self.events:
            return "event:" + b.result
        if isinstance(b, Vote) and b.value not in (LEAF, NIL, REJECT) and b.value not in self.events:
            return "event:" + b.value
        node = base_node(b.node)
        if self.node_ref(node) is None:
            if "/" in node:
                pid = node.partition("/")[0]
                if pid not in self.proposals:
                    return "event:" + pid
                raise Rejected(Reason.UNKNOWN_DEPENDENCY, f"proposal {pid[:10]} has no subgoal {node}")
            return "event:" + node
        if isinstance(b, Claim):
            self._check_claim_static(ev)
            blocker = self.task_blocker(b.node) or claim_wait(self, ev)
            if blocker is not None:
                return blocker
        return None

    def _keys_provided(self, ev: Event) -> list[str]:
        keys = ["event:" + ev.id]
        b = ev.body
        if isinstance(b, Hello):
            keys.append("member:" + ev.author)  # its credential may admit what waits for it
        elif isinstance(b, Vote) and b.phase == "precommit":
            keys.append("task:" + b.node)  # a decision here may make a waiting claim's node a task
            if "#v" in b.node:
                keys.append("done:" + base_node(b.node))  # an accepted result makes its node done
        elif isinstance(b, (Result, Renew)):
            # ...and a done child its parent's synthesis, or the subgoals that follow it
            keys.append("done:" + base_node(b.node))
        return keys

    def _before(self, ev: Event, dep_id: str, what: str) -> None:
        dep = self.events[dep_id]
        if (ev.hlc.wall, ev.hlc.logical) <= (dep.hlc.wall, dep.hlc.logical):
            raise Rejected(Reason.BACKDATED, f"stamped {ev.hlc}, not after the {what} it depends on ({dep.hlc})")

    def _check_claim_static(self, ev: Event) -> None:
        node, attempt = parse_task(ev.body.node)
        ref = self.node_ref(node)
        assert ref is not None
        params = self.params(ref)
        cap = params.max_lease_ms
        if ev.body.lease_ms > cap:
            raise Rejected(Reason.LEASE_TOO_LONG, f"lease {ev.body.lease_ms} ms > the goal's {cap} ms")
        if attempt > params.attempts:
            raise Rejected(Reason.NOT_CLAIMABLE, f"attempt {attempt}; the goal allows {params.attempts}")

    def _check(self, ev: Event) -> None:
        """Rules that need the dependencies present and can never change once they are."""
        b = ev.body
        if isinstance(b, Goal):
            p = b.params
            why = committee.problem(ev.author, b.title, b.description, p.electorate, p.pool, p.committee)
            if why is not None:
                raise Rejected(Reason.BAD_ELECTORATE, why)
            return
        if isinstance(b, Hello):
            return
        ref = self.node_ref(base_node(b.node))
        assert ref is not None
        params = self.params(ref)
        self._before(ev, ref.creator, "node")
        if isinstance(b, Brief):
            if not params.brief:
                raise Rejected(Reason.WRONG_NODE, "the goal settles no brief")
        elif isinstance(b, Review):
            result = self.events[b.result]
            if result.body.type != "result" or base_node(result.body.node) != b.node:
                raise Rejected(Reason.WRONG_NODE, "reviews a result of another node")
            self._before(ev, b.result, "result")
        elif isinstance(b, Vote) and "#" in b.node:
            self._check_slot_vote(ev, ref, params)
        elif isinstance(b, Proposal):
            if ref.depth >= params.max_depth:
                raise Rejected(Reason.TOO_DEEP, f"node at depth {ref.depth}, max {params.max_depth}")
            if len(b.subgoals) > params.max_children:
                raise Rejected(Reason.TOO_MANY_CHILDREN,
                               f"{len(b.subgoals)} subgoals, max {params.max_children}")
            if b.refines is not None:
                if self.proposals[b.refines].body.node != b.node:
                    raise Rejected(Reason.WRONG_NODE, "refines a proposal for another node")
                self._before(ev, b.refines, "proposal")
        elif isinstance(b, Score):
            if self.proposals[b.proposal].body.node != b.node:
                raise Rejected(Reason.WRONG_NODE, "scores a proposal of another node")
            self._before(ev, b.proposal, "proposal")
        elif isinstance(b, Vote):
            if ev.author not in params.electorate:
                raise Rejected(Reason.NOT_ELECTOR, f"{ev.author[-8:]} is not in the goal's electorate")
            if ref.depth >= params.max_depth:
                raise Rejected(Reason.TOO_DEEP, "a node at the depth limit is a leaf: nothing to vote on")
            if b.value == REJECT:
                raise Rejected(Reason.WRONG_NODE, "a split slot has no REJECT")
            if b.value not in (LEAF, NIL):
                if b.value not in self.proposals or self.proposals[b.value].body.node != b.node:
                    raise Rejected(Reason.WRONG_NODE, "vote names a proposal of another node")
                self._before(ev, b.value, "proposal")
        elif isinstance(b, Claim):
            self._check_claim_static(ev)
        elif isinstance(b, (Renew, Release, Result)):
            claim = self.claims[b.claim]
            if claim.author != ev.author:
                raise Rejected(Reason.NOT_CLAIMANT, "only the claim's author may renew, release or report")
            if claim.body.node != b.node:
                raise Rejected(Reason.WRONG_NODE, "claim is for another node")
            self._before(ev, b.claim, "claim")
            if isinstance(b, Renew):
                self._check_claim_static(ev)
            if isinstance(b, (Renew, Release)):
                done = [r for r in self.by_claim.get(b.claim, ()) if r.body.type == "result"]
                if any((r.hlc.wall, r.hlc.logical) < (ev.hlc.wall, ev.hlc.logical) for r in done):
                    # can never matter; an honest executor stops renewing before it reports
                    raise Rejected(Reason.AFTER_RESULT, "the claim already has its result")

    def _check_slot_vote(self, ev: Event, ref: NodeRef, params: PlanParams) -> None:
        b = ev.body
        if ev.author not in params.electorate:
            raise Rejected(Reason.NOT_ELECTOR, f"{ev.author[-8:]} is not in the goal's electorate")
        slot = parse_slot(b.node)
        if b.value == NIL:
            pass
        elif slot.kind == "brief":
            if b.value == REJECT:
                raise Rejected(Reason.WRONG_NODE, "a brief slot has no REJECT")
            if b.value != LEAF:
                brief = self.events[b.value]
                if brief.body.type != "brief" or brief.body.node != slot.node:
                    raise Rejected(Reason.WRONG_NODE, "vote names no brief of this goal")
                self._before(ev, b.value, "brief")
        else:
            if b.value == LEAF:
                raise Rejected(Reason.WRONG_NODE, "a review slot has no LEAF")
            if b.value != REJECT:
                result = self.events[b.value]
                if result.body.type != "result" or result.body.node != task_key(slot.node, slot.attempt):
                    raise Rejected(Reason.WRONG_NODE, "vote names no result of this attempt")
                self._before(ev, b.value, "result")
        if slot.kind == "brief" and (ref.depth != 0 or not params.brief):
            raise Rejected(Reason.WRONG_NODE, "the goal settles no brief")
        if slot.kind == "review" and slot.attempt >= params.attempts:
            raise Rejected(Reason.WRONG_NODE, f"attempt {slot.attempt} is not reviewed "
                                              f"(the goal allows {params.attempts})")

    def _spend(self, ev: Event, sign: int = 1) -> None:
        b = ev.body
        p, c = getattr(b, "prompt_tokens", 0), getattr(b, "completion_tokens", 0)
        if not (p or c):
            return
        if isinstance(b, Brief):
            goal = b.node
        else:
            ref = self.node_ref(base_node(b.node))
            if ref is None:
                return
            goal = ref.root
        synthesis = isinstance(b, Result) and not self.is_leaf(base_node(b.node))
        row = self.spent[goal].setdefault(budget.kind_of(b.type, synthesis), [0, 0])
        row[0] += sign * p
        row[1] += sign * c

    def spent_total(self, goal: str) -> int:
        return sum(p + c for p, c in self.spent.get(goal, {}).values())

    def budget_phase(self, goal: str) -> budget.Phase:
        g = self.goals.get(goal)
        return budget.phase(g.body.params.token_budget if g else 0, self.spent_total(goal))

    def _index(self, ev: Event) -> None:
        self.events[ev.id] = ev
        self.version += 1
        self._spend(ev)
        b = ev.body
        if isinstance(b, Hello):
            self.changes.append(MEMBERS)
            self.members.file(ev)
            if ev.author not in self.members.revoked:
                self.roles[ev.author].add(b.role)
            return
        if isinstance(b, Goal):
            self.changes.append(ev.id)
            self.goals[ev.id] = ev
            return
        self.changes.append(base_node(b.node))
        ne = self.by_node[b.node]
        if isinstance(b, Brief):
            self.briefs[b.node].append(ev)
        elif isinstance(b, Review):
            ne.reviews.append(ev)
        elif isinstance(b, Proposal):
            self.proposals[ev.id] = ev
            ne.proposals.append(ev)
        elif isinstance(b, Score):
            ne.scores.append(ev)
        elif isinstance(b, Vote):
            ne.votes.append(ev)
            self._tallies.pop(b.node, None)
        elif isinstance(b, Claim):
            self.claims[ev.id] = ev
            ne.claims.append(ev)
            self._leases.pop(b.node, None)
        elif isinstance(b, (Renew, Release, Result)):
            ups = self.by_claim[b.claim]
            if isinstance(b, Result):
                # renewals or releases stamped after the claim's own result can never matter:
                # refused if they come later, dropped if they came first (either way the fold
                # holds the same events, whatever the arrival order)
                stale = [e for e in ups if e.body.type != "result"
                         and (e.hlc.wall, e.hlc.logical) > (ev.hlc.wall, ev.hlc.logical)]
                for e in stale:
                    ups.remove(e)
                    del self.events[e.id]
                    self._spend(e, -1)
            ups.append(ev)
            self._leases.pop(b.node, None)

    # ------------------------------------------------------------------ revocations
    def _revoke(self, ev: Event) -> Applied:
        """File a revocation; if it refuses events already here, fold everything again."""
        earlier = self.members.revocation(ev)
        self.events[ev.id] = ev
        self.version += 1
        self.changes.append(MEMBERS)
        out = Applied(accepted=[ev])
        peer = ev.body.peer
        if earlier and (peer in self.roles or any(e.author == peer for e in self.events.values())
                        or any(e.author == peer for e, _ in self.pending_events())):
            out.dropped = self.refold()
        return out

    def refold(self) -> list[tuple[Event, Rejected]]:
        """Fold this plan's events (filed and waiting) again from scratch, in place: what a
        revocation refuses goes, with whatever depended on it. Returns the filed events now refused.
        The result equals folding the set in any order; views derived before are not reused
        (``generation``)."""
        filed = [e for e in self.events.values() if e.body.type != "revoke"]
        waiting = [e for e, _ in self.pending_events()]
        before = set(self.by_node) | set(self.goals)
        members, changes, generation = self.members, self.changes, self.generation
        self.__init__(members.config)
        self.members.revoked, self.members.revocations = members.revoked, members.revocations
        for rid, rev in members.revocations.items():
            self.events[rid] = rev
        refused: list[tuple[Event, Rejected]] = []
        was_filed = {e.id for e in filed}
        for e in sorted(filed + waiting, key=lambda e: (e.order, e.id)):
            try:
                self.apply(e)
            except Rejected as exc:
                if e.id in was_filed:
                    refused.append((e, exc))
        # (one filed before that waits now, e.g. a claim whose node's decision needed a revoked
        # elector's precommit, waits like any event that came after the revocation)
        # every node before or after may look different: the incremental derivation re-derives
        # them all (changes[v - 1] names what version v touched)
        self.changes = changes + sorted(before | set(self.by_node) | set(self.goals)) + [MEMBERS]
        self.version = len(self.changes)
        self.generation = generation + 1
        return refused

    # ------------------------------------------------------------------ derived, cached
    def tally(self, node: str) -> Tally:
        """The votes on a slot: a node's split (its id), a brief or a review slot."""
        t = self._tallies.get(node)
        if t is None:
            ref = self.node_ref(base_node(node))
            quorum = self.params(ref).quorum if ref is not None else 1
            t = self._tallies[node] = tally(self.by_node[node].votes if node in self.by_node else (), quorum)
        return t

    def count_votes(self, votes: Iterable[Event], quorum: int) -> Tally:
        """``votes`` counted by the fold's one rule (a quorum of precommits in one round)."""
        return tally(votes, quorum)

    def leases(self, node: str) -> Leases:
        ls = self._leases.get(node)
        if ls is None:
            ne = self.by_node.get(node)
            ref = self.node_ref(base_node(node))
            cap = self.params(ref).max_lease_ms if ref is not None else 0
            ls = self._leases[node] = leases(ne.claims if ne else (), self.by_claim, cap)
        return ls

    def subgoal_dicts(self, proposal_id: str) -> list[dict]:
        """The proposal's subgoals as plain dicts (computed once: events never change)."""
        got = self._subgoals.get(proposal_id)
        if got is None:
            got = self._subgoals[proposal_id] = [s.model_dump() for s in self.proposals[proposal_id].body.subgoals]
        return got

    def decided(self, node: str) -> str | None:
        return self.tally(node).decided

    def is_leaf(self, node: str) -> bool:
        ref = self.node_ref(node)
        if ref is None:
            return False
        return ref.depth >= self.params(ref).max_depth or self.decided(node) == LEAF

    def is_done(self, node: str) -> bool:
        return self.accepted(node) is not None

    # ------------------------------------------------------------------ briefs and attempts
    def brief(self, goal: str) -> Event | None:
        """The goal's settled brief: the latest one its own author wrote (the person amending
        it), else the one the electorate decided (None while undecided, or decided LEAF)."""
        own = [e for e in self.briefs.get(goal, ()) if e.author == self.goals[goal].author]
        if own:
            return max(own, key=lambda e: (e.order, e.id))
        value = self.decided(brief_slot(goal))
        return self.events[value] if value not in (None, LEAF) else None

    def brief_settled(self, goal: str) -> bool:
        if goal not in self.goals or not self.goals[goal].body.params.brief:
            return True
        if any(e.author == self.goals[goal].author for e in self.briefs.get(goal, ())):
            return True
        return self.decided(brief_slot(goal)) is not None

    def attempt(self, node: str) -> int:
        """The task's current attempt: one more than its results rejected so far."""
        ref = self.node_ref(node)
        last = self.params(ref).attempts if ref is not None else 1
        k = 1
        while k < last and self.decided(review_slot(node, k)) == REJECT:
            k += 1
        return k

    def accepted(self, node: str) -> Event | None:
        """The node's result: the one its review accepted, or the last attempt's counted one."""
        ref = self.node_ref(node)
        if ref is None:
            return None
        k = self.attempt(node)
        counted = self.leases(task_key(node, k)).counted
        if k >= self.params(ref).attempts:
            return counted
        value = self.decided(review_slot(node, k))
        return self.events[value] if value not in (None, REJECT) else None

    def dependents(self, node: str) -> list[str]:
        """The siblings that follow ``node`` (its done-ness decides whether they are tasks)."""
        ref = self.node_ref(node)
        if ref is None or ref.proposal is None:
            return []
        subs = self.proposals[ref.proposal].body.subgoals
        return [child_id(ref.proposal, i) for i, s in enumerate(subs) if ref.index + 1 in s.after]

    def after(self, node: str) -> tuple[str, ...]:
        """The sibling nodes whose results ``node`` follows (its subgoal's ``after``)."""
        ref = self.node_ref(node)
        if ref is None or ref.proposal is None:
            return ()
        sub = self.proposals[ref.proposal].body.subgoals[ref.index]
        return tuple(child_id(ref.proposal, a - 1) for a in sub.after)

    def children(self, node: str) -> list[str]:
        v = self.decided(node)
        if v is None or v == LEAF:
            return []
        return [child_id(v, i) for i in range(len(self.proposals[v].body.subgoals))]

    def claimable(self, node: str) -> bool:
        """A task: a leaf, or a split node whose children are all done (its synthesis).
        Monotone: once a node is a task it stays one (decisions and valid results are final)."""
        return self.task_blocker(node) is None

    def task_blocker(self, key: str) -> str | None:
        """None if the task key ``key`` (a node, or a later attempt of it) is a task; else the
        key of what must happen first: "task:<slot>" (a decision on that slot) or "done:<n>"
        (node n done: a child, or an earlier subgoal it follows). A claim waits under that key."""
        node, attempt = parse_task(key)
        ref = self.node_ref(node)
        chain = []
        while ref is not None and ref.proposal is not None:
            chain.append(ref)
            ref = self.node_ref(self.proposals[ref.proposal].body.node)
        for r in reversed(chain):  # from the goal down: each parent must have chosen this split
            parent = self.proposals[r.proposal].body.node
            if self.decided(parent) != r.proposal:
                return "task:" + parent
        for dep in self.after(node):
            if not self.is_done(dep):
                return "done:" + dep
        if not self.is_leaf(node):
            kids = self.children(node)
            if not kids:
                return "task:" + node
            for k in kids:
                if not self.is_done(k):
                    return "done:" + k
        if attempt > 1 and self.decided(review_slot(node, attempt - 1)) != REJECT:
            return "task:" + review_slot(node, attempt - 1)
        return None

    def latest_wall(self) -> int:
        return max((e.hlc.wall for e in self.events.values()), default=0)


def fold(events: Iterable[Event], membership: Membership | None = None) -> Plan:
    """Fold events in any order; duplicates and invalid ones are skipped."""
    plan = Plan(membership)
    for ev in events:
        try:
            plan.apply(ev)
        except Rejected:
            pass
    return plan
