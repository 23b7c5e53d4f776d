"""Metrics of a live local swarm (scripted LLM): scraped over HTTP by the test and by a real
Prometheus server on 127.0.0.1, and every PromQL expression of the Grafana dashboard returns
data from it."""

import json
import shutil

import subprocess
import urllib.parse
import urllib.request
from pathlib import Path

import pytest
import trio
from prometheus_client.parser import text_string_to_metric_families

from agent.demo import free_port
from agent.goals import plan_params
from agent.core.events import Claim, Goal, sign_event
from agent.core.hlc import Timestamp
from builders import ident
from swarm_harness import LocalSwarm, cli, wait_ready

pytestmark = [pytest.mark.slow, pytest.mark.timeout(400)]
DASHBOARD = Path(__file__).parent.parent / "grafana" / "dashboards" / "swarm.json"


def scrape(port: int) -> dict[str, float]:
    text = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5).read().decode()
    out: dict[str, float] = {}
    for fam in text_string_to_metric_families(text):
        for s in fam.samples:
            key = s.name + (json.dumps(s.labels, sort_keys=True) if s.labels else "")
            out[key] = s.value
    return out




def start_prometheus(tmp: Path, children) -> tuple[subprocess.Popen, int]:
    port = free_port()
    targets = [{"targets": [f"127.0.0.1:{c.metrics_port}"], "labels": {"service": c.role, "agent": c.name}}
               for c in children]
    cfg = {"global": {"scrape_interval": "1s", "evaluation_interval": "1s"},
           "scrape_configs": [{"job_name": "swarm-agents", "static_configs": targets}]}
    (tmp / "prometheus.yml").write_text(json.dumps(cfg))  # JSON is YAML
    proc = subprocess.Popen(
        [shutil.which("prometheus"), f"--config.file={tmp / 'prometheus.yml'}",
         f"--storage.tsdb.path={tmp / 'tsdb'}", f"--web.listen-address=127.0.0.1:{port}"],
        stdout=open(tmp / "prometheus.log", "wb"), stderr=subprocess.STDOUT)
    return proc, port


def promql(port: int, expr: str) -> list:
    url = f"http://127.0.0.1:{port}/api/v1/query?" + urllib.parse.urlencode({"query": expr})
    body = json.loads(urllib.request.urlopen(url, timeout=10).read())
    assert body["status"] == "success", body
    return body["data"]["result"]


def dashboard_exprs() -> list[str]:
    """Every expression, with each template variable at its "All" value (what Grafana sends
    by default), so the check covers the expressions as shipped."""
    d = json.loads(DASHBOARD.read_text())
    every = {v["name"]: v["allValue"] for v in d["templating"]["list"] if v.get("includeAll")}
    out = []
    for p in d["panels"]:
        for t in p.get("targets", []):
            if t.get("expr"):
                e = t["expr"]
                for name, value in every.items():
                    e = e.replace(f"${{{name}}}", value).replace(f"${name}", value)
                assert "$" not in e.replace("$__rate_interval", ""), e
                out.append(e)
    return out


async def test_metrics_scraped_by_prometheus_and_every_dashboard_query_has_data(tmp_path):
    if shutil.which("prometheus") is None:
        pytest.skip("Debian's prometheus package is not installed (.ci/run installs it)")
    with LocalSwarm(tmp_path, decomposers=2, scorers=3, executors=3, observers=1,
                    max_depth=1, max_children=4, metrics=True, authority=False) as sw:
        prom, prom_port = start_prometheus(tmp_path, sw.children)
        try:
            rt = sw.driver()
            async with trio.open_nursery() as nursery:
                await nursery.start(rt.run)
                await wait_ready(rt, sw.children, 90)
                p = await cli("submit", "Plan a weekend in Lisbon", env=sw.env(sw.children))
                assert p.returncode == 0, p.stderr.decode()[-2000:]
                goal_id = p.stdout.decode().split()[-1]
                with trio.fail_after(240):
                    while not rt.tree().is_done(goal_id):
                        await trio.sleep(0.5)
                # A one-task goal, and two claimants racing for it at the same instant: a sure
                # collision (the executors then take the task over when that lease lapses). The
                # swarm is open (no authority: the racers' fresh keys may claim) and the goal has
                # no brief (its root is a task at once).
                electorate = [c.peer_id for c in sw.children if c.role == "scorer"]
                params = plan_params(rt.settings, electorate).model_copy(update={"max_depth": 0, "brief": False})
                g2 = await rt.publish(Goal(title="Book the airport train", params=params))
                ts = Timestamp(rt.now_ms(), 0)
                for who in (ident("racer-a"), ident("racer-b")):
                    ev = sign_event(who, ts, Claim(node=g2.id, lease_ms=1000))
                    assert await rt.ingest(ev.raw, "test")
                    await rt.net.publish(ev.raw)
                with trio.fail_after(120):
                    while not rt.tree().is_done(g2.id):
                        await trio.sleep(0.5)
                await trio.sleep(4)  # let every agent fold the last events and be scraped
                tree = rt.tree()
                collisions = sum(n.collisions for n in tree.walk())
                assert collisions >= 1
                for c in sw.children:
                    m = scrape(c.metrics_port)
                    assert m["swarm_vote_latency_seconds_count"] >= 1, c.name
                    assert m["swarm_claim_collisions_total"] == collisions, c.name
                    assert m['swarm_plan_duration_seconds_count'] == 2, c.name
                    assert m['swarm_tasks{"state": "done"}'] == sum(1 for _ in tree.walk()), c.name
                    assert m['swarm_peers_connected'] >= 3, c.name
                nursery.cancel_scope.cancel()
            await trio.sleep(3)
            for expr in dashboard_exprs():
                q = expr.replace("$__rate_interval", "1m")
                assert promql(prom_port, q), f"no data for {expr}"
            up = promql(prom_port, 'up{job="swarm-agents"}')
            assert len(up) == len(sw.children) and all(r["value"][1] == "1" for r in up)
        finally:
            prom.terminate()
            prom.wait(10)
