"""A real multi-process swarm on 127.0.0.1 (scripted LLM): completion, exactly-once execution,
convergence of every agent, kill -9 + restart, and a late observer learning the plan by sync."""

from collections import Counter

import orjson
import pytest
import trio

from swarm_harness import LocalSwarm, cli, wait_ready

pytestmark = [pytest.mark.slow, pytest.mark.timeout(400)]


async def test_swarm_plans_executes_once_converges_and_survives_restart(tmp_path):
    with LocalSwarm(tmp_path, decomposers=3, scorers=3, executors=2, observers=1,
                    max_depth=2, max_children=3) as sw:
        rt = sw.driver()
        async with trio.open_nursery() as nursery:
            await nursery.start(rt.run)
            await wait_ready(rt, sw.children, 90)
            p = await cli("submit", "Plan a two-week trip to Japan", env=sw.env(sw.children[:2]))
            assert p.returncode == 0, p.stderr.decode()[-2000:]
            goal_id = p.stdout.decode().strip().splitlines()[-1]
            assert len(goal_id) == 64

            # kill -9 a scorer once the root is decided, restart it with the same data dir
            with trio.fail_after(120):
                while rt.tree().node(goal_id) is None or rt.tree().node(goal_id).decided is None:
                    await trio.sleep(0.2)
            sw.kill("scorer-2")
            await trio.sleep(1.0)
            sw.restart("scorer-2")

            with trio.fail_after(240):
                while not rt.tree().is_done(goal_id):
                    await trio.sleep(0.5)
            # let stragglers (a last renewal, a late vote) arrive: the log stops growing
            with trio.fail_after(60):
                stable_since, count = trio.current_time(), len(rt.plan)
                while trio.current_time() - stable_since < 3.0:
                    await trio.sleep(0.2)
                    if len(rt.plan) != count:
                        stable_since, count = trio.current_time(), len(rt.plan)
            tree = rt.tree()
            root = tree.node(goal_id)
            assert max(n.depth for n in root.walk()) >= 2
            tasks = [n for n in root.walk() if n.task is not None]
            results = Counter(e.body.node for e in rt.plan.events.values() if e.type == "result")
            assert all(results[n.id] == 1 for n in tasks), "a task was executed more than once"
            assert root.result is not None  # the root's synthesis: the plan's summary
            assert "log reloaded" in sw.log_text("scorer-2")
            # the observer printed the final plan as Markdown, leaf results in tree order
            with trio.fail_after(10):
                while "# Plan a two-week trip to Japan" not in sw.log_text("observer-1"):
                    await trio.sleep(0.2)
            md = sw.log_text("observer-1")
            first_leaf = next(n for n in root.walk() if n.leaf)
            first_line = first_leaf.result["output"].strip().splitlines()[0]
            assert " ".join(first_line.split()) in " ".join(md.split())  # (the console wraps long lines)
            reload_lines = [orjson.loads(line) for line in sw.log_text("scorer-2").splitlines()
                            if line.startswith("{") and "log reloaded" in line]
            assert len(reload_lines) == 2 and reload_lines[1]["events"] > 0

            # a late observer, connected to one agent only, learns the whole plan by sync
            p = await cli("observe", "--once", "--json", env=sw.env([sw.child("executor-1")]))
            assert p.returncode == 0, p.stderr.decode()[-2000:]
            late = orjson.loads(p.stdout)
            assert late["digest"] == rt.tree().digest == tree.digest
            nursery.cancel_scope.cancel()

        # stop everyone, then fold each agent's own stored log: all equal
        await trio.sleep(2.0)
        sw.__exit__(None, None, None)
        now = tree.now_ms
        digests = {c.name: sw.stored_digest(c.name, now) for c in sw.children}
        assert set(digests.values()) == {tree.digest}, digests
