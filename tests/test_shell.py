"""The agent shell every driver keeps (agent.shell): the tree cache, what publishing files, the
net view, the routing of effects, and the metric sinks (the Tally, Prometheus)."""

from __future__ import annotations

import pytest

from agent import metrics
from agent.behaviour import make
from agent.behaviour.effects import (
    Ask, Cancel, Count, Log, Metric, Observe, Publish, SyncPeers, WakeAt,
)
from agent.behaviour.timing import STARTUP_GRACE_MS, Timing
from agent.core.events import Hello
from agent.core.intake import Intake
from agent.drivers.real.driver import declare_llm_series, record
from agent.llm.base import LLMRequest
from agent.shell import AgentShell, Tally, route
from agent.drivers.sim.byzantine import ForgedPublish
from agent.store import MemoryLog
from builders import T0, goal, hello, ident


def _shell() -> AgentShell:
    return AgentShell(Intake(), MemoryLog())


def test_the_tree_is_derived_again_only_when_the_fold_or_its_validity_changed():
    sh = _shell()
    me = ident("sub")
    first = sh.tree(1_000)
    assert sh.tree(1_001) is first
    sh.sign(me, Hello(role="scorer", name="x"), 1_002)
    second = sh.tree(1_003)
    assert second is not first and sh.tree(1_004) is second


def test_sign_gives_ours_first_and_folds_all_it_gives():
    sh = _shell()
    sub = ident("sub")
    g = goal(sub, wall=1, scorers=1)
    assert sh.intake.offer(g, "peer", T0 + 10).ok
    signed = sh.sign(ident("ex"), Hello(role="executor", name="e"), T0 + 20)
    assert signed[0].author == ident("ex").peer_id and signed[0].type == "hello"
    assert all(e.id in sh.plan for e in signed)


def test_a_new_behaviour_gets_its_own_startup_grace():
    sh = _shell()
    t = Timing()
    first = make("scorer", "me", t, 1)
    first.ready = True
    sh.hand_net_view(first, 5_000)  # ready from here: misses before 5_000 + grace do not count
    sh.delivered(hello(ident("p"), "scorer", wall=0), "sync:p", 6_000)  # history, within the grace
    sh.hand_net_view(first, 5_000 + STARTUP_GRACE_MS + 1)
    assert first.net.gossip_healthy
    again = make("scorer", "me", t, 2)  # the role restarted: not ready yet
    sh.hand_net_view(again, 9_000)
    assert not again.net.gossip_healthy


@pytest.mark.parametrize("eff,name", [
    (Publish(Hello(role="scorer", name="x")), "on_publish"),
    (ForgedPublish(Hello(role="scorer", name="x")), "on_publish"),
    (Ask(1, LLMRequest(kind="rank", system="s", prompt="p", free_text=True)), "on_ask"),
    (Cancel(1), "on_cancel"),
    (SyncPeers(1), "on_sync"),
    (WakeAt(5), "on_wake"),
    (Count(Metric.CLAIMS_WON), "on_metric"),
    (Observe(Metric.TASK_SECONDS, 1.5), "on_metric"),
    (Log("info", "x"), "on_log"),
])
def test_every_effect_has_one_route(eff, name):
    assert route(eff) == name


def test_an_unknown_effect_is_refused():
    with pytest.raises(TypeError, match="unknown effect"):
        route(object())


def test_the_tally_keeps_totals_and_observed_values():
    t = Tally()
    t.record(Count(Metric.CLAIMS_WON))
    t.record(Count(Metric.CLAIMS_WON, 2))
    t.record(Observe(Metric.PROPOSALS_SCORED, 3))
    assert t.totals == {"claims_won": 3.0, "proposals_scored": 3.0}
    assert t.observed == {"proposals_scored": [3.0]}


def _counted() -> float:
    return sum(s.value for m in metrics.REGISTRY.collect() if m.name.startswith("swarm_")
               for s in m.samples if s.name.endswith(("_total", "_count")))


@pytest.mark.parametrize("metric", list(Metric))
def test_every_metric_effect_has_a_prometheus_series(metric):
    # the real driver records every metric a behaviour may emit: none is dropped silently
    declare_llm_series("scorer", "scripted")
    before = _counted()
    record(Observe(metric, 2.0) if metric is Metric.TASK_SECONDS else Count(metric, 2.0), "scorer")
    assert _counted() > before
