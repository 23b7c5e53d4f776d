"""agent.metrics: names, types and labels as scraped over HTTP, and no id-carrying labels."""

from __future__ import annotations

import socket
import urllib.request

import pytest
from prometheus_client.parser import text_string_to_metric_families

from agent import metrics

# family name (as parsed from the exposition) -> (type, label names)
EXPECTED = {
    "swarm_vote_latency_seconds": ("histogram", set()),
    "swarm_claim_collisions": ("counter", set()),
    "swarm_events": ("counter", {"type"}),
    "swarm_events_rejected": ("counter", {"reason"}),
    "swarm_peers_connected": ("gauge", set()),
    "swarm_llm_request_duration_seconds": ("histogram", {"role", "backend"}),
    "swarm_llm_errors": ("counter", {"role", "backend", "kind"}),
    "swarm_tasks": ("gauge", {"state"}),
    "swarm_sync_events_pulled": ("counter", set()),
    "swarm_connection_errors": ("counter", {"kind"}),
    "swarm_gossip_dropped": ("counter", {"reason"}),
    "swarm_sync_requests_refused": ("counter", {"reason"}),
    "swarm_plan_duration_seconds": ("histogram", set()),
    # an Info metric is exposed as a gauge named *_info in the text format
    "swarm_agent_info": ("gauge", {"role", "swarm", "version"}),
}
# label names that would carry an unbounded set of values (one series per id)
ID_LIKE = {"id", "peer", "peer_id", "node", "node_id", "task", "task_id", "event", "event_id",
           "proposal", "proposal_id", "goal", "goal_id", "name", "agent", "host", "addr", "hash"}


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture
def scrape():
    port = _free_port()
    metrics.start_metrics_server(port, host="127.0.0.1")
    try:
        def get() -> dict:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as r:
                assert r.status == 200
                text = r.read().decode()
            return {f.name: f for f in text_string_to_metric_families(text)}
        yield get
    finally:
        metrics.stop_metrics_server()


def _value(fam, sample_name, **labels):
    for s in fam.samples:
        if s.name == sample_name and all(s.labels.get(k) == v for k, v in labels.items()):
            return s.value
    raise AssertionError(f"no sample {sample_name}{labels} in {fam.name}: {fam.samples}")


def test_scraped_names_types_and_labels(scrape):
    metrics.set_agent_info(role="scorer", swarm="t1")
    metrics.EVENTS.labels(type="vote").inc(3)
    metrics.EVENTS_REJECTED.labels(reason="bad_signature").inc()
    metrics.CLAIM_COLLISIONS.inc()
    metrics.PEERS_CONNECTED.set(4)
    metrics.VOTE_LATENCY.observe(0.07)
    metrics.VOTE_LATENCY.observe(420)
    metrics.LLM_REQUEST_DURATION.labels(role="scorer", backend="scripted").observe(1.5)
    metrics.LLM_ERRORS.labels(role="scorer", backend="ollama", kind="timeout").inc()
    metrics.set_task_counts({"open": 2, "done": 1})
    metrics.SYNC_EVENTS_PULLED.inc(7)
    metrics.PLAN_DURATION.observe(95)

    fams = scrape()
    for name, (kind, labels) in EXPECTED.items():
        assert name in fams, f"{name} not exposed"
        fam = fams[name]
        assert fam.type == kind, (name, fam.type)
        seen = {k for s in fam.samples for k in s.labels} - {"le"}
        assert seen == labels, (name, seen)

    assert _value(fams["swarm_events"], "swarm_events_total", type="vote") >= 3
    assert _value(fams["swarm_events"], "swarm_events_total", type="result") >= 0  # pre-created
    assert _value(fams["swarm_events_rejected"], "swarm_events_rejected_total",
                  reason="bad_signature") >= 1
    assert _value(fams["swarm_peers_connected"], "swarm_peers_connected") == 4
    assert _value(fams["swarm_agent_info"], "swarm_agent_info", role="scorer", swarm="t1") == 1
    assert _value(fams["swarm_tasks"], "swarm_tasks", state="open") == 2
    # histogram buckets span 0.05 s .. 10 min for vote latency
    vl = fams["swarm_vote_latency_seconds"]
    les = sorted(float(s.labels["le"]) for s in vl.samples if s.name.endswith("_bucket"))
    assert les[0] == 0.05 and 600 in les and les[-1] == float("inf")
    assert _value(vl, "swarm_vote_latency_seconds_bucket", le="0.1") >= 1
    assert _value(vl, "swarm_vote_latency_seconds_bucket", le="300.0") < \
        _value(vl, "swarm_vote_latency_seconds_bucket", le="600.0")
    # process metrics come along (module registry with the standard collectors)
    assert "process_resident_memory_bytes" in fams


