"""Run many seeds (over several processes) and report every invariant that broke, with the seed
that reproduces it: ``python -m agent simulate --seeds 0..9999 --faults all``."""

from __future__ import annotations

import multiprocessing
import os
import time
import traceback
from dataclasses import dataclass, field, replace
from typing import Callable, Iterable

from .config import Faults, SimConfig


@dataclass
class SeedResult:
    seed: int
    ok: bool
    violations: list[str] = field(default_factory=list)
    error: str | None = None  # a behaviour (or the simulator) raised
    seconds: float = 0.0
    done_ms: int | None = None
    events: int = 0
    llm_calls: int = 0
    executed_twice: int = 0
    tables: list[int] = field(default_factory=list)
    injected: int = 0
    voted_nodes: int = 0
    judged_two: int = 0
    unscored: int = 0  # splits on the table at a scorer's first prevote that it had not judged


def run_seed(seed: int, base: SimConfig) -> SeedResult:
    from agent.core.tree import derive

    from .world import Simulation

    t0 = time.perf_counter()
    cfg = replace(base, seed=seed)
    try:
        sim = Simulation(cfg)
        stats = sim.run()
    except Exception as exc:  # a bug in a behaviour, the fold or the simulator: report it
        return SeedResult(seed, False, ["no_raise: " + repr(exc)], error=traceback.format_exc(),
                          seconds=time.perf_counter() - t0)
    from .measure import competition

    plan = sim.agents[-1].intake.plan
    tree = derive(plan, sim.now)
    comp = competition(plan)
    return SeedResult(
        seed, sim.checker.ok, [str(v) for v in sim.checker.violations], None,
        time.perf_counter() - t0, stats.done_ms, stats.events_published,
        sum(stats.llm_calls.values()), sum(n.executed_twice for n in tree.walk()),
        list(stats.first_round_tables), len(stats.injected), comp.voted, comp.judged_two,
        comp.unscored,
    )


def _job(args: tuple[int, SimConfig]) -> SeedResult:
    return run_seed(*args)


def sweep(seeds: Iterable[int], base: SimConfig, processes: int | None = None,
          on_result: Callable[[SeedResult], None] | None = None) -> list[SeedResult]:
    seeds = list(seeds)
    processes = processes or max(1, min(len(seeds), os.cpu_count() or 1))
    jobs = [(s, base) for s in seeds]
    results: list[SeedResult] = []
    if processes == 1:
        for job in jobs:
            r = _job(job)
            results.append(r)
            if on_result:
                on_result(r)
        return results
    ctx = multiprocessing.get_context("fork")
    with ctx.Pool(processes) as pool:
        for r in pool.imap_unordered(_job, jobs, chunksize=4):
            results.append(r)
            if on_result:
                on_result(r)
    results.sort(key=lambda r: r.seed)
    return results


def parse_seeds(text: str) -> list[int]:
    """'7', '0..9999' (inclusive) or '1,5,9'."""
    out: list[int] = []
    for part in text.split(","):
        part = part.strip()
        if ".." in part:
            lo, hi = part.split("..", 1)
            out.extend(range(int(lo), int(hi) + 1))
        elif part:
            out.append(int(part))
    if not out:
        raise ValueError("no seeds given")
    return out


@dataclass
class Summary:
    seeds: int
    failed: list[SeedResult]
    seconds: float
    seeds_per_second: float
    competition: float  # share of voted nodes with at least 2 splits judged before the first prevote
    executed_twice: int
    median_done_s: float | None
    unscored: int = 0  # splits on the table at a scorer's first prevote that it had not judged


def summarize(results: list[SeedResult], seconds: float) -> Summary:
    failed = [r for r in results if not r.ok]
    voted = sum(r.voted_nodes for r in results)
    with_two = sum(r.judged_two for r in results) / voted if voted else 0.0
    done = sorted(r.done_ms for r in results if r.done_ms is not None)
    median = done[len(done) // 2] / 1000 if done else None
    return Summary(len(results), failed, seconds, len(results) / seconds if seconds else 0.0,
                   with_two, sum(r.executed_twice for r in results), median,
                   sum(r.unscored for r in results))


__all__ = ["Faults", "SeedResult", "Summary", "parse_seeds", "run_seed", "summarize", "sweep"]
