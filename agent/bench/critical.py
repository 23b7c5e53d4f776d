"""Where a plan's time went: its critical path, read backwards from the event log.

Starting at the root's accepted result (the review decision that accepted it, or the last
attempt's result), each step asks what the event on the path waited for, and labels the time in
between:

- a review decision waited for its votes, each prevote for its elector's reading (``llm:
  review`` for the rapporteur's call), which waited for the result it reads;
- a result waited for its executor's LLM call (``llm: execute``), which waited for the pull
  before work (``sync``) and the settle window after the claim (``settle``);
- a claim waited for its task to become ready (the parent's decision, or the last child's
  result), or for its executor to finish the previous task (the path then runs through that
  task); a claim lost to another executor is ``lost claim race``;
- a decision (the precommit that completed a quorum) waited for the polka it precommits
  (``votes``); a prevote waited for its scorer's last judgment of the table, a round's end or
  a window (``competition window`` in round 1; ``vote timeouts`` for rounds closed by NIL);
- a score waited for its scorer's ranking of the table (``llm: rank``), which waited for the
  last proposal on it or for the scorer's previous call (the path then runs through that call);
- a proposal waited for its LLM call (``llm: decompose``), which waited for the node to open
  (the goal's splits for its brief to be settled: ``llm: brief`` and its votes).

The hop between one agent's event and another agent's reaction to it is ``gossip + reaction``
(delivery, intake, derivation, the behaviour's poll); the hop between an LLM answer and the
event made of it is ``reaction``. The same labels are computed for the central baseline, whose
log has the same shape, so the difference per label is what leaderlessness costs.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass
from typing import Iterable

from agent.drivers.central import CallRecord
from agent.core.consensus import LEAF, NIL
from agent.core.events import Event
from agent.core.plan import Plan, fold
from agent.core.slots import base_node, brief_slot, parse_slot, parse_task, review_slot

CATEGORIES = (
    "llm: brief", "llm: decompose", "llm: rank", "llm: atomic", "llm: execute", "llm: synthesize",
    "llm: review",
    "gossip + reaction", "reaction", "votes",
    "competition window", "vote timeouts", "settle", "sync", "lost claim race", "unexplained",
)


@dataclass
class Segment:
    start: float
    end: float
    category: str
    what: str

    @property
    def ms(self) -> float:
        return max(0.0, self.end - self.start)


def _key(e: Event) -> tuple[int, int, str]:
    return (e.hlc.wall, e.hlc.logical, e.id)


class CriticalPath:
    def __init__(self, events: Iterable[Event], calls: list[CallRecord], syncs: list[tuple[str, float, float]],
                 names: dict[str, str]) -> None:
        self.events = sorted(events, key=_key)
        self.plan: Plan = fold(self.events)
        self.names = names
        self.calls: dict[str, list[CallRecord]] = defaultdict(list)
        for c in calls:
            if c.end_ms is not None:
                self.calls[c.agent].append(c)
        for lst in self.calls.values():
            lst.sort(key=lambda c: c.start_ms)
        self.syncs: dict[str, list[tuple[float, float]]] = defaultdict(list)
        for agent, s, e in syncs:
            self.syncs[agent].append((s, e))
        self.by_author: dict[str, list[Event]] = defaultdict(list)
        self.node_events: dict[str, list[Event]] = defaultdict(list)
        for e in self.events:
            self.by_author[e.author].append(e)
            node = getattr(e.body, "node", None)
            if node is not None:
                self.node_events[node].append(e)
        self.segments: list[Segment] = []

    # ------------------------------------------------------------------ helpers
    def name(self, e: Event) -> str:
        return self.names.get(e.author, e.author[-6:])

    def seg(self, start: float, end: float, category: str, what: str) -> None:
        if end > start:
            self.segments.append(Segment(start, end, category, what))

    def _call_for(self, agent: str, kind: str, node: str, before: float, after: float = 0.0) -> CallRecord | None:
        best = None
        for c in self.calls.get(agent, ()):
            if c.kind == kind and c.node == node and c.outcome == "answered" and after - 5 <= c.start_ms \
                    and c.end_ms is not None and c.end_ms <= before + 5:
                if best is None or c.end_ms > best.end_ms:
                    best = c
        return best

    def _prev_call(self, agent: str, before: float) -> CallRecord | None:
        best = None
        for c in self.calls.get(agent, ()):
            if c.end_ms is not None and c.end_ms <= before + 1 and c.start_ms < before:
                if best is None or c.end_ms > best.end_ms:
                    best = c
        return best

    def decision(self, node: str) -> Event | None:
        t = self.plan.tally(node)
        if t.decided is None:
            return None
        pcs = sorted((e for e in self.node_events[node] if e.type == "vote" and e.body.phase == "precommit"
                      and e.body.round == t.decided_round and e.body.value == t.decided), key=_key)
        return pcs[t.quorum - 1] if len(pcs) >= t.quorum else None

    def _quorum_th(self, node: str, rnd: int, phase: str, value: str | None) -> Event | None:
        t = self.plan.tally(node)
        vs = sorted((e for e in self.node_events[node] if e.type == "vote" and e.body.phase == phase
                     and e.body.round == rnd and (value is None or e.body.value == value)), key=_key)
        return vs[t.quorum - 1] if len(vs) >= t.quorum else None

    def _own_vote(self, node: str, author: str, rnd: int, phase: str) -> Event | None:
        return next((e for e in self.node_events[node] if e.type == "vote" and e.author == author
                     and e.body.round == rnd and e.body.phase == phase), None)

    def _opened(self, node: str) -> Event | None:
        """The event that made ``node`` open for splits: its parent's decision (or, for a goal,
        the goal itself, or the settling of its brief)."""
        ref = self.plan.node_ref(node)
        if ref is None:
            return None
        if ref.proposal is None:
            goal = self.plan.goals.get(node)
            if goal is not None and goal.body.params.brief:
                own = [e for e in self.plan.briefs.get(node, ()) if e.author == goal.author]
                if own:
                    return min(own, key=_key)
                return self.decision(brief_slot(node)) or goal
            return goal
        parent = self.plan.proposals[ref.proposal].body.node
        return self.decision(parent)

    def done_event(self, node: str) -> Event | None:
        """When ``node`` became done: the decision accepting its result, or the result itself."""
        accepted = self.plan.accepted(node)
        if accepted is None:
            return None
        k = self.plan.attempt(node)
        if self.plan.decided(review_slot(node, k)) == accepted.id:
            return self.decision(review_slot(node, k)) or accepted
        return accepted

    # ------------------------------------------------------------------ the walk
    def walk(self, goal_id: str) -> list[Segment]:
        done = self.done_event(goal_id)
        if done is None:
            return []
        cur: Event | None = done
        for _ in range(100_000):
            if cur is None or cur.type == "goal":
                break
            nxt = getattr(self, "_" + cur.type)(cur)
            if nxt is not None and _key(nxt) >= _key(cur):
                self.seg(0, 0, "unexplained", "loop")
                break
            cur = nxt
        self.segments.reverse()
        return self.segments

    def _result(self, r: Event) -> Event | None:
        claim = self.plan.claims[r.body.claim]
        agent = self.name(r)
        node = base_node(r.body.node)
        calls = [c for c in self.calls.get(agent, ()) if c.kind in ("execute", "synthesize") and c.node == node
                 and c.start_ms >= claim.hlc.wall - 5 and (c.end_ms or 0) <= r.hlc.wall + 5]
        if not calls:
            self.seg(claim.hlc.wall, r.hlc.wall, "unexplained", f"{agent} execute {node[-8:]}")
            return claim
        last = max(calls, key=lambda c: c.end_ms or 0)
        self.seg(last.end_ms, r.hlc.wall, "reaction", "answer -> result")
        t = last.end_ms
        for c in sorted(calls, key=lambda c: c.start_ms, reverse=True):
            self.seg(c.start_ms, min(t, c.end_ms or t), f"llm: {c.kind}", f"{agent} {node[-8:]}")
            t = c.start_ms
        first = t
        # between the claim and the first call: the pull from peers, the rest is the settle window
        synced = 0.0
        for s, e in self.syncs.get(agent, ()):
            s, e = max(s, claim.hlc.wall), min(e, first)
            if e > s:
                self.seg(s, e, "sync", agent)
                synced += e - s
        settle_end = first - synced
        self.seg(claim.hlc.wall, settle_end, "settle", agent)
        return claim

    def _claim(self, c: Event) -> Event | None:
        node, attempt = parse_task(c.body.node)
        kids = self.plan.children(node)
        if attempt > 1:  # a later attempt: ready once the previous result was sent back
            ready = self.decision(review_slot(node, attempt - 1))
        elif kids:
            done = [self.done_event(k) for k in kids]
            ready = max((d for d in done if d is not None), key=_key, default=None)
        else:
            ready = self.decision(node) if self.plan.decided(node) == LEAF else self._opened(node)
        follows = [d for d in (self.done_event(a) for a in self.plan.after(node)) if d is not None]
        if follows and (ready is None or _key(max(follows, key=_key)) > _key(ready)):
            ready = max(follows, key=_key)  # waited for an earlier step it follows
        prev = max((e for e in self.by_author[c.author] if e.type in ("result", "release") and _key(e) < _key(c)),
                   key=_key, default=None)
        if prev is not None and (ready is None or _key(prev) > _key(ready)):
            self.seg(prev.hlc.wall, c.hlc.wall, "reaction", "executor free -> claim")
            if prev.type == "release":
                lost = self.plan.claims.get(prev.body.claim)
                if lost is not None:
                    self.seg(lost.hlc.wall, prev.hlc.wall, "lost claim race", self.name(c))
                    return lost
            return prev
        if ready is None:
            return None
        self.seg(ready.hlc.wall, c.hlc.wall, "gossip + reaction", "ready -> claim")
        return ready

    def _release(self, r: Event) -> Event | None:
        claim = self.plan.claims.get(r.body.claim)
        if claim is not None:
            self.seg(claim.hlc.wall, r.hlc.wall, "lost claim race", self.name(r))
        return claim

    def _vote(self, v: Event) -> Event | None:
        b = v.body
        node = v.body.node
        if b.phase == "precommit":
            polka = self._quorum_th(node, b.round, "prevote", None if b.value == NIL else b.value)
            own = self._own_vote(node, v.author, b.round, "prevote")
            cause = max((e for e in (polka, own) if e is not None and _key(e) < _key(v)), key=_key, default=None)
            if cause is None:
                return None
            self.seg(cause.hlc.wall, v.hlc.wall, "vote timeouts" if b.value == NIL else "votes",
                     f"precommit r{b.round}")
            return cause
        # a prevote: what did its scorer wait for?
        cands: list[tuple[Event, str]] = []
        slot = parse_slot(node)
        if slot.kind == "review":
            read = [e for e in self.node_events[slot.node] if e.author == v.author and e.type == "review"
                    and _key(e) < _key(v)]
            if read:
                cause = max(read, key=_key)
                self.seg(cause.hlc.wall, v.hlc.wall, "reaction", f"review -> prevote r{b.round}")
                return cause
        if slot.kind == "brief":
            briefs = [e for e in self.plan.briefs.get(slot.node, ()) if _key(e) < _key(v)]
            if briefs:
                cause = max(briefs, key=_key)
                self.seg(cause.hlc.wall, v.hlc.wall, "competition window" if b.round == 1 else "votes",
                         f"brief prevote r{b.round}")
                return cause
        mine = [e for e in self.node_events[node] if e.author == v.author and e.type == "score" and _key(e) < _key(v)]
        if mine:
            cands.append((max(mine, key=_key), "competition window" if b.round == 1 else "votes"))
        if b.round > 1:
            qc = self._quorum_th(node, b.round - 1, "precommit", None)
            own = self._own_vote(node, v.author, b.round - 1, "precommit")
            for e in (qc, own):
                if e is not None and _key(e) < _key(v):
                    cands.append((e, "vote timeouts"))
        else:
            opened = self._opened(node)
            if opened is not None:
                cands.append((opened, "competition window"))
        if not cands:
            return None
        cause, cat = max(cands, key=lambda ec: _key(ec[0]))
        self.seg(cause.hlc.wall, v.hlc.wall, cat, f"prevote r{b.round}")
        return cause

    def _score(self, s: Event) -> Event | None:
        """A scorer's first scores of a node's splits wait for two things: its criteria (one
        call, asked when the node opened) and the table (the last split on it). Whichever came
        last is on the path."""
        agent = self.name(s)
        node = s.body.node
        table = [e for e in self.node_events[node] if e.type == "proposal" and _key(e) < _key(s)]
        last = max(table, key=_key, default=self.plan.proposals[s.body.proposal])
        call = self._call_for(agent, "rank", node, s.hlc.wall)
        if call is None or call.end_ms <= last.hlc.wall:
            # the criteria were ready: the score waited for the split (and the competition)
            self.seg(last.hlc.wall, s.hlc.wall, "competition window" if call is not None else "unexplained",
                     f"{agent} split -> score")
            return last
        self.seg(call.end_ms, s.hlc.wall, "reaction", "answer -> score")
        self.seg(call.start_ms, call.end_ms, "llm: rank", f"{agent} {node[-8:]}")
        opened = self._opened(node)
        if opened is None or opened.hlc.wall > call.start_ms:
            return last
        prev = self._prev_call(agent, call.start_ms)
        busy = prev is not None and prev.end_ms > opened.hlc.wall
        # (a criteria call's answer is published later, with the scores: what the scorer did
        # before it is told by its previous call alone)
        self.seg(opened.hlc.wall, call.start_ms, f"llm: {prev.kind}" if busy and prev else "gossip + reaction",
                 "node open -> criteria call")
        return opened

    def _made_by(self, agent: str, call: CallRecord) -> Event | None:
        """The event an answered call turned into (its author's next event on that node)."""
        peer = next((p for p, n in self.names.items() if n == agent), None)
        if peer is None:
            return None
        return next((e for e in self.by_author[peer] if getattr(e.body, "node", None) == call.node
                     and e.hlc.wall >= call.end_ms - 5
                     and e.type in ("score", "proposal", "result", "brief", "review")), None)

    def _review(self, r: Event) -> Event | None:
        """An elector's reading of a result: the rapporteur's waited for its LLM call."""
        agent = self.name(r)
        result = self.plan.events.get(r.body.result)
        call = self._call_for(agent, "review", r.body.node, r.hlc.wall, result.hlc.wall if result else 0.0)
        if call is not None:
            self.seg(call.end_ms, r.hlc.wall, "reaction", "answer -> review")
            self.seg(call.start_ms, call.end_ms, "llm: review", f"{agent} {r.body.node[-8:]}")
            if result is not None:
                self.seg(result.hlc.wall, call.start_ms, "gossip + reaction", "result -> review call")
            return result
        if result is not None:  # read on the checks and the rapporteur's reading
            rap = [e for e in self.node_events[r.body.node] if e.type == "review" and e.author != r.author
                   and e.body.result == r.body.result and _key(e) < _key(r)]
            cause = max(rap, key=_key) if rap else result
            self.seg(cause.hlc.wall, r.hlc.wall, "gossip + reaction", "-> review")
            return cause
        return None

    def _brief(self, b: Event) -> Event | None:
        agent = self.name(b)
        goal = self.plan.goals.get(b.body.node)
        call = self._call_for(agent, "brief", b.body.node, b.hlc.wall)
        if call is None or goal is None:
            if goal is not None:
                self.seg(goal.hlc.wall, b.hlc.wall, "unexplained", f"{agent} brief")
            return goal
        self.seg(call.end_ms, b.hlc.wall, "reaction", "answer -> brief")
        self.seg(call.start_ms, call.end_ms, "llm: brief", f"{agent} {b.body.node[-8:]}")
        self.seg(goal.hlc.wall, call.start_ms, "gossip + reaction", "goal -> brief call")
        return goal

    def _proposal(self, p: Event) -> Event | None:
        agent = self.name(p)
        node = p.body.node
        opened = self._opened(node)
        call = self._call_for(agent, "decompose", node, p.hlc.wall)
        if call is None:
            if opened is not None:
                self.seg(opened.hlc.wall, p.hlc.wall, "unexplained", f"{agent} decompose")
            return opened
        if opened is not None and call.start_ms < opened.hlc.wall:
            # worked ahead of the decision: only what the LLM still had to do after it counts
            end = max(call.end_ms, opened.hlc.wall)
            self.seg(end, p.hlc.wall, "gossip + reaction" if end == opened.hlc.wall else "reaction",
                     "decision -> proposal (worked ahead)")
            self.seg(opened.hlc.wall, end, "llm: decompose", f"{agent} {node[-8:]} (ahead)")
            return opened
        self.seg(call.end_ms, p.hlc.wall, "reaction", "answer -> proposal")
        self.seg(call.start_ms, call.end_ms, "llm: decompose", f"{agent} {node[-8:]}")
        cands: list[Event] = [e for e in (opened,) if e is not None]
        if p.body.refines is not None:  # a refinement waited for its round to close
            closing = [e for e in self.node_events[node] if e.type == "vote" and e.hlc.wall <= call.start_ms + 1]
            if closing:
                cands.append(max(closing, key=_key))
        prev = self._prev_call(agent, call.start_ms)
        if prev is not None:
            made = self._made_by(agent, prev)
            if made is not None:
                cands.append(made)
        if not cands:
            return None
        cause = max(cands, key=_key)
        own = cause.author == p.author
        self.seg(cause.hlc.wall, call.start_ms, "reaction" if own else "gossip + reaction", "-> decompose call")
        return cause


def breakdown(events: Iterable[Event], calls: list[CallRecord], syncs: list[tuple[str, float, float]],
              names: dict[str, str], goal_id: str) -> dict[str, float]:
    """Seconds per category along the critical path (goal -> the root's counted result)."""
    cp = CriticalPath(events, calls, syncs, names)
    out = {c: 0.0 for c in CATEGORIES}
    for s in cp.walk(goal_id):
        out[s.category] = out.get(s.category, 0.0) + s.ms / 1000
    return {k: round(v, 3) for k, v in out.items()}


def llm_calls(events: Iterable[Event], calls: list[CallRecord], names: dict[str, str]) -> dict[str, dict[str, int]]:
    """LLM calls by kind: useful, wasted (answered for work that no longer mattered: a score of
    a node decided before it came, a split after the decision or of a node that never came to
    be, an execution whose result does not count) and cancelled."""
    evs = sorted(events, key=_key)
    plan = fold(evs)
    by_name = {n: p for p, n in names.items()}
    decided_at: dict[str, float] = {}  # slot -> when its decision was complete
    for node in plan.by_node:
        t = plan.tally(node)
        if t.decided is not None:
            pcs = sorted((e for e in plan.by_node[node].votes if e.body.phase == "precommit"
                          and e.body.round == t.decided_round and e.body.value == t.decided), key=_key)
            if len(pcs) >= t.quorum:
                decided_at[node] = pcs[t.quorum - 1].hlc.wall
    counted_claims: dict[str, set[str]] = defaultdict(set)  # node -> claims whose result counted
    for node in plan.by_node:
        r = plan.leases(node).counted
        if r is not None:
            counted_claims[base_node(node)].add(r.body.claim)
    claims_by = defaultdict(list)
    for c in plan.claims.values():
        claims_by[(c.author, base_node(c.body.node))].append(c)
    out: dict[str, dict[str, int]] = {}
    for c in calls:
        row = out.setdefault(c.kind, {"useful": 0, "wasted": 0, "cancelled": 0})
        if c.outcome == "cancelled":
            row["cancelled"] += 1
            continue
        if c.outcome != "answered" or c.end_ms is None:
            row["wasted"] += 1
            continue
        node = c.node or ""
        if c.kind in ("rank", "decompose", "atomic", "brief", "review"):
            slot = {"brief": brief_slot(node), "review": review_slot(node, plan.attempt(node))}.get(c.kind, node)
            if c.kind == "review":  # the reading of an attempt: decided before the answer came?
                slot = next((review_slot(node, k) for k in range(1, 10)
                             if review_slot(node, k) in decided_at and decided_at[review_slot(node, k)] >= c.start_ms),
                            slot)
            d = decided_at.get(slot)
            if plan.node_ref(node) is None:  # worked ahead for a split that was not decided
                row["wasted"] += 1
            else:
                row["useful" if d is None or c.end_ms <= d + 1 else "wasted"] += 1
        else:
            peer = by_name.get(c.agent, "")
            mine = [cl for cl in claims_by.get((peer, node), ()) if cl.hlc.wall <= c.start_ms + 5]
            useful = any(cl.id in counted_claims.get(node, ()) for cl in mine)
            row["useful" if useful else "wasted"] += 1
    return out


__all__ = ["CATEGORIES", "CriticalPath", "Segment", "breakdown", "llm_calls"]
