"""Scorers scaled 3 -> 7 -> 3 while a plan runs (real processes, scripted LLM): the goal's
electorate is fixed, so the plan completes, no node is ever decided two ways, the new scorers'
votes on it are never stored, and a goal submitted while 7 run names all 7."""

import pytest
import trio

from swarm_harness import LocalSwarm, cli, wait_ready

pytestmark = [pytest.mark.slow, pytest.mark.timeout(400)]


async def test_scaling_scorers_mid_plan_never_yields_two_decisions(tmp_path):
    with LocalSwarm(tmp_path, decomposers=2, scorers=3, executors=2, observers=0, max_depth=2,
                    max_children=3, scripted_latency=0.3) as sw:
        rt = sw.driver()
        async with trio.open_nursery() as nursery:
            await nursery.start(rt.run)
            await wait_ready(rt, sw.children, 90)
            p = await cli("submit", "Organise a team offsite", env=sw.env(sw.children))
            assert p.returncode == 0, p.stderr.decode()[-2000:]
            goal_id = p.stdout.decode().split()[-1]
            first = {c.peer_id for c in sw.children if c.role == "scorer"}
            assert set(rt.plan.goals[goal_id].body.params.electorate) == first

            decided: dict[str, str] = {}

            async def watch() -> None:  # a decision, once seen, must never change
                while True:
                    for node in list(rt.plan.by_node):
                        v = rt.plan.decided(node)
                        if node in decided:
                            assert v == decided[node], f"node {node[:12]} decided twice"
                        elif v is not None:
                            decided[node] = v
                    await trio.sleep(0.05)

            nursery.start_soon(watch)
            extra = sw.add("scorer", 4)  # 3 -> 7 while the first goal is being planned
            await wait_ready(rt, sw.children, 90)
            env7 = {**sw.env(sw.children), "SWARM_SCORERS": "7"}
            p = await cli("submit", "Plan a garden", env=env7)
            assert p.returncode == 0, p.stderr.decode()[-2000:]
            second = p.stdout.decode().split()[-1]
            assert len(rt.plan.goals[second].body.params.electorate) == 7
            for c in extra:  # 7 -> 3: the newcomers leave again
                sw.kill(c.name)
            with trio.fail_after(240):
                while not rt.tree().is_done(goal_id):
                    await trio.sleep(0.3)
            late = {c.peer_id for c in extra}
            votes_first = [e for e in rt.plan.events.values() if e.type == "vote"
                           and rt.plan.node_ref(e.body.node).root == goal_id]
            assert votes_first and not any(e.author in late for e in votes_first)
            assert decided
            nursery.cancel_scope.cancel()
