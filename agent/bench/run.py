"""`python -m agent bench` / `make bench`: every section, a table on stdout, JSON in a file.

Sections: overhead (swarm vs the central baseline at each LLM latency, with the critical-path
breakdown), votes (vote latency in a 10-agent swarm), claims (claim races: 5 executors, 200+
leaves), core (fold throughput, one incremental update at 10k and 100k events), ollama (one
queue-modelling fake Ollama server under 8 and 16 closed-loop agents), scale (N agent processes to completion), latejoin (a fresh
observer joining 3 agents holding 10,000 events: time to an equal digest, bytes pulled), realmodel (the demo's
swarm on an embedded model, a copy per agent against one shared server, and one direct call). Noise: repeats and
medians; the machine's load average is recorded with every figure (2 cores, shared)."""

from __future__ import annotations

import json
import os
import platform
import sys
import time
from pathlib import Path
from typing import Any, Callable

from agent.bench.critical import CATEGORIES

SECTIONS = ("overhead", "votes", "claims", "core", "ollama", "latejoin", "scale", "realmodel")


def _ollama(log: Callable[[str], None]) -> dict[str, Any]:
    here = Path(__file__).resolve().parents[2] / "tests"
    if not (here / "support" / "ollama_load.py").exists():
        return {"ok": False, "error": "tests/support/ollama_load.py not found (run from a checkout)"}
    sys.path.insert(0, str(here))
    from dataclasses import asdict

    from support.ollama_load import closed_loop  # type: ignore

    out = {}
    for agents in (8, 16):
        for timeout in (120.0, 600.0):
            r = closed_loop(agents, parallel=4, cpu=True, timeout=timeout)
            out[f"{agents}x{int(timeout)}"] = asdict(r)
            log(f"  ollama {agents} agents, timeout {timeout:.0f}s: p95 {r.p95:.0f}s, wasted {r.wasted}, "
                f"abandoned {r.abandoned}, failed {r.failed}" if r.p95 is not None else f"  ollama {agents}: no answer")
    return out


def _fmt(v: Any) -> str:
    if v is None:
        return "-"
    if isinstance(v, float):
        return f"{v:.2f}"
    return str(v)


