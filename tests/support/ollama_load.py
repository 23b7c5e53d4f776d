"""N agents against one (fake) Ollama server: request latency and wasted calls.

Each agent is a closed loop, like a role's loop: one request in flight at a time, with a client
timeout and retries as the agents' Ollama backend does (a timed-out request is abandoned and
sent again at the back of the queue). Time is scaled: the server runs ``scale`` times faster
than the figures given, and latencies are reported in unscaled seconds.

    python tests/support/ollama_load.py --agents 8 16 --parallel 4 --cpu --timeout 120 600

A worst case by design: every agent always has a request waiting (real roles idle between
phases). "wasted" counts answers the server started and the client abandoned (compute spent
for nothing); "abandoned" those dropped while still queued; "failed" calls that ran out of
retries.
"""

from __future__ import annotations

import argparse
import json
import sys
import threading
import time
from dataclasses import asdict, dataclass
from pathlib import Path

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from support.fake_ollama import FakeOllama, QueueModel, percentile  # noqa: E402


@dataclass
class LoadResult:
    agents: int
    parallel: int
    cpu: bool
    timeout: float
    p50: float | None
    p95: float | None
    ok: int
    failed: int
    attempts: int
    wasted: int
    abandoned: int


def closed_loop(agents: int, *, parallel: int = 4, cpu: bool = True, timeout: float = 600.0,
                retries: int = 3, calls: int = 5, token_seconds: float = 0.05,
                prompt_token_seconds: float = 0.005, tokens: int = 250, prompt_chars: int = 1600,
                max_queue: int = 64, scale: float = 50.0) -> LoadResult:
    q = QueueModel(parallel=parallel, shared_compute=cpu, token_seconds=token_seconds / scale,
                   prompt_token_seconds=prompt_token_seconds / scale, tokens=tokens,
                   max_queue=max_queue, tick=0.002)
    latencies: list[float] = []
    failed = 0
    lock = threading.Lock()
    with FakeOllama(models=["m"], queue=q) as fake:
        def agent() -> None:
            nonlocal failed
            with httpx.Client() as client:
                for _ in range(calls):
                    t = time.monotonic()
                    for _attempt in range(retries + 1):
                        try:
                            r = client.post(f"{fake.url}/api/chat", timeout=timeout / scale, json={
                                "model": "m", "stream": False,
                                "messages": [{"role": "user", "content": "x" * prompt_chars}]})
                        except httpx.TimeoutException:
                            continue
                        if r.status_code == 200:
                            with lock:
                                latencies.append((time.monotonic() - t) * scale)
                            break
                    else:
                        with lock:
                            failed += 1

        threads = [threading.Thread(target=agent, daemon=True) for _ in range(agents)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        s = q.summary()
    return LoadResult(agents=agents, parallel=parallel, cpu=cpu, timeout=timeout,
                      p50=percentile(latencies, 50), p95=percentile(latencies, 95),
                      ok=len(latencies), failed=failed, attempts=s["calls"],
                      wasted=s["cancelled_while_running"],
                      abandoned=s["cancelled"] - s["cancelled_while_running"])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--agents", type=int, nargs="+", default=[8, 16])
    ap.add_argument("--parallel", type=int, nargs="+", default=[4])
    ap.add_argument("--cpu", action="store_true", help="slots share one compute (no GPU)")
    ap.add_argument("--timeout", type=float, nargs="+", default=[120.0, 600.0])
    ap.add_argument("--retries", type=int, default=3)
    ap.add_argument("--calls", type=int, default=5, help="calls per agent")
    ap.add_argument("--token-seconds", type=float, default=0.05, help="per generated token")
    ap.add_argument("--tokens", type=int, default=250)
    ap.add_argument("--scale", type=float, default=50.0)
    a = ap.parse_args()
    for n in a.agents:
        for p in a.parallel:
            for t in a.timeout:
                r = closed_loop(n, parallel=p, cpu=a.cpu, timeout=t, retries=a.retries,
                                calls=a.calls, token_seconds=a.token_seconds, tokens=a.tokens,
                                scale=a.scale)
                print(json.dumps(asdict(r)), flush=True)


if __name__ == "__main__":
    main()
