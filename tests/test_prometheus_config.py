"""config/prometheus.yml: valid for promtool, and its DNS service discovery covers exactly the
agent services of docker-compose.yml on the agents' metrics port."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parent.parent
CONFIG = ROOT / "config" / "prometheus.yml"
COMPOSE = ROOT / "docker-compose.yml"
AGENT_METRICS_PORT = 9100


def _agent_services() -> set[str]:
    services = yaml.safe_load(COMPOSE.read_text())["services"]
    return {n for n, s in services.items()
            if str(s.get("environment", {}).get("SWARM_METRICS_PORT")) == str(AGENT_METRICS_PORT)}


@pytest.mark.skipif(shutil.which("promtool") is None,
                    reason="promtool not installed (Debian: apt-get install prometheus)")
def test_promtool_check_config():
    r = subprocess.run(["promtool", "check", "config", str(CONFIG)],
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "SUCCESS" in r.stdout + r.stderr


def test_dns_sd_covers_every_agent_service():
    cfg = yaml.safe_load(CONFIG.read_text())
    jobs = {j["job_name"]: j for j in cfg["scrape_configs"]}
    agents = jobs["swarm-agents"]
    assert "static_configs" not in agents, "agents must be found by DNS-SD (replicas scale)"
    names: set[str] = set()
    for sd in agents["dns_sd_configs"]:
        assert sd["type"] == "A"
        assert sd["port"] == AGENT_METRICS_PORT
        names |= set(sd["names"])
    expected = _agent_services()
    assert {"decomposer-2", "scorer", "executor", "observer"} <= expected
    assert names == expected, f"DNS-SD names {sorted(names)} != agent services {sorted(expected)}"
    # the `service` label comes from the DNS name (bounded cardinality, used by the dashboard)
    assert any(r.get("target_label") == "service" and r.get("source_labels") == ["__meta_dns_name"]
               for r in agents.get("relabel_configs", []))
