"""The plan-quality benchmark end to end: the swarm's behaviours and one direct call plan each
goal, both are measured the same way and written in one shape, with their cost (no particular
scores are asserted: it is a measurement, not a timed or graded test)."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from agent.eval.report import blind_pairs, blind_tally
from agent.eval.runner import EvalConfig, run_eval
from agent.llm.scripted import ScriptedLLM


def _run(args, tmp_path, timeout):
    env = {**os.environ, "SWARM_MODEL_DIR": str(tmp_path / "models")}  # no installed Qwen
    return subprocess.run([sys.executable, "-m", "agent", "eval", *args], capture_output=True,
                          text=True, timeout=timeout, env=env)


def check_results(data, model, n_goals, planners=("single", "swarm")):
    assert data["model"] == model and len(data["goals"]) == n_goals
    for g in data["goals"]:
        for planner in planners:
            run = g["runs"][planner]
            assert run["error"] is None
            m = run["metrics"]
            assert 0 <= m["quality"] <= 100 and 0 <= m["coverage"] <= 1
            assert run["markdown"].startswith(f"# {g['title']}")
            assert run["prompt_tokens"] > 0 and run["completion_tokens"] > 0
    for planner in planners:
        assert "quality" in data["aggregate"][planner]


async def test_the_swarm_makes_every_kind_of_request_and_one_call_one():
    cfg = EvalConfig(goals=["online-bakery"], max_depth=2, max_children=3)
    data = await run_eval(ScriptedLLM(), cfg, model="scripted", say=lambda _m: None)
    (g,) = data["goals"]
    swarm, single = g["runs"]["swarm"], g["runs"]["single"]
    assert set(swarm["calls"]) == {"brief", "decompose", "rank", "atomic", "execute", "review", "synthesize"}
    assert single["calls"] == {"single": 1}
    tree = g["tree"]
    assert tree["brief"] and tree["state"] == "done" and tree["result"]["output"]
    assert swarm["metrics"]["synthesis_coverage"] == 1.0  # the root's answer takes up every part
    # the swarm's own rendering shows its brief; the shared shape leaves it out (it would name
    # the planner in a blind reading)
    assert "Working assumptions" in swarm["plan"] and "## Assumptions" not in swarm["markdown"]
    assert swarm["markdown"].startswith("# Launch a small online bakery\n\n## Overview")


def test_the_cli_writes_json_markdown_and_blind_pairs_and_resumes(tmp_path):
    out = tmp_path / "a.json"
    p = _run(["--llm", "scripted", "--goals", "online-bakery,todo-app", "--out", str(out),
              "--markdown-dir", str(tmp_path / "md"), "--blind-dir", str(tmp_path / "blind")], tmp_path, 300)
    assert p.returncode == 0, p.stdout[-2000:] + p.stderr[-2000:]
    data = json.loads(out.read_text())
    check_results(data, "scripted", 2)
    assert (tmp_path / "md" / "todo-app-swarm.md").read_text().startswith("# Build a to-do list mobile app")
    assert (tmp_path / "md" / "todo-app-single.md").read_text()
    key = json.loads((tmp_path / "blind-key.json").read_text())
    assert set(key) == {"online-bakery", "todo-app"}
    for goal, labels in key.items():
        assert sorted(labels.values()) == ["single", "swarm"]
        a = (tmp_path / "blind" / f"{goal}-A.md").read_text()
        assert "swarm" not in a.lower().split("\n", 1)[0]  # nothing says who wrote it
    assert "quality" in p.stdout and "mean" in p.stdout
    # a resumed run keeps what is done and adds the rest
    p = _run(["--llm", "scripted", "--goals", "online-bakery,todo-app,wedding", "--out", str(out), "--resume"],
             tmp_path, 300)
    assert p.returncode == 0, p.stderr[-2000:]
    again = json.loads(out.read_text())
    assert [g["id"] for g in again["goals"]] == ["online-bakery", "todo-app", "wedding"]
    assert again["goals"][0] == data["goals"][0]


def test_the_blind_key_and_tally():
    data = {"goals": [{"id": g, "runs": {"single": {"markdown": "# s"}, "swarm": {"markdown": "# w"}}}
                      for g in ("a", "b", "c")]}
    import tempfile
    from pathlib import Path

    with tempfile.TemporaryDirectory() as d:
        key = blind_pairs(data, Path(d) / "pairs", seed=3)
        assert blind_pairs(data, Path(d) / "again", seed=3) == key  # the order is reproducible
    verdicts = {g: next(label for label, who in key[g].items() if who == "swarm") for g in ("a", "b")}
    verdicts["c"] = "tie"
    assert blind_tally(key, verdicts)["wins"] == {"swarm": 2, "single": 0, "tie": 1}


def test_an_unknown_goal_or_planner_is_a_clear_error(tmp_path):
    p = _run(["--llm", "scripted", "--goals", "moon-base", "--out", str(tmp_path / "x.json")], tmp_path, 60)
    assert p.returncode == 2 and "no eval goal 'moon-base'" in p.stderr
    p = _run(["--llm", "scripted", "--planners", "oracle", "--out", str(tmp_path / "x.json")], tmp_path, 60)
    assert p.returncode == 2 and "--planners" in p.stderr


@pytest.mark.slow
@pytest.mark.timeout(1300)
def test_the_eval_runs_on_the_small_embedded_model(tmp_path):
    """CI's subset: one goal, one level, the fast SmolLM2, both planners."""
    pytest.importorskip("xllamacpp", reason="the local-llm extra is not installed")
    out = tmp_path / "eval.json"
    p = _run(["--model", "smollm2-135m", "--goals", "online-bakery", "--max-depth", "1",
              "--max-children", "2", "--single-max-tokens", "300", "--out", str(out)], tmp_path, 1280)
    assert p.returncode == 0, p.stdout[-3000:] + p.stderr[-3000:]
    data = json.loads(out.read_text())
    # the embedded model served once, with parallel slots (as the demo has it)
    assert data["backend"] == "llamacpp-server" and data["model"] == "smollm2-135m"
    (g,) = data["goals"]
    assert g["runs"]["single"]["completion_tokens"] > 0
    assert g["runs"]["swarm"]["error"] is None and g["tree"]["state"] == "done"
