"""Measure the shared llama.cpp server (agent.llm.server) before choosing its defaults.

    python -m agent.bench.llmserver --model qwen2.5-1.5b --configs 1x1,1x2,2x1,2x2,4x2 \
        --concurrency 1,2,4 --tokens 96 [--cache] [--out out/llmserver.json]

For each configuration PxT (P parallel slots, T threads) it starts one server and sends C
requests at once (C in --concurrency), each with a prompt of its own (no shared prefix beyond
the chat template) and a fixed answer length (``ignore_eos``, --tokens tokens), and prints the
aggregate completion tokens/s (all tokens / wall time), the median per-request decode rate, the
wall time, the prompt rate, and the process's peak RSS. With --cache it then measures the prompt
cache: requests that share a long prefix (a system message and a ~900-token brief), cold and
warm, in one slot and across slots, and a prefix coming back after another one took its slot.
The machine's load average is printed with every figure (the machine may be shared), and so
is what the work cost in CPU time (tokens per CPU-second of this process, llama.cpp's threads
included): wall-clock rates fall with other load, the cost of a token does much less.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import time
from pathlib import Path
from typing import Any

import httpx
import trio

from agent.llm.server import LocalLLMServer

TOPICS = ["the history of tea", "how bridges carry load", "the life of bees", "tides and the moon",
          "a walk through Kyoto", "how bread rises", "the rules of chess", "volcanoes of Iceland"]


def _load() -> str:
    return " ".join(f"{x:.2f}" for x in os.getloadavg())


def _cpu_s() -> float:
    """CPU seconds this process (llama.cpp's threads included) has used."""
    ru = resource.getrusage(resource.RUSAGE_SELF)
    return ru.ru_utime + ru.ru_stime


def _rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def _prompt(i: int, words: int = 180) -> str:
    # distinct from the first token on: no request can reuse another's cache
    topic = TOPICS[i % len(TOPICS)]
    filler = " ".join(f"{topic.split()[-1]}-{i}-{k}" for k in range(words // 3))
    return f"Request {i}: write about {topic}. Notes: {filler}. Now write the text."


async def _post(client: httpx.AsyncClient, url: str, key: str, body: dict) -> dict:
    r = await client.post(url + "/chat/completions", json=body,
                          headers={"Authorization": f"Bearer {key}"})
    r.raise_for_status()
    return r.json()


async def throughput(srv: LocalLLMServer, concurrency: int, tokens: int, base: int) -> dict[str, Any]:
    results: list[dict] = []
    async with httpx.AsyncClient(timeout=1800) as client:
        async def one(i: int) -> None:
            body = {"messages": [{"role": "user", "content": _prompt(base + i)}],
                    "max_tokens": tokens, "ignore_eos": True, "temperature": 0.7, "seed": i}
            results.append(await _post(client, srv.base_url, srv.api_key, body))

        t0, c0 = time.perf_counter(), _cpu_s()
        async with trio.open_nursery() as n:
            for i in range(concurrency):
                n.start_soon(one, i)
        wall, cpu = time.perf_counter() - t0, _cpu_s() - c0
    gen = sum(r["usage"]["completion_tokens"] for r in results)
    prompt = sum(r["timings"]["prompt_n"] for r in results)
    return {
        "concurrency": concurrency, "wall_s": round(wall, 2), "completion_tokens": gen,
        "aggregate_tok_s": round(gen / wall, 2),
        # robust to other load on the machine: what the work costs, not how long it waited
        "cpu_s": round(cpu, 2), "tok_per_cpu_s": round(gen / cpu, 2) if cpu > 0 else None,
        "per_request_tok_s": round(statistics.median(r["timings"]["predicted_per_second"] for r in results), 2),
        "prompt_tokens": prompt,
        "prompt_tok_s": round(statistics.median(r["timings"]["prompt_per_second"] for r in results), 1),
        "load": _load(),
    }


BRIEF = ("You are an expert planner working inside a swarm of agents. " * 4 + "\n" + "\n".join(
    f"Fact {k}: the traveller prefers {w} on day {k}, budget {k * 37 % 500} euros, and notes that "
    f"{w} near station {k} opens at {8 + k % 4} o'clock." for k, w in
    enumerate(["temples", "markets", "trains", "museums", "gardens", "food stalls"] * 5)))


async def cache(srv: LocalLLMServer, tokens: int = 16) -> dict[str, Any]:
    """Shared-prefix requests, one at a time: cold, warm, another prefix, the first again."""
    out: dict[str, Any] = {}
    async with httpx.AsyncClient(timeout=1800) as client:
        async def ask(prefix: str, question: str) -> dict:
            body = {"messages": [{"role": "system", "content": prefix},
                                 {"role": "user", "content": question}],
                    "max_tokens": tokens, "temperature": 0.7, "seed": 1}
            t0 = time.perf_counter()
            r = await _post(client, srv.base_url, srv.api_key, body)
            t = r["timings"]
            return {"wall_s": round(time.perf_counter() - t0, 2), "prompt_n": t["prompt_n"],
                    "cache_n": t.get("cache_n"), "prompt_ms": round(t["prompt_ms"]),
                    "cached_tokens": (r["usage"].get("prompt_tokens_details") or {}).get("cached_tokens")}

        other = BRIEF.replace("traveller", "visitor").replace("Fact", "Item")
        out["cold"] = await ask(BRIEF, "Split the trip into places.")
        out["warm_same_prefix"] = await ask(BRIEF, "Score the split by days.")
        out["other_prefix"] = await ask(other, "Split the trip into days.")
        out["first_prefix_again"] = await ask(BRIEF, "Execute: book a hotel in Tokyo.")
        # several at once, all sharing the prefix: how much of it each one reuses
        conc: list[dict] = []

        async def keep(q: str) -> None:
            conc.append(await ask(BRIEF, q))

        t0 = time.perf_counter()
        async with trio.open_nursery() as n:
            for q in ("Score split A.", "Score split B.", "Score split C.", "Score split D."):
                n.start_soon(keep, q)
        out["four_at_once"] = {"wall_s": round(time.perf_counter() - t0, 2),
                               "cache_n": [c["cache_n"] for c in conc],
                               "prompt_n": [c["prompt_n"] for c in conc]}
    out["load"] = _load()
    return out


def run(model: str, configs: list[tuple[int, int]], concurrency: list[int], tokens: int,
        with_cache: bool, ctx: int, batch: int, say=print) -> dict[str, Any]:
    res: dict[str, Any] = {"model": model, "tokens": tokens, "ctx": ctx, "batch": batch,
                           "started": time.strftime("%Y-%m-%d %H:%M:%S"), "runs": []}
    for parallel, threads in configs:
        t0 = time.perf_counter()
        with LocalLLMServer(model, parallel=parallel, ctx=ctx, threads=threads, batch=batch) as srv:
            say(f"server P={parallel} T={threads}: loaded in {time.perf_counter() - t0:.1f}s")
            trio.run(throughput, srv, 1, 8, 900)  # warm-up: the first decode pays page faults
            for c in concurrency:
                r = trio.run(throughput, srv, c, tokens, 100 * c)
                r.update(parallel=parallel, threads=threads, rss_mb=round(_rss_mb()))
                res["runs"].append(r)
                say(f"  P={parallel} T={threads} C={c}: {r['aggregate_tok_s']:6.2f} tok/s aggregate, "
                    f"{r['per_request_tok_s']:6.2f} per request, {r['tok_per_cpu_s']} tok per CPU-s "
                    f"({r['cpu_s']} CPU-s), {r['wall_s']:6.1f}s wall, prompt "
                    f"{r['prompt_tok_s']} tok/s, peak RSS {r['rss_mb']} MB (load {r['load']})")
            if with_cache:
                c = trio.run(cache, srv)
                res.setdefault("cache", {})[f"{parallel}x{threads}"] = c
                say(f"  cache P={parallel} T={threads}: " + json.dumps(c))
    return res


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--model", default="qwen2.5-1.5b")
    ap.add_argument("--configs", default="1x1,1x2,2x1,2x2,4x2", help="PxT: parallel slots x threads")
    ap.add_argument("--concurrency", default="1,2,4")
    ap.add_argument("--tokens", type=int, default=96)
    ap.add_argument("--ctx", type=int, default=4096)
    ap.add_argument("--batch", type=int, default=512)
    ap.add_argument("--cache", action="store_true")
    ap.add_argument("--out", type=Path, default=None)
    a = ap.parse_args(argv)
    configs = [tuple(int(x) for x in c.split("x")) for c in a.configs.split(",") if c]
    res = run(a.model, configs, [int(x) for x in a.concurrency.split(",")], a.tokens, a.cache,
              a.ctx, a.batch)
    if a.out:
        a.out.parent.mkdir(parents=True, exist_ok=True)
        a.out.write_text(json.dumps(res, indent=2))
        print(f"written to {a.out}")


if __name__ == "__main__":
    main()
