"""Real model: the same goal planned by the demo's swarm with an embedded model, once with a
model copy per agent and once with one shared server, and one direct call of the same model on
the same goal, in one run.

    python -m agent bench --sections realmodel --real-model qwen2.5-1.5b

Each swarm is the demo's (``agent.demo``: 3 decomposers, 3 scorers, 2 executors, 1 observer as
separate processes over libp2p on 127.0.0.1, one level of up to six subgoals), started through
``agent.bench.swarm.run_swarm`` (the demo's ``plan_children``/``start``/``stop``):

- **per-agent**: ``SWARM_LLM=llamacpp``, every LLM agent loads its own copy (``demo --per-agent-llm``);
- **shared**: one ``serve-llm`` process started by the demo's own ``start_shared_server``, every
  agent reaches it as ``SWARM_LLM=openai`` (what ``make demo`` does);
- **single**: before the shared swarm starts, one call of that same server with the quality
  benchmark's prompt (``agent.eval.runner.single_request``: the whole plan in one answer).

Per run: plan wall time (goal published -> the submitter holds the root done), the time until
every agent announced itself (its model loaded), LLM calls and their prompt/completion tokens by
kind (from the agents' logs: every ``llm.answer`` line carries its tokens and what the server
said: its generation rate and the prompt tokens it took from its cache), the plan's own
spending by kind (the fold's, from the events), the median generation rate per call, the
prompt-cache hit rate, and the peak of the summed RSS and PSS of every process of the run
(sampled from /proc), with how many processes mapped the model file. Both swarms get
``SWARM_LLM_TIMEOUT=600`` (the demo gives it to the shared one: a call may wait behind every
other agent's; a copy per agent on a loaded CPU needs it as much).
"""

from __future__ import annotations

import os
import resource
import statistics
import threading
import time
from pathlib import Path
from typing import Any, Callable

import psutil

from agent.drivers.central import CallRecord

GOAL = "Plan a two-week trip to Japan"
# the demo's shape (agent.demo.DemoConfig's defaults)
SHAPE = dict(decomposers=3, scorers=3, executors=2, observers=1, max_depth=1, max_children=6, max_rounds=2)
LLM_TIMEOUT_S = "600"
SINGLE_MAX_TOKENS = 1200  # the quality benchmark's (agent.eval.runner.EvalConfig)


class TreeSampler:
    """Samples every descendant process of this one (the swarm's agents, the model server) from
    /proc every ``every`` seconds in a thread: the peak of their summed RSS and PSS (PSS counts a
    page shared by n processes 1/n in each: a model file mapped by six processes is counted
    once), each process's own peak RSS, and which processes mapped ``model_file``."""

    def __init__(self, every: float = 1.0, model_file: str | Path | None = None) -> None:
        self.every = every
        self.model_file = str(model_file) if model_file else None
        self.peak_rss = 0
        self.peak_pss = 0
        self.samples = 0
        self.per_process: dict[int, int] = {}  # pid -> peak RSS bytes
        self.mapping_model: set[int] = set()  # pids
        self.loads: list[float] = []  # the machine's 1-minute load average at every sample
        self._labels: dict[int, str] = {}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="rss-sampler", daemon=True)

    def __enter__(self) -> "TreeSampler":
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(timeout=30)

    def _label(self, p: psutil.Process) -> str:
        # A label is kept only once the process shows what it is: sampled between fork and exec, a
        # child still has its parent's command line (CI once named the model server "pid-N" so).
        if p.pid in self._labels:
            return self._labels[p.pid]
        try:
            cmd = " ".join(p.cmdline())
            name = p.environ().get("SWARM_NAME") if "agent run" in cmd else None
        except psutil.Error:
            cmd, name = "", None
        label = name or ("llm-server" if "serve-llm" in cmd else None)
        if label is None:
            return f"pid-{p.pid}"
        self._labels[p.pid] = label
        return label

    def _maps_model(self, pid: int) -> bool:
        try:
            with open(f"/proc/{pid}/maps", "rb") as fh:
                return self.model_file.encode() in fh.read()  # type: ignore[union-attr]
        except OSError:
            return False

    def sample(self) -> None:
        rss = pss = 0
        for p in psutil.Process().children(recursive=True):
            try:
                mem = p.memory_full_info()
            except psutil.Error:
                continue
            self._label(p)
            rss += mem.rss
            pss += getattr(mem, "pss", 0)
            self.per_process[p.pid] = max(self.per_process.get(p.pid, 0), mem.rss)
            if self.model_file and p.pid not in self.mapping_model and self._maps_model(p.pid):
                self.mapping_model.add(p.pid)
        self.peak_rss = max(self.peak_rss, rss)
        self.peak_pss = max(self.peak_pss, pss)
        self.samples += 1
        self.loads.append(os.getloadavg()[0])

    def _loop(self) -> None:
        while not self._stop.is_set():
            self.sample()
            self._stop.wait(self.every)

    def result(self) -> dict[str, Any]:
        mb = lambda b: round(b / 2**20, 1)  # noqa: E731
        name = lambda pid: self._labels.get(pid, f"pid-{pid}")  # noqa: E731
        per: dict[str, int] = {}
        for pid, peak in self.per_process.items():
            per[name(pid)] = max(per.get(name(pid), 0), peak)
        return {"peak_rss_mb": mb(self.peak_rss), "peak_pss_mb": mb(self.peak_pss), "samples": self.samples,
                "per_process_peak_rss_mb": {k: mb(v) for k, v in sorted(per.items())},
                "processes_mapping_model": sorted({name(pid) for pid in self.mapping_model}),
                "load_1min_min_median_max": [round(min(self.loads), 2), round(statistics.median(self.loads), 2),
                                             round(max(self.loads), 2)] if self.loads else None}


