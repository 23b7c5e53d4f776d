"""`demo --out plan.md --json plan.json` writes the final plan, and the demo names its LLM."""

from __future__ import annotations

import json
import re
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
    # off a terminal (here: a pipe) the plan's progress is one plain line per change of the
    # counts, with the time and, once a node is done, the estimate; the last line: all done
    nodes = sum(1 for _ in walk(tree["goals"][0]))
    progress = [ln for ln in p.stdout.splitlines() if re.match(r"\s*\d+\.\ds  ", ln)]
    assert len(progress) >= 3, p.stdout[-3000:]
    assert progress[0].split("s  ", 1)[1].strip() == "open=1", progress
    assert progress[-1].split("s  ", 1)[1].strip() == f"done={nodes}", progress
    assert any(ln.endswith("left (estimate; the tree may still grow)") for ln in progress), progress
    assert all(ln.endswith("grow)") for ln in progress if "left (" in ln), progress  # never wrapped
    assert len(set(progress)) == len(progress)  # a line per change, not per poll


def walk(node: dict):
    yield node
    for c in node.get("children") or []:
        yield from walk(c)


def test_the_demo_shows_its_progress_as_a_live_bar_on_a_terminal(tmp_path):
    """On a terminal (a pseudo-terminal here) the demo's progress is rich's live bar: nodes
    done of those known, the counts, elapsed time, the estimate; it ends with every node done."""
    import os
    import pty
    import threading

    master, slave = pty.openpty()
    env = {k: v for k, v in os.environ.items() if not k.startswith("SWARM_")}
    env.update({"TERM": "xterm-256color", "COLUMNS": "200", "LINES": "50", "SWARM_MDNS": "false"})
    proc = subprocess.Popen(
        [sys.executable, "-m", "agent", "demo", "Launch a small online bakery", "--llm", "scripted",
         "--max-depth", "1", "--decomposers", "1", "--scorers", "1", "--executors", "1", "--no-web",
         "--json", str(tmp_path / "plan.json"), "--out-dir", str(tmp_path / "run"), "--timeout", "120"],
        stdin=slave, stdout=slave, stderr=slave, env=env, close_fds=True)
    os.close(slave)
    chunks: list[bytes] = []

    def drain() -> None:  # a pty that nobody reads stops the writer once its buffer is full
        while True:
            try:
                data = os.read(master, 65536)
            except OSError:  # EIO: every writer closed its end
                return
            if not data:
                return
            chunks.append(data)

    reader = threading.Thread(target=drain, daemon=True)
    reader.start()
    try:
        code = proc.wait(timeout=280)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        reader.join(timeout=10)
        os.close(master)
    out = b"".join(chunks).decode(errors="replace")
    assert code == 0, out[-3000:]
    nodes = sum(1 for _ in walk(json.loads((tmp_path / "plan.json").read_text())["goals"][0]))
    text = re.sub(r"\x1b\[[0-9;?]*[A-Za-z]", "", out)  # the bar redraws in place with escapes
    assert "\x1b[" in out, "no terminal output: the bar was not live"
    assert "━" in text and "elapsed" in text, text[-3000:]
    assert re.search(r"\d+/\d+ nodes done .*left \(estimate", text), text[-3000:]
    assert f"{nodes}/{nodes} nodes done done={nodes} elapsed" in text, text[-3000:]  # the last draw
    # not the plain lines a pipe gets
    assert not re.search(r"^\s*\d+\.\ds  open=1$", text, re.M), text[-3000:]
