"""Bad input to the command line: one line on stderr saying what is wrong, a non-zero exit
code, nothing published; checked before joining the swarm wherever it can be (then no network
is ever started). Real processes, as a user types the commands; no mDNS (loopback only)."""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from agent.core.events import decode_event
from agent.drivers.real.runtime import load_identity

ROOT = Path(__file__).resolve().parent.parent


def agent(*args: str, env: dict[str, str] | None = None, timeout: float = 120,
          cwd: Path | None = None, wrap: list[str] | None = None) -> subprocess.CompletedProcess:
    base = {k: v for k, v in os.environ.items() if not k.startswith("SWARM_")}
    base.update({"PYTHONPATH": str(ROOT), "SWARM_MDNS": "false", "SWARM_LOG_LEVEL": "info",
                 "SWARM_LOG_FORMAT": "json", "COLUMNS": "100"})
    base.update(env or {})
    return subprocess.run([*(wrap or []), sys.executable, "-m", "agent", *args], capture_output=True,
                          text=True, env=base, timeout=timeout, cwd=cwd)


def one_line_error(r: subprocess.CompletedProcess) -> str:
    lines = [ln for ln in r.stderr.splitlines() if ln.strip()]
    errors = [ln for ln in lines if ln.startswith("error:")]
    assert len(errors) == 1, r.stderr[-2000:]
    assert "Traceback" not in r.stderr and "╭" not in r.stderr, r.stderr[-2000:]
    assert not r.stdout.strip(), r.stdout
    return errors[0]


BEFORE_JOINING = {  # argv -> (what the message says, exit code)
    "empty": (["submit", ""], "the goal is empty", 2),
    "spaces": (["submit", "   \t  "], "the goal is empty", 2),
    "invisible": (["submit", "\u200b\u2060\ufeff \u200b"], "the goal is empty", 2),
    "escapes only": (["submit", "\x1b[31m\x1b[0m\x1b]0;title\x07"], "the goal is empty", 2),
    "no word": (["submit", "?!? ..."], "has no word in it", 2),
    "too long": (["submit", "x" * 201], "the goal is 201 characters; at most 200", 2),
    "long description": (["submit", "Plan a trip", "--description", "y" * 2001],
                         "the description is 2,001 characters; at most 2,000", 2),
}


@pytest.mark.parametrize("case", list(BEFORE_JOINING), ids=list(BEFORE_JOINING))
def test_goal_text_is_refused_before_joining(case, tmp_path):
    argv, message, code = BEFORE_JOINING[case]
    t = time.monotonic()
    r = agent(*argv, env={"SWARM_PEERS": ""}, cwd=tmp_path)
    assert r.returncode == code, (r.returncode, r.stderr[-2000:])
    assert message in one_line_error(r)
    assert "net.started" not in r.stderr  # nothing joined, so nothing could be published
    assert time.monotonic() - t < 30


def test_a_bad_peer_address_is_refused_before_joining(tmp_path):
    for cmd in (["submit", "Plan a trip"], ["run", "--role", "scorer"], ["observe", "--once"]):
        r = agent(*cmd, env={"SWARM_PEERS": "/ip4/127.0.0.1/tcp/4001,bogus",
                             "SWARM_DATA_DIR": str(tmp_path / "d")}, cwd=tmp_path)
        assert r.returncode == 2, (cmd, r.stderr[-2000:])
        line = one_line_error(r)
        assert "SWARM_PEERS" in line and "bad peer address" in line and "/p2p/<peer id>" in line, line
        assert "net.started" not in r.stderr


@pytest.fixture
def read_only_dir(tmp_path):
    """A directory nobody can write to: a read-only bind mount when root (who ignores mode
    bits), mode 0500 otherwise."""
    d = tmp_path / "ro"
    d.mkdir()
    if os.geteuid() == 0:
        r = subprocess.run(["mount", "--bind", "-o", "ro", str(d), str(d)], capture_output=True)
        if r.returncode != 0:
            pytest.skip(f"cannot make a read-only bind mount: {r.stderr.decode()[-200:]}")
        try:
            yield d
        finally:
            subprocess.run(["umount", str(d)], check=False)
    else:
        d.chmod(0o500)
        yield d
        d.chmod(0o700)


def test_a_read_only_data_dir_is_refused_before_joining(read_only_dir, tmp_path):
    for cmd in (["run", "--role", "observer"], ["observe"]):  # agents: their key and log go there
        for data_dir in (read_only_dir, read_only_dir / "agent", read_only_dir / "{hostname}"):
            r = agent(*cmd, env={"SWARM_DATA_DIR": str(data_dir)}, cwd=tmp_path)
            assert r.returncode == 2, (cmd, data_dir, r.stderr[-2000:])
            line = one_line_error(r)
            assert "SWARM_DATA_DIR" in line and ("not writable" in line or "cannot use" in line), line
            assert "net.started" not in r.stderr


TOOLS = (["submit", "Plan a trip", "--timeout", "2"], ["observe", "--once", "--timeout", "2"])