def _children_cpu_s() -> float:
    """CPU seconds of this process's children that were waited for (the run's processes, once
    stopped: their threads included)."""
    ru = resource.getrusage(resource.RUSAGE_CHILDREN)
    return ru.ru_utime + ru.ru_stime


def _process_cpu_s(pid: int) -> float:
    try:
        t = psutil.Process(pid).cpu_times()
    except psutil.Error:
        return 0.0
    return t.user + t.system


def _load() -> list[float]:
    return [round(x, 2) for x in os.getloadavg()]


def _med(xs: list[float]) -> float | None:
    return round(statistics.median(xs), 2) if xs else None


def in_flight_mean(calls: list[CallRecord], start_ms: float, end_ms: float) -> float | None:
    """Time-weighted mean of the LLM calls in flight over [start_ms, end_ms]."""
    if end_ms <= start_ms:
        return None
    busy = sum(max(0.0, min(c.end_ms, end_ms) - max(c.start_ms, start_ms))
               for c in calls if c.end_ms is not None)
    return round(busy / (end_ms - start_ms), 2)


def call_figures(calls: list[CallRecord]) -> dict[str, Any]:
    """What the agents' logs say about their LLM calls: per kind, and overall."""
    kinds: dict[str, dict[str, int]] = {}
    rates: list[float] = []
    wall_rates: list[float] = []
    prompt = cached_of = cached = 0
    for c in calls:
        row = kinds.setdefault(c.kind, {"answered": 0, "cancelled": 0, "error": 0, "running": 0,
                                        "prompt_tokens": 0, "completion_tokens": 0})
        row[c.outcome if c.outcome in row else "error"] += 1
        row["prompt_tokens"] += c.prompt_tokens
        row["completion_tokens"] += c.completion_tokens
        if c.outcome != "answered":
            continue
        if c.tokens_per_second:
            rates.append(float(c.tokens_per_second))
        if c.end_ms is not None and c.end_ms > c.start_ms and c.completion_tokens:
            wall_rates.append(c.completion_tokens / ((c.end_ms - c.start_ms) / 1000))
        if c.cached_tokens is not None:
            cached += int(c.cached_tokens)
            cached_of += c.prompt_tokens
        prompt += c.prompt_tokens
    total = {k: sum(r[k] for r in kinds.values()) for k in ("answered", "cancelled", "error", "running",
                                                            "prompt_tokens", "completion_tokens")}
    return {
        "by_kind": dict(sorted(kinds.items())), "total": total,
        "tok_s_per_call_median": _med(rates),  # completion tokens / the server's generation time
        "tok_s_per_call_wall_median": _med(wall_rates),  # completion tokens / the call's wall time
        "calls_with_rate": len(rates),
        "cached_tokens": cached if cached_of else None,
        "cache_hit_rate": round(cached / cached_of, 3) if cached_of else None,
    }


