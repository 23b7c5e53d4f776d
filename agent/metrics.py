"""Prometheus metrics of every agent role: declarations only.

The roles call ``.inc()``, ``.observe()``, ``.set()`` themselves; nothing here does I/O except
:func:`start_metrics_server`. Metrics live in a module registry (:data:`REGISTRY`, with the
process/platform/GC collectors added), so importing this module twice in one process, or a
library that registers into prometheus_client's default registry, cannot clash with them.

Conventions (https://prometheus.io/docs/practices/naming/): ``swarm_`` prefix, base units
(seconds), ``_total`` on counters (prometheus_client appends it), and labels with a small,
fixed set of values only. **No label may carry an id** (peer id, event/node/task id, goal
text, agent name): each distinct value is a new time series, and ids are unbounded.
tests/test_metrics.py enforces the allowed label names (:data:`ALLOWED_LABELS`).
"""

from __future__ import annotations

import threading
from collections.abc import Mapping
from wsgiref.simple_server import WSGIServer

from prometheus_client import (
    CollectorRegistry,
    Counter,
    Gauge,
    Histogram,
    Info,
    disable_created_metrics,
    start_http_server,
)
from prometheus_client.gc_collector import GCCollector
from prometheus_client.platform_collector import PlatformCollector
from prometheus_client.process_collector import ProcessCollector

from agent import __version__
from agent.core.events import EVENT_TYPES as _EVENT_TYPES
from agent.core.reasons import Reason

# The *_created series double the series count and no dashboard uses them (process-wide switch;
# every process importing this module is an agent).
disable_created_metrics()

REGISTRY = CollectorRegistry(auto_describe=True)
ProcessCollector(registry=REGISTRY)  # process_cpu_seconds_total, process_resident_memory_bytes...
PlatformCollector(registry=REGISTRY)  # python_info
GCCollector(registry=REGISTRY)  # python_gc_*

# Known label values. Children for these are created up front so every series exists (at 0)
# from the first scrape: rate() and absent() behave, and dashboards show zeros, not gaps.
EVENT_TYPES = _EVENT_TYPES
# every reason the core can refuse an event for (agent.core.reasons.Reason)
REJECT_REASONS = tuple(r.value for r in Reason)
ROLES = ("decomposer", "scorer", "executor", "observer")
# Every label name any metric here may use; each has a small fixed value set.
ALLOWED_LABELS = frozenset(
    {"type", "reason", "role", "backend", "kind", "state", "outcome", "swarm", "version"}
)

# 0.05 s .. 10 min: a vote can land within one gossip round trip or after several LLM calls.
VOTE_LATENCY_BUCKETS = (0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 20, 30, 60, 120, 300, 600)
# one LLM call: a fast local model answers in ~0.1 s, a 1B model on a CPU in tens of seconds.
LLM_BUCKETS = (0.1, 0.25, 0.5, 1, 2.5, 5, 10, 20, 30, 60, 120, 300)
# a whole plan: seconds with a scripted LLM, up to hours with a slow real model.
PLAN_BUCKETS = (1, 5, 10, 30, 60, 120, 300, 600, 1200, 1800, 3600, 7200)
TASK_BUCKETS = LLM_BUCKETS

# --- identity ---------------------------------------------------------------------------------
AGENT_INFO = Info(
    "swarm_agent",
    "Constant 1, labelled with this agent's role, swarm name and software version",
    registry=REGISTRY,
)  # exposed as swarm_agent_info{role,swarm,version} 1

# --- the event log --------------------------------------------------------------------------
EVENTS = Counter(
    "swarm_events",
    "Events accepted into the local log (from gossip, sync or this agent), by event type",
    ["type"],
    registry=REGISTRY,
)
EVENTS_REJECTED = Counter(
    "swarm_events_rejected",
    "Events dropped before entering the log, by reason",
    ["reason"],
    registry=REGISTRY,
)
EVENTS_PUBLISHED = Counter(
    "swarm_events_published",
    "Events this agent signed and published, by event type",
    ["type"],
    registry=REGISTRY,
)
EVENTS_STORED = Gauge(
    "swarm_events_stored",
    "Events in the local append-only log (equal on converged peers)",
    registry=REGISTRY,
)

