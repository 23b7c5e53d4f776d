"""The plan-quality benchmark end to end: it runs, plans, measures and writes its JSON (no
particular scores are asserted: it is a measurement, not a timed or graded test)."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from agent.eval.runner import EvalConfig, run_eval
from agent.llm.scripted import ScriptedLLM


def _run(args, tmp_path, timeout):
    env = {**os.environ, "SWARM_MODEL_DIR": str(tmp_path / "models")}  # no installed Qwen
    return subprocess.run([sys.executable, "-m", "agent", "eval", *args], capture_output=True,
                          text=True, timeout=timeout, env=env)


def check_results(data, model, n_goals):
    assert data["model"] == model and len(data["goals"]) == n_goals
    for g in data["goals"]:
        assert g["plan"]["title"] == g["title"]
        m = g["metrics"]
        assert 0 <= m["quality"] <= 100 and 0 <= m["coverage"] <= 1
        assert sum(g["llm"]["requests"].values()) >= 2
        assert g["markdown"].startswith(f"# {g['title']}")
    assert "quality" in data["aggregate"]


async def test_the_central_loop_makes_every_kind_of_request():
    cfg = EvalConfig(goals=["online-bakery"], max_depth=2, max_children=3, proposals=2)
    data = await run_eval(ScriptedLLM(), cfg, model="scripted", say=lambda _m: None,
                          render=lambda plan: "# " + plan["title"])
    (g,) = data["goals"]
    assert set(g["llm"]["requests"]) == {"decompose", "score", "atomic", "execute", "synthesize"}
    assert g["metrics"]["depth"] == 2 and g["metrics"]["summary"] is True
    assert g["metrics"]["proposals_per_split"] > 1  # competing splits were scored
    assert g["llm"]["prompt_tokens"] > 0 and g["llm"]["completion_tokens"] > 0
    # atomic nodes stop early, the others reach max_depth
    reasons = {n["leaf_reason"] for n in g["plan"]["children"]} | {
        c["leaf_reason"] for n in g["plan"]["children"] for c in n["children"]}
    assert "max_depth" in reasons


def test_the_cli_writes_json_markdown_and_compares(tmp_path):
    out = tmp_path / "a.json"
    p = _run(["--llm", "scripted", "--goals", "online-bakery,todo-app", "--out", str(out),
              "--markdown-dir", str(tmp_path / "md")], tmp_path, 120)
    assert p.returncode == 0, p.stdout[-2000:] + p.stderr[-2000:]
    data = json.loads(out.read_text())
    check_results(data, "scripted", 2)
    assert (tmp_path / "md" / "todo-app.md").read_text().startswith("# Build a to-do list mobile app")
    assert "quality" in p.stdout and "mean" in p.stdout
    p = _run(["--llm", "scripted", "--goals", "online-bakery", "--out", str(tmp_path / "b.json"),
              "--compare", str(out)], tmp_path, 120)
    assert p.returncode == 0 and "1 common goals" in p.stdout


def test_an_unknown_goal_is_a_clear_error(tmp_path):
    p = _run(["--llm", "scripted", "--goals", "moon-base", "--out", str(tmp_path / "x.json")], tmp_path, 60)
    assert p.returncode == 2 and "no eval goal 'moon-base'" in p.stderr


@pytest.mark.slow
@pytest.mark.timeout(300)
def test_the_eval_runs_on_the_small_embedded_model(tmp_path):
    """CI's subset: one goal, one level, the fast SmolLM2 (about a minute on 2 cores)."""
    pytest.importorskip("xllamacpp", reason="the local-llm extra is not installed")
    out = tmp_path / "eval.json"
    p = _run(["--model", "smollm2-135m", "--goals", "online-bakery", "--max-depth", "1",
              "--max-children", "3", "--proposals", "1", "--out", str(out)], tmp_path, 280)
    assert p.returncode == 0, p.stdout[-3000:] + p.stderr[-3000:]
    data = json.loads(out.read_text())
    check_results(data, "smollm2-135m", 1)
    assert data["backend"] == "llamacpp"
    assert data["aggregate"]["prompt_tokens"] > 0 and data["aggregate"]["completion_tokens"] > 0