def test_task_counts_zero_states_that_empty(scrape):
    metrics.set_task_counts({"voting": 3, "claimed": 1})
    metrics.set_task_counts({"claimed": 2})
    fam = scrape()["swarm_tasks"]
    assert _value(fam, "swarm_tasks", state="voting") == 0
    assert _value(fam, "swarm_tasks", state="claimed") == 2


# the one stated exception (README, Metrics): spending per goal is a series per goal, labelled
# by the goal id's first 12 characters
GOAL_SERIES = {"swarm_goal_tokens", "swarm_goal_token_budget"}


def test_no_label_carries_an_id():
    for fam in metrics.REGISTRY.collect():
        if not fam.name.startswith("swarm_"):
            continue
        collector = metrics.REGISTRY._names_to_collectors[fam.name]  # noqa: SLF001
        labels = set(getattr(collector, "_labelnames", ())) | {
            k for s in fam.samples for k in s.labels} - {"le"}
        if fam.name in GOAL_SERIES:
            assert labels & ID_LIKE == {"goal"}, (fam.name, labels)
            assert all(len(s.labels["goal"]) <= 12 for s in fam.samples), fam.name
            labels -= {"goal"}
        assert not labels & ID_LIKE, (fam.name, labels & ID_LIKE)
        assert labels <= metrics.ALLOWED_LABELS, (fam.name, labels - metrics.ALLOWED_LABELS)


def test_names_follow_conventions():
    for fam in metrics.REGISTRY.collect():
        if not fam.name.startswith("swarm_"):
            continue
        assert fam.name == fam.name.lower() and " " not in fam.name
        if fam.type == "histogram":
            assert fam.name.endswith("_seconds"), f"{fam.name}: durations in seconds"
        if fam.type == "counter":
            assert not fam.name.endswith("_total"), "prometheus_client appends _total itself"


def test_net_label_values_match_the_net_layer():
    """The pre-created label values are exactly the ones agent.net uses."""
    from agent.net import gossip as gossip_mod
    from agent.net.wire import ConnErrorKind

    assert set(metrics.CONNECTION_ERROR_KINDS) == {k.value for k in ConnErrorKind}
    assert set(metrics.GOSSIP_DROP_REASONS) == {
        gossip_mod.OVERSIZE, gossip_mod.UNSIGNED, gossip_mod.BAD_SIGNATURE,
        gossip_mod.INBOX_FULL, gossip_mod.ERROR}


def test_port_zero_is_a_no_op():
    metrics.start_metrics_server(0)
    assert metrics._server is None  # noqa: SLF001


def test_a_metrics_port_someone_holds_is_one_line_and_a_retry_not_an_exit():
    """Seen in a full run: a scorer died at start with 'Address already in use' on /metrics (a
    traceback, and the test's swarm one scorer short). The agent now logs one line, retries
    with backoff and serves /metrics once the port is free."""
    import trio
    import trio.testing

    from agent.app import _serve_metrics
    from agent.demo import free_port
    from agent.settings import load_settings

    class Log:
        def __init__(self):
            self.lines = []

        def error(self, event, **kw):
            self.lines.append(("error", event, kw))

        def info(self, event, **kw):
            self.lines.append(("info", event, kw))

    port = free_port()
    holder = socket.socket()
    holder.bind(("127.0.0.1", port))
    holder.listen()
    settings = load_settings(metrics_port=port, metrics_host="127.0.0.1", mdns=False)
    log = Log()

    async def main():
        async with trio.open_nursery() as nursery:
            nursery.start_soon(_serve_metrics, settings, log)
            while len(log.lines) < 2:
                await trio.sleep(1)
            holder.close()  # the port is free again
            while not any(e == "metrics.up" for _lvl, e, _kw in log.lines):
                await trio.sleep(1)

    try:
        trio.run(main, clock=trio.testing.MockClock(autojump_threshold=0))
        assert [e for _l, e, _kw in log.lines[:2]] == ["metrics.unavailable", "metrics.unavailable"]
        first = log.lines[0][2]
        assert first["port"] == port and "in use" in first["error"] and first["retry_s"] > 0
        assert log.lines[-1][:2] == ("info", "metrics.up")
        body = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10).read().decode()
        assert "swarm_" in body
    finally:
        holder.close()
        metrics.stop_metrics_server()


def test_the_ports_the_demo_hands_out_are_outside_the_outgoing_range():
    """Ports bind(0) hands out come from the range outgoing connections take their source
    ports from, so one of the swarm's own dials could take a port before its agent bound it."""
    from agent.demo import _ephemeral_low, free_port

    low = _ephemeral_low()
    ports = {free_port() for _ in range(50)}
    assert all(1024 <= p < low for p in ports), sorted(ports)
    assert len(ports) > 40  # drawn at random, not one port for every agent
