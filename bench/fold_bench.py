"""Fold benchmark: prints figures (not a test). Run: .venv/bin/python bench/fold_bench.py [N]

Builds a synthetic but protocol-shaped event set (goals, hellos, competing proposals, scores,
two-phase votes, claims with collisions, renewals, results) of at least N events, then measures decode+verify,
apply, tree derivation and a full fold from scratch, in one run so the ratios compare.
"""

from __future__ import annotations

import hashlib
import random
import statistics
import sys
import time

sys.path.insert(0, ".")
from agent.core.events import (  # noqa: E402
    Claim, Goal, Hello, PlanParams, Proposal, Renew, Result, Score, Subgoal, Vote, decode_event, sign_event,
)
from agent.core.hlc import HybridClock  # noqa: E402
from agent.core.identity import Identity  # noqa: E402
from agent.core.plan import Plan, child_id  # noqa: E402
from agent.core.tree import derive  # noqa: E402

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


def main() -> None:
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 10_000
    t0 = time.perf_counter()
    evs = build(n)
    raws = [e.raw for e in evs]
    print(f"built {len(evs)} signed events in {time.perf_counter() - t0:.2f}s "
          f"({sum(map(len, raws)) / len(raws):.0f} B average)")

    t0 = time.perf_counter()
    decoded = [decode_event(r) for r in raws]
    t_decode = time.perf_counter() - t0

    runs = []
    for _ in range(5):
        shuffled = decoded[:]
        random.Random(len(runs)).shuffle(shuffled)
        t0 = time.perf_counter()
        plan = Plan()
        for e in shuffled:
            plan.apply(e)
        t_apply = time.perf_counter() - t0
        t0 = time.perf_counter()
        tree = derive(plan, plan.latest_wall())
        digest = tree.digest
        t_tree = time.perf_counter() - t0
        runs.append((t_apply, t_tree, digest))
    assert len({r[2] for r in runs}) == 1, "shuffled folds disagree"
    apply_s = statistics.median(r[0] for r in runs)
    tree_s = statistics.median(r[1] for r in runs)
    nodes = sum(1 for _ in tree.walk())
    print(f"decode+verify : {t_decode:.3f}s  ({len(raws) / t_decode:,.0f} events/s)")
    print(f"apply (fold)  : {apply_s:.3f}s  ({len(raws) / apply_s:,.0f} events/s, median of 5 shuffled orders)")
    print(f"derive tree   : {tree_s:.3f}s  ({nodes} nodes, digest {digest[:16]})")
    print(f"fold {len(raws)} events from scratch (apply + tree): {apply_s + tree_s:.3f}s"
          f"  -> {len(raws) / (apply_s + tree_s):,.0f} events/s")
    print(f"including decode+verify of every signature: {t_decode + apply_s + tree_s:.3f}s")


if __name__ == "__main__":
    main()
