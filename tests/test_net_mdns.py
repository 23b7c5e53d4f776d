"""mDNS discovery between separate processes, each in its own network namespace.

Root only: mDNS (zeroconf) binds every interface, so it only ever runs inside namespaces
these tests create (tests/support/netns.py) and remove again, also on failure.
"""

from __future__ import annotations

import json
import os
import queue
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from support.netns import bridge_hosts, loopback_ns, netns_unavailable

pytestmark = [pytest.mark.netns, pytest.mark.slow, pytest.mark.timeout(120)]

RUNNER = Path(__file__).parent / "support" / "net_runner.py"


@pytest.fixture
def netns():
    reason = netns_unavailable()
    if reason is not None:
        pytest.skip(f"mDNS tests run only inside private network namespaces: {reason}")


class Agent:
    """One net_runner process inside a namespace; its JSON-line output on a queue."""

    def __init__(self, tn, ns: str, name: str, data: Path, logdir: Path, *extra: str):
        self.name = name
        self.t_launch = time.time()
        self.err_path = logdir / f"{name}-{int(self.t_launch * 1000)}.log"
        self._err = open(self.err_path, "w")
        argv = [sys.executable, str(RUNNER), "--name", name, "--swarm", "mdns-test",
                "--data", str(data / name), "--mdns", "--reconnect-interval", "1",
                "--sync-interval", "5", *extra]
        self.proc = tn.popen(ns, argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                             stderr=self._err)
        self.lines: queue.Queue = queue.Queue()
        self.seen: list[dict] = []
        self._polled: list[dict] = []
        threading.Thread(target=self._pump, daemon=True).start()

    def _pump(self) -> None:
        for line in self.proc.stdout:
            try:
                self.lines.put(json.loads(line))
            except ValueError:
                self.lines.put({"junk": line.decode(errors="replace")})
        self.lines.put({"eof": True})

    def until(self, pred, timeout: float, what: str) -> dict:
        for msg in self.seen:  # already received
            if pred(msg):
                return msg
        end = time.time() + timeout
        while True:
            left = end - time.time()
            if left <= 0:
                break
            try:
                msg = self.lines.get(timeout=left)
            except queue.Empty:
                break
            self.seen.append(msg)
            if pred(msg):
                return msg
            if msg.get("eof"):
                break
        tail = self.err_path.read_text()[-3000:]
        raise AssertionError(f"{self.name}: no {what} within {timeout}s; stderr tail:\n{tail}")

    def send(self, cmd: dict) -> None:
        self.proc.stdin.write(json.dumps(cmd).encode() + b"\n")
        self.proc.stdin.flush()

    def quit(self, timeout: float = 20) -> dict:
        self.send({"quit": True})
        stopped = self.until(lambda m: "stopped" in m, timeout, "clean stop")
        assert self.proc.wait(timeout=10) == 0
        return stopped

    def wait_mesh(self, n: int, timeout: float) -> float:
        """Poll the runner until its gossip mesh has n peers; returns when (its clock)."""
        end = time.time() + timeout
        while time.time() < end:
            self.send({"mesh": True})
            reply = self.until(lambda m: "mesh" in m and m not in self._polled, 5, "mesh reply")
            self._polled.append(reply)
            if len(reply["mesh"]) >= n:
                return reply["t"]
            time.sleep(0.1)
        raise AssertionError(f"{self.name}: gossip mesh never reached {n} peers")

    def kill(self) -> None:
        os.killpg(self.proc.pid, signal.SIGKILL)
        self.proc.wait(timeout=10)

    def close(self) -> None:
        self._err.close()


def _has_event(event_id: str):
    return lambda m: m.get("event") == event_id


def _no_errors_of_ours(agents) -> None:
    """No error logged by our code and no traceback through it (the library may log its
    own shutdown races, e.g. a peer redialing a node that is stopping)."""
    for a in agents:
        text = a.err_path.read_text()
        for block in text.split("Traceback (most recent call last)")[1:]:
            frames = block.split("\n\n")[0]
            assert "agent/" not in frames and "net_runner" not in frames, (
                f"{a.name}: traceback through our code:\n{frames[:3000]}")
        assert '"level": "error"' not in text, f"{a.name} logged an error:\n{text[-3000:]}"


