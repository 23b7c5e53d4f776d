"""Chaos: a 4|4 partition while the swarm plans, then heal. Each agent runs in its own network
namespace on a bridge (tests/support/netns.py); the cut moves four hosts' veth ports onto a
second bridge (no nft or iptables needed), the heal moves them back. The side with two of the
three scorers (the quorum) goes on deciding; afterwards every agent must converge. The checks
are ChaosRun.finish's (tests/support/chaos.py); a counted result may change at the heal only
where the other side never had it (both sides may have run a task).

Root only (network namespaces).
"""

from __future__ import annotations

import time

import pytest
import trio

from support.chaos import LATENCY, ChaosRun, NetnsSwarm
from support.netns import add_bridge, bridge_hosts, move_port, netns_unavailable

pytestmark = [pytest.mark.netns, pytest.mark.slow, pytest.mark.timeout(420)]

GOAL = "Plan a two-week trip to Japan"
SWARM = dict(decomposers=2, scorers=3, executors=2, observers=1, max_depth=2, max_children=3,
             scripted_latency=LATENCY)
SIDE_A = ["decomposer-1", "scorer-1", "scorer-2", "executor-1"]  # + the watcher: the quorum
SIDE_B = ["decomposer-2", "scorer-3", "executor-2", "observer-1"]
MIN_CUT_S = 10.0  # > SWARM_LEASE_SECONDS and SWARM_ROUND_TIMEOUT of the harness (6 s)


async def test_partition_4_4_during_planning_then_heal(tmp_path):
    reason = netns_unavailable()
    if reason:
        pytest.skip(reason)
    with bridge_hosts(len(SIDE_A) + len(SIDE_B) + 1) as net:
        add_bridge(net, "br1")
        with NetnsSwarm(tmp_path, net, **SWARM) as sw:
            index = {c.name: i for i, c in enumerate(sw.children)}
            async with trio.open_nursery() as nursery:
                run = ChaosRun(sw, nursery, "4|4 partition during planning, then heal", driver=sw.watcher())
                await run.start(GOAL)

                def decided() -> int:
                    return len(run.snapshot.get("decided", []))

                # cut once the goal and a first subgoal are decided: tasks are ready on both sides
                await run.until(lambda: decided() >= 2, 180, "two nodes decided")
                for name in SIDE_B:
                    move_port(net, index[name], "br1")
                t_cut, at_cut, counted_at_cut = time.monotonic(), decided(), len(run.snapshot["counted"])
                # the quorum's side goes on alone: it decides the rest of the tree. The cut lasts
                # longer than a lease and a round timeout (the other side's claims lapse, its lone
                # scorer's rounds time out). (Tasks run during the cut are only noted: an executor's
                # pull before work waits ~20 s for the unreachable peers, longer than the 6 s lease,
                # so it loses its own claims until the heal; see the report.)
                def side_a_went_on() -> bool:
                    snap = run.snapshot
                    undecided = snap["states"].get("open", 0) + snap["states"].get("voting", 0)
                    return time.monotonic() - t_cut >= MIN_CUT_S and decided() > at_cut and undecided == 0

                await run.until(side_a_went_on, 180, "side A to decide the rest of the tree")
                for name in SIDE_B:
                    move_port(net, index[name], "br0")
                run.rec.fault_end = time.monotonic()
                run.rec.notes.update(partition_s=round(run.rec.fault_end - t_cut, 1),
                                     decided_during=decided() - at_cut,
                                     counted_during=len(run.snapshot["counted"]) - counted_at_cut)
                await run.finish(counted_may_change=True)
                nursery.cancel_scope.cancel()
