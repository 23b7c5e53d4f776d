"""`python -m agent demo` stops every process it started however it is stopped: SIGINT (also
as a background job of a script, where SIGINT starts ignored), SIGTERM (kill, timeout, CI,
systemd), and even SIGKILL (the agents get SIGTERM when the demo dies). Run as a script runs
it; the agents are found by their environment (SWARM_DATA_DIR under the demo's directory)."""

from __future__ import annotations

import os
import shlex
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
pytestmark = [pytest.mark.slow, pytest.mark.timeout(180)]


def agents_of(out: Path) -> list[int]:
    """Pids of live processes whose SWARM_DATA_DIR lies under ``out``."""
    want = f"SWARM_DATA_DIR={out}/".encode()
    found = []
    for d in Path("/proc").iterdir():
        if not d.name.isdigit():
            continue
        try:
            env = (d / "environ").read_bytes()
            state = (d / "stat").read_text().rsplit(")", 1)[1].split()[0]
        except OSError:
            continue
        if state != "Z" and any(v.startswith(want) for v in env.split(b"\0")):
            found.append(int(d.name))
    return found


def demo_argv(out: Path) -> list[str]:
    return [sys.executable, "-m", "agent", "demo", "Plan a weekend in Lisbon", "--llm", "scripted",
            "--scripted-latency", "5", "--decomposers", "1", "--scorers", "1", "--executors", "1",
            "--observers", "1", "--no-web", "--out-dir", str(out), "--timeout", "120"]


def env() -> dict[str, str]:
    e = {k: v for k, v in os.environ.items() if not k.startswith("SWARM_")}
    e.update({"PYTHONPATH": str(ROOT), "SWARM_MDNS": "false"})
    return e


def wait_for(pred, timeout: float, what: str):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        got = pred()
        if got:
            return got
        time.sleep(0.2)
    raise AssertionError(f"timed out after {timeout}s: {what}")


def started(out_file: Path, out: Path) -> list[int]:
    def ready() -> bool:
        text = out_file.read_text(errors="replace") if out_file.exists() else ""
        assert "rc=" not in text and "demo failed" not in text, text[-2000:]
        return "posting the goal" in text

    wait_for(ready, 90, "the demo's agents ready")
    return wait_for(lambda: len(agents_of(out)) == 4 and agents_of(out), 10, "4 agents")


@pytest.mark.parametrize("sig", ["INT", "TERM", "HUP"])
def test_a_signal_to_the_demo_as_a_background_job_of_a_script_stops_every_agent(tmp_path, sig):
    out = tmp_path / "demo"
    log = tmp_path / "demo.out"
    pidfile = tmp_path / "pid"
    # a non-interactive shell starts background jobs with SIGINT ignored
    script = f'{shlex.join(demo_argv(out))} > {log} 2>&1 & echo $! > {pidfile}; wait $!; echo "rc=$?" >> {log}'
    shell = subprocess.Popen(["bash", "-c", script], env=env(), stdin=subprocess.DEVNULL)
    try:
        pids = started(log, out)
        demo = int(pidfile.read_text())
        os.kill(demo, getattr(signal, f"SIG{sig}"))
        shell.wait(timeout=40)
        text = log.read_text(errors="replace")
        assert f"rc={128 + getattr(signal, f'SIG{sig}')}" in text, text[-2000:]
        assert f"stopped by SIG{sig}: every agent it started is stopped" in text, text[-2000:]
        assert "Traceback" not in text, text[-3000:]
        left = agents_of(out)
        assert not left, f"agents left running after SIG{sig}: {left} (started {pids})"
    finally:
        for p in agents_of(out):
            os.kill(p, signal.SIGKILL)
        if shell.poll() is None:
            shell.kill()


def test_timeout_stops_the_demo_and_every_agent(tmp_path):
    """`timeout 25 python -m agent demo ...`, as CI or a cron job would run it."""
    out = tmp_path / "demo"
    log = tmp_path / "demo.out"
    with open(log, "wb") as fh:
        p = subprocess.Popen(["timeout", "-s", "TERM", "25"] + demo_argv(out), env=env(),
                             stdout=fh, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
        try:
            started(log, out)
            assert p.wait(timeout=60) == 124  # timeout's own code: it had to stop the demo
            assert not agents_of(out), agents_of(out)
        finally:
            for q in agents_of(out):
                os.kill(q, signal.SIGKILL)
            if p.poll() is None:
                p.kill()


def test_the_agents_die_with_a_demo_that_is_killed_outright(tmp_path):
    out = tmp_path / "demo"
    log = tmp_path / "demo.out"
    with open(log, "wb") as fh:
        p = subprocess.Popen(demo_argv(out), env=env(), stdout=fh, stderr=subprocess.STDOUT,
                             stdin=subprocess.DEVNULL)
        try:
            started(log, out)
            p.kill()  # SIGKILL: no handler runs; the kernel tells the agents (parent-death signal)
            p.wait(timeout=10)
            wait_for(lambda: not agents_of(out), 20, "every agent gone after the demo was killed")
        finally:
            for q in agents_of(out):
                os.kill(q, signal.SIGKILL)
