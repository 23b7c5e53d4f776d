"""The WorFBench driver: planners see the title only, results are written per task and
resumed, failures are recorded, several planners are compared on the same tasks."""

from __future__ import annotations

import json

import pytest

pytest.importorskip("numpy")
pytest.importorskip("networkx")

from worfbench_fakes import FakeEmbedder, make_task  # noqa: E402

from agent.eval.worfbench_run import (  # noqa: E402
    PlannerOutput, RunFileMismatch, format_summary, read_results, run_worfbench,
)

STEPS = {
    "w1": ["Gather the tools.", "Cut the board.", "Sand the edges."],
    "w2": ["Boil the water.", "Add the pasta.", "Drain the pasta."],
    "w3": ["Open the app.", "Create an account.", "Verify your email."],
}


def tasks():
    return [make_task(s, id=i, title=f"How to Do Thing {i}", actions=("Secret candidate step.",))
            for i, s in STEPS.items()]


class Recorder:
    """A planner that answers from a table keyed by title, and remembers what it was asked."""

    def __init__(self, answers, seconds=2.0, tokens=100, fail_on=()):
        self.answers, self.seconds, self.tokens, self.fail_on = answers, seconds, tokens, set(fail_on)
        self.asked: list[str] = []

    def __call__(self, title: str) -> PlannerOutput:
        self.asked.append(title)
        if title in self.fail_on:
            raise RuntimeError("the model server went away")
        steps = self.answers[title]
        return PlannerOutput(steps=list(steps), steps_with_results=[s + " Details." for s in steps],
                             seconds=self.seconds, tokens=self.tokens)


def gold_planner(**kw):
    return Recorder({f"How to Do Thing {i}": s for i, s in STEPS.items()}, **kw)


def reversed_planner(**kw):
    return Recorder({f"How to Do Thing {i}": s[::-1] for i, s in STEPS.items()}, **kw)


def test_the_planner_gets_the_title_and_nothing_else(tmp_path):
    p = gold_planner()
    run_worfbench(p, tasks(), FakeEmbedder(), out=tmp_path / "r.jsonl", say=None)
    assert p.asked == ["How to Do Thing w1", "How to Do Thing w2", "How to Do Thing w3"]


def test_per_task_lines_and_summary(tmp_path):
    out = tmp_path / "r.jsonl"
    printed = []
    summary = run_worfbench({"gold": gold_planner(), "reversed": reversed_planner(seconds=5.0)}, tasks(),
                            FakeEmbedder(), out=out, say=printed.append)
    meta, rows = read_results(out)
    assert meta["kind"] == "meta" and meta["threshold"] == 0.6
    assert len(rows) == 6
    row = next(r for r in rows if r["planner"] == "reversed" and r["task"] == "w2")
    assert row["predicted"] == STEPS["w2"][::-1] and row["gold"] == STEPS["w2"]
    assert row["scores"]["steps"]["strict"]["k"] == 1 and row["seconds"] == 5.0 and row["tokens"] == 100
    assert row["scores"]["with_results"]["strict"]["f1"] < 1.0  # "... Details." is another text here
    g, r = summary["common"]["gold"], summary["common"]["reversed"]
    assert g["tasks"] == r["tasks"] == 3
    assert g["steps.strict"]["f1"] == 1.0 and r["steps.strict"]["f1"] == pytest.approx(1 / 3, abs=1e-4)
    assert g["seconds_per_task"] == 2.0 and r["seconds_per_task"] == 5.0
    table = printed[-1]
    assert "gold" in table and "reversed" in table and "3 tasks every planner has" in table
    assert table == format_summary(summary)


def test_a_run_resumes_where_it_stopped(tmp_path):
    out = tmp_path / "r.jsonl"
    first = gold_planner()
    run_worfbench(first, tasks(), FakeEmbedder(), limit=2, out=out, say=None)
    assert len(first.asked) == 2
    again = gold_planner()
    summary = run_worfbench(again, tasks(), FakeEmbedder(), out=out, say=None)
    assert again.asked == ["How to Do Thing w3"]
    assert summary["all"]["planner"]["tasks"] == 3
    lines = out.read_text().splitlines()
    assert sum(1 for ln in lines if json.loads(ln)["kind"] == "meta") == 1 and len(lines) == 4