def _summary(mode: str, run: Any, sampler: TreeSampler, cpu_s: float, load: list[list[float]],
             extra: dict[str, Any] | None = None) -> dict[str, Any]:
    from agent.render import markdown_plan

    out: dict[str, Any] = {"mode": mode, "ok": run.ok, "error": run.error,
                           "plan_wall_s": round(run.makespan_s, 2) if run.ok else None,
                           "ready_s": run.ready_s, "cpu_s": round(cpu_s, 1), "load": load,
                           **sampler.result(), **call_figures(run.calls), "plan_spent": run.spent}
    completion = out["total"]["completion_tokens"]
    if run.ok and completion:
        # comparable across plans of different sizes (a stochastic model splits differently)
        out["completion_tok_per_plan_s"] = round(completion / run.makespan_s, 2)
        out["cpu_ms_per_completion_token"] = round(1000 * cpu_s / completion, 1)
    if run.ok and run.calls:
        ends = [c.end_ms for c in run.calls if c.end_ms is not None]
        start = min(c.start_ms for c in run.calls)
        out["calls_in_flight_mean"] = in_flight_mean(run.calls, start, max(ends)) if ends else None
    if run.tree is not None and run.goal_id:
        root = run.tree.node(run.goal_id)
        out["nodes"] = sum(1 for _ in root.walk()) if root is not None else None
        out["plan_head"] = markdown_plan(run.tree, run.goal_id).splitlines()[:6]
    out.update(extra or {})
    return out


def _stderr_console():
    import sys

    from rich.console import Console

    return Console(file=sys.stderr, highlight=False, soft_wrap=True)


def run_per_agent(model: str, root: Path, goal: str, timeout: float, shape: dict[str, int],
                  log: Callable[[str], None]) -> dict[str, Any]:
    from agent.bench.swarm import run_swarm
    from agent.llm import models

    path = models.resolve(model)[1]
    load = [_load()]
    cpu0 = _children_cpu_s()
    with TreeSampler(model_file=path) as sampler:
        run = run_swarm(0.0, root, goal=goal, llm="llamacpp", model=model, timeout=timeout,
                        ready_timeout=900, extra_env={"SWARM_LLM_TIMEOUT": LLM_TIMEOUT_S}, tag="realmodel",
                        **shape)
    load.append(_load())
    out = _summary("per-agent", run, sampler, _children_cpu_s() - cpu0, load)
    log(f"  per-agent models: {'plan in %.1f s' % run.makespan_s if run.ok else 'FAILED: ' + run.error}, "
        f"peak RSS {out['peak_rss_mb']:.0f} MB (load {load[-1][0]})")
    return out


async def _single_call(base_url: str, model: str | None, key_file: Path, goal: str, seed: int,
                       max_tokens: int = SINGLE_MAX_TOKENS) -> dict[str, Any]:
    from agent.eval.runner import single_request
    from agent.llm.openai_backend import OpenAILLM

    llm = OpenAILLM(base_url, model, api_key_file=key_file, timeout=float(LLM_TIMEOUT_S), retries=1)
    try:
        t0 = time.perf_counter()
        ans = await llm.complete(single_request(goal, max_tokens, seed))
        wall = time.perf_counter() - t0
    finally:
        await llm.aclose()
    timing = ans.timing or {}
    text = str(ans.value.get("text", ""))
    return {"mode": "single", "ok": True, "plan_wall_s": round(wall, 2), "prompt_tokens": ans.prompt_tokens,
            "completion_tokens": ans.completion_tokens, "tok_s_per_call_median": timing.get("tokens_per_second"),
            "tok_s_per_call_wall_median": round(ans.completion_tokens / wall, 2) if wall > 0 else None,
            "plan_head": text.strip().splitlines()[:6], "load": [_load()]}


