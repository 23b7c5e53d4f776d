"""WorFBench node F1 with an embedder whose cosines each test sets: order, threshold,
one-to-one maximum-weight matching, gold DAG orders, empty plans, and the benchmark's quirks
(k starts at 1; its parser's reading of the gold)."""

from __future__ import annotations

import math

import pytest

pytest.importorskip("numpy")
pytest.importorskip("networkx")

from worfbench_fakes import FakeEmbedder, answer_text, make_task, record  # noqa: E402

from agent.eval import node_f1  # noqa: E402
from agent.eval.node_f1 import PRF, match, node_f1 as score, ordered_count, prf  # noqa: E402
from agent.eval.worfbench import (  # noqa: E402
    Graph, WorfbenchFormatError, gold_orders, parse_clean, parse_upstream, task_from_record, task_title,
)

A, B, C, D = "Gather the tools.", "Cut the board.", "Sand the edges.", "Paint the board."


def f1(k: int, n_pred: int, n_gold: int) -> float:
    p, r = k / n_pred, k / n_gold
    return 2 * p * r / (p + r)


def test_the_same_steps_in_the_same_order_score_one():
    s = score([A, B, C], make_task([A, B, C]), FakeEmbedder())
    for v in ("upstream", "strict"):
        assert (s[v].precision, s[v].recall, s[v].f1, s[v].k) == (1.0, 1.0, 1.0, 3)


def test_order_matters_reversed_steps_count_once():
    task = make_task([A, B, C])
    rev = score([C, B, A], task, FakeEmbedder())
    assert rev["strict"].k == 1 and rev["strict"].f1 == pytest.approx(1 / 3)
    swapped = score([A, C, B], task, FakeEmbedder())
    assert swapped["strict"].k == 2 and swapped["strict"].f1 == pytest.approx(2 / 3)


def test_a_gold_dag_accepts_any_of_its_orders():
    # 1 -> {2, 3} -> 4: B and C may come in either order, D only after both
    edges = [(0, 1), (1, 2), (1, 3), (2, 4), (3, 4), (4, 5)]
    task = make_task([A, B, C, D], edges)
    assert score([A, C, B, D], task, FakeEmbedder())["strict"].k == 4
    assert score([A, B, C, D], task, FakeEmbedder())["strict"].k == 4
    assert score([A, D, B, C], task, FakeEmbedder())["strict"].k == 3


def test_similar_wording_matches_above_the_threshold_only():
    emb = FakeEmbedder()
    emb.like(A, "Collect your tools.", 0.61)
    emb.like(B, "Saw the plank.", 0.59)
    task = make_task([A, B])
    s = score(["Collect your tools.", "Saw the plank."], task, emb)
    assert s["strict"].k == 1 and s["strict"].precision == 0.5 and s["strict"].recall == 0.5


def test_matching_is_one_to_one():
    emb = FakeEmbedder()
    emb.like(A, "Gather all of the tools.", 0.95)
    s = score([A, "Gather all of the tools."], make_task([A, B]), emb)
    assert s["strict"].k == 1
    assert (s["strict"].precision, s["strict"].recall) == (0.5, 0.5)


def test_matching_maximises_total_weight_not_the_best_pair():
    # p is closest to A (0.78) but also like B (0.62); q is like A only (0.75). Taking the best
    # pair first (p-A) leaves q unmatched: one match. Maximum weight pairs p-B and q-A: two.
    emb = FakeEmbedder()
    emb.mix("p", {A: 0.78, B: 0.62})
    emb.like(A, "q", 0.75)
    s = score(["q", "p"], make_task([A, B]), emb)
    assert s["strict"].k == 2 and s["strict"].f1 == 1.0


def test_an_empty_plan_scores_zero_in_both_variants_without_embedding():
    emb = FakeEmbedder()
    s = score([], make_task([A, B]), emb)
    assert s["upstream"] == s["strict"] == PRF(0.0, 0.0, 0.0, 0, 0, 2)
    assert emb.calls == []
    assert score(["  ", ""], make_task([A, B]), emb)["strict"].f1 == 0.0


def test_upstream_counts_one_when_nothing_matches():
    s = score(["Unrelated one.", "Unrelated two.", "Unrelated three."], make_task([A, B, C, D]), FakeEmbedder())
    assert s["strict"].k == 0 and s["strict"].f1 == 0.0
    up = s["upstream"]
    assert up.k == 1
    assert (up.precision, up.recall) == (pytest.approx(1 / 3), pytest.approx(1 / 4))
    assert up.f1 == pytest.approx(2 / 7)


def test_upstream_adds_nothing_once_something_matches():
    s = score([A, "Unrelated."], make_task([A, B]), FakeEmbedder())
    assert s["upstream"].k == s["strict"].k == 1


def test_ordered_count_is_the_longest_increasing_run():
    m = {0: 3, 1: 0, 2: 1, 4: 2}  # position 3 unmatched
    assert ordered_count(m, 5, start_at_one=False) == 3  # 0, 1, 2 at positions 1, 2, 4
    assert ordered_count({}, 4, start_at_one=False) == 0
    assert ordered_count({}, 4, start_at_one=True) == 1
    assert ordered_count({}, 0, start_at_one=True) == 0


