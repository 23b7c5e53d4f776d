"""`pip install .` installs the CLI as a `swarm` command (README: Other commands): the same
commands as `python -m agent`."""

import os
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


def test_the_swarm_command_is_the_cli():
    scripts = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["scripts"]
    assert scripts == {"swarm": "agent.cli:main"}
    readme = (ROOT / "README.md").read_text()
    assert "`swarm` command" in readme and "`swarm demo`" in readme


def test_the_installed_swarm_command_runs():
    exe = Path(sys.executable).parent / "swarm"
    if not exe.exists():
        pytest.skip("no `swarm` script beside this Python (the package is not installed here)")
    env = {**os.environ, "PYTHONPATH": str(ROOT), "COLUMNS": "120"}
    r = subprocess.run([str(exe), "--help"], capture_output=True, text=True, env=env, timeout=60)
    assert r.returncode == 0, r.stderr
    for command in ("demo", "submit", "observe", "run", "simulate", "replay", "models"):
        assert command in r.stdout, r.stdout