def _server_metrics(base_url: str, key_file: Path) -> dict[str, float]:
    """llama.cpp's counters and the gate's, from the server's /metrics (behind its key)."""
    import httpx

    try:
        key = key_file.read_text().strip()
        r = httpx.get(base_url.rsplit("/v1", 1)[0] + "/metrics", headers={"Authorization": f"Bearer {key}"},
                      timeout=10)
        r.raise_for_status()
    except (OSError, httpx.HTTPError):
        return {}
    out: dict[str, float] = {}
    for line in r.text.splitlines():
        if line.startswith("#") or " " not in line:
            continue
        name, value = line.rsplit(" ", 1)
        if name.startswith(("llamacpp:prompt_tokens_total", "llamacpp:tokens_predicted_total",
                            "llamacpp:n_decode_total", "swarm_llm_gate_")):
            try:
                out[name] = float(value)
            except ValueError:
                pass
    return out


def run_shared(model: str, root: Path, goal: str, timeout: float, shape: dict[str, int],
               log: Callable[[str], None], single: bool = True, seed: int = 1,
               parallel: int | None = None, threads: int | None = None,
               single_max_tokens: int = SINGLE_MAX_TOKENS) -> tuple[dict[str, Any], dict[str, Any] | None]:
    import trio

    from agent.bench.swarm import run_swarm
    from agent.demo import DemoConfig, start_shared_server
    from agent.llm import models

    path = models.resolve(model)[1]
    cfg = DemoConfig(goal=goal, llm="llamacpp", model=model, llm_parallel=parallel, llm_threads=threads)
    (root / "logs").mkdir(parents=True, exist_ok=True)
    load = [_load()]
    cpu0 = _children_cpu_s()
    single_out = None
    server: dict[str, Any] = {}
    with TreeSampler(model_file=path) as sampler:
        t0 = time.monotonic()
        srv = start_shared_server(cfg, root, _stderr_console())  # the demo's: sets cfg.extra_env
        server["start_s"] = round(time.monotonic() - t0, 2)
        try:
            if single:
                try:
                    single_out = trio.run(_single_call, srv.base_url, srv.model, srv.key_file, goal, seed,
                                          single_max_tokens)
                except Exception as exc:  # reported, not raised: the table says so
                    single_out = {"mode": "single", "ok": False, "error": f"{type(exc).__name__}: {exc}"}
                log(f"  single call: {single_out.get('plan_wall_s')} s, "
                    f"{single_out.get('completion_tokens')} completion tokens")
            # the server's CPU so far (start, the single call) is not the swarm's
            cpu0 += _process_cpu_s(srv.proc.pid)
            run = run_swarm(0.0, root, goal=goal, llm="openai", timeout=timeout, ready_timeout=900,
                            extra_env=dict(cfg.extra_env), tag="realmodel", **shape)
            server["metrics"] = _server_metrics(srv.base_url, srv.key_file)
        finally:
            srv.stop()
    load.append(_load())
    out = _summary("shared", run, sampler, _children_cpu_s() - cpu0, load, {"server": server})
    log(f"  shared server: {'plan in %.1f s' % run.makespan_s if run.ok else 'FAILED: ' + run.error}, "
        f"peak RSS {out['peak_rss_mb']:.0f} MB (load {load[-1][0]})")
    return out, single_out


def _ratio(a: float | None, b: float | None) -> float | None:
    return round(a / b, 2) if a and b else None


