"""A private swarm across two networks with no multicast between them (two LANs joined by a
router, in namespaces this test makes and removes). mDNS works inside each LAN; the agents
of the far LAN know one bootstrap peer; the DHT rendezvous connects the rest. The bootstrap
peer is then killed, the plan still completes across the router, and a late joiner on the
far LAN (mDNS only) learns the whole plan.

Root only (network namespaces).
"""

from __future__ import annotations

import hashlib
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import orjson
import pytest

from agent.core.identity import Identity
from agent.logfile import read_log
from agent.core.plan import Plan
from agent.core.tree import derive
from agent.net.swarmkey import generate_swarm_key
from support.netns import netns_unavailable, two_networks

pytestmark = [pytest.mark.netns, pytest.mark.slow, pytest.mark.timeout(400)]

# (name, role, network)
AGENTS = [("observer-1", "observer", 0), ("scorer-1", "scorer", 0), ("executor-1", "executor", 0),
          ("decomposer-1", "decomposer", 1), ("scorer-2", "scorer", 1)]
BOOTSTRAP = "observer-1"
PORT = 4001


def _identity(tmp: Path, name: str) -> Identity:
    """Write the agent's key before it starts, so its peer id is known in advance."""
    seed = hashlib.sha256(f"two-networks/{name}".encode()).digest()
    (tmp / name).mkdir(parents=True, exist_ok=True)
    (tmp / name / "key.ed25519").write_bytes(seed)
    return Identity(seed)


def _env(tmp: Path, key: str, name: str, role: str, peers: str) -> dict[str, str]:
    return {**{k: v for k, v in os.environ.items() if not k.startswith("SWARM_")},
            "SWARM_SWARM": "far", "SWARM_ROLE": role, "SWARM_NAME": name,
            "SWARM_DATA_DIR": str(tmp / name), "SWARM_KEY": key, "SWARM_MDNS": "true",
            "SWARM_DHT": "true", "SWARM_PEERS": peers, "SWARM_LISTEN_PORT": str(PORT),
            "SWARM_LLM": "scripted", "SWARM_SCRIPTED_LATENCY": "0.05", "SWARM_SCORERS": "2",
            "SWARM_MAX_DEPTH": "1", "SWARM_MAX_CHILDREN": "3", "SWARM_LOG_FORMAT": "json",
            "SWARM_LOG_LEVEL": "info", "SWARM_COLLECTION_WINDOW": "0.5",
            "SWARM_SETTLE_WINDOW": "0.3", "SWARM_RECONNECT_INTERVAL": "1",
            "SWARM_SYNC_INTERVAL": "2"}


def _log_lines(path: Path) -> list[dict]:
    out = []
    for line in path.read_text(errors="replace").splitlines():
        if line.startswith("{"):
            try:
                out.append(orjson.loads(line))
            except orjson.JSONDecodeError:
                pass
    return out


def _wait(pred, timeout: float, what: str, logs: dict[str, Path]) -> float:
    t0 = time.monotonic()
    while time.monotonic() - t0 < timeout:
        if pred():
            return time.monotonic() - t0
        time.sleep(0.3)
    tails = {n: p.read_text(errors="replace")[-1500:] for n, p in logs.items()}
    pytest.fail(f"timed out after {timeout}s waiting for {what}; log tails: {tails}")


def test_swarm_across_two_networks(tmp_path):
    reason = netns_unavailable()
    if reason:
        pytest.skip(reason)
    key = generate_swarm_key()
    ids = {name: _identity(tmp_path, name).peer_id for name, _, _ in AGENTS}
    with two_networks(3, 3) as net:  # LAN 0: hosts 0-2; LAN 1: hosts 3-5 (5: the late joiner)
        hosts = {name: net.hosts[i] for i, (name, _, _) in enumerate(AGENTS)}
        boot_addr = f"/ip4/{hosts[BOOTSTRAP].ip}/tcp/{PORT}/p2p/{ids[BOOTSTRAP]}"
        logs: dict[str, Path] = {}
        procs: dict[str, subprocess.Popen] = {}
        t_start = time.monotonic()
        for name, role, lan in AGENTS:
            logs[name] = tmp_path / f"{name}.log"
            procs[name] = net.popen(
                hosts[name].ns, [sys.executable, "-m", "agent", "run"],
                env=_env(tmp_path, key, name, role, boot_addr if lan == 1 else ""),
                stdout=open(logs[name], "wb"), stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)

        def connected(name: str) -> set[str]:
            up: set[str] = set()
            for e in _log_lines(logs[name]):
                if e.get("event") == "net.peer_connected":
                    up.add(e["peer"])
                elif e.get("event") == "net.peer_disconnected":
                    up.discard(e["peer"])
            return up

        far = {ids["decomposer-1"], ids["scorer-2"]}
        # scorer-1 (LAN 0, no static peers) can only meet LAN 1's agents through the DHT
        took = _wait(lambda: far <= connected("scorer-1") and far <= connected("executor-1"),
                     90, "LAN 0 agents connected to LAN 1 agents", logs)
        # (scorer-1 and executor-1 have no static peer, LAN 1's agents only the bootstrap,
        # and mDNS does not cross the router: only the DHT can have introduced them)
        print(f"\ncross-network mesh {time.monotonic() - t_start:.1f}s after start "
              f"({took:.1f}s of waiting)")

        # the bootstrap peer goes away; the plan is posted on LAN 1 and still completes
        os.killpg(procs[BOOTSTRAP].pid, signal.SIGKILL)
        procs[BOOTSTRAP].wait()
        tool_env = {**_env(tmp_path, key, "tool", "observer", ""), "SWARM_LISTEN_PORT": "0",
                    "SWARM_DHT": "false"}
        late_ns = net.hosts[5].ns  # on LAN 1, mDNS only: no static peer, no DHT

        def tool(*args: str, timeout: float = 90) -> subprocess.CompletedProcess:
            return subprocess.run(net.argv(late_ns, [sys.executable, "-m", "agent", *args]),
                                  env=tool_env, capture_output=True, text=True, timeout=timeout)

        p = tool("submit", "Plan a weekend in Lisbon", "--timeout", "60")
        assert p.returncode == 0, p.stderr[-3000:]
        goal_id = p.stdout.strip().splitlines()[-1]
        t_goal = time.monotonic()
        tree = None

        def done() -> bool:
            nonlocal tree
            q = tool("observe", "--once", "--json", "--timeout", "30")
            if q.returncode != 0:
                return False
            tree = orjson.loads(q.stdout)
            root = next((g for g in tree["goals"] if g["id"] == goal_id), None)
            return bool(root and root["state"] == "done" and root["children"])

        _wait(done, 150, "the plan to complete across the router", logs)
        print(f"plan done {time.monotonic() - t_goal:.1f}s after the goal, bootstrap dead")
        # the executor (LAN 0) ran the leaves that the decomposer (LAN 1) proposed
        results = [e for e in _log_lines(logs["executor-1"]) if e.get("event") == "published"
                   and e.get("type") == "result"]
        assert results, "LAN 0's executor worked on LAN 1's split"
        time.sleep(2)
        net.cleanup()
    digests = set()
    for name, _, _ in AGENTS:
        if name == BOOTSTRAP:
            continue
        events, _bad = read_log(tmp_path / name / "events.jsonl")
        plan = Plan()
        for e in events:
            plan.apply(e)
        digests.add(derive(plan, 10**13).digest)
    assert digests == {tree["digest"]}, "every live agent's stored log folds to the plan"
