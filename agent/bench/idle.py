"""Idle cost: N agent processes on 127.0.0.1, all announced, no goal. What each costs in CPU
(% of one core) and memory while nothing happens, and where that CPU goes.

The swarm is the scale bench's (agent.bench.scale): the demo's machinery, a private swarm with
an authority, a full mesh of static peers on loopback (no mDNS), the scripted LLM. A
submitter in this process waits until every agent announced itself, then leaves the swarm
(so the window measures the agents alone); after a settle period every agent's user+system
CPU time is read over the window (psutil). With ``--profile DIR`` py-spy records the first
``--profile-n`` agents during the window (raw folded stacks, one file each, plus a summary of
the hottest frames: see ``summarise``).

``python -m agent.bench.idle 10 --window 30``; ``--env SWARM_X=Y`` passes settings to every
agent (e.g. the library's heartbeat, to compare in one run)."""

from __future__ import annotations

import argparse
import collections
import os
import shutil
import statistics
import subprocess
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import psutil
import trio

from agent.bench.fleet import cpu_seconds, roles_for, start_agents
from agent.bench.swarm import write_key
from agent.demo import DemoConfig, issue_credential_file, plan_children, stop
from agent.drivers.real.runtime import open_runtime
from agent.settings import load_settings


@dataclass
class IdleRun:
    agents: int
    window_s: float
    ok: bool = False
    error: str = ""
    ready_s: float | None = None
    cpu_pct: dict[str, float] = field(default_factory=dict)  # agent -> % of a core over the window
    rss_mb: dict[str, float] = field(default_factory=dict)
    load: list[float] = field(default_factory=list)
    profiles: dict[str, str] = field(default_factory=dict)  # agent -> py-spy raw file

    def summary(self) -> dict[str, Any]:
        cpu, rss = list(self.cpu_pct.values()), list(self.rss_mb.values())
        by_role: dict[str, list[float]] = collections.defaultdict(list)
        for name, v in self.cpu_pct.items():
            by_role[name.rsplit("-", 1)[0]].append(v)
        return {
            "agents": self.agents, "ok": self.ok, "error": self.error, "ready_s": self.ready_s,
            "window_s": self.window_s,
            "cpu_pct_mean": round(statistics.fmean(cpu), 3) if cpu else None,
            "cpu_pct_median": round(statistics.median(cpu), 3) if cpu else None,
            "cpu_pct_max": round(max(cpu), 3) if cpu else None,
            "cpu_pct_total": round(sum(cpu), 2) if cpu else None,
            "cpu_pct_by_role": {r: round(statistics.fmean(v), 3) for r, v in sorted(by_role.items())},
            "rss_mb_median": round(statistics.median(rss), 1) if rss else None,
            "rss_mb_max": round(max(rss), 1) if rss else None,
            "load": self.load,
        }


async def _wait_ready(cfg: DemoConfig, children: list[Any], root: Path, run: IdleRun, timeout: float) -> None:
    settings = load_settings(
        swarm="demo", data_dir=root / "client", listen_host="127.0.0.1", listen_port=0,
        peers=[c.addr for c in children], mdns=False, scorers=cfg.scorers, max_depth=cfg.max_depth,
        max_children=cfg.max_children, max_rounds=cfg.max_rounds, log_level="warning",
        key=cfg.swarm_key, key_file=None, authority=cfg.authority_id, credential_file=None,
        credentials_dir=None, identity_file=None,
    )
    issue_credential_file(cfg, root / "client", ["submitter", "observer"])
    rt = open_runtime(settings, "submitter")
    agents = [c for c in children if c.role != "observer"]
    t0 = time.monotonic()
    async with trio.open_nursery() as nursery:
        await nursery.start(rt.run)
        with trio.fail_after(timeout):
            while not all(rt.plan.roles.get(c.peer_id) for c in agents):
                dead = [c.name for c in children if c.proc and c.proc.poll() is not None]
                if dead:
                    raise RuntimeError(f"agents exited: {dead}")
                await trio.sleep(0.2)
        run.ready_s = round(time.monotonic() - t0, 1)
        nursery.cancel_scope.cancel()