def test_mdns_three_namespaces_on_a_bridge(netns, tmp_path):
    agents: list[Agent] = []
    with bridge_hosts(3) as tn:
        try:
            for i, host in enumerate(tn.hosts):  # listen on 0.0.0.0: advertise 10.77.x.i
                agents.append(Agent(tn, host.ns, f"n{i}", tmp_path, tmp_path))
            ready = [a.until(lambda m: "ready" in m, 30, "ready") for a in agents]
            ids = [r["peer_id"] for r in ready]
            for a, host in zip(agents, tn.hosts):
                up = a.until(lambda m: m.get("peers") == 2, 30, "2 peers")
                assert up["t"] - a.t_launch < 30
            t_all = max(a.until(lambda m: m.get("peers") == 2, 1, "")["t"] for a in agents)
            t_ready = max(r["t"] for r in ready)
            print(f"\nmDNS: all ready {t_ready - agents[0].t_launch:.2f} s after launch "
                  f"(import + zeroconf registration), fully connected "
                  f"{t_all - t_ready:.2f} s after the last was ready")
            for r, host in zip(ready, tn.hosts):
                assert any(f"/ip4/{host.ip}/" in addr for addr in r["addrs"])

            t_mesh = max(a.wait_mesh(2, 15) for a in agents)
            print(f"gossip mesh complete {t_mesh - t_ready:.2f} s after the last was ready")
            agents[0].send({"hello": "scorer"})
            ev = agents[0].until(lambda m: "published" in m, 10, "publish")["published"]
            for a in agents[1:]:
                got = a.until(_has_event(ev), 10, f"event {ev[:8]}")
                assert got["source"] == ids[0]

            # n2 dies (SIGKILL); n0 publishes meanwhile; n2 restarts with the same key and
            # data, is rediscovered, reconnects, and syncs what it missed
            agents[2].kill()
            agents[0].until(lambda m: m.get("peers") == 1, 15, "n0 to see n2 gone")
            agents[0].send({"hello": "executor"})
            missed = agents[0].until(lambda m: "published" in m and m["published"] != ev, 10,
                                     "second publish")["published"]
            t_missed = agents[1].until(_has_event(missed), 10, "missed event at n1")["t"]
            # gossipsub replays its ~5 s message cache to a (re)subscribing peer; wait that
            # out so the missed event can only come back through sync
            time.sleep(max(0.0, t_missed + 8.0 - time.time()))  # heartbeats slip under load
            t_restart = time.time()
            agents[2] = Agent(tn, tn.hosts[2].ns, "n2", tmp_path, tmp_path)
            back = agents[2].until(lambda m: m.get("peers") == 2, 30, "2 peers after restart")
            got = agents[2].until(_has_event(missed), 15, "the missed event after restart")
            assert got["source"].startswith("sync:")
            print(f"restart: reconnected {back['t'] - t_restart:.2f} s after relaunch, "
                  f"missed event synced {got['t'] - t_restart:.2f} s after relaunch")

            for a in agents:
                stopped = a.quit()
                assert stopped["stats"]["gossip"]["rejected"] == 0
                # zeroconf's threads are closed (trio's idle worker thread may remain)
                assert [t for t in stopped["threads"]
                        if t != "MainThread" and not t.startswith("Trio thread")] == []
            _no_errors_of_ours(agents)
        finally:
            for a in agents:
                a.close()


def test_mdns_on_loopback_namespace(netns, tmp_path):
    agents: list[Agent] = []
    with loopback_ns() as tn:
        ns = tn.hosts[0].ns
        try:
            for i in range(2):
                agents.append(Agent(tn, ns, f"l{i}", tmp_path, tmp_path))
            for a in agents:
                a.until(lambda m: m.get("peers") == 1, 30, "1 peer")
            agents[1].send({"hello": "observer"})
            ev = agents[1].until(lambda m: "published" in m, 10, "publish")["published"]
            agents[0].until(_has_event(ev), 10, "event")
            for a in agents:
                a.quit()
            _no_errors_of_ours(agents)
        finally:
            for a in agents:
                a.close()