def table(res: dict[str, Any]) -> str:
    lines = [f"# swarm-planner bench  {res['started']}  ({res['machine']})",
             f"load average at start {res['load_start']}, at end {res.get('load_end')}", ""]
    ov = res.get("overhead")
    if ov:
        lines.append("## Coordination overhead: swarm (processes over libp2p, 127.0.0.1) vs central baseline")
        lines.append("3 decomposers, 3 scorers, 2 executors, depth 2, <= 4 children, scripted LLM of fixed latency L; "
                     "medians of repeats")
        lines.append("")
        lines.append("| L | swarm s | central s | ratio | repeats (failed) | nodes | load |")
        lines.append("|---|---|---|---|---|---|---|")
        for lat, r in ov.items():
            shape = (r["runs"]["central"][0].get("shape") or {}).get("nodes")
            loads = [x["load"][0] for x in r["runs"]["swarm"]]
            lines.append(f"| {lat} s | {_fmt(r['swarm_makespan_s'])} | {_fmt(r['central_makespan_s'])} | "
                         f"{_fmt(r['ratio_median'])} | {r['repeats']} ({r['failed']}) | {shape} | "
                         f"{min(loads):.1f}-{max(loads):.1f} |")
        lines.append("")
        for lat, r in ov.items():
            pairs = [f"{s_['makespan_s']:.2f} / {c_['makespan_s']:.2f}"
                     for s_, c_ in zip(r["runs"]["swarm"], r["runs"]["central"]) if s_.get("ok")]
            lines.append(f"L = {lat} s, each repeat (swarm / central s): " + ", ".join(pairs))
        lines.append("")
        lines.append("LLM calls by kind, useful / wasted / cancelled (median per run):")
        lines.append("")
        lines.append("| L | kind | swarm | central |")
        lines.append("|---|---|---|---|")
        for lat, r in ov.items():
            for kind in sorted(set(r["swarm_calls"]) | set(r["central_calls"])):
                s = r["swarm_calls"].get(kind, {})
                c = r["central_calls"].get(kind, {})
                fmt = lambda d: f"{d.get('useful', 0):g} / {d.get('wasted', 0):g} / {d.get('cancelled', 0):g}"  # noqa: E731
                lines.append(f"| {lat} s | {kind} | {fmt(s)} | {fmt(c)} |")
        lines.append("")
        lines.append("Critical path, seconds per label (median per run): where the swarm's extra time goes")
        lines.append("")
        head = "| label | " + " | ".join(f"swarm L={lat} | central L={lat}" for lat in ov) + " |"
        lines.append(head)
        lines.append("|---|" + "---|---|" * len(ov))
        for cat in CATEGORIES:
            row = [f"{ov[lat]['swarm_path'].get(cat, 0):.2f} | {ov[lat]['central_path'].get(cat, 0):.2f}" for lat in ov]
            lines.append(f"| {cat} | " + " | ".join(row) + " |")
        lines.append("")
    v = res.get("votes")
    if v:
        lines.append("## Vote latency (the precommit completing a quorum -> every peer holds the decision)")
        lines.append(f"{v.get('agents')} agents, {v.get('decisions')} decisions: p50 {_fmt(v.get('p50_ms'))} ms, "
                     f"p95 {_fmt(v.get('p95_ms'))} ms, max {_fmt(v.get('max_ms'))} ms (load {v.get('load')})"
                     if v.get("ok") else f"FAILED: {v.get('error')}")
        lines.append("")
    c = res.get("claims")
    if c:
        lines.append("## Claim races")
        if c.get("ok"):
            lines.append(f"{c['executors']} executors, {c['goals']} goals, {c['tasks']} tasks ({c['leaves']} leaves) in "
                         f"{c['makespan_s']} s: {c['claims']} claims, {c['collisions']} collisions, "
                         f"{c['claims_lost']} claims lost, {c['loser_llm_calls']} LLM calls started by losers, "
                         f"{c['tasks_with_work_from_two_executors']} tasks with LLM work from two executors, "
                         f"{c['executed_twice']} executed twice (load {c.get('load')})")
        else:
            lines.append(f"FAILED: {c.get('error')}")
        lines.append("")
    co = res.get("core")
    if co:
        lines.append("## Core (one process)")
        lines.append("")
        lines.append("| events | nodes | arrival | decode+verify /s | apply /s | derive from scratch ms | one update (apply + "
                     "incremental derive) ms p50 / p95 | full re-derive per update (before) ms |")
        lines.append("|---|---|---|---|---|---|---|---|")
        for n, r in co.items():
            if not isinstance(r, dict):
                continue
            lines.append(f"| {r['events']} | {r['nodes']} | {r.get('arrival', '-')} | {r['decode_verify_per_s']:,} | {r['apply_per_s']:,} | "
                         f"{r['derive_from_scratch_ms']} | {r['update_incremental_ms_p50']} / "
                         f"{r['update_incremental_ms_p95']} | {r['update_full_rederive_ms_p50']} |")
        lines.append("")
    ol = res.get("ollama")
    if ol:
        lines.append("## Ollama under load (fake server: 1 model, 4 slots sharing one CPU, 250 tokens at 50 ms; "
                     "closed-loop agents, one request in flight each)")
        lines.append("")
        lines.append("| agents | client timeout s | p50 s | p95 s | ok | failed | wasted (ran, abandoned) | abandoned in queue |")
        lines.append("|---|---|---|---|---|---|---|---|")
        for key, r in ol.items():
            if isinstance(r, dict) and "agents" in r:
                lines.append(f"| {r['agents']} | {r['timeout']:.0f} | {_fmt(r['p50'])} | {_fmt(r['p95'])} | {r['ok']} | "
                             f"{r['failed']} | {r['wasted']} | {r['abandoned']} |")
        lines.append("")
    lj = res.get("latejoin")
    if lj:
        lines.append(f"## Late join: a fresh observer joins {lj.get('peers')} agents holding {lj.get('events')} events "
                     f"({lj.get('store_bytes', 0) / 1e6:.1f} MB of log)")
        lines.append("ids = ids before bodies; pages = whole pages (the earlier sync); medians of runs")
        lines.append("")
        lines.append("| sync | s to equal digest (median; each run) | joiner CPU s | MB in | copies of the log | "
                     "events pulled | requests | runs (failed) | load |")
        lines.append("|---|---|---|---|---|---|---|---|---|")
        for mode in ("ids", "pages"):
            r = lj.get(mode)
            if not r:
                continue
            runs = [x for x in lj["runs"] if x["mode"] == mode]
            loads = [x["load"][0] for x in runs]
            each = ", ".join(str(x["seconds"]) for x in runs if "seconds" in x)
            lines.append(f"| {mode} | {r['seconds']} ({each}) | {r.get('cpu_s', '-')} | {r['bytes_in'] / 1e6:.2f} | "
                         f"{r['copies']} | {r['pulled']} | {r['requests']} | {r['ok']} ({r['failed']}) | "
                         f"{min(loads):.1f}-{max(loads):.1f} |")
        lines.append("")
    sc = res.get("scale")
    if sc:
        from agent.bench.scale import table as scale_table

        lines.append("## Scale: N agent processes, one goal (depth 2, <= 3 children, scripted LLM 0.5 s)")
        lines.append("")
        lines += scale_table(sc)
        lines.append("")
    rm = res.get("realmodel")
    if rm:
        from agent.bench.realmodel import table as realmodel_table

        lines.append("## Real model: a model copy per agent vs one shared server, and one direct call")
        lines += realmodel_table(rm)
        lines.append("")
    return "\n".join(lines)


