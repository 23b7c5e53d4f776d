"""Committees between real processes (issue 22): `submit` draws a goal's electorate from the
live scorers, every agent checks the draw, only the committee judges and votes, and a node's
splits come from its home decomposers."""

from collections import defaultdict

import pytest
import trio

from agent.core import committee
from swarm_harness import LocalSwarm, cli, wait_ready

pytestmark = [pytest.mark.slow, pytest.mark.timeout(400)]


async def test_a_committee_of_three_out_of_six_scorers_plans_the_goal(tmp_path):
    with LocalSwarm(tmp_path, decomposers=4, scorers=6, executors=2, observers=1, max_depth=1, max_children=3,
                    extra_env={"SWARM_DECOMPOSERS_PER_NODE": "2"}) as sw:
        rt = sw.driver()
        async with trio.open_nursery() as nursery:
            await nursery.start(rt.run)
            await wait_ready(rt, sw.children, 120)
            env = {**sw.env(sw.children[:2]), "SWARM_COMMITTEE": "3"}
            p = await cli("submit", "Plan a two-week trip to Japan", env=env)
            assert p.returncode == 0, p.stderr.decode()[-2000:]
            goal_id = p.stdout.decode().strip().splitlines()[-1]
            with trio.fail_after(240):
                while not rt.tree().is_done(goal_id):
                    await trio.sleep(0.5)
            goal = rt.plan.events[goal_id]
            params = goal.body.params
            scorers = {c.peer_id for c in sw.children if c.role == "scorer"}
            assert params.committee == 3 and set(params.pool) == scorers and len(params.electorate) == 3
            seed = committee.seed(goal.author, goal.body.title, goal.body.description)
            assert params.electorate == committee.draw(seed, scorers, 3)
            judged = {e.author for e in rt.plan.events.values() if e.type in ("score", "vote", "review")}
            assert judged and judged <= set(params.electorate)  # the other three never judged
            splits = defaultdict(set)
            for e in rt.plan.events.values():
                if e.type == "proposal":
                    splits[e.body.node].add(e.author)
            assert splits and all(len(a) <= 2 for a in splits.values()), splits
            nursery.cancel_scope.cancel()
        # every agent stored the goal: each checked the draw and took it
        for c in sw.children:
            with trio.fail_after(30):
                while goal_id not in (c.data_dir / "events.jsonl").read_text():
                    await trio.sleep(0.5)
