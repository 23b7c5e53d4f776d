"""The simulator runs the real behaviour: one scenario, run once in virtual time and once as
separate OS processes over libp2p (scripted LLM, the same keys and seeds), makes the same
decisions in the same order, with the same results (a structural comparison of the events)."""

import re

import pytest
import trio

from agent.goals import plan_params
from agent.core.events import Goal
from agent.core.tree import derive
from agent.settings import load_settings
from agent.drivers.sim import SimConfig, Simulation
from agent.drivers.sim.cast import sim_identity
from agent.demo import ROLES_OF, issue_credential_file
from swarm_harness import LocalSwarm, wait_ready

pytestmark = [pytest.mark.slow, pytest.mark.timeout(300)]
SEED = 21
SHAPE = dict(decomposers=1, scorers=3, executors=1, max_depth=2, max_children=3)


MONTHS = re.compile(r"\b(January|February|March|April|May|June|July|August|September|October|"
                    r"November|December)\b")
ISO_MONTH = re.compile(r"\b\d{4}-\d{2}-(\d{2})\b")


def undated(text):
    """The scripted answers name dates from the brief, which starts from the goal's own clock
    (the simulator's epoch, or today): the year and month differ between the runs, nothing
    else may (the day of the month stays: it comes from the step's part of the schedule)."""
    return ISO_MONTH.sub(r"<year-month>-\1", MONTHS.sub("<month>", text)) if text else text


def structure(plan):
    """What was decided and produced, by titles (ids and timestamps differ between runs)."""
    tree = derive(plan, plan.latest_wall())
    nodes = {}
    for n in tree.walk():
        path = tuple(x.title for x in tree.path(n))
        chosen = None
        if n.decided == "leaf":
            chosen = "leaf"
        elif n.decided is not None:
            chosen = tuple(s["title"] for s in n.proposal(n.decided).subgoals)
        nodes[path] = (chosen, n.decided_round, undated((n.result or {}).get("output")))
    decided_at = {}
    for n in tree.walk():
        if n.decided is not None:
            pcs = sorted(v.hlc for v in plan.by_node[n.id].votes
                         if v.body.phase == "precommit" and v.body.value == n.decided)
            decided_at[tuple(x.title for x in tree.path(n))] = pcs[n.params.quorum - 1]
    order = [p for p, _ in sorted(decided_at.items(), key=lambda kv: kv[1])]
    return nodes, order


async def test_simulator_and_real_processes_decide_the_same(tmp_path):
    fast = {"decompose": (50, 60), "score": (50, 60), "execute": (50, 60)}  # as the scripted LLM
    sim = Simulation(SimConfig(seed=SEED, behaviour_seed=7, llm_ms=fast, **SHAPE))
    sim.run()
    assert sim.checker.ok
    sim_nodes, sim_order = structure(sim.agents[-1].intake.plan)

    sw = LocalSwarm(tmp_path, observers=0, extra_env={"SWARM_SEED": "7"}, **SHAPE)
    for c in sw.children:  # the simulator's keys: the same electorate, the same scorers' jitter
        ident = sim_identity(SEED, c.name)
        (c.data_dir / "key.ed25519").write_bytes(ident.seed)
        c.peer_id = ident.peer_id
        issue_credential_file(sw.cfg, c.data_dir, ROLES_OF[c.role])  # the credential names the key
    with sw:
        rt = sw.driver()
        async with trio.open_nursery() as nursery:
            await nursery.start(rt.run)
            await wait_ready(rt, sw.children, 90)
            settings = load_settings(max_depth=SHAPE["max_depth"], max_children=SHAPE["max_children"],
                                     max_rounds=2, max_lease_seconds=120)
            electorate = [c.peer_id for c in sw.children if c.role == "scorer"]
            assert sorted(electorate) == list(sim.params.electorate)
            g = await rt.publish(Goal(title=SimConfig().goal, params=plan_params(settings, electorate)))
            with trio.fail_after(200):
                while not rt.tree().is_done(g.id):
                    await trio.sleep(0.3)
            nursery.cancel_scope.cancel()
    real_nodes, real_order = structure(rt.plan)
    assert real_nodes == sim_nodes
    # decisions in causal order alike: a node after the decision that made it (siblings are
    # decided concurrently, and which comes first is a race in real time)
    assert set(real_order) == set(sim_order) and len(real_order) == len(sim_order)
    for order in (real_order, sim_order):
        for i, path in enumerate(order):
            ancestors = [p for p in order if len(p) < len(path) and path[:len(p)] == p]
            assert all(order.index(p) < i for p in ancestors), (path, order)
    assert max(len(p) for p in sim_nodes) == 3  # a depth-2 plan