def main(sections: list[str], latencies: list[float], repeats: int, out: Path, core_sizes: list[int],
         keep: Path | None = None, latejoin_events: int = 10_000,
         scale_sizes: list[int] | None = None, real_model: str = "qwen2.5-1.5b",
         real_goal: str | None = None, real_parallel: int | None = None,
         real_threads: int | None = None) -> dict[str, Any]:
    from agent.logging import configure_logging

    configure_logging("json", "error")
    from agent.bench import core, overhead, races

    log = lambda m: print(m, file=sys.stderr, flush=True)  # noqa: E731
    res: dict[str, Any] = {"started": time.strftime("%Y-%m-%d %H:%M:%S"), "machine":
                           f"{platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}",
                           "load_start": [round(x, 2) for x in os.getloadavg()], "sections": sections}
    if "overhead" in sections:
        log(f"overhead: L = {latencies}, {repeats} repeats")
        res["overhead"] = overhead.run(latencies, repeats, log, keep)
    if "votes" in sections:
        log("vote latency: 10-agent swarm")
        res["votes"] = {**races.vote_latency(keep), "load": overhead.load()}
    if "claims" in sections:
        log("claim races: 5 executors")
        res["claims"] = {**races.claim_races(keep), "load": overhead.load()}
    if "core" in sections:
        log(f"core: {core_sizes}")
        res["core"] = {**core.run(core_sizes, log), "load": overhead.load()}
    if "ollama" in sections:
        log("ollama under load")
        res["ollama"] = {**_ollama(log), "load": overhead.load()}
    if "latejoin" in sections:
        from agent.bench import latejoin

        log(f"late join: {latejoin_events} events, 3 peers, {repeats} repeats")
        res["latejoin"] = latejoin.run(latejoin_events, 3, repeats, log=log, keep=keep)
    if "scale" in sections:
        import tempfile

        from agent.bench import scale

        sizes = scale_sizes or [10, 20, 30]
        log(f"scale: {sizes} agent processes")
        if keep is not None:
            res["scale"] = scale.main(sizes, keep)
        else:
            with tempfile.TemporaryDirectory(prefix="bench-scale-") as tmp:
                res["scale"] = scale.main(sizes, Path(tmp))
    if "realmodel" in sections:
        from agent.bench import realmodel

        res["realmodel"] = realmodel.run(real_model, real_goal or realmodel.GOAL, keep=keep, log=log,
                                         parallel=real_parallel, threads=real_threads)
    res["load_end"] = [round(x, 2) for x in os.getloadavg()]
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(res, indent=1))
    text = table(res)
    print(text)
    out.with_suffix(".md").write_text(text + "\n")
    log(f"wrote {out} and {out.with_suffix('.md')}")
    return res


__all__ = ["SECTIONS", "main", "table"]
