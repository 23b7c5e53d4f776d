"""The WorFBench WikiHow dev split as loaded (skipped where shared/eval/worfbench/ is absent:
the data is evaluation data only and never part of the repository)."""

from __future__ import annotations

import ast
import json
import os

import pytest

from agent.eval import worfbench as W

PATH = W.default_path()
pytestmark = pytest.mark.skipif(PATH is None or not PATH.is_file(),
                                reason="WorFBench data not present (shared/eval/worfbench/)")


@pytest.fixture(scope="module")
def tasks():
    return W.load_tasks(PATH)


@pytest.fixture(scope="module")
def raw():
    return {r["id"]: r for r in json.loads(PATH.read_text(encoding="utf-8"))}


def test_the_dev_split_loads_whole(tasks):
    if not os.environ.get(W.ENV_DIR):
        assert W.sha256_of(PATH) == W.DEV_SHA256
    assert len(tasks) == 200 and len({t.id for t in tasks}) == 200
    assert all(t.id.startswith("wikihow_") for t in tasks)


def test_no_title_carries_the_action_list(tasks, raw):
    for t in tasks:
        assert t.title.startswith("How to") and "\n" not in t.title, t.id
        user = next(c["content"] for c in raw[t.id]["conversations"] if c["role"] == "user")
        actions = ast.literal_eval(user.split("The action list you can take:", 1)[1].strip())
        assert actions and not any(a.strip() and a.strip() in t.title for a in actions), t.id


def test_every_gold_has_steps_and_orders(tasks):
    for t in tasks:
        assert len(t.steps) >= 2, t.id
        n = len(t.steps) + 1
        assert all(0 <= a <= n and 0 <= b <= n for a, b in t.edges), t.id
        for upstream, graph in ((False, t.gold), (True, t.gold_upstream)):
            orders = W.gold_orders(graph, upstream=upstream)
            assert 1 <= len(orders) <= W.MAX_ORDERS, t.id
            want = sorted(graph.nodes if (upstream and len(graph.nodes) >= W.LIST_ORDER_FROM) else graph.steps)
            assert all(sorted(o) == want for o in orders), t.id


def test_the_clean_reading_is_the_node_block(tasks):
    # the benchmark's parser also reads the commentary some golds carry after their node list;
    # the clean reading never has more steps, and both agree where there is no commentary
    differ = [t for t in tasks if t.steps != t.gold_upstream.steps]
    assert all(len(t.steps) < len(t.gold_upstream.steps) for t in differ)
    assert all(t.gold_upstream.steps[: len(t.steps)] == t.steps for t in differ)
    assert len(differ) < len(tasks) // 10


def test_limit_and_ids(tasks):
    assert [t.id for t in W.load_tasks(PATH, limit=3)] == [t.id for t in tasks[:3]]
    pick = [tasks[5].id, tasks[1].id]
    assert [t.id for t in W.load_tasks(PATH, ids=pick)] == pick
    with pytest.raises(W.WorfbenchFormatError, match="no task"):
        W.load_tasks(PATH, ids=["wikihow_none"])
