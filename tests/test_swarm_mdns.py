"""mDNS with no peer list: 4 agents in 4 network namespaces on a bridge find each other and
complete a plan (root only; namespaces are made and removed by the test)."""

import os
import subprocess
import sys
import time

import orjson
import pytest

from agent.core.plan import Plan
from agent.core.tree import derive
from agent.logfile import read_log
from support.netns import bridge_hosts, netns_unavailable

pytestmark = [pytest.mark.netns, pytest.mark.slow, pytest.mark.timeout(300)]

ROLES = ["decomposer", "scorer", "executor", "observer"]


def agent_env(tmp_path, name, role):
    return {**os.environ, "SWARM_SWARM": "mdnstest", "SWARM_ROLE": role, "SWARM_NAME": name,
            "SWARM_DATA_DIR": str(tmp_path / name), "SWARM_MDNS": "true", "SWARM_PEERS": "",
            "SWARM_LLM": "scripted", "SWARM_SCRIPTED_LATENCY": "0.05", "SWARM_SCORERS": "1",
            "SWARM_MAX_DEPTH": "1", "SWARM_MAX_CHILDREN": "3", "SWARM_LOG_FORMAT": "json",
            "SWARM_LOG_LEVEL": "info", "SWARM_PROPOSAL_WINDOW": "0.5", "SWARM_SETTLE_WINDOW": "0.3",
            "SWARM_LISTEN_PORT": "4001", "SWARM_RECONNECT_INTERVAL": "1", "SWARM_SYNC_INTERVAL": "2"}


def test_mdns_swarm_in_namespaces_completes_a_plan(tmp_path):
    reason = netns_unavailable()
    if reason:
        pytest.skip(reason)
    with bridge_hosts(4) as net:
        logs = {}
        for host, role in zip(net.hosts, ROLES):
            name = f"{role}-1"
            logs[name] = open(tmp_path / f"{name}.log", "wb")
            net.popen(host.ns, [sys.executable, "-m", "agent", "run"], env=agent_env(tmp_path, name, role),
                      stdout=logs[name], stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
        tool_env = {**agent_env(tmp_path, "tool", "observer"), "SWARM_LISTEN_PORT": "0"}
        obs_ns = net.hosts[3].ns

        def tool(*args, timeout=90):
            return subprocess.run(net.argv(obs_ns, [sys.executable, "-m", "agent", *args]), env=tool_env,
                                  capture_output=True, text=True, timeout=timeout)

        time.sleep(3)
        p = tool("submit", "Plan a weekend in Lisbon", "--timeout", "60")
        assert p.returncode == 0, p.stderr[-3000:]
        goal_id = p.stdout.strip().splitlines()[-1]
        deadline = time.monotonic() + 150
        tree = None
        while time.monotonic() < deadline:
            p = tool("observe", "--once", "--json", "--timeout", "30")
            if p.returncode == 0:
                tree = orjson.loads(p.stdout)
                root = next((g for g in tree["goals"] if g["id"] == goal_id), None)
                if root and root["state"] == "done":
                    break
            time.sleep(2)
        else:
            tails = {n: (tmp_path / f"{n}.log").read_text()[-1500:] for n in logs}
            pytest.fail(f"plan not done; last tree {tree and tree['goals']}; logs {tails}")
        assert root["children"], "the plan was split at least once"
        time.sleep(2)
        net.cleanup()  # SIGTERM every agent, then remove the namespaces
        for fh in logs.values():
            fh.close()
    digests = set()
    for n in logs:
        events, _ = read_log(tmp_path / n / "events.jsonl")
        plan = Plan()
        for e in events:
            plan.apply(e)
        digests.add(derive(plan, 10**13).digest)
    assert digests == {tree["digest"]}, "every agent's stored log folds to the observed plan"
