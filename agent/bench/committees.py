"""Committees in the simulator: what one decision costs as the swarm grows, with a goal's
electorate bounded (a committee drawn from the scorers) against every scorer an elector.

For each number of scorers S (3 decomposers, 2 executors, a submitter and an observer; the
simulator's scripted LLM at its usual 3-40 s of virtual time per call), one goal to done per
seed. Reported per decision (a node decided: a split or a leaf): protocol events (every kind),
judgments and votes, and deliveries (an event arriving at an agent: events x the agents that
hold the log), and the simulator's CPU. Every invariant is checked after every step, as in the
sweep; a run that breaks one is reported, not averaged.

``python -m agent.bench.committees --scorers 9,51,101,500 --committee 7 --seeds 3``."""

from __future__ import annotations

import argparse
import json
import statistics
import time
from dataclasses import asdict, dataclass

from agent.core.tree import derive
from agent.drivers.sim import Faults, SimConfig, Simulation


@dataclass
class Row:
    scorers: int
    agents: int
    committee: int  # 0: every scorer an elector
    electorate: int
    seeds: int
    failed: int
    decisions: float
    events_per_decision: float
    protocol_events_per_decision: float  # hellos aside (one per agent, not per decision)
    judgments_per_decision: float  # scores, reviews and votes
    deliveries_per_decision: float
    deliveries_per_decision_per_agent: float
    cpu_s_per_decision: float
    done_s_virtual: float | None


def run(scorers: int, committee: int, seeds: list[int], faults: str = "none", agents_out: list | None = None) -> Row:
    per: dict[str, list[float]] = {k: [] for k in ("dec", "ev", "proto", "judge", "deliv", "cpu", "done")}
    failed = electorate = agents = 0
    for seed in seeds:
        cfg = SimConfig(seed=seed, scorers=scorers, committee=committee, faults=Faults.parse(faults))
        c0 = time.process_time()
        sim = Simulation(cfg)
        stats = sim.run()
        cpu = time.process_time() - c0
        agents, electorate = len(sim.agents), len(sim.params.electorate)
        if not sim.checker.ok or stats.done_ms is None:
            failed += 1
            continue
        plan = sim.agents[-1].intake.plan
        tree = derive(plan, sim.now)
        decisions = sum(1 for n in tree.walk() if n.decided is not None) or 1
        judged = sum(1 for e in plan.events.values() if e.type in ("score", "review", "vote"))
        per["dec"].append(decisions)
        per["ev"].append(len(plan.events) / decisions)
        per["proto"].append(sum(1 for e in plan.events.values() if e.type != "hello") / decisions)
        per["judge"].append(judged / decisions)
        per["deliv"].append(stats.deliveries / decisions)
        per["cpu"].append(cpu / decisions)
        per["done"].append(stats.done_ms / 1000)

    def med(k: str) -> float:
        return round(statistics.median(per[k]), 2) if per[k] else float("nan")

    return Row(scorers, agents, committee, electorate, len(seeds), failed, med("dec"), med("ev"), med("proto"), med("judge"),
               med("deliv"), round(med("deliv") / agents, 2) if agents else float("nan"), round(med("cpu"), 3),
               med("done") if per["done"] else None)


def table(rows: list[Row]) -> str:
    head = ("| scorers S | agents N | committee | electorate | seeds (failed) | decisions | events / decision "
            "| hellos aside | judgments + votes / decision | deliveries / decision | per agent | sim CPU s / decision | goal -> done s (virtual) |\n"
            "|---|---|---|---|---|---|---|---|---|---|---|---|---|")
    lines = [head]
    for r in rows:
        lines.append(f"| {r.scorers} | {r.agents} | {r.committee or 'all'} | {r.electorate} | {r.seeds} ({r.failed}) "
                     f"| {r.decisions} | {r.events_per_decision} | {r.protocol_events_per_decision} "
                     f"| {r.judgments_per_decision} "
                     f"| {r.deliveries_per_decision:,.0f} | {r.deliveries_per_decision_per_agent} "
                     f"| {r.cpu_s_per_decision} | {r.done_s_virtual} |")
    return "\n".join(lines)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--scorers", default="9,51,101,500")
    ap.add_argument("--committee", type=int, default=7)
    ap.add_argument("--seeds", type=int, default=3)
    ap.add_argument("--faults", default="none")
    ap.add_argument("--baseline", action="store_true", help="also every scorer an elector (up to 101)")
    ap.add_argument("--out", default=None, help="write the rows as JSON here")
    a = ap.parse_args()
    seeds = list(range(a.seeds))
    rows = []
    for s in (int(x) for x in a.scorers.split(",")):
        if a.baseline and s <= 101:
            rows.append(run(s, 0, seeds, a.faults))
            print(table(rows[-1:]).splitlines()[-1], flush=True)
        rows.append(run(s, a.committee, seeds, a.faults))
        print(table(rows[-1:]).splitlines()[-1], flush=True)
    print(table(rows))
    if a.out:
        with open(a.out, "w") as f:
            json.dump([asdict(r) for r in rows], f, indent=1)


if __name__ == "__main__":
    main()
