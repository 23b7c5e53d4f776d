"""A swarm key (libp2p private network) keeps strangers out: separate processes on 127.0.0.1.

Members A and B share a key. Stranger C has another key, stranger D none; both have A and B
as static peers and keep dialling. Neither connects, reads, syncs or publishes anything, and
nothing of theirs is stored."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import orjson
import pytest
import trio

from agent.core.events import decode_event
from support.net_runner import identity_for

pytestmark = [pytest.mark.slow, pytest.mark.timeout(180)]

RUNNER = Path(__file__).parent / "support" / "net_runner.py"


class Proc:
    """One net_runner process; its JSON lines collected as they come."""

    def __init__(self, name: str, tmp: Path) -> None:
        self.name = name
        self.data = tmp / name
        self.err_path = tmp / f"{name}.stderr"
        self.seen: list[dict] = []
        self.changed = trio.Event()
        self.proc: trio.Process | None = None

    async def start(self, nursery: trio.Nursery, *, key: str | None, peers: list[str]) -> dict:
        argv = [sys.executable, str(RUNNER), "--name", self.name, "--swarm", "members",
                "--data", str(self.data), "--listen-host", "127.0.0.1",
                "--reconnect-interval", "0.3", "--sync-interval", "1", "--log-level", "debug",
                "--peers", ",".join(peers)]
        if key is not None:
            argv += ["--swarm-key", key]
        err = open(self.err_path, "wb")
        self.proc = await nursery.start(lambda task_status: trio.run_process(
            argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
            stderr=err, check=False, task_status=task_status))
        nursery.start_soon(self._pump)
        return await self.until(lambda m: m.get("ready"), 30, "ready")

    async def _pump(self) -> None:
        buf = b""
        async for chunk in self.proc.stdout:
            buf += chunk
            while b"\n" in buf:
                line, buf = buf.split(b"\n", 1)
                self.seen.append(orjson.loads(line))
                self.changed.set()
                self.changed = trio.Event()

    async def until(self, pred, timeout: float, what: str) -> dict:
        with trio.move_on_after(timeout):
            while True:
                for msg in self.seen:
                    if pred(msg):
                        return msg
                await self.changed.wait()
        raise AssertionError(f"{self.name}: no {what} within {timeout}s; stderr tail:\n"
                             f"{self.err_path.read_text(errors='replace')[-3000:]}")

    async def send(self, cmd: dict[str, Any]) -> None:
        await self.proc.stdin.send_all(orjson.dumps(cmd) + b"\n")

    def stderr_count(self, text: str) -> int:
        return self.err_path.read_text(errors="replace").count(text)

    def stored_authors(self) -> set[str]:
        path = self.data / "events.jsonl"
        return {decode_event(line).author for line in path.read_bytes().splitlines() if line}


async def _until(pred, timeout: float, what: str) -> None:
    with trio.move_on_after(timeout):
        while not pred():
            await trio.sleep(0.1)
        return
    raise AssertionError(f"timed out after {timeout}s waiting for {what}")


async def test_swarm_key_keeps_strangers_out(tmp_path):
    key, other = os.urandom(32).hex(), os.urandom(32).hex()
    ids = {n: identity_for(n).peer_id for n in "abcd"}
    procs = {n: Proc(n, tmp_path) for n in "abcd"}
    async with trio.open_nursery() as nursery:
        a_ready = await procs["a"].start(nursery, key=key, peers=[])
        a_addr = a_ready["addrs"][0]
        b_ready = await procs["b"].start(nursery, key=key, peers=[a_addr])
        both = [a_addr, b_ready["addrs"][0]]
        await procs["c"].start(nursery, key=other, peers=both)
        await procs["d"].start(nursery, key=None, peers=both)
        a, b, c, d = (procs[n] for n in "abcd")

        # members: connected, gossip and sync flow
        await a.until(lambda m: ids["b"] in m.get("connected", ()), 20, "A connected to B")
        await a.send({"hello": "scorer"})
        await b.until(lambda m: m.get("author") == ids["a"], 20, "A's event at B")
        # strangers: dial A and B again and again (debug lines), publish and sync meanwhile
        for s in (c, d):
            await s.send({"hello": "executor"})
        await _until(lambda: all(s.stderr_count("net.dial_failed") >= 3 for s in (c, d)),
                     60, "three failed dials by each stranger")
        for s in (c, d):
            await s.send({"sync_all": True})
            synced = await s.until(lambda m: "synced" in m, 30, "its sync_all report")
            assert synced == {**synced, "synced": 0, "answered": 0}
        await b.send({"hello": "observer"})
        await a.until(lambda m: m.get("author") == ids["b"], 20, "B's event at A")

        for p in procs.values():
            await p.send({"quit": True})
        stopped = {n: await p.until(lambda m: m.get("stopped"), 30, "stop")
                   for n, p in procs.items()}
        nursery.cancel_scope.cancel()

    for n in "ab":  # nothing of the strangers was ever connected, received or stored
        assert not any(set(m.get("connected", ())) & {ids["c"], ids["d"]} for m in procs[n].seen)
        assert procs[n].stored_authors() == {ids["a"], ids["b"]}
        assert stopped[n]["stats"]["sync"]["new"] + stopped[n]["stats"]["gossip"]["new"] == 1
    for n in "cd":  # and the strangers learnt nothing of the members
        assert not any(m.get("connected") for m in procs[n].seen)
        assert procs[n].stored_authors() == {ids[n]}
        assert stopped[n]["stats"]["peers"]["connects"] == 0
    print(f"\nstrangers' failed dials: C {procs['c'].stderr_count('net.dial_failed')}, "
          f"D {procs['d'].stderr_count('net.dial_failed')}")
