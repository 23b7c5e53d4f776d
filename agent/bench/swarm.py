"""Run the real swarm for a benchmark: separate OS processes over libp2p on 127.0.0.1 (the
demo's machinery), the scripted LLM at a fixed latency, keys fixed per agent name (the central
baseline uses the same ones), and read back what happened: the event log, every LLM call and
every pre-work sync from the agents' JSON logs, the makespan as the submitter saw it."""

from __future__ import annotations

import hashlib
import os
import time
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

import orjson
import trio

from agent.goals import plan_params
from agent.drivers.central import CallRecord
from agent.core.events import Event, Goal
from agent.demo import Child, DemoConfig, issue_credential_file, plan_children, start, stop
from agent.drivers.real.runtime import open_runtime
from agent.settings import load_settings


@dataclass
class SwarmRun:
    goal_id: str
    makespan_s: float
    events: list[Event]
    calls: list[CallRecord]
    syncs: list[tuple[str, float, float]]  # (agent, start ms, end ms) of pre-work syncs
    names: dict[str, str]  # peer id -> agent name
    accepted: dict[str, dict[str, float]] = field(default_factory=dict)  # agent -> event id -> ms
    root: Path | None = None
    ok: bool = True
    error: str = ""
    ready_s: float | None = None  # processes started -> every agent announced (its LLM loaded)
    tree: Any = None  # the submitter's tree once the goal was done
    spent: dict[str, list[int]] = field(default_factory=dict)  # LLM kind -> [prompt, completion] (the fold's)


def write_key(data_dir: Path, name: str, tag: str = "bench") -> None:
    data_dir.mkdir(parents=True, exist_ok=True)
    path = data_dir / "key.ed25519"
    if not path.exists():
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "wb") as fh:
            fh.write(hashlib.sha256(f"{tag}:{name}".encode()).digest())


def _ms(ts: str) -> float:
    return datetime.fromisoformat(ts.replace("Z", "+00:00")).timestamp() * 1000


def parse_agent_log(path: Path, name: str, role: str) -> tuple[list[CallRecord], list[tuple[str, float, float]],
                                                               dict[str, float]]:
    calls: dict[int, CallRecord] = {}
    out: list[CallRecord] = []
    syncs = []
    accepted: dict[str, float] = {}
    try:
        lines = path.read_bytes().splitlines()
    except OSError:
        return [], [], {}
    for line in lines:
        if not line.startswith(b"{"):
            continue
        try:
            d = orjson.loads(line)
        except orjson.JSONDecodeError:
            continue
        ev = d.get("event")
        ts = d.get("timestamp")
        if ev is None or ts is None:
            continue
        if ev == "llm.call":
            rec = CallRecord(name, role, d.get("kind", "?"), d.get("node_id"), _ms(ts))
            calls[d["ticket"]] = rec
            out.append(rec)
        elif ev in ("llm.answer", "llm.cancelled"):
            rec = calls.pop(d.get("ticket"), None)
            if rec is not None:
                rec.end_ms = _ms(ts)
                rec.outcome = d.get("outcome", "answered") if ev == "llm.answer" else "cancelled"
                rec.prompt_tokens = int(d.get("prompt_tokens") or 0)
                rec.completion_tokens = int(d.get("completion_tokens") or 0)
                rec.tokens_per_second = d.get("tokens_per_second")
                rec.cached_tokens = d.get("cached_tokens")
        elif ev == "sync.done":
            end = _ms(ts)
            syncs.append((name, end - 1000 * float(d.get("seconds", 0)), end))
        elif ev in ("event accepted", "published") and d.get("event_id"):
            accepted.setdefault(d["event_id"], _ms(ts))
        elif ev == "decided" and d.get("node_id"):
            accepted.setdefault("decided:" + d["node_id"], _ms(ts))
    return out, syncs, accepted