def run(model: str, goal: str = GOAL, *, keep: Path | None = None, timeout: float = 3600.0,
        shape: dict[str, int] | None = None, single: bool = True, log: Callable[[str], None] = print,
        parallel: int | None = None, threads: int | None = None,
        single_max_tokens: int = SINGLE_MAX_TOKENS) -> dict[str, Any]:
    """Both swarms and the single call, one after the other (per-agent first). ``parallel``,
    ``threads``: the shared server's (None: serve-llm's defaults)."""
    import tempfile

    from agent.llm import models
    from agent.llm.base import LLMError
    from agent.llm.server import DEFAULT_PARALLEL, DEFAULT_THREADS
    from agent.settings import load_settings

    shape = {**SHAPE, **(shape or {})}
    res: dict[str, Any] = {"model": model, "goal": goal, "shape": shape, "load_start": _load(),
                           "server_parallel": parallel or DEFAULT_PARALLEL, "server_threads": threads or DEFAULT_THREADS,
                           "agent_threads": load_settings().llamacpp_threads,
                           "single_max_tokens": single_max_tokens}
    try:
        res["model_path"] = str(models.resolve(model)[1])
    except LLMError as exc:  # not installed: say how to install it
        return {**res, "ok": False, "error": str(exc)}
    with tempfile.TemporaryDirectory(prefix="bench-realmodel-") as tmp:
        base = keep if keep is not None else Path(tmp)
        log(f"real model {model}: per-agent models, then one shared server and a single call")
        res["per_agent"] = run_per_agent(model, base / "realmodel-per-agent", goal, timeout, shape, log)
        try:
            res["shared"], res["single"] = run_shared(model, base / "realmodel-shared", goal, timeout, shape, log,
                                                      single=single, parallel=parallel, threads=threads,
                                                      single_max_tokens=single_max_tokens)
        except LLMError as exc:
            res["shared"] = {"mode": "shared", "ok": False, "error": str(exc)}
    pa, sh, si = res["per_agent"], res["shared"], res.get("single") or {}
    res["ratios"] = {
        "wall_per_agent_over_shared": _ratio(pa.get("plan_wall_s"), sh.get("plan_wall_s")),
        "wall_shared_over_single": _ratio(sh.get("plan_wall_s"), si.get("plan_wall_s") if si.get("ok") else None),
        "peak_rss_per_agent_over_shared": _ratio(pa.get("peak_rss_mb"), sh.get("peak_rss_mb")),
        "peak_pss_per_agent_over_shared": _ratio(pa.get("peak_pss_mb"), sh.get("peak_pss_mb")),
    }
    res["ok"] = bool(pa.get("ok") and sh.get("ok"))
    res["load_end"] = _load()
    return res


def _f(v: Any, fmt: str = "{:.2f}") -> str:
    if v is None or v == "":
        return "-"
    if isinstance(v, float):
        return fmt.format(v)
    return str(v)


