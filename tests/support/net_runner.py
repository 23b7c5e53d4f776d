"""A tiny stand-in agent for network tests: one Network plus a minimal runtime.

As a script (the mDNS tests start it inside network namespaces):

    python tests/support/net_runner.py --name n1 --swarm s --data DIR [--mdns] [--peers A,B]
        [--swarm-key HEX]

prints JSON lines on stdout: {"ready": ...}, {"peers": n}, {"event": id, ...}, {"published": id}
and reads JSON-line commands on stdin: {"hello": "<role>"} signs and publishes a hello event;
{"publish": "<raw event>"} publishes given bytes; {"mesh": true} reports the gossip mesh;
{"sync_all": true} answers {"synced": new events, "answered": peers}; {"quit": true} answers
{"stopped": true, "stats": <Network.stats as a dict>, "threads": [...]}.

``MiniRuntime`` (also used in-process by the tests) is what the real runtime does, minus the
fold: decode/verify, drop duplicates, append to the store, remember arrival order and time.
"""

from __future__ import annotations

import argparse
import hashlib
import os
import sys
import time
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any, AsyncIterator, Callable

if __name__ == "__main__":  # run as a script: make `agent` importable
    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

import orjson
import trio

from agent.core.events import Event, Hello, decode_event, sign_event
from agent.core.hlc import Timestamp
from agent.core.identity import Identity
from agent.core.reasons import Rejected
from agent.net import NetConfig, Network
from agent.store import EventStore

_CALLBACKS = ("ingest", "knows", "on_peers_changed", "on_reject", "log")


def make_network(identity: Identity, store: EventStore, swarm: str = "test",
                 **kw: Any) -> Network:
    """A Network from flat keywords: callbacks as they are, the rest into NetConfig."""
    callbacks = {k: kw.pop(k) for k in _CALLBACKS if k in kw}
    if "peers" in kw:
        kw["peers"] = tuple(kw["peers"])
    return Network(identity=identity, store=store, config=NetConfig(swarm=swarm, **kw),
                   **callbacks)


def identity_for(name: str) -> Identity:
    return Identity(hashlib.sha256(name.encode()).digest())


class MiniRuntime:
    """decode -> dedup -> store, like the agent runtime (without the fold)."""

    def __init__(self, store: EventStore, on_new: Callable[[Event, str], None] | None = None):
        self.store = store
        self.ids: set[str] = set()
        for raw in store.load():
            try:
                self.ids.add(decode_event(raw).id)
            except Rejected:
                pass
        self.order: list[str] = []          # ids accepted by ingest, in order
        self.sources: dict[str, str] = {}
        self.arrived: dict[str, float] = {}  # id -> perf_counter at acceptance
        self.rejected: list[tuple[str, str]] = []
        self.calls: list[tuple[bytes, str]] = []  # everything ingest was given
        self.duplicates = 0
        self.on_new = on_new

    async def ingest(self, raw: bytes | Event, source: str) -> bool:
        self.calls.append((raw.raw if isinstance(raw, Event) else raw, source))
        try:
            ev = raw if isinstance(raw, Event) else decode_event(raw)
        except Rejected as exc:
            self.rejected.append((exc.reason.value, source))
            return False
        if ev.id in self.ids:
            self.duplicates += 1
            return False
        self.store.append(ev.raw)
        self.ids.add(ev.id)
        self.order.append(ev.id)
        self.sources[ev.id] = source
        self.arrived[ev.id] = time.perf_counter()
        if self.on_new is not None:
            self.on_new(ev, source)
        return True

    def knows(self, event_id: str) -> bool:
        return event_id in self.ids

    async def publish(self, net: Network, ev: Event) -> None:
        await self.ingest(ev.raw, "local")
        await net.publish(ev.raw)


class Node:
    """A Network with a MiniRuntime and its own store, for in-process tests."""

    def __init__(self, name: str, data_dir: Path, swarm: str = "test", **net_kw: Any) -> None:
        self.name = name
        self.identity = identity_for(name)
        self.store = EventStore(Path(data_dir) / name / "events.jsonl")
        self.rt = MiniRuntime(self.store)
        net_kw.setdefault("listen_host", "127.0.0.1")
        net_kw.setdefault("reconnect_interval", 0.5)
        self.net_kw = net_kw
        self.swarm = swarm
        self.net = self.make_net()

    def make_net(self, **override: Any) -> Network:
        kw = {"ingest": self.rt.ingest, "knows": self.rt.knows, **self.net_kw, **override}
        return make_network(self.identity, self.store, self.swarm, **kw)

    @property
    def addr(self) -> str:
        return self.net.listen_addrs[0]

    async def publish(self, ev: Event) -> None:
        await self.rt.publish(self.net, ev)