# --- clock ----------------------------------------------------------------------------------
CLOCK_AHEAD = Gauge(
    "swarm_clock_ahead_seconds",
    "How far this agent's clock is ahead of its peers' (negative: behind), estimated from the "
    "stamps of the events it receives",
    registry=REGISTRY,
)
CLOCK_CORRECTION = Gauge(
    "swarm_clock_correction_seconds",
    "What this agent subtracts from its clock to stamp in step with its peers (0: none)",
    registry=REGISTRY,
)
CLOCK_HOLDS = Counter(
    "swarm_clock_holds",
    "Times this agent held an event back because its clock's last stamp was further ahead than peers accept",
    registry=REGISTRY,
)

# --- network --------------------------------------------------------------------------------
PEERS_CONNECTED = Gauge(
    "swarm_peers_connected", "libp2p peers currently connected", registry=REGISTRY
)
SYNC_EVENTS_PULLED = Counter(
    "swarm_sync_events_pulled",
    "Events received through the sync protocol that were new to this peer",
    registry=REGISTRY,
)
SYNC_REQUESTS = Counter(
    "swarm_sync_requests",
    "Sync requests this agent sent to a peer, by outcome (ok, error, timeout)",
    ["outcome"],
    registry=REGISTRY,
)
# agent.net.wire.ConnErrorKind (kept in step by tests/test_metrics.py)
CONNECTION_ERROR_KINDS = ("decrypt", "write_stalled", "malformed", "unexpected")
CONNECTION_ERRORS = Counter(
    "swarm_connection_errors",
    "Connections this agent closed because of an error on that connection alone, by kind "
    "(decrypt, write_stalled, malformed, unexpected); the agent reconnects and carries on",
    ["kind"],
    registry=REGISTRY,
)
# agent.net.wire.InboundGuard's reasons
CONNECTION_REFUSE_REASONS = ("handshake", "timeout", "pending_limit")
CONNECTIONS_REFUSED = Counter(
    "swarm_connections_refused",
    "Inbound connections closed before their security handshake finished, by reason: "
    "handshake (failed: no or another swarm key), timeout, pending_limit (too many unfinished "
    "handshakes from one address or in all)",
    ["reason"],
    registry=REGISTRY,
)
GOSSIP_DROP_REASONS = ("oversize", "unsigned", "bad_signature", "inbox_full", "error")
GOSSIP_DROPPED = Counter(
    "swarm_gossip_dropped",
    "Gossip messages dropped before reaching the event validator, by reason (oversize, "
    "unsigned, bad_signature, inbox_full, error); sync repairs what honest peers lost",
    ["reason"],
    registry=REGISTRY,
)
GOSSIP_RECEIVED = Counter(
    "swarm_gossip_messages_received",
    "Gossip messages from other peers off the subscription (duplicates the mesh delivers "
    "included; the agent's own messages coming back excluded)",
    registry=REGISTRY,
)
SYNC_REFUSE_REASONS = ("bad_request", "busy", "idle_timeout")
SYNC_REQUESTS_REFUSED = Counter(
    "swarm_sync_requests_refused",
    "Sync requests from peers this agent refused, by reason (bad_request, busy, idle_timeout)",
    ["reason"],
    registry=REGISTRY,
)
SYNC_REQUESTS_SERVED = Counter(
    "swarm_sync_requests_served",
    "Sync requests this agent answered for other peers",
    registry=REGISTRY,
)

# --- plan progress (as folded by this peer) -----------------------------------------------------
VOTE_LATENCY = Histogram(
    "swarm_vote_latency_seconds",
    "Time from a node's first split proposal seen to its decision at quorum, as observed locally",
    buckets=VOTE_LATENCY_BUCKETS,
    registry=REGISTRY,
)
PLAN_DURATION = Histogram(
    "swarm_plan_duration_seconds",
    "Time from the goal being posted to its root node being done",
    buckets=PLAN_BUCKETS,
    registry=REGISTRY,
)
TASKS = Gauge(
    "swarm_tasks",
    "Nodes of the plan tree(s) known to this peer, by state",
    ["state"],
    registry=REGISTRY,
)

