"""`make up` ends with `mk/llm_in_use.py`: the LLM the agents really run, read from an agent's
own `llm.selected` log line through the compose CLI (faked here), not from what the Makefile
was told. podman-compose prefixes and colours each line; the record is found all the same."""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
_spec = importlib.util.spec_from_file_location("swarm_llm_in_use", ROOT / "mk" / "llm_in_use.py")
llm_in_use = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(llm_in_use)  # type: ignore[union-attr]

SELECTED = {"event": "llm.selected", "backend": "openai", "model": "smollm2-135m",
            "host": "http://llm:8088/v1", "level": "info"}


def podman_line(rec: dict) -> str:
    return f"\x1b[1;32m[decomposer-1] | \x1b[0m{json.dumps(rec)}"


def test_the_record_is_read_through_podmans_prefix_and_colours():
    log = "\n".join([
        "[decomposer-1] | starting",
        '[decomposer-1] | {"event": "net.started", "level": "info"}',
        '[decomposer-1] | {"event": "llm.selected", broken json',
        podman_line(SELECTED),
        podman_line({**SELECTED, "model": "later"}),
    ])
    rec = llm_in_use.find(log)
    assert rec == SELECTED
    assert llm_in_use.describe(rec) == "llm: openai model=smollm2-135m at http://llm:8088/v1"
    assert llm_in_use.find("nothing here\n{}") is None


def test_the_scripted_double_is_named_as_what_it_is():
    line = llm_in_use.describe({"event": "llm.selected", "backend": "scripted", "latency": 10})
    assert line.startswith("llm: scripted (a test double") and "after 10 s each" in line
    assert "model=" not in line  # the Makefile's model is not what runs


def run(tmp_path: Path, log: str, wait: float) -> subprocess.CompletedProcess:
    (tmp_path / "log.txt").write_text(log)
    fake = tmp_path / "compose.py"
    fake.write_text("import sys; from pathlib import Path\n"
                    "assert sys.argv[1:] == ['logs', 'decomposer-1'], sys.argv\n"
                    f"sys.stdout.write(Path({str(tmp_path / 'log.txt')!r}).read_text())\n")
    return subprocess.run([sys.executable, str(ROOT / "mk" / "llm_in_use.py"), "--compose",
                           f"{sys.executable} {fake}", "--wait", str(wait)],
                          capture_output=True, text=True, timeout=60)


def test_make_up_prints_what_the_agent_logged(tmp_path):
    r = run(tmp_path, podman_line({**SELECTED, "backend": "ollama", "model": "llama3.2:1b",
                                   "host": "http://ollama:11434"}), wait=5)
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "llm: ollama model=llama3.2:1b at http://ollama:11434"


def test_an_agent_that_has_not_chosen_yet_is_said_so(tmp_path):
    r = run(tmp_path, '[decomposer-1] | {"event": "net.started"}\n', wait=0)
    assert "decomposer-1 has not picked its LLM yet" in r.stdout, r.stdout + r.stderr
