"""Many agent processes on one host, for the scale and idle benchmarks: which roles N agents
take, who dials whom, starting them as the demo does, and the CPU time each has used."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path
from typing import Any

import psutil

from agent.demo import DemoConfig, child_env
from agent.procs import die_with_parent


def roles_for(n: int, max_decomposers: int = 0) -> dict[str, int]:
    """N agent processes: about a quarter decomposers, a third scorers (odd), the rest
    executors, one observer (at least 6: one decomposer, three scorers, one executor).
    ``max_decomposers`` (> 0) caps the decomposers; the rest become executors."""
    if n < 6:
        raise ValueError(f"a scale run needs at least 6 agents, not {n}")
    observers = 1
    decomposers = max(1, n // 4)
    if max_decomposers > 0:
        decomposers = min(decomposers, max_decomposers)
    scorers = max(3, n // 3) | 1
    executors = max(1, n - observers - decomposers - scorers)
    return dict(decomposers=decomposers, scorers=scorers, executors=executors, observers=observers)


def cpu_seconds(procs: dict[str, psutil.Process]) -> dict[str, float]:
    out = {}
    for name, p in procs.items():
        try:
            t = p.cpu_times()
            out[name] = t.user + t.system
        except psutil.Error:
            pass
    return out


def sparse_peers(children: list[Any], k: int, seed: int = 22) -> dict[str, list[Any]]:
    """Each agent's static peers when not everyone dials everyone: its next k//2 on a ring
    (so the graph is connected) and k - k//2 others drawn at random (so it is an expander,
    a few hops across). Dialled both ways, an agent ends up with about 2k connections."""
    import random

    rng = random.Random(seed)
    n = len(children)
    out: dict[str, list[Any]] = {}
    for i, c in enumerate(children):
        ring = [children[(i + j) % n] for j in range(1, k // 2 + 1)]
        rest = [o for o in children if o is not c and o not in ring]
        out[c.name] = ring + rng.sample(rest, min(len(rest), k - len(ring)))
    return out


def start_agents(cfg: DemoConfig, children: list[Any], log_dir: Path, src: Path | None = None,
                 peers: int = 0) -> None:
    """The demo's start, with the agents' code taken from ``src`` (another checkout: the
    baseline of a before/after comparison run side by side) when given, and with ``peers``
    (> 0) static peers per agent instead of every other agent (``sparse_peers``)."""
    chosen = sparse_peers(children, peers) if 0 < peers < len(children) - 1 else {}
    for c in children:
        idx = int(c.name.rsplit("-", 1)[1]) - 1
        env = child_env(cfg, c, children, idx)
        if c.name in chosen:
            env["SWARM_PEERS"] = ",".join(o.addr for o in chosen[c.name])
        with open(log_dir / f"{c.name}.log", "ab") as fh:
            c.proc = subprocess.Popen(
                [os.sys.executable, "-m", "agent", "run"], env=env,
                stdout=fh, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, start_new_session=True,
                preexec_fn=die_with_parent(), cwd=str(src) if src else None)
