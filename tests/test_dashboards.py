"""Grafana provisioning and the dashboard: structurally valid, wired to the Compose file, and
every metric a PromQL expression uses exists in agent/metrics.py."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
import yaml

from agent import metrics

ROOT = Path(__file__).resolve().parent.parent
DASH_DIR = ROOT / "grafana" / "dashboards"
PROV = ROOT / "grafana" / "provisioning"
COMPOSE = ROOT / "docker-compose.yml"

# metrics that come from Prometheus itself, not from the agents
PROMETHEUS_BUILTIN = {"up", "scrape_duration_seconds", "scrape_samples_scraped"}
PROMQL_WORDS = {
    "sum", "min", "max", "avg", "count", "by", "without", "rate", "irate", "increase",
    "histogram_quantile", "topk", "bottomk", "on", "ignoring", "group_left", "group_right",
    "offset", "bool", "and", "or", "unless", "abs", "clamp_min", "clamp_max", "delta",
    "deriv", "time", "vector", "scalar", "absent", "label_replace", "sort", "sort_desc",
    "quantile", "stddev", "count_values", "last_over_time", "max_over_time",
    "min_over_time", "avg_over_time", "inf", "nan",
}


def _series_names() -> set[str]:
    """Every sample name agent/metrics.py can expose (counters as *_total, histograms as
    *_bucket/_sum/_count, info as *_info...), from the declared metric families."""
    names: set[str] = set()
    for fam in metrics.REGISTRY.collect():
        n = fam.name
        names |= {s.name for s in fam.samples}
        if fam.type == "counter":
            names.add(n + "_total")
        elif fam.type in ("histogram", "summary"):
            names |= {n + "_bucket", n + "_sum", n + "_count", n}
        elif fam.type == "info":
            names.add(n + "_info")
        else:
            names.add(n)
    return names


def _dashboards() -> list[tuple[Path, dict]]:
    files = sorted(DASH_DIR.glob("*.json"))
    assert files, f"no dashboards in {DASH_DIR}"
    return [(f, json.loads(f.read_text())) for f in files]


def _panels(dash: dict):
    for p in dash.get("panels", []):
        yield p
        yield from p.get("panels", [])  # collapsed rows


def _metric_names(expr: str) -> set[str]:
    """Metric-like identifiers in a PromQL expression (not label names, functions, strings,
    durations or Grafana variables)."""
    e = re.sub(r'"[^"]*"', '""', expr)  # label values
    e = re.sub(r"\{[^}]*\}", "", e)  # label matchers
    e = re.sub(r"\[[^\]]*\]", "", e)  # ranges, incl. $__rate_interval
    e = re.sub(r"\b(by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)", "", e)
    e = re.sub(r"\$\w+", "", e)
    names = set(re.findall(r"[a-zA-Z_:][a-zA-Z0-9_:]*", e))
    return {n for n in names if n not in PROMQL_WORDS and not re.fullmatch(r"\d\w*", n)}


def test_dashboard_structure():
    for path, dash in _dashboards():
        assert dash.get("uid") and dash.get("title"), path
        assert isinstance(dash.get("schemaVersion"), int), path
        ids = [p["id"] for p in _panels(dash)]
        assert ids and len(ids) == len(set(ids)), f"{path}: panel ids must be unique: {ids}"
        for p in _panels(dash):
            if p.get("type") == "row":
                continue
            where = f"{path.name} panel {p.get('id')} {p.get('title')!r}"
            assert p.get("title"), where
            assert {"x", "y", "w", "h"} <= set(p.get("gridPos", {})), where
            ds = p.get("datasource")
            assert isinstance(ds, dict) and ds.get("uid") and ds.get("type"), f"{where}: datasource"
            targets = p.get("targets")
            assert targets, f"{where}: no targets"
            refids = [t.get("refId") for t in targets]
            assert len(refids) == len(set(refids)), f"{where}: duplicate refId"
            for t in targets:
                assert t.get("expr", "").strip(), f"{where}: target without expr"
                assert t["expr"].count("(") == t["expr"].count(")"), f"{where}: {t['expr']}"


# the schema Grafana 12 (the Compose file's image) writes; 42 and 43 only migrate features this
# dashboard does not use (hidden-field overrides, formatTime transformations)
SCHEMA_VERSION = 41


def test_dashboard_schema_and_template_variables():
    prom = yaml.safe_load((ROOT / "config" / "prometheus.yml").read_text())
    agents = next(j for j in prom["scrape_configs"] if j["job_name"] == "swarm-agents")
    labels = {r.get("target_label") for r in agents.get("relabel_configs", [])}
    for path, dash in _dashboards():
        assert dash["schemaVersion"] >= SCHEMA_VERSION, path
        variables = {v["name"]: v for v in dash["templating"]["list"]}
        ds = variables["datasource"]
        assert ds["type"] == "datasource" and ds["query"] == "prometheus"
        svc = variables["service"]
        assert svc["type"] == "query" and svc["datasource"]["uid"] == "${datasource}"
        assert svc["includeAll"] and svc["multi"] and svc["allValue"] == ".*"
        assert re.fullmatch(r'label_values\(up\{job="swarm-agents"\}, service\)', svc["query"]["query"])
        assert "service" in labels, "Prometheus must label every agent target with its service"
        for p in _panels(dash):
            for t in p.get("targets", []):
                # every selector of an agent metric is narrowed to the chosen services
                for sel in re.findall(r"\b([a-z_:]+)(\{[^}]*\})?(?=[\s\[)/]|$)", t["expr"]):
                    name, matchers = sel
                    if name in _metric_names(t["expr"]):
                        assert 'service=~"$service"' in matchers, (p["title"], t["expr"])


def test_dashboard_covers_the_required_views():
    exprs = " ".join(t["expr"] for _, d in _dashboards() for p in _panels(d)
                     for t in p.get("targets", []))
    for needed in [
        "histogram_quantile(0.5, sum by (le) (rate(swarm_vote_latency_seconds_bucket",
        "histogram_quantile(0.95, sum by (le) (rate(swarm_vote_latency_seconds_bucket",
        "rate(swarm_claim_collisions_total", "swarm_events_total", "swarm_events_rejected_total",
        "swarm_peers_connected", "swarm_llm_request_duration_seconds_bucket",
        "swarm_llm_errors_total", "swarm_tasks", "swarm_sync_events_pulled_total",
        "swarm_plan_duration_seconds",
    ]:
        assert needed in exprs, f"no panel queries {needed}"
    # p50 and p95 of LLM latency by role
    assert re.search(r"histogram_quantile\(0\.5, sum by \(le, role\) \(rate\(swarm_llm", exprs)
    assert re.search(r"histogram_quantile\(0\.95, sum by \(le, role\) \(rate\(swarm_llm", exprs)


def test_every_metric_in_a_query_exists():
    known = _series_names()
    process = {n for n in known if n.startswith(("process_", "python_"))}
    for path, dash in _dashboards():
        for p in _panels(dash):
            for t in p.get("targets", []):
                for name in _metric_names(t["expr"]):
                    assert name in known or name in PROMETHEUS_BUILTIN or name in process, (
                        f"{path.name} panel {p['title']!r}: {name} is not declared in "
                        f"agent/metrics.py (expr: {t['expr']})")


def test_metric_name_extraction():  # the checker above must see through PromQL syntax
    e = 'histogram_quantile(0.95, sum by (le, role) (rate(swarm_x_bucket{job="a"}[$__rate_interval])))'
    assert _metric_names(e) == {"swarm_x_bucket"}
    assert _metric_names("sum(a_total) / sum(b_count) > 0.5") == {"a_total", "b_count"}


def _compose_mounts(service: str) -> dict[str, str]:
    svc = yaml.safe_load(COMPOSE.read_text())["services"][service]
    out = {}
    for v in svc.get("volumes", []):
        src, dst = v.split(":")[:2]
        out[src] = dst
    return out


def test_provisioning_matches_compose_mounts():
    mounts = _compose_mounts("grafana")
    assert mounts.get("./grafana/provisioning") == "/etc/grafana/provisioning"
    dash_target = mounts.get("./grafana/dashboards")
    assert dash_target, "grafana/dashboards is not mounted into the grafana service"

    prov = yaml.safe_load((PROV / "dashboards" / "dashboards.yml").read_text())
    assert prov["apiVersion"] == 1
    paths = [pr["options"]["path"] for pr in prov["providers"] if pr.get("type") == "file"]
    assert paths == [dash_target], f"provider path {paths} != mount target {dash_target}"

    ds = yaml.safe_load((PROV / "datasources" / "prometheus.yml").read_text())
    assert ds["apiVersion"] == 1
    (src,) = ds["datasources"]
    assert src["type"] == "prometheus"
    services = yaml.safe_load(COMPOSE.read_text())["services"]
    host, port = re.fullmatch(r"http://([\w.-]+):(\d+)", src["url"]).groups()
    assert host in services, f"datasource points at {host}, not a Compose service"
    assert port == "9090"
    # every panel queries the dashboard's datasource variable, whose default is the provisioned one
    for _, dash in _dashboards():
        var = next(v for v in dash["templating"]["list"] if v["type"] == "datasource")
        assert var["query"] == src["type"] and var["current"]["value"] == src["uid"]
        for p in _panels(dash):
            if p.get("type") != "row":
                assert p["datasource"]["uid"] == f"${{{var['name']}}}", p["title"]
                assert all(t["datasource"]["uid"] == p["datasource"]["uid"] for t in p["targets"] if "datasource" in t)


@pytest.mark.parametrize("path", sorted(PROV.rglob("*.yml")), ids=lambda p: p.name)
def test_provisioning_yaml_parses(path):
    assert isinstance(yaml.safe_load(path.read_text()), dict)
