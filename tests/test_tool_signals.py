"""`submit` and `observe --once` join the swarm as a temporary peer with a key and a log in a
temporary directory. Stopped by a signal (Ctrl-C, `kill`, `timeout`, CI, systemd, a closed
terminal; SIGINT also as a background job of a script, which starts with SIGINT ignored) they
leave the swarm, remove that directory and exit 128 + the signal's number with one line saying
so. Real processes; no peer to find (no mDNS, no SWARM_PEERS), so each waits until signalled."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
pytestmark = pytest.mark.timeout(120)

COMMANDS = {"submit": ["submit", "Plan a trip", "--timeout", "90"],
            "observe --once": ["observe", "--once", "--timeout", "90"]}
SIGNALS = {"SIGTERM": (signal.SIGTERM, False), "SIGHUP": (signal.SIGHUP, False),
           "SIGINT as a background job": (signal.SIGINT, True)}


def _ignore_sigint() -> None:  # what a non-interactive shell does for `cmd &`
    signal.signal(signal.SIGINT, signal.SIG_IGN)


@pytest.mark.parametrize("sig_case", list(SIGNALS))
@pytest.mark.parametrize("cmd", list(COMMANDS))
def test_a_stopped_tool_leaves_no_temporary_directory(cmd, sig_case, tmp_path):
    sig, background = SIGNALS[sig_case]
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    env = {k: v for k, v in os.environ.items() if not k.startswith("SWARM_")}
    env.update({"PYTHONPATH": str(ROOT), "TMPDIR": str(tmp), "SWARM_MDNS": "false",
                "SWARM_LOG_FORMAT": "json", "SWARM_LOG_LEVEL": "info"})
    err_path = tmp_path / "stderr"
    with open(err_path, "wb") as err:
        proc = subprocess.Popen([sys.executable, "-m", "agent", *COMMANDS[cmd]], env=env, cwd=tmp_path,
                                stdout=subprocess.PIPE, stderr=err,
                                preexec_fn=_ignore_sigint if background else None)
    try:
        # in the swarm: its directory made, its network up (it then waits for a peer)
        deadline = time.monotonic() + 60
        while not (list(tmp.glob("swarm-*")) and b'"net.started"' in err_path.read_bytes()):
            assert proc.poll() is None, err_path.read_text()[-2000:]
            assert time.monotonic() < deadline, err_path.read_text()[-2000:]
            time.sleep(0.1)
        assert (held := list(tmp.glob("swarm-*"))) and any(p.iterdir() for p in held)
        proc.send_signal(sig)
        code = proc.wait(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    text = err_path.read_text()
    assert code == 128 + sig, (code, text[-2000:])
    assert [ln for ln in text.splitlines() if ln.startswith("stopped by")] == \
        [f"stopped by {signal.Signals(sig).name}"], text[-2000:]
    assert "Traceback" not in text, text[-2000:]
    assert list(tmp.iterdir()) == [], "the temporary directory was left behind"
    assert proc.stdout.read() == b""
