"""`submit --wait`: the goal's id at once, the plan's progress on stderr while it runs (counts,
elapsed, an estimate), then the finished plan as Markdown: against a local swarm of real
processes (scripted LLM)."""

import pytest
import trio

from swarm_harness import LocalSwarm, cli, wait_ready

pytestmark = [pytest.mark.slow, pytest.mark.timeout(300)]


async def test_submit_wait_follows_the_plan_to_its_end(tmp_path):
    with LocalSwarm(tmp_path, decomposers=2, scorers=3, executors=2, observers=0, max_depth=1,
                    max_children=3, scripted_latency=2.0) as sw:
        rt = sw.driver()
        async with trio.open_nursery() as nursery:
            await nursery.start(rt.run)
            await wait_ready(rt, sw.children, 90)
            nursery.cancel_scope.cancel()
        # --timeout bounds finding peers and having the goal stored, not the plan: a plan that
        # takes longer than it (2 s per LLM answer) is still followed to its end
        t0 = trio.current_time()
        p = await cli("submit", "Plan a weekend in Porto", "--wait", "--timeout", "10",
                      "--wait-timeout", "200", env=sw.env(sw.children), timeout=240)
        took = trio.current_time() - t0
        out, err = p.stdout.decode(), p.stderr.decode()
        assert p.returncode == 0, err[-3000:]
        gid, rest = out.split("\n", 1)
        assert len(gid) == 64 and rest.startswith("# Plan a weekend in Porto"), out[:500]
        progress = [ln for ln in err.splitlines() if "s  " in ln and "=" in ln and not ln.startswith("{")]
        assert progress and "done=" in progress[-1], err[-2000:]
        assert any("left (estimate" in ln for ln in progress), progress
        assert all("open" not in ln for ln in progress[-1:])  # the last line: every node done
        assert took > 12, f"the plan took {took:.0f}s: too short to show the timeout does not cut it"
