#!/usr/bin/env python3
"""`make chaos`: submit a goal, kill decomposer-2 once the plan is in progress, and follow the
plan until its root is done. Standard library only (runs on the host, outside the venv).

  python3 mk/chaos.py --compose "docker compose" --goal "Plan a two-week trip to Japan"

Success (exit 0) needs all three: the kill happened (the container is no longer running), it
came while the plan was in progress, and the root was done after it. The last is checked on
the plan itself, not on when we happened to look: the root's synthesis (its claim, which only
comes once every child is done) must start after the kill. A plan that finished before the
victim could be killed proves nothing and exits 3, saying so, with the way to give the plan
more time: the scripted LLM at 10 s per answer (`make up SWARM_LLM=scripted
SWARM_SCRIPTED_LATENCY=10`; the latency alone does nothing while the agents use a real model).

Also imported by tests/test_cluster_podman.py (compose_cmd/observe/find_goal/summary).
"""

from __future__ import annotations

import argparse
import json
import re
import shlex
import signal
import subprocess
import sys
import time
from collections import Counter

# A second process inside a running agent's container must not take the agent's ports or its
# data directory: give it an ephemeral libp2p port, no metrics server and its own store.
# what to do when the plan finished before the kill: SWARM_SCRIPTED_LATENCY alone does nothing
# while the agents run a real model (the podman cluster's default, SWARM_LLM=openai)
SLOWER = ("Give the plan more time: run the scripted LLM at 10 s per answer "
          "(make down; make up SWARM_LLM=scripted SWARM_SCRIPTED_LATENCY=10), then make chaos again")
ONE_SHOT_ENV = {"SWARM_LISTEN_PORT": "0", "SWARM_METRICS_PORT": "0", "SWARM_WEB_PORT": "0"}
# warnings only, readable (mk/cluster.mk's READABLE): a failed submit or observe is then its
# error line, not the last 2,000 characters of the compose environment's JSON info lines
READABLE_ENV = {"SWARM_LOG_FORMAT": "console", "SWARM_LOG_LEVEL": "warning"}


def compose_cmd(compose: str | list[str], *args: str) -> list[str]:
    base = shlex.split(compose) if isinstance(compose, str) else list(compose)
    return base + list(args)


def exec_agent(compose, service: str, agent_args: list[str], data_dir: str,
               timeout: float = 120, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    flags: list[str] = []
    for k, v in {**ONE_SHOT_ENV, **READABLE_ENV, "SWARM_DATA_DIR": data_dir, **(env or {})}.items():
        flags += ["-e", f"{k}={v}"]
    cmd = compose_cmd(compose, "exec", "-T", *flags, service, "python", "-m", "agent", *agent_args)
    return subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)


def submit(compose, goal: str, service: str = "observer") -> str:
    """Submit ``goal``; its id (what `submit` prints last on stdout)."""
    r = exec_agent(compose, service, ["submit", goal], "/tmp/submit")
    if r.returncode != 0:
        raise RuntimeError(f"submit failed ({r.returncode}): {r.stderr.strip()[-2000:]}")
    ids = [ln.strip() for ln in r.stdout.splitlines() if re.fullmatch(r"[0-9a-f]{64}", ln.strip())]
    if not ids:
        raise RuntimeError(f"submit printed no goal id: {r.stdout.strip()[-500:]}")
    return ids[-1]


def observe(compose, service: str = "observer", timeout: float = 120) -> dict:
    """The plan tree JSON as `observe --once --json` prints it (top-level digest, goals)."""
    r = exec_agent(compose, service, ["observe", "--once", "--json"], "/tmp/observe",
                   timeout=timeout)
    if r.returncode != 0:
        raise RuntimeError(f"observe failed ({r.returncode}): {r.stderr.strip()[-2000:]}")
    out = r.stdout
    return json.loads(out[out.index("{"):])


def find_goal(tree: dict, goal: str, goal_id: str | None = None) -> dict | None:
    """The root node of the goal with id `goal_id`; without an id, the first titled `goal`
    (else the last goal); or None. A swarm may hold several goals of one title (`make submit`
    and `make chaos` both default to the Japan trip): chaos follows the one it submitted."""
    goals = tree.get("goals") or ([tree["root"]] if tree.get("root") else [])
    if goal_id is not None:
        return next((g for g in goals if g.get("id") == goal_id), None)
    for g in goals:
        if g.get("title") == goal:
            return g
    return goals[-1] if goals else None


