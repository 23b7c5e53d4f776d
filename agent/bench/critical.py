"""Where a plan's time went: its critical path, read backwards from the event log.

Starting at the root's counted result, each step asks what the event on the path waited for,
and labels the time in between:

- a result waited for its executor's LLM call (``llm: execute``), which waited for the pull
  before work (``sync``) and the settle window after the claim (``settle``);
- a claim waited for its task to become ready (the parent's decision, or the last child's
  result), or for its executor to finish the previous task (the path then runs through that
  task); a claim lost to another executor is ``lost claim race``;
- a decision (the precommit that completed a quorum) waited for the polka it precommits
  (``votes``); a prevote waited for its scorer's last judgment of the table, a round's end or
  a window (``competition window`` in round 1; ``vote timeouts`` for rounds closed by NIL);
- a score waited for its LLM call (``llm: score``), which waited for the proposal or for the
  scorer's previous call (the path then runs through that call);
- a proposal waited for its LLM call (``llm: decompose``), which waited for the node to open.

The hop between one agent's event and another agent's reaction to it is ``gossip + reaction``
(delivery, intake, derivation, the behaviour's poll); the hop between an LLM answer and the
event made of it is ``reaction``. The same labels are computed for the central baseline, whose
log has the same shape, so the difference per label is what leaderlessness costs.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass
from typing import Iterable

from agent.central import CallRecord
from agent.core.consensus import LEAF, NIL
from agent.core.events import Event
from agent.core.plan import Plan, fold

CATEGORIES = (
    "llm: decompose", "llm: score", "llm: atomic", "llm: execute", "llm: synthesize",
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
        """The event that made ``node`` exist: its parent's decision (or the goal)."""
        ref = self.plan.node_ref(node)
        if ref is None:
            return None
        if ref.proposal is None:
            return self.plan.goals.get(node)
        parent = self.plan.proposals[ref.proposal].body.node
        return self.decision(parent)

    # ------------------------------------------------------------------ the walk
    def walk(self, goal_id: str) -> list[Segment]:
        root_result = self.plan.leases(goal_id).counted
        if root_result is None:
            return []
        cur: Event | None = root_result
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
        node = r.body.node
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
        node = c.body.node
        kids = self.plan.children(node)
        if kids:
            done = [self.plan.leases(k).counted for k in kids]
            ready = max((d for d in done if d is not None), key=_key, default=None)
        else:
            ready = self.decision(node) if self.plan.decided(node) == LEAF else self._opened(node)
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
        agent = self.name(s)
        node = s.body.node
        prop = self.plan.proposals[s.body.proposal]
        call = self._call_for(agent, "score", node, s.hlc.wall, prop.hlc.wall)
        if call is None:
            self.seg(prop.hlc.wall, s.hlc.wall, "unexplained", f"{agent} score")
            return prop
        self.seg(call.end_ms, s.hlc.wall, "reaction", "answer -> score")
        self.seg(call.start_ms, call.end_ms, "llm: score", f"{agent} {node[-8:]}")
        prev = self._prev_call(agent, call.start_ms)
        if prev is not None and prev.end_ms > prop.hlc.wall:
            if prev.kind == "atomic":  # judging the node first: that call publishes nothing
                opened = self._opened(prev.node) if prev.node else None
                if opened is not None and _key(opened) < _key(s):
                    self.seg(prev.end_ms, call.start_ms, "reaction", "scorer free -> next call")
                    start = max(prev.start_ms, opened.hlc.wall)
                    self.seg(start, prev.end_ms, "llm: atomic", f"{agent} {prev.node[-8:]}")
                    busy = self._prev_call(agent, prev.start_ms)
                    own = busy is not None and busy.end_ms > opened.hlc.wall
                    # busy judging its other new nodes first: LLM work, as in the central run
                    self.seg(opened.hlc.wall, start, f"llm: {busy.kind}" if own and busy else "gossip + reaction",
                             "-> atomic call")
                    return opened
            made = self._made_by(agent, prev)
            if made is not None and _key(made) < _key(s):
                self.seg(made.hlc.wall, call.start_ms, "reaction", "scorer free -> next call")
                return made
        self.seg(prop.hlc.wall, call.start_ms, "gossip + reaction", "proposal -> score call")
        return prop

    def _made_by(self, agent: str, call: CallRecord) -> Event | None:
        """The event an answered call turned into (its author's next event on that node)."""
        peer = next((p for p, n in self.names.items() if n == agent), None)
        if peer is None:
            return None
        return next((e for e in self.by_author[peer] if getattr(e.body, "node", None) == call.node
                     and e.hlc.wall >= call.end_ms - 5 and e.type in ("score", "proposal", "result")), None)

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
    decided_at: dict[str, float] = {}
    for node in plan.by_node:
        t = plan.tally(node)
        if t.decided is not None:
            pcs = sorted((e for e in plan.by_node[node].votes if e.body.phase == "precommit"
                          and e.body.round == t.decided_round and e.body.value == t.decided), key=_key)
            if len(pcs) >= t.quorum:
                decided_at[node] = pcs[t.quorum - 1].hlc.wall
    counted_claims = {}
    for node in plan.by_node:
        r = plan.leases(node).counted
        if r is not None:
            counted_claims[node] = r.body.claim
    claims_by = defaultdict(list)
    for c in plan.claims.values():
        claims_by[(c.author, c.body.node)].append(c)
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
        if c.kind in ("score", "decompose", "atomic"):
            d = decided_at.get(node)
            if plan.node_ref(node) is None:  # worked ahead for a split that was not decided
                row["wasted"] += 1
            else:
                row["useful" if d is None or c.end_ms <= d + 1 else "wasted"] += 1
        else:
            peer = by_name.get(c.agent, "")
            mine = [cl for cl in claims_by.get((peer, node), ()) if cl.hlc.wall <= c.start_ms + 5]
            useful = any(cl.id == counted_claims.get(node) for cl in mine)
            row["useful" if useful else "wasted"] += 1
    return out


__all__ = ["CATEGORIES", "CriticalPath", "Segment", "breakdown", "llm_calls"]