def test_a_line_cut_by_a_crash_is_run_again(tmp_path):
    out = tmp_path / "r.jsonl"
    run_worfbench(gold_planner(), tasks(), FakeEmbedder(), limit=1, out=out, say=None)
    with out.open("a") as fh:
        fh.write('{"kind": "result", "planner": "planner", "task": "w2", "pre')
    p = gold_planner()
    run_worfbench(p, tasks(), FakeEmbedder(), out=out, say=None)
    assert p.asked == ["How to Do Thing w2", "How to Do Thing w3"]
    _, rows = read_results(out)
    assert sorted(r["task"] for r in rows) == ["w1", "w2", "w3"]  # the cut line did not eat the next
    p3 = gold_planner()
    run_worfbench(p3, tasks(), FakeEmbedder(), out=out, say=None)
    assert p3.asked == []


def test_a_failing_planner_is_recorded_scored_zero_and_the_run_goes_on(tmp_path):
    out = tmp_path / "r.jsonl"
    p = gold_planner(fail_on={"How to Do Thing w2"})
    summary = run_worfbench(p, tasks(), FakeEmbedder(), out=out, say=None)
    _, rows = read_results(out)
    bad = next(r for r in rows if r["task"] == "w2")
    assert "RuntimeError: the model server went away" in bad["error"]
    assert bad["predicted"] == [] and bad["scores"]["steps"]["upstream"]["f1"] == 0.0
    f = summary["common"]["planner"]
    assert f["errors"] == 1 and f["steps.strict"]["f1"] == pytest.approx(2 / 3, abs=1e-4)
    # resumed as done by default; retried when asked
    p2 = gold_planner()
    run_worfbench(p2, tasks(), FakeEmbedder(), out=out, say=None)
    assert p2.asked == []
    summary = run_worfbench(p2, tasks(), FakeEmbedder(), out=out, retry_errors=True, say=None)
    assert p2.asked == ["How to Do Thing w2"] and summary["common"]["planner"]["errors"] == 0
    assert summary["common"]["planner"]["steps.strict"]["f1"] == 1.0


def test_a_planner_returning_the_wrong_type_is_an_error_not_a_crash(tmp_path):
    summary = run_worfbench(lambda title: ["a list"], tasks()[:1], FakeEmbedder(), out=tmp_path / "r.jsonl", say=None)
    assert summary["common"]["planner"]["errors"] == 1


def test_comparison_reads_only_tasks_every_planner_has(tmp_path):
    out = tmp_path / "r.jsonl"
    run_worfbench({"a": gold_planner()}, tasks(), FakeEmbedder(), out=out, say=None)
    summary = run_worfbench({"a": gold_planner(), "b": reversed_planner()}, tasks(), FakeEmbedder(),
                            limit=1, out=out, say=None)
    assert summary["common_tasks"] == 1 and summary["common"]["a"]["tasks"] == 1


def test_a_file_of_another_run_is_refused(tmp_path):
    out = tmp_path / "r.jsonl"
    run_worfbench(gold_planner(), tasks(), FakeEmbedder(), out=out, say=None)
    with pytest.raises(RunFileMismatch, match="threshold"):
        run_worfbench(gold_planner(), tasks(), FakeEmbedder(), out=out, threshold=0.7, say=None)
    changed = [make_task(["Another gold."], id="w1", title="How to Do Thing w1")]
    with pytest.raises(RunFileMismatch, match="w1"):
        run_worfbench(gold_planner(), changed, FakeEmbedder(), out=out, say=None)


def test_without_an_output_file_nothing_is_written(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    summary = run_worfbench(gold_planner(), tasks(), FakeEmbedder(), say=None)
    assert summary["common"]["planner"]["steps.upstream"]["f1"] == 1.0
    assert list(tmp_path.iterdir()) == []