async def wait_for(pred: Callable[[], bool], timeout: float, what: str = "condition",
                   poll: float = 0.01) -> float:
    """Poll until pred() is true; returns seconds waited; fails the test after timeout."""
    t0 = time.perf_counter()
    try:
        with trio.fail_after(timeout):
            while not pred():
                await trio.sleep(poll)
    except trio.TooSlowError:
        raise AssertionError(f"timed out after {timeout}s waiting for {what}") from None
    return time.perf_counter() - t0


@asynccontextmanager
async def running(net: Network) -> AsyncIterator[Network]:
    """Run a Network for the duration of the block; fully stopped when the block exits."""
    async with trio.open_nursery() as nursery:
        await nursery.start(net.run)
        try:
            yield net
        finally:
            nursery.cancel_scope.cancel()


def _emit(obj: dict[str, Any]) -> None:
    obj.setdefault("t", time.time())
    sys.stdout.buffer.write(orjson.dumps(obj) + b"\n")
    sys.stdout.buffer.flush()


async def _commands(net: Network, rt: MiniRuntime, ident: Identity, done: trio.Event) -> None:
    stream = trio.lowlevel.FdStream(os.dup(sys.stdin.fileno()))
    buf = b""
    async with stream:
        while True:
            chunk = await stream.receive_some(65536)
            if not chunk:
                done.set()
                return
            buf += chunk
            while b"\n" in buf:
                line, buf = buf.split(b"\n", 1)
                if not line.strip():
                    continue
                cmd = orjson.loads(line)
                if "hello" in cmd:
                    now = time.time_ns() // 1_000_000
                    ev = sign_event(ident, Timestamp(now, 0), Hello(role=cmd["hello"], name="r"))
                    await rt.publish(net, ev)
                    _emit({"published": ev.id, "mesh": net.mesh_peers})
                elif "publish" in cmd:
                    await net.publish(cmd["publish"].encode())
                    _emit({"published_raw": True})
                elif "mesh" in cmd:
                    _emit({"mesh": net.mesh_peers, "connected": net.connected})
                elif "sync_all" in cmd:
                    report = await net.sync_all()
                    _emit({"synced": report.new, "answered": report.peers_answered})
                elif "quit" in cmd:
                    done.set()
                    return


async def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--name", required=True)
    ap.add_argument("--swarm", default="test")
    ap.add_argument("--data", required=True)
    ap.add_argument("--listen-host", default="0.0.0.0")
    ap.add_argument("--port", type=int, default=0)
    ap.add_argument("--peers", default="")
    ap.add_argument("--mdns", action="store_true")
    ap.add_argument("--reconnect-interval", type=float, default=1.0)
    ap.add_argument("--sync-interval", type=float, default=10.0)
    ap.add_argument("--log-level", default="info")
    ap.add_argument("--swarm-key", default="", help="64 hex digits: a private swarm")
    args = ap.parse_args(argv)

    import logging

    import structlog

    structlog.configure(
        processors=[structlog.processors.add_log_level,
                    structlog.processors.TimeStamper(fmt="iso"),
                    structlog.processors.JSONRenderer()],
        wrapper_class=structlog.make_filtering_bound_logger(
            getattr(logging, args.log_level.upper())),
        logger_factory=structlog.PrintLoggerFactory(file=sys.stderr))

    ident = identity_for(args.name)
    store = EventStore(Path(args.data) / "events.jsonl")
    rt = MiniRuntime(store, on_new=lambda ev, src: _emit(
        {"event": ev.id, "author": ev.author, "source": src}))
    swarm_key = None
    if args.swarm_key:
        from agent.net.swarmkey import parse_swarm_key

        swarm_key = parse_swarm_key(args.swarm_key)
    net = make_network(
        ident, store, args.swarm, ingest=rt.ingest,
        listen_host=args.listen_host, listen_port=args.port,
        peers=[p for p in args.peers.split(",") if p], mdns=args.mdns,
        reconnect_interval=args.reconnect_interval, sync_interval=args.sync_interval,
        swarm_key=swarm_key,
        on_peers_changed=lambda n: _emit({"peers": n, "connected": net.connected}))
    done = trio.Event()
    async with trio.open_nursery() as nursery:
        await nursery.start(net.run)
        _emit({"ready": True, "peer_id": net.peer_id, "addrs": net.listen_addrs})
        nursery.start_soon(_commands, net, rt, ident, done)
        await done.wait()
        nursery.cancel_scope.cancel()
    store.close()
    import threading

    import dataclasses

    _emit({"stopped": True, "stats": dataclasses.asdict(net.stats),
           "threads": sorted(t.name for t in threading.enumerate())})


if __name__ == "__main__":
    try:
        trio.run(main)
    except KeyboardInterrupt:
        pass