def run_idle(n: int, root: Path, *, window: float = 30.0, settle: float = 15.0,
             extra_env: dict[str, str] | None = None, profile_dir: Path | None = None,
             profile_n: int = 0, ready_timeout: float = 300.0, rate: int = 500,
             src: Path | None = None) -> IdleRun:
    roles = roles_for(n)
    run = IdleRun(agents=n, window_s=window)
    cfg = DemoConfig(decomposers=roles["decomposers"], scorers=roles["scorers"], executors=roles["executors"],
                     observers=roles["observers"], llm="scripted", scripted_latency=0.5, web=False,
                     metrics=False, max_depth=2, max_children=3,
                     extra_env={"SWARM_LOG_LEVEL": "warning", **(extra_env or {})})
    (root / "logs").mkdir(parents=True, exist_ok=True)
    for c in ("decomposer", "scorer", "executor", "observer"):
        for i in range(roles[c + "s"]):
            write_key(root / f"{c}-{i + 1}", f"{c}-{i + 1}", "idle")
    write_key(root / "client", "submitter", "idle")
    children = plan_children(cfg, root)
    start_agents(cfg, children, root / "logs", src)
    spies: list[subprocess.Popen] = []
    try:
        trio.run(_wait_ready, cfg, children, root, run, ready_timeout)
        time.sleep(settle)  # past start-up syncs, and the submitter's leaving
        procs = {c.name: psutil.Process(c.proc.pid) for c in children if c.proc}
        if profile_dir is not None and profile_n > 0:
            spy = shutil.which("py-spy") or str(Path(os.sys.executable).parent / "py-spy")
            profile_dir.mkdir(parents=True, exist_ok=True)
            # one of each role first, then the rest in order
            order = sorted(children, key=lambda c: (int(c.name.rsplit("-", 1)[1]) > 1, c.name))
            for c in order[:profile_n]:
                out = profile_dir / f"{c.name}.raw"
                run.profiles[c.name] = str(out)
                spies.append(subprocess.Popen(
                    [spy, "record", "--format", "raw", "-r", str(rate), "-d", str(int(window)), "-p",
                     str(c.proc.pid), "-o", str(out)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))
        before, t0 = cpu_seconds(procs), time.monotonic()
        time.sleep(window)
        after, secs = cpu_seconds(procs), time.monotonic() - t0
        for name, p in procs.items():
            if name in before and name in after:
                run.cpu_pct[name] = round(100 * (after[name] - before[name]) / secs, 3)
            try:
                run.rss_mb[name] = round(p.memory_info().rss / 2**20, 1)
            except psutil.Error:
                pass
        for s in spies:
            s.wait(timeout=window + 30)
        dead = [c.name for c in children if c.proc and c.proc.poll() is not None]
        run.ok = not dead
        run.error = f"agents exited: {dead}" if dead else ""
    except (RuntimeError, trio.TooSlowError, OSError, subprocess.TimeoutExpired) as exc:
        run.error = f"{type(exc).__name__}: {exc}"
    finally:
        for s in spies:
            if s.poll() is None:
                s.kill()
        run.load = [round(x, 2) for x in os.getloadavg()]
        stop(children)
    return run


# leaf frames of a thread or loop that waits (py-spy counts some of them as active: a blocking
# C call under a Python frame): trio's epoll wait, its worker threads' idle wait, the
# selector of a helper thread, pubsub's seen-cache sweeper
_IDLE_LEAVES = ("get_events", "epoll", "WorkerThread._work", "_PollLikeSelector.select", "select (",
                "wait (threading", "Event.wait", "Condition.wait", "_background_cleanup")


def _idle(frames: list[str]) -> bool:
    return bool(frames) and any(x in frames[-1] for x in _IDLE_LEAVES)


def summarise(raw: Path, top: int = 25, skip_idle: bool = True) -> list[tuple[str, int, float]]:
    """Inclusive samples per frame from a py-spy raw (folded) file: [(frame, samples, share)],
    share of the non-idle samples. Idle = the stack ends in the trio loop's epoll wait."""
    counts: collections.Counter[str] = collections.Counter()
    total = 0
    for line in raw.read_text(errors="replace").splitlines():
        stack, _, n = line.rpartition(" ")
        try:
            k = int(n)
        except ValueError:
            continue
        frames = stack.split(";")
        if skip_idle and _idle(frames):
            continue
        total += k
        for f in set(frames):
            counts[f] += k
    if not total:
        return []
    # the frames on every stack (the entry point down to trio's loop) say nothing
    return [(f, c, round(100 * c / total, 1)) for f, c in counts.most_common()
            if c < 0.97 * total and not any(x in f for x in GENERIC)][:top]


GENERIC = ("typer/", "click/", "runpy", "agent/cli.py", "agent/__main__.py", "unrolled_run", "trio/_core/_run.py")


# what a stack was doing: the first of these found anywhere in it (most specific first)
BUCKETS = (
    ("SyncClient", "sync: pulling peers (anti-entropy)"),
    ("sync_server", "sync: serving peers"),
    ("heartbeat", "gossipsub heartbeat"),
    ("identify", "identify"),
    ("multiselect", "stream protocol negotiation"),
    ("GossipChannel._validate", "gossip validator: decode + verify an event"),
    ("GossipChannel._deliver", "intake: fold + store a delivered event"),
    ("GossipChannel.publish", "publish our own event"),
    ("Pubsub", "pubsub (RPCs in/out)"),
    ("GossipSub", "gossipsub (other)"),
    ("_housekeeping", "runtime housekeeping loop"),
    ("Driver", "behaviour driver"),
    ("PeerKeeper", "peer keeper (reconnects)"),
    ("show", "observer display"),
    ("Mplex", "muxer (streams opened/closed)"),
    ("Yamux", "muxer (streams opened/closed)"),
    ("logging", "logging"),
)


def buckets(raw: Path) -> list[tuple[str, int, float]]:
    """Non-idle samples per activity (BUCKETS), with shares."""
    counts: collections.Counter[str] = collections.Counter()
    total = 0
    for line in raw.read_text(errors="replace").splitlines():
        stack, _, n = line.rpartition(" ")
        try:
            k = int(n)
        except ValueError:
            continue
        frames = stack.split(";")
        if _idle(frames):
            continue
        total += k
        name = next((b for key, b in BUCKETS if any(key in f for f in frames)), None)
        if name is None:
            leaf = frames[-1]
            name = "other: " + leaf.split(" (")[0] + " (" + leaf.split(" (")[-1].split(":")[0].split("/")[-1]
        counts[name] += k
    return [(b, c, round(100 * c / total, 1)) for b, c in counts.most_common()] if total else []


def main(argv: list[str] | None = None) -> None:
    import json

    from agent.logging import configure_logging

    p = argparse.ArgumentParser(prog="python -m agent.bench.idle")
    p.add_argument("sizes", nargs="?", default="10")
    p.add_argument("--window", type=float, default=30.0)
    p.add_argument("--settle", type=float, default=15.0)
    p.add_argument("--env", action="append", default=[], help="KEY=VALUE for every agent")
    p.add_argument("--profile", type=Path, default=None, help="py-spy raw profiles into this directory")
    p.add_argument("--profile-n", type=int, default=3)
    p.add_argument("--agent-src", type=Path, action="append", default=[],
                   help="run the agents from this checkout (repeat: each size runs once per checkout; "
                        "'.' is this one)")
    a = p.parse_args(argv)
    configure_logging("console", "error")
    env = dict(kv.split("=", 1) for kv in a.env)
    out = []
    srcs = [x.resolve() for x in a.agent_src] or [Path(".").resolve()]
    for n in [int(x) for x in a.sizes.split(",")]:
        for si, src in enumerate(srcs):
            with tempfile.TemporaryDirectory(prefix="idle-") as tmp:
                r = run_idle(n, Path(tmp), window=a.window, settle=a.settle, extra_env=env,
                             profile_dir=a.profile / f"n{n}-{si}" if a.profile else None, profile_n=a.profile_n,
                             src=src)
            s = r.summary() | {"src": str(src)}
            out.append(s | {"env": env})
            print(json.dumps(s), flush=True)
            for name, path in r.profiles.items():
                print(f"--- {name}: hottest frames (inclusive, share of non-idle samples)")
                for b, c, share in buckets(Path(path))[:12]:
                    print(f"{share:6.1f}% {c:6d}  [{b}]")
                for f, c, share in summarise(Path(path), 12):
                    print(f"{share:6.1f}% {c:6d}  {f[:150]}")
    print("| agents | agents' code | CPU % of a core per agent (mean/median/max) | total % | RSS MB (median/max) | load |")
    print("|---|---|---|---|---|---|")
    for s in out:
        print(f"| {s['agents']} | {s['src']} | {s['cpu_pct_mean']}/{s['cpu_pct_median']}/{s['cpu_pct_max']} | "
              f"{s['cpu_pct_total']} | {s['rss_mb_median']}/{s['rss_mb_max']} | {s['load']} |")


if __name__ == "__main__":
    main()