async def _drive(children: list[Child], root: Path, goal: Any, cfg: DemoConfig, timeout: float,
                 warmup: float, ready_timeout: float = 120.0, info: dict[str, Any] | None = None,
                 ) -> tuple[str, float, list[Event]]:
    settings = load_settings(
        swarm="demo", data_dir=root / "client", listen_host="127.0.0.1", listen_port=0,
        peers=[c.addr for c in children], mdns=False, scorers=cfg.scorers, max_depth=cfg.max_depth,
        max_children=cfg.max_children, max_rounds=cfg.max_rounds, log_level="warning",
        key=cfg.swarm_key, key_file=None,  # every demo swarm is private (DemoConfig.swarm_key)
        authority=cfg.authority_id, credential_file=None, credentials_dir=None, identity_file=None,
    )
    issue_credential_file(cfg, root / "client", ["submitter", "observer"])
    rt = open_runtime(settings, "submitter")
    agents = [c for c in children if c.role != "observer"]
    info = {} if info is None else info
    async with trio.open_nursery() as nursery:
        await nursery.start(rt.run)
        with trio.fail_after(ready_timeout):
            while not all(rt.plan.roles.get(c.peer_id) for c in agents):
                dead = [c.name for c in children if c.proc and c.proc.poll() is not None]
                if dead:
                    raise RuntimeError(f"agents exited: {dead}")
                await trio.sleep(0.1)
        info["ready_at"] = time.monotonic()
        await trio.sleep(warmup)  # every agent past its startup sync
        electorate = [c.peer_id for c in children if c.role == "scorer"]
        titles = goal if isinstance(goal, list) else [goal]
        gs = [await rt.publish(Goal(title=t, params=plan_params(settings, electorate))) for t in titles]
        g = gs[0]
        t0 = time.monotonic()
        with trio.fail_after(timeout):
            while not all(rt.tree().is_done(x.id) for x in gs):
                await rt.wait_change(0.5)
        makespan = time.monotonic() - t0
        await trio.sleep(0.5)
        await rt.net.sync_all()
        events = sorted(rt.plan.events.values(), key=lambda e: (e.order, e.id))
        info["tree"] = rt.tree()
        info["spent"] = {k: list(v) for k, v in rt.plan.spent.get(g.id, {}).items()}
        nursery.cancel_scope.cancel()
    return g.id, makespan, events


def run_swarm(latency: float, root: Path, *, goal: Any = "Plan a two-week trip to Japan",
              decomposers: int = 3, scorers: int = 3, executors: int = 2, observers: int = 0,
              max_depth: int = 2, max_children: int = 4, max_rounds: int = 2,
              extra_env: dict[str, str] | None = None, tag: str = "bench", timeout: float = 900.0,
              warmup: float = 1.0, llm: str = "scripted", model: str | None = None,
              ready_timeout: float = 120.0) -> SwarmRun:
    """One goal, start to done, on a fresh swarm under ``root``; every process is stopped.
    ``llm``/``model``: the agents' backend (SWARM_LLM) and embedded model, as the demo's."""
    cfg = DemoConfig(goal=goal if isinstance(goal, str) else goal[0], decomposers=decomposers, scorers=scorers, executors=executors,
                     observers=observers, llm=llm, model=model, scripted_latency=latency, web=False,
                     max_depth=max_depth, max_children=max_children, max_rounds=max_rounds,
                     extra_env={"SWARM_LOG_LEVEL": "info", **(extra_env or {})})
    (root / "logs").mkdir(parents=True, exist_ok=True)
    for role, n in (("decomposer", decomposers), ("scorer", scorers), ("executor", executors),
                    ("observer", observers)):
        for i in range(n):
            write_key(root / f"{role}-{i + 1}", f"{role}-{i + 1}", tag)
    write_key(root / "client", "submitter", tag)
    children = plan_children(cfg, root)
    info: dict[str, Any] = {}
    t_start = time.monotonic()
    start(cfg, children, root / "logs")
    try:
        gid, makespan, events = trio.run(_drive, children, root, goal, cfg, timeout, warmup, ready_timeout, info)
        ok, error = True, ""
    except Exception as exc:  # a failed run is reported, not raised: the table says so
        gid, makespan, events, ok, error = "", float("nan"), [], False, f"{type(exc).__name__}: {exc}"
    finally:
        stop(children)
    calls: list[CallRecord] = []
    syncs: list[Any] = []
    accepted: dict[str, dict[str, float]] = {}
    for c in children:
        cs, ss, acc = parse_agent_log(root / "logs" / f"{c.name}.log", c.name, c.role)
        calls += cs
        syncs += ss
        accepted[c.name] = acc
    names = {c.peer_id: c.name for c in children}
    ready_s = round(info["ready_at"] - t_start, 2) if "ready_at" in info else None
    return SwarmRun(gid, makespan, events, calls, syncs, names, accepted, root, ok, error, ready_s,
                    info.get("tree"), info.get("spent", {}))


__all__ = ["SwarmRun", "parse_agent_log", "run_swarm", "write_key"]
