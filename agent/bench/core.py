"""Core benchmark: fold throughput and the cost of one incremental update.

A synthetic but protocol-shaped event set (goals, hellos, competing proposals, scores,
two-phase votes, claims with collisions, renewals, results) of N events is decoded and
verified, folded in shuffled orders, and derived into a tree from scratch; then held-out
events are applied one at a time, each followed by the tree derivation a runtime does after
every change (incremental: only the changed node and its ancestors), against deriving the
whole tree again (what every change cost before).
"""

from __future__ import annotations

import hashlib
import random
import statistics
import time
from typing import Any

from agent.core.events import (
    Claim, Goal, Hello, PlanParams, Proposal, Renew, Result, Score, Subgoal, Vote, decode_event, sign_event,
)
from agent.core.hlc import HybridClock
from agent.core.identity import Identity
from agent.core.plan import Plan, child_id
from agent.core.reasons import Reason, Rejected
from agent.core.tree import derive

WORDS = "Tokyo Kyoto Osaka Nara Hakone food temples rail budget hotels onsen museums shopping".split()


def build(n_target: int, seed: int = 7) -> list:
    rng = random.Random(seed)
    ids = {r: [Identity(hashlib.sha256(f"{r}{i}".encode()).digest()) for i in range(5)]
           for r in ("dec", "sc", "ex", "user")}
    clock = HybridClock()
    t = [1_767_225_600_000]

    def mk(who, body):
        t[0] += rng.randint(1, 20)
        return sign_event(who, clock.send(t[0]), body)

    evs = [mk(s, Hello(role="scorer")) for s in ids["sc"]]
    params = PlanParams(electorate=tuple(sorted(s.peer_id for s in ids["sc"])), quorum=3, max_depth=3,
                        max_children=4, max_rounds=2)
    g_no = 0
    while len(evs) < n_target:
        g = mk(ids["user"][0], Goal(title=f"Goal {g_no}: plan a trip", params=params))
        g_no += 1
        evs.append(g)
        frontier = [(g.id, 0)]
        while frontier:
            node, depth = frontier.pop()
            if depth == params.max_depth:
                claims = [mk(rng.choice(ids["ex"]), Claim(node=node, lease_ms=30_000)) for _ in range(rng.randint(1, 2))]
                claims.sort(key=lambda c: (c.order, c.id))
                evs += claims
                win = claims[0]
                evs.append(mk(next(i for i in ids["ex"] if i.peer_id == win.author), Renew(node=node, claim=win.id, lease_ms=30_000)))
                evs.append(mk(next(i for i in ids["ex"] if i.peer_id == win.author), Result(node=node, claim=win.id, output="done " * 20)))
                continue
            props = []
            for d in ids["dec"][:3]:
                subs = tuple(Subgoal(title=f"{w} {depth}", description="details " * 5) for w in rng.sample(WORDS, 4))
                props.append(mk(d, Proposal(node=node, strategy="by place", subgoals=subs)))
            evs += props
            for s in ids["sc"]:
                for p in props:
                    evs.append(mk(s, Score(node=node, proposal=p.id, specificity=0.7, non_overlap=0.7,
                                           coverage=0.7, acceptable=True, feedback="ok")))
            for phase in ("prevote", "precommit"):
                for s in ids["sc"]:
                    evs.append(mk(s, Vote(node=node, round=1, phase=phase, value=props[0].id)))
            frontier += [(child_id(props[0].id, i), depth + 1) for i in range(4)]
    return evs


def shuffled(events: list, seed: int, per_goal: bool = False) -> list:
    """An arrival order for the fold: a full shuffle, or ``per_goal``: the goals arrive in a
    shuffled order, each goal's events shuffled among themselves.

    A full shuffle of 100,000 events leaves tens of thousands waiting for their parents, more
    than a plan holds pending (MAX_PENDING, 10,000; the rest is refused); a peer pulling a log
    gets it in an order where dependencies come first. Per goal, at most one goal's events
    (about 800 here) wait at once, and the fold still sees every event out of order."""
    rng = random.Random(seed)
    if not per_goal:
        order = events[:]
        rng.shuffle(order)
        return order
    blocks: list[list] = [[]]
    for e in events:
        if e.type == "goal" and blocks[-1]:
            blocks.append([])
        blocks[-1].append(e)
    rng.shuffle(blocks)
    order = []
    for b in blocks:
        rng.shuffle(b)
        order += b
    return order


