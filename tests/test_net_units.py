"""Small pieces of agent.net without a network: repeated-error logging, swarm keys, config."""

from __future__ import annotations

import base64
import os

import pytest

from agent.net.config import NetConfig
from agent.errlog import RepeatedErrorLog
from agent.net.swarmkey import (
    SwarmKeyError, format_swarm_key, generate_swarm_key, key_id, parse_swarm_key,
)
from agent.settings import SettingsError, load_settings


class Lines:
    def __init__(self) -> None:
        self.lines: list[tuple[str, str, dict]] = []

    def __getattr__(self, level: str):
        return lambda event, **kw: self.lines.append((level, event, kw))


def test_repeated_error_is_logged_once_then_summarized():
    now = [0.0]
    log = Lines()
    errs = RepeatedErrorLog(log, "cannot persist event", every=60, clock=lambda: now[0])
    for i in range(120):  # a full disk: one failure a second for two minutes
        now[0] = float(i)
        errs.failed("No space left on device (ENOSPC)", unsaved=i)
    assert [(lv, kw.get("repeated"), kw.get("total")) for lv, _, kw in log.lines] == [
        ("error", None, None), ("error", 60, 61)]
    errs.failed("Read-only file system (EROFS)")  # another error: logged at once
    assert len(log.lines) == 3
    errs.succeeded()
    assert [kw["error"] for lv, ev, kw in log.lines[3:]] == [
        "No space left on device (ENOSPC)", "Read-only file system (EROFS)"]
    assert log.lines[3][1] == "cannot persist event: recovered" and log.lines[3][2]["failures"] == 120
    assert not errs.failing
    errs.failed("No space left on device (ENOSPC)")  # after recovery: a fresh first line
    assert log.lines[-1][2].get("repeated") is None and len(log.lines) == 6


def test_swarm_key_formats():
    key = os.urandom(32)
    text = format_swarm_key(key)
    assert text == f"/key/swarm/psk/1.0.0/\n/base16/\n{key.hex()}\n"
    assert parse_swarm_key(text) == key
    assert parse_swarm_key(text.replace("\n", "\r\n").encode()) == key
    assert parse_swarm_key(key.hex().upper()) == key  # just the 64 hex digits
    b64 = f"/key/swarm/psk/1.0.0/\n/base64/\n{base64.b64encode(key).decode()}\n"
    assert parse_swarm_key(b64) == key
    assert parse_swarm_key(generate_swarm_key()) != parse_swarm_key(generate_swarm_key())
    assert len(key_id(key)) == 12 and key.hex()[:12] != key_id(key)
    for bad, why in [("abc", "not valid base16"), (key.hex()[:-2], "32 bytes"),
                     ("/key/swarm/psk/1.0.0/\n/bin/\nxx", "unsupported"),
                     ("/key/other/\n/base16/\n" + key.hex(), "expected"),
                     (b"\xff" * 70, "ASCII")]:
        with pytest.raises(SwarmKeyError, match=why):
            parse_swarm_key(bad)


def test_settings_swarm_key(tmp_path, monkeypatch):
    monkeypatch.delenv("SWARM_KEY", raising=False)
    monkeypatch.delenv("SWARM_KEY_FILE", raising=False)
    monkeypatch.chdir(tmp_path)  # no stray .env
    key = os.urandom(32)
    assert load_settings().swarm_psk() is None
    monkeypatch.setenv("SWARM_KEY", "")  # Compose passes an unset variable through as empty
    assert load_settings().swarm_psk() is None
    monkeypatch.setenv("SWARM_KEY", key.hex())
    s = load_settings()
    assert s.swarm_psk() == key and key.hex() not in repr(s)
    assert NetConfig.from_settings(s).swarm_key == key
    path = tmp_path / "swarm.key"
    path.write_text(format_swarm_key(key))
    with pytest.raises(SettingsError, match="not both"):
        load_settings(key_file=path)
    monkeypatch.delenv("SWARM_KEY")
    monkeypatch.setenv("SWARM_KEY_FILE", str(path))
    assert load_settings().swarm_psk() == key
    path.write_text("nonsense")
    with pytest.raises(SettingsError, match=r"swarm key file .*swarm.key.*base16"):
        load_settings()
    monkeypatch.setenv("SWARM_KEY_FILE", str(tmp_path / "missing"))
    with pytest.raises(SettingsError, match="cannot read swarm key file"):
        load_settings()


def test_net_config_checks():
    with pytest.raises(ValueError, match="32 bytes"):
        NetConfig(swarm_key=b"short")
    assert NetConfig(peers=["a", "b"]).peers == ("a", "b")