def test_match_keeps_only_pairs_above_the_threshold():
    import numpy as np

    sim = np.array([[0.9, 0.0], [0.6, 0.61]])
    assert match(sim) == {0: 0, 1: 1}
    assert match(np.array([[0.6, 0.59]])) == {}


def test_prf_and_mean():
    assert prf(2, 4, 5).f1 == pytest.approx(f1(2, 4, 5))
    m = node_f1.mean([prf(1, 1, 1), prf(0, 3, 3)])
    assert m == {"precision": 0.5, "recall": 0.5, "f1": 0.5, "tasks": 2}


# --------------------------------------------------------------------- the benchmark's reading


def test_upstream_gold_of_ten_nodes_keeps_start_and_end_as_steps():
    steps = [f"Step number {i}." for i in range(1, 9)]  # 8 steps + START + END = 10 nodes
    task = make_task(steps)
    assert gold_orders(task.gold_upstream, upstream=True) == [("START", *steps, "END")]
    s = score(steps, task, FakeEmbedder())
    assert s["strict"].recall == 1.0
    assert s["upstream"].recall == pytest.approx(8 / 10) and s["upstream"].precision == 1.0


def test_upstream_gold_reads_numbered_commentary_as_more_steps():
    commentary = ("Here is why:\n\n1. **Gather the tools** - first.\n2. **Cut the board** - then.\n\n")
    task = make_task([A, B], commentary=commentary)
    assert task.steps == (A, B)
    assert task.gold_upstream.steps == (A, B, "**Gather the tools** - first.", "**Cut the board** - then.")
    s = score([A, B], task, FakeEmbedder())
    assert s["strict"].recall == 1.0 and s["upstream"].recall == 0.5


def test_upstream_drops_predicted_start_and_end():
    s = score(["START", A, B, "END"], make_task([A, B]), FakeEmbedder())
    assert s["upstream"].precision == 1.0
    assert s["strict"].precision == 0.5


def test_gold_orders_are_capped_at_twenty():
    steps = [f"Parallel {i}." for i in range(1, 6)]  # 5 independent steps: 120 orders
    edges = [(0, i) for i in range(1, 6)] + [(i, 6) for i in range(1, 6)]
    orders = gold_orders(make_task(steps, edges).gold, upstream=False)
    assert len(orders) == 20 and all(sorted(o) == sorted(steps) for o in orders)
    assert len(set(orders)) == 20


def test_a_gold_with_a_cycle_falls_back_to_its_list_order():
    g = Graph(("START", A, B, "END"), ((0, 1), (1, 2), (2, 1), (2, 3)))
    assert gold_orders(g, upstream=False) == [(A, B)]


def test_parse_upstream_as_the_benchmark():
    text = "Node:\n1: Cut.\n2. Sand.\nEdge: (START, 1) (1,2) (2 ,END)"
    g = parse_upstream(text)
    assert g.nodes == ("START", "Cut.", "Sand.", "END") and g.edges == ((0, 1), (1, 2), (2, 3))
    assert parse_upstream("1: Cut.\n(START,1)") is None  # no "Node"
    assert parse_upstream("Node:\n1: Cut.") is None  # no edge


def test_parse_clean_reads_the_node_block_only():
    g = parse_clean(answer_text([A, B], commentary="Then:\n1. again\n"))
    assert g.steps == (A, B) and g.edges == ((0, 1), (1, 2), (2, 3))
    with pytest.raises(WorfbenchFormatError):
        parse_clean("no nodes here")


def test_the_title_never_carries_the_action_list():
    task = task_from_record(record([A], title="How to Fix a Chair", actions=("Glue the leg.", "Sand it.")))
    assert task.title == "How to Fix a Chair"
    assert "Glue" not in repr(task)
    with pytest.raises(WorfbenchFormatError):
        task_title("How to Fix a Chair")  # no "Task:" line
    with pytest.raises(WorfbenchFormatError):
        task_from_record({"id": "x", "conversations": []})


def test_upstream_text_scores_a_raw_answer_with_the_benchmarks_parser():
    task = make_task([A, B])
    good = node_f1.upstream_text_f1(f"Node:\n1: {A}\n2: {B}\nEdge: (START,1) (1,2) (2,END)", task, FakeEmbedder())
    assert good.f1 == 1.0
    no_edges = node_f1.upstream_text_f1(f"Node:\n1: {A}\n2: {B}\n", task, FakeEmbedder())
    assert no_edges.f1 == 0.0
    assert math.isclose(score([A, B], task, FakeEmbedder())["upstream"].f1, good.f1)


def test_missing_data_is_one_clear_error(tmp_path, monkeypatch):
    from agent.eval.worfbench import ENV_DIR, WorfbenchMissing, load_tasks

    monkeypatch.setenv(ENV_DIR, str(tmp_path))
    with pytest.raises(WorfbenchMissing, match=ENV_DIR):
        load_tasks()
    (tmp_path / "wikihow_dev.json").write_text("{not json")
    with pytest.raises(WorfbenchFormatError, match="JSON"):
        load_tasks()