def table(res: dict[str, Any]) -> list[str]:
    shape = res.get("shape") or SHAPE
    lines = [f"{shape['decomposers']} decomposers, {shape['scorers']} scorers, {shape['executors']} executors, "
             f"{shape['observers']} observer (the demo's), depth {shape['max_depth']}, <= {shape['max_children']} "
             f"children; goal \"{res.get('goal')}\"; model {res.get('model')}; a copy per LLM agent with "
             f"{res.get('agent_threads')} thread(s) each, against one server of {res.get('server_parallel')} slots and "
             f"{res.get('server_threads')} threads; the single call asks that server for the whole plan "
             f"(<= {res.get('single_max_tokens')} tokens)", ""]
    if res.get("error"):
        return lines + [f"FAILED: {res['error']}"]
    pa, sh, si = res.get("per_agent") or {}, res.get("shared") or {}, res.get("single") or {}
    runs = [pa, sh, si]

    def tok(r: dict) -> str:
        t = r.get("total")
        if t:
            return f"{t['prompt_tokens']:,} / {t['completion_tokens']:,}"
        if r.get("prompt_tokens") is not None:
            return f"{r['prompt_tokens']:,} / {r['completion_tokens']:,}"
        return "-"

    def calls(r: dict) -> str:
        t = r.get("total")
        if not t:
            return "1" if r.get("ok") else "-"
        return f"{t['answered']} / {t['cancelled']} / {t['error'] + t['running']}"

    def status(r: dict) -> str:
        return "ok" if r.get("ok") else ("FAILED: " + str(r.get("error", ""))[:120] if r else "not run")

    def load(r: dict) -> str:
        if r.get("load_1min_min_median_max"):
            lo, med, hi = r["load_1min_min_median_max"]
            return f"{lo:.1f} / {med:.1f} / {hi:.1f}"
        ls = [x[0] for x in r.get("load") or []]
        return f"{min(ls):.1f}-{max(ls):.1f}" if ls else "-"

    def rss(r: dict) -> str:
        procs = r.get("per_process_peak_rss_mb") or {}
        return f"{r['peak_rss_mb']:,.0f} ({len(procs)} processes)" if r.get("peak_rss_mb") is not None else "-"

    rows = [
        ("run", status),
        ("plan wall s (goal -> done)", lambda r: _f(r.get("plan_wall_s"))),
        ("agents ready s (models loaded)", lambda r: _f(r.get("ready_s"))),
        ("LLM calls answered / cancelled / failed", calls),
        ("prompt / completion tokens (calls)", tok),
        ("completion tok/s per call, median (generation)", lambda r: _f(r.get("tok_s_per_call_median"))),
        ("completion tok/s per call, median (wall, queue incl.)", lambda r: _f(r.get("tok_s_per_call_wall_median"))),
        ("completion tokens / plan wall s (all calls together)", lambda r: _f(r.get("completion_tok_per_plan_s"))),
        ("LLM calls in flight, mean", lambda r: _f(r.get("calls_in_flight_mean"))),
        ("prompt-cache hit rate (cached / prompt tokens)",
         lambda r: f"{r['cache_hit_rate']:.1%}" if r.get("cache_hit_rate") is not None else "-"),
        ("peak RSS MB, all processes summed", rss),
        ("peak PSS MB, all processes summed", lambda r: _f(r.get("peak_pss_mb"), "{:,.0f}")),
        ("processes that mapped the model", lambda r: str(len(r["processes_mapping_model"]))
         if "processes_mapping_model" in r else "-"),
        ("CPU s, all processes (from start to stop)", lambda r: _f(r.get("cpu_s"), "{:.0f}")),
        ("CPU ms per completion token", lambda r: _f(r.get("cpu_ms_per_completion_token"), "{:.1f}")),
        ("plan nodes", lambda r: _f(r.get("nodes"))),
        ("load average, 1 min (min / median / max)", load),
    ]
    lines += ["| | per-agent models | shared server | single call |", "|---|---|---|---|"]
    for name, fn in rows:
        lines.append(f"| {name} | " + " | ".join(fn(r) if r else "-" for r in runs) + " |")
    rt = res.get("ratios") or {}
    lines += ["", f"Ratios: plan wall time per-agent / shared **{_f(rt.get('wall_per_agent_over_shared'))}** "
                  f"(target >= 2); shared / single call **{_f(rt.get('wall_shared_over_single'))}**; "
                  f"peak RSS per-agent / shared {_f(rt.get('peak_rss_per_agent_over_shared'))} "
                  f"(PSS {_f(rt.get('peak_pss_per_agent_over_shared'))})", ""]
    kinds = sorted(set((pa.get("by_kind") or {})) | set((sh.get("by_kind") or {}))
                   | set(pa.get("plan_spent") or {}) | set(sh.get("plan_spent") or {}))
    if kinds:
        lines += ["LLM calls and tokens by kind: calls answered, prompt / completion tokens from the agents' logs; "
                  "the plan's spending (its events' tokens, the fold's) in brackets", "",
                  "| kind | per-agent models | shared server |", "|---|---|---|"]

        def cell(r: dict, k: str) -> str:
            row = (r.get("by_kind") or {}).get(k)
            spent = (r.get("plan_spent") or {}).get(k)
            a = f"{row['answered']}: {row['prompt_tokens']:,} / {row['completion_tokens']:,}" if row else "0"
            return a + (f" ({spent[0]:,} / {spent[1]:,})" if spent else "")

        for k in kinds:
            lines.append(f"| {k} | {cell(pa, k)} | {cell(sh, k)} |")
        lines.append("")
    srv = (sh.get("server") or {})
    m = srv.get("metrics") or {}
    if m:
        gate = {k.removeprefix("swarm_llm_gate_").removesuffix("_total"): int(v) for k, v in m.items()
                if k.startswith("swarm_llm_gate_")}
        lines.append(f"Shared server: started in {_f(srv.get('start_s'))} s; llama.cpp computed "
                     f"{int(m.get('llamacpp:prompt_tokens_total', 0)):,} prompt tokens and generated "
                     f"{int(m.get('llamacpp:tokens_predicted_total', 0)):,}; gate {gate}")
        lines.append("")
    heads = [(name, r.get("plan_head")) for name, r in (("per-agent", pa), ("shared", sh), ("single", si))]
    for name, head in heads:
        if head:
            first = next((x for x in head if x.strip() and not x.startswith("#")), head[0])
            lines.append(f"{name}'s plan begins: {first[:160]}")
    return lines


__all__ = ["GOAL", "SHAPE", "TreeSampler", "call_figures", "in_flight_mean", "run", "table"]
