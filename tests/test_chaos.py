"""The chaos suite: faults injected into a real swarm of agent processes on 127.0.0.1 (scripted
LLM with a realistic-but-short latency) while it plans. Each scenario ends with the same checks
(tests/support/chaos.py, ``ChaosRun.finish``): the plan completes; every agent's stored log
folds to the same digest; no event is lost; no agent process died; no counted result changed
after every agent had it. Each prints its recovery time.

The partition (network namespaces) is in test_chaos_partition.py, the hostile peer in
test_chaos_hostile.py.
"""

from __future__ import annotations

import signal
import time

import pytest
import trio

from support.chaos import LATENCY, ChaosRun, SmallDisk, in_flight
from swarm_harness import LocalSwarm

pytestmark = [pytest.mark.slow, pytest.mark.timeout(420)]

GOAL = "Plan a two-week trip to Japan"
# 8 agents: 2 decomposers, 3 scorers (quorum 2), 2 executors, 1 observer; a depth-2 plan
SWARM = dict(decomposers=2, scorers=3, executors=2, observers=1, max_depth=2, max_children=3,
             scripted_latency=LATENCY)


def swarm(tmp_path, **kw) -> LocalSwarm:
    return LocalSwarm(tmp_path, **{**SWARM, **kw})


async def test_kill_executor_holding_a_claim(tmp_path):
    """SIGKILL an executor while it works on a task it claimed: its lease lapses, the other
    executor takes the task over; restarted after the plan, it catches up."""
    # executor-1's LLM calls take longer, so it is caught working
    with swarm(tmp_path, agent_env={"executor-1": {"SWARM_SCRIPTED_LATENCY": "3"}}) as sw:
        async with trio.open_nursery() as nursery:
            run = ChaosRun(sw, nursery, "SIGKILL executor holding a claim")
            await run.start(GOAL)
            calls = await run.until_log("executor-1", lambda r: in_flight(r, "execute") or in_flight(r, "synthesize"),
                                        180, "an execute call in flight")
            node = calls[0]["node_id"]
            n = run.tree().node(node)
            assert n is not None and n.holder is not None and n.holder.author == run.peer("executor-1")
            run.kill("executor-1")
            run.rec.fault_end = time.monotonic()
            await run.until_done()
            took_over = [c for c in run.tree().node(node).claims if c.author != run.peer("executor-1")]
            assert took_over, "the other executor took the task over"
            sw.restart("executor-1")
            await run.finish()
            nursery.cancel_scope.cancel()