def test_the_short_lived_tools_write_nothing_to_the_data_dir(read_only_dir, tmp_path):
    """submit and observe --once keep their key and log in a temporary directory, not in
    SWARM_DATA_DIR (only its name picks a credential slot): a read-only one is not in their way.
    A placeholder there must still take a directory (the slot's lock): refused in one line."""
    for cmd in TOOLS:
        r = agent(*cmd, env={"SWARM_DATA_DIR": str(read_only_dir), "SWARM_PEERS": ""}, cwd=tmp_path)
        assert r.returncode == 1 and "no peer connected within 2s: none found" in one_line_error(r), \
            (cmd, r.stderr[-2000:])
        assert "net.started" in r.stderr  # it joined (as a peer of its own), then found nobody
        r = agent(*cmd, env={"SWARM_DATA_DIR": str(read_only_dir / "{slot}")}, cwd=tmp_path)
        assert r.returncode == 2, (cmd, r.stderr[-2000:])
        line = one_line_error(r)
        assert "SWARM_DATA_DIR" in line and "cannot use" in line, line
        assert "net.started" not in r.stderr
    assert list(read_only_dir.iterdir()) == []


@pytest.mark.skipif(os.geteuid() != 0 or shutil.which("unshare") is None,
                    reason="needs root and unshare: /tmp read-only in a mount namespace of its own")
def test_no_writable_temporary_directory_is_refused_before_joining(tmp_path):
    """A read-only container: TMPDIR, /tmp, /var/tmp and the working directory all read-only
    (in a mount namespace of the test's own, the machine's /tmp untouched)."""
    ro = tmp_path / "ro"
    ro.mkdir()
    for cmd in TOOLS:
        script = ("set -e; mount --make-rprivate /; "
                  + "".join(f"mount --bind -o ro {d} {d}; " for d in ("/tmp", "/var/tmp", ro))
                  + 'exec "$@"')
        r = agent(*cmd, env={"TMPDIR": str(ro), "SWARM_PEERS": ""}, cwd=ro,
                  wrap=["unshare", "-m", "sh", "-c", script, "sh"])
        assert r.returncode == 2, (cmd, r.stderr[-2000:])
        line = one_line_error(r)
        assert "TMPDIR: no writable temporary directory" in line and "/tmp" in line, line
        assert "net.started" not in r.stderr


def test_demo_choices_are_refused_before_anything_starts(tmp_path):
    out = tmp_path / "demo"
    r = agent("demo", "--llm", "foo", "--out-dir", str(out), cwd=tmp_path)
    assert r.returncode == 2
    assert "'foo' is not one of 'auto', 'ollama', 'llamacpp', 'openai', 'scripted'" in one_line_error(r)
    assert not out.exists() and not (tmp_path / "out").exists()  # no agent, no directory
    r = agent("demo", "--model", "gpt-9", "--out-dir", str(out), cwd=tmp_path)
    assert r.returncode == 2 and "neither an embedded model" in one_line_error(r)
    r = agent("demo", "  ", "--llm", "scripted", "--out-dir", str(out), cwd=tmp_path)
    assert r.returncode == 2 and "the goal is empty" in one_line_error(r)
    assert not out.exists()
    h = agent("demo", "--help", env={"COLUMNS": "80"})
    text = " ".join(h.stdout.replace("│", " ").split())
    for choice in ("auto (an", "ollama,", "llamacpp (the embedded", "openai (an OpenAI",
                   "scripted (a test double"):
        assert choice in text, h.stdout


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.mark.slow
@pytest.mark.timeout(240)
def test_a_strangers_submit_says_the_handshake_was_refused(tmp_path):
    """A member with key A; submits with key B, and with no key, name it as a static peer. Each
    fails early (before its 90 s timeout) saying no peer accepted the key; the member stores
    nothing of theirs."""
    key_a, key_b = os.urandom(32).hex(), os.urandom(32).hex()
    port = _free_port()
    member = tmp_path / "member"
    peer = f"/ip4/127.0.0.1/tcp/{port}/p2p/{load_identity(member).peer_id}"
    env = {k: v for k, v in os.environ.items() if not k.startswith("SWARM_")}
    env.update({"PYTHONPATH": str(ROOT), "SWARM_MDNS": "false", "SWARM_KEY": key_a,
                "SWARM_DATA_DIR": str(member), "SWARM_LISTEN_HOST": "127.0.0.1",
                "SWARM_LISTEN_PORT": str(port), "SWARM_LOG_FORMAT": "json"})
    log = open(tmp_path / "member.log", "wb")
    proc = subprocess.Popen([sys.executable, "-m", "agent", "run", "--role", "observer"], env=env,
                            stdout=log, stderr=subprocess.STDOUT)
    try:
        deadline = time.monotonic() + 60
        while b'"agent up"' not in (tmp_path / "member.log").read_bytes():
            assert proc.poll() is None and time.monotonic() < deadline, \
                (tmp_path / "member.log").read_text()[-2000:]
            time.sleep(0.2)
        for key in (key_b, ""):
            t = time.monotonic()
            r = agent("submit", "Plan a trip", "--timeout", "90", cwd=tmp_path,
                      env={"SWARM_KEY": key, "SWARM_PEERS": peer, "SWARM_RECONNECT_INTERVAL": "1"})
            took = time.monotonic() - t
            assert r.returncode == 1, r.stderr[-2000:]
            line = one_line_error(r)
            assert "no peer accepted the key" in line and "refused the handshake" in line, line
            assert took < 80, f"waited {took:.0f}s: the refusal should end the wait"
    finally:
        proc.terminate()
        proc.wait(30)
        log.close()
    stored = [decode_event(ln) for ln in (member / "events.jsonl").read_bytes().splitlines() if ln]
    assert {e.author for e in stored} <= {load_identity(member).peer_id}, "a stranger's event was stored"
    assert not any(e.body.type == "goal" for e in stored)