def walk(node: dict):
    yield node
    for c in node.get("children") or []:
        yield from walk(c)


def summary(node: dict) -> str:
    states = Counter(n.get("state", "?") for n in walk(node))
    return f"root={node.get('state')} nodes={sum(states.values())} " + " ".join(
        f"{k}={v}" for k, v in sorted(states.items()))


def in_progress(node: dict | None) -> bool:
    """Work has begun on the plan and it is not finished: a done root is not in progress."""
    if node is None or node.get("state") == "done":
        return False
    return bool(node.get("children")) or node.get("state") not in (None, "open")


def synthesis_start_ms(node: dict) -> int | None:
    """When the root's counted synthesis was claimed (wall ms), or None if it was never."""
    starts = [c.get("start") for c in node.get("claims") or [] if isinstance(c.get("start"), int)]
    return min(starts) if starts else None


def running(compose, service: str) -> bool:
    """Does `service` still run? `exec` into it: the same on Docker Compose and podman-compose."""
    try:
        r = subprocess.run(compose_cmd(compose, "exec", "-T", service, "true"),
                           capture_output=True, text=True, timeout=60)
    except subprocess.TimeoutExpired:
        return True
    return r.returncode == 0


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--compose", required=True, help='e.g. "docker compose -f docker-compose.yml"')
    ap.add_argument("--goal", default="Plan a two-week trip to Japan")
    ap.add_argument("--victim", default="decomposer-2")
    ap.add_argument("--timeout", type=float, default=1800, help="seconds until the root is done")
    ap.add_argument("--poll", type=float, default=5)
    a = ap.parse_args()

    t0 = time.monotonic()

    def say(msg: str) -> None:
        print(f"[{time.monotonic() - t0:7.1f}s] {msg}", flush=True)

    say(f"submitting: {a.goal!r}")
    goal_id = submit(a.compose, a.goal)
    say(f"goal {goal_id[:12]} stored; following it")
    killed_at: float | None = None  # wall clock, seconds
    last = ""
    while time.monotonic() - t0 < a.timeout:
        try:
            tree = observe(a.compose)
        except (RuntimeError, ValueError, subprocess.TimeoutExpired) as exc:
            say(f"observe: {exc}")
            time.sleep(a.poll)
            continue
        node = find_goal(tree, a.goal, goal_id)
        line = "goal not seen yet" if node is None else summary(node)
        if line != last:
            say(f"{line}  digest={tree.get('digest', '?')[:12]}")
            last = line
        if killed_at is None and node is not None and node.get("state") == "done":
            say(f"FAILED: the plan was done before {a.victim} could be killed: nothing proven. "
                + SLOWER)
            return 3
        if killed_at is None and in_progress(node):
            say(f"plan in progress: killing {a.victim}")
            r = subprocess.run(compose_cmd(a.compose, "kill", a.victim), capture_output=True, text=True)
            if r.returncode != 0:
                say(f"FAILED: kill {a.victim}: {r.stderr.strip()[-500:]}")
                return 4
            killed_at = time.time()
            if running(a.compose, a.victim):
                say(f"FAILED: {a.victim} is still running after the kill")
                return 4
            say(f"{a.victim} killed")
        if node is not None and node.get("state") == "done":
            start = synthesis_start_ms(node)
            # a root with no children was executed as one task (the electorate accepted no split)
            work = "synthesis" if node.get("children") else "execution as one task (no split accepted)"
            if killed_at is None or start is None or start / 1000 < killed_at:
                say(f"FAILED: the root's {work} began before {a.victim} was killed: the plan was "
                    "finished without it, nothing proven. " + SLOWER)
                return 3
            say(f"root done: its {work} began {start / 1000 - killed_at:.1f}s after {a.victim} "
                f"was killed; digest {tree.get('digest')}")
            return 0
        time.sleep(a.poll)
    say(f"FAILED: timeout after {a.timeout:.0f}s: root not done")
    return 1


if __name__ == "__main__":
    # A background job of a script starts with SIGINT ignored, and Python then installs no
    # KeyboardInterrupt: `kill -INT` (and a CI's or a test's interrupt) would do nothing
    signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        sys.exit(main())
    except KeyboardInterrupt:  # Ctrl-C: the cluster stays as it is; a line, not a traceback
        print("interrupted: nothing proven; the cluster keeps running (make down stops it)", flush=True)
        sys.exit(130)
