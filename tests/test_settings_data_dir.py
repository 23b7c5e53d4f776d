"""SWARM_DATA_DIR templates: {hostname} and {slot}, each directory held by one live process.

This is what lets one Compose volume keep every agent's key and log across re-creation of its
container (docker-compose.yml: SWARM_DATA_DIR=/data/{hostname} for the named services,
/data/scorer-{slot} for scaled replicas, whose hostname is a new container id every time)."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from agent.settings import DATA_DIR_LOCK, SettingsError, expand_data_dir, load_settings

ROOT = Path(__file__).resolve().parent.parent
HOLDER = (
    "import sys\n"
    "from agent.settings import load_settings\n"
    "print(load_settings(_env_file=None, data_dir=sys.argv[1]).data_dir, flush=True)\n"
    "sys.stdin.read()\n"  # hold the directory until the test closes stdin or kills us
)


class Holder:
    """Another agent process that resolves a template and keeps its directory."""

    def __init__(self, template: str):
        self.proc = subprocess.Popen([sys.executable, "-c", HOLDER, template], cwd=ROOT,
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     stderr=subprocess.PIPE, text=True)
        line = self.proc.stdout.readline()  # blocks until it holds the lock (or died)
        if not line:
            raise AssertionError(f"holder failed: {self.proc.stderr.read()[-2000:]}")
        self.path = Path(line.strip())

    def kill(self) -> None:
        """SIGKILL: no clean-up code runs; only the kernel can release the lock."""
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGKILL)
        self.proc.wait(timeout=30)
        for f in (self.proc.stdin, self.proc.stdout, self.proc.stderr):
            f.close()


@pytest.fixture
def holders():
    started: list[Holder] = []

    def start(template: str) -> Holder:
        h = Holder(template)
        started.append(h)
        return h

    yield start
    for h in started:
        h.kill()


def test_a_plain_path_is_left_alone(tmp_path):
    s = load_settings(_env_file=None, data_dir=str(tmp_path / "plain"))
    assert s.data_dir == tmp_path / "plain"
    assert not (tmp_path / "plain").exists()  # nothing created, nothing locked


def test_hostname_is_expanded_and_held(tmp_path):
    s = load_settings(_env_file=None, data_dir=str(tmp_path / "{hostname}"))
    assert s.data_dir == tmp_path / socket.gethostname()
    owner = (s.data_dir / DATA_DIR_LOCK).read_text().split()
    assert owner == [socket.gethostname(), str(os.getpid())]
    # loading the settings again in the same process gives the same directory
    assert load_settings(_env_file=None, data_dir=str(tmp_path / "{hostname}")).data_dir == s.data_dir


def test_a_held_hostname_directory_is_refused(tmp_path, holders):
    other = holders(str(tmp_path / "agents" / "{hostname}"))
    assert other.path == tmp_path / "agents" / socket.gethostname()
    with pytest.raises(SettingsError) as info:
        load_settings(_env_file=None, data_dir=str(tmp_path / "agents" / "{hostname}"))
    msg = str(info.value)
    assert "SWARM_DATA_DIR" in msg and "in use by another agent" in msg
    assert f"{socket.gethostname()} {other.proc.pid}" in msg and "{slot}" in msg


def test_slots_go_to_the_lowest_free_one_and_come_back_after_a_kill(tmp_path, holders):
    template = str(tmp_path / "scorer-{slot}")
    a, b, c = holders(template), holders(template), holders(template)
    assert [h.path.name for h in (a, b, c)] == ["scorer-1", "scorer-2", "scorer-3"]
    (b.path / "key.ed25519").write_bytes(b"k" * 32)
    b.kill()  # the container of slot 2 dies or is re-created
    again = holders(template)
    assert again.path.name == "scorer-2", "a new process must take the freed slot, not a new one"
    assert (again.path / "key.ed25519").read_bytes() == b"k" * 32
    assert sorted(p.name for p in tmp_path.iterdir()) == ["scorer-1", "scorer-2", "scorer-3"]


def test_slot_in_this_process_is_stable(tmp_path):
    template = str(tmp_path / "x-{slot}")
    first = expand_data_dir(template)
    assert first.name == "x-1"
    assert expand_data_dir(template) == first  # idempotent: not x-2


def test_hostname_and_slot_combine(tmp_path, holders):
    h = holders(str(tmp_path / "{hostname}-{slot}"))
    assert h.path.name == f"{socket.gethostname()}-1"


@pytest.mark.parametrize("template", ["/data/{host}", "/data/{}", "/data/{slot}-{pid}"])
def test_unknown_placeholders_are_refused(template):
    with pytest.raises(SettingsError) as info:
        load_settings(_env_file=None, data_dir=template)
    assert "unknown placeholder" in str(info.value) and "{hostname}" in str(info.value)


def test_from_the_environment(tmp_path, monkeypatch):
    monkeypatch.setenv("SWARM_DATA_DIR", str(tmp_path / "env-{slot}"))
    assert load_settings(_env_file=None).data_dir == tmp_path / "env-1"