def test_a_goal_keeps_its_words_and_loses_escapes_and_invisible_characters():
    from agent.goals import check_goal_text

    title, description = check_goal_text("Plan\u200b a \x1b[1mtrip\x1b[0m to\tJapan",
                                         "Two weeks.\x1b[2J\nRail pass\u200b only.")
    assert (title, description) == ("Plan a trip to Japan", "Two weeks.\nRail pass only.")
    assert check_goal_text("می\u200cخواهم سفر کنم")[0] == "می\u200cخواهم سفر کنم"  # a joiner is spelling
    assert check_goal_text("日本旅行を計画する")[0] == "日本旅行を計画する"


USAGE_ERRORS = {  # argv -> what the one line says
    "unknown option": (["demo", "--nope"], "No such option: --nope"),
    "bad number": (["demo", "--scorers", "x"], "Invalid value for '--scorers'"),
    "missing goal": (["submit"], "Missing argument 'goal'"),
    "missing command": (["credential"], "Missing command"),
}


@pytest.mark.parametrize("case", list(USAGE_ERRORS), ids=list(USAGE_ERRORS))
def test_a_mistyped_command_line_gets_one_line_and_exit_2(case, tmp_path):
    argv, message = USAGE_ERRORS[case]
    r = agent(*argv, cwd=tmp_path)
    assert r.returncode == 2, (r.returncode, r.stderr[-2000:])
    line = one_line_error(r)
    assert message in line and "--help' )" not in line and "--help')" in line, line


BAD_VALUES = {  # argv -> (the whole message, on its one line; exit code)
    "fault kinds": (["simulate", "--faults", "bogus,[red]x[/red]"],
                    "unknown fault kinds ['[red]x[/red]', 'bogus']; known: delay, loss, dup, partition, "
                    "crash, pause, skew, llm, byzantine", 2),
    "seeds": (["simulate", "--seeds", "9..x"], "bad --seeds: invalid literal for int()", 2),
    "replay": (["replay", "missing.jsonl"], "cannot read missing.jsonl: No such file or directory", 2),
    "keygen": (["keygen", "--authority", "--identity"], "--authority or --identity, not both", 2),
    "publish": (["publish", "/dev/null"], "no events to publish", 2),
}


@pytest.mark.parametrize("case", list(BAD_VALUES), ids=list(BAD_VALUES))
def test_every_tools_bad_value_is_one_whole_line(case, tmp_path):
    """The other commands' refusals go through the same one line as the goal's: never wrapped
    at the terminal's width, a value's brackets printed as typed (not read as markup)."""
    argv, message, code = BAD_VALUES[case]
    r = agent(*argv, cwd=tmp_path, env={"COLUMNS": "60"})
    assert r.returncode == code, (r.returncode, r.stderr[-2000:])
    assert message in one_line_error(r) and len(r.stderr.strip().splitlines()) == 1, r.stderr


def test_help_and_no_arguments_still_show_the_help(tmp_path):
    assert agent("demo", "--help", cwd=tmp_path).returncode == 0
    r = agent(cwd=tmp_path)
    assert r.returncode == 2 and "Usage: python -m agent" in r.stdout + r.stderr


def test_a_bad_revocation_and_a_timeout_below_one_second_are_one_line(tmp_path):
    # seen: `revoke not-a-peer` printed pydantic's four-line error; `observe --once --timeout -5`
    # joined the swarm and then said "no peer connected within -5s"
    assert agent("keygen", "--authority", "--out", str(tmp_path / "authority.key"), cwd=tmp_path).returncode == 0
    for argv, message in ((["revoke", "not-a-peer"], "peer: String should match pattern"),
                          (["revoke", "12D3KooWGwXqXrdSYYWopc4ZRxaS7SH4bQZbTu8G3uLKBKQXng1D", "--reason", "x" * 300],
                           "reason: String should have at most")):
        r = agent(*argv, "--authority-key", str(tmp_path / "authority.key"), cwd=tmp_path)
        assert r.returncode == 2 and len(r.stderr.strip().splitlines()) == 1, r.stderr
        assert message in one_line_error(r) and "errors.pydantic.dev" not in r.stderr, r.stderr
    for argv in (["observe", "--once", "--timeout", "-5"], ["publish", "/dev/null", "--timeout", "0"]):
        r = agent(*argv, cwd=tmp_path)
        assert r.returncode == 2 and "Invalid value for '--timeout'" in one_line_error(r), (argv, r.stderr[-500:])