def _fold(order: list) -> Plan:
    plan = Plan()
    for e in order:
        plan.apply(e)
    return plan


def measure(n: int, shuffles: int = 3, held_out: int = 200, log: Any = print) -> dict[str, Any]:
    t0 = time.perf_counter()
    evs = build(n)
    raws = [e.raw for e in evs]
    log(f"  built {len(evs)} signed events in {time.perf_counter() - t0:.1f} s")
    t0 = time.perf_counter()
    decoded = [decode_event(r) for r in raws]
    t_decode = time.perf_counter() - t0
    applies, derives, digests = [], [], set()
    how = "full shuffle"
    for i in range(shuffles):
        order = shuffled(decoded, i, per_goal=how == "per goal")
        t0 = time.perf_counter()
        try:
            plan = _fold(order)
        except Rejected as exc:  # more than MAX_PENDING waiting: arrive per goal instead
            if exc.reason is not Reason.PENDING_OVERFLOW or how == "per goal":
                raise
            how = "per goal"
            order = shuffled(decoded, i, per_goal=True)
            t0 = time.perf_counter()
            plan = _fold(order)
        assert len(plan) == len(decoded) and not plan.pending_count, "events left pending"
        applies.append(time.perf_counter() - t0)
        t0 = time.perf_counter()
        tree = derive(plan, plan.latest_wall())
        derives.append(time.perf_counter() - t0)
        digests.add(tree.digest)
    assert len(digests) == 1, "shuffled folds disagree"
    nodes = sum(1 for _ in tree.walk())
    # one incremental update: apply one more event, derive the tree again (as the runtime does)
    base, tail = decoded[:-held_out], decoded[-held_out:]
    plan = Plan()
    for e in base:
        plan.apply(e)
    now = max(e.hlc.wall for e in decoded) + 1
    prev = derive(plan, now)
    inc, scratch = [], []
    for e in tail:
        t0 = time.perf_counter()
        plan.apply(e)
        prev = derive(plan, now, prev=prev)
        inc.append(time.perf_counter() - t0)
    for e in tail[:20]:  # the old way: every change derived the whole tree
        t0 = time.perf_counter()
        derive(plan, now)
        scratch.append(time.perf_counter() - t0)
    assert prev.digest == derive(plan, now).digest
    return {
        "events": len(raws), "nodes": nodes, "arrival": how, "goals": sum(1 for e in decoded if e.type == "goal"), "bytes_avg": round(sum(map(len, raws)) / len(raws)),
        "decode_verify_per_s": round(len(raws) / t_decode),
        "apply_per_s": round(len(raws) / statistics.median(applies)),
        "derive_from_scratch_ms": round(1000 * statistics.median(derives), 2),
        "fold_from_scratch_per_s": round(len(raws) / (statistics.median(applies) + statistics.median(derives))),
        "update_incremental_ms_p50": round(1000 * statistics.median(inc), 3),
        "update_incremental_ms_p95": round(1000 * sorted(inc)[int(0.95 * len(inc))], 3),
        "update_full_rederive_ms_p50": round(1000 * statistics.median(scratch), 2),
    }


def run(sizes: list[int], log: Any = print) -> dict[str, Any]:
    out = {}
    for n in sizes:
        out[str(n)] = r = measure(n, log=log)
        log(f"  {n} events: apply {r['apply_per_s']:,}/s, decode+verify {r['decode_verify_per_s']:,}/s, "
            f"one update {r['update_incremental_ms_p50']} ms (full re-derive {r['update_full_rederive_ms_p50']} ms)")
    return out


if __name__ == "__main__":
    import sys

    run([int(a) for a in sys.argv[1:]] or [10_000])