GOAL_TOKENS = Gauge(
    "swarm_goal_tokens",
    "Tokens a goal's events report its LLM work cost, by goal (its id's first 12 characters: "
    "goals are few and long-lived) and kind of work; the fold's spending, equal on every peer",
    ["goal", "kind"],
    registry=REGISTRY,
)
GOAL_TOKEN_BUDGET = Gauge(
    "swarm_goal_token_budget",
    "A goal's token budget (0: none)",
    ["goal"],
    registry=REGISTRY,
)

# --- claims (executors) ---------------------------------------------------------------------
CLAIM_COLLISIONS = Counter(
    "swarm_claim_collisions",
    "Claims that met a competing claim for the same task (one of them loses)",
    registry=REGISTRY,
)
CLAIMS = Counter(
    "swarm_claims",
    "Claims made by this executor, by outcome (won, lost, expired)",
    ["outcome"],
    registry=REGISTRY,
)
LEASES_EXPIRED = Counter(
    "swarm_leases_expired",
    "Claim leases seen expiring without a result (the task became claimable again)",
    registry=REGISTRY,
)
TASK_DURATION = Histogram(
    "swarm_task_duration_seconds",
    "Executor: from a won claim to the published result",
    buckets=TASK_BUCKETS,
    registry=REGISTRY,
)

TASKS_EXECUTED_TWICE = Counter(
    "swarm_tasks_executed_twice",
    "Tasks found with more than one valid result (a partition hid a claim): observed in the fold",
    registry=REGISTRY,
)
WORK_DROPPED = Counter(
    "swarm_work_dropped",
    "Executor: LLM work thrown away because the lease was lost before the result was ready",
    registry=REGISTRY,
)
PULLS_UNANSWERED = Counter(
    "swarm_pulls_unanswered",
    "Executor: pulls before work that no peer answered (pulled again before spending the LLM)",
    registry=REGISTRY,
)
LLM_UNUSABLE = Counter(
    "swarm_llm_unusable_answers",
    "LLM answers a behaviour could not use (off the schema, empty): asked again, by role",
    ["role"],
    registry=REGISTRY,
)
SET_ASIDE = Counter(
    "swarm_set_aside",
    "Nodes set aside for a while because every LLM attempt at them failed, by role",
    ["role"],
    registry=REGISTRY,
)
LEAF_BY_FALLBACK = Counter(
    "swarm_leaf_by_fallback",
    "Scorer: prevotes for a leaf because the node's rounds ran out",
    registry=REGISTRY,
)
LLM_CANCELLED = Counter(
    "swarm_llm_cancelled",
    "LLM requests stopped because their node was decided or done meanwhile, by role",
    ["role"],
    registry=REGISTRY,
)
EVENTS_HELD = Counter(
    "swarm_events_held",
    "Events stamped further ahead of our clock than allowed, held until due",
    registry=REGISTRY,
)
DECISIONS = Counter(
    "swarm_decisions",
    "Nodes decided at a quorum of precommits, by kind (split, leaf), as observed locally",
    ["kind"],
    registry=REGISTRY,
)
FIRST_PREVOTES = Counter(
    "swarm_first_round_prevotes",
    "Scorer: first-round prevotes cast",
    registry=REGISTRY,
)
FIRST_PREVOTES_COMPETING = Counter(
    "swarm_first_round_prevotes_competing",
    "Scorer: first-round prevotes cast with at least two splits judged side by side",
    registry=REGISTRY,
)

ROLE_RESTARTS = Counter(
    "swarm_role_restarts",
    "Times this agent's role loop failed on an unexpected error and was restarted",
    registry=REGISTRY,
)

# --- LLM ------------------------------------------------------------------------------------
LLM_REQUEST_DURATION = Histogram(
    "swarm_llm_request_duration_seconds",
    "Duration of one LLM request (including retries inside the client), by role and backend",
    ["role", "backend"],
    buckets=LLM_BUCKETS,
    registry=REGISTRY,
)
LLM_ERRORS = Counter(
    "swarm_llm_errors",
    "Failed LLM requests by role, backend and kind (timeout, connection, http, invalid_output)",
    ["role", "backend", "kind"],
    registry=REGISTRY,
)

