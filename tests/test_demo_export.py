"""`demo --out plan.md --json plan.json` writes the final plan, and the demo names its LLM."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

pytestmark = pytest.mark.timeout(300)


def test_demo_exports_markdown_and_json_and_states_its_llm(tmp_path):
    p = subprocess.run(
        [sys.executable, "-m", "agent", "demo", "Launch a small online bakery", "--llm", "scripted",
         "--max-depth", "1", "--decomposers", "1", "--scorers", "1", "--executors", "1",
         "--out", str(tmp_path / "plan.md"), "--json", str(tmp_path / "plan.json"),
         "--out-dir", str(tmp_path / "run"), "--timeout", "120"],
        capture_output=True, text=True, timeout=280)
    assert p.returncode == 0, p.stdout[-2000:] + p.stderr[-2000:]
    md = (tmp_path / "plan.md").read_text()
    assert md.startswith("# Launch a small online bakery\n") and "## 1. " in md
    tree = json.loads((tmp_path / "plan.json").read_text())
    assert tree["goals"][0]["title"] == "Launch a small online bakery" and tree["digest"]
    assert "with LLM scripted" in " ".join(p.stdout.split())