LLM_TOKENS = Counter(
    "swarm_llm_tokens",
    "Tokens of answered LLM requests (a backend's rejected attempts included), by role and kind (prompt|completion)",
    ["role", "kind"],
    registry=REGISTRY,
)
TOKEN_KINDS = ("prompt", "completion")


def count_tokens(role: str, prompt_tokens: int, completion_tokens: int) -> None:
    """Add one answer's tokens to ``swarm_llm_tokens_total{role,kind}``."""
    LLM_TOKENS.labels(role=role, kind="prompt").inc(max(0, prompt_tokens))
    LLM_TOKENS.labels(role=role, kind="completion").inc(max(0, completion_tokens))


for _t in EVENT_TYPES:
    EVENTS.labels(type=_t)
    EVENTS_PUBLISHED.labels(type=_t)
for _r in REJECT_REASONS:
    EVENTS_REJECTED.labels(reason=_r)
for _k in CONNECTION_ERROR_KINDS:
    CONNECTION_ERRORS.labels(kind=_k)
for _r in CONNECTION_REFUSE_REASONS:
    CONNECTIONS_REFUSED.labels(reason=_r)
for _r in GOSSIP_DROP_REASONS:
    GOSSIP_DROPPED.labels(reason=_r)
for _r in SYNC_REFUSE_REASONS:
    SYNC_REQUESTS_REFUSED.labels(reason=_r)
for _r in ("ok", "error", "timeout"):
    SYNC_REQUESTS.labels(outcome=_r)
for _k in ("split", "leaf"):
    DECISIONS.labels(kind=_k)
del _t, _r, _k


def set_agent_info(role: str, swarm: str, version: str = __version__) -> None:
    """Set ``swarm_agent_info{role,swarm,version} 1`` (call once at start-up)."""
    AGENT_INFO.info({"role": role, "swarm": swarm, "version": version})


_task_states_lock = threading.Lock()
_task_states: set[str] = set()


def set_task_counts(counts: Mapping[str, int]) -> None:
    """Set ``swarm_tasks{state}`` from a full ``{state: count}`` map; states seen before and
    missing now are set to 0 (so a state that empties does not keep its last value)."""
    with _task_states_lock:
        for state in _task_states - counts.keys():
            TASKS.labels(state=state).set(0)
        for state, n in counts.items():
            TASKS.labels(state=state).set(n)
        _task_states.update(counts.keys())


def set_goal_spending(goals: Mapping[str, tuple[int, Mapping[str, tuple[int, int]]]]) -> None:
    """Set ``swarm_goal_tokens{goal,kind}`` and ``swarm_goal_token_budget{goal}`` from
    ``{goal id: (budget, {kind: (prompt, completion)})}``."""
    for gid, (budget, spent) in goals.items():
        short = gid[:12]
        GOAL_TOKEN_BUDGET.labels(goal=short).set(budget)
        for kind, (p, c) in spent.items():
            GOAL_TOKENS.labels(goal=short, kind=kind).set(p + c)


_server: WSGIServer | None = None
_server_thread: threading.Thread | None = None


def start_metrics_server(port: int, host: str = "0.0.0.0") -> None:
    """Serve ``/metrics`` on ``host:port``; a no-op for port 0.

    prometheus_client's server runs in its own daemon thread (a WSGI server over the
    registry). That is acceptable inside a trio program: it only reads metric values under
    prometheus_client's locks and never touches trio objects, and it dies with the process.
    """
    global _server, _server_thread
    if port == 0:
        return
    if _server is not None:
        raise RuntimeError("metrics server already started")
    _server, _server_thread = start_http_server(port, addr=host, registry=REGISTRY)


def stop_metrics_server() -> None:
    """Stop the server started by :func:`start_metrics_server` (for tests and clean exits)."""
    global _server, _server_thread
    if _server is None:
        return
    _server.shutdown()
    _server.server_close()
    if _server_thread is not None:
        _server_thread.join(timeout=5)
    _server, _server_thread = None, None
