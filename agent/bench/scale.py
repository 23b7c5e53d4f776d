"""Scale: the largest swarm of separate agent processes this machine runs to completion.

For each size N (agent processes, split over the roles), one goal on a fresh swarm over
libp2p on 127.0.0.1 with the scripted LLM at a fixed latency. Reported per size: whether the
plan completed and in how long, processes that died, each agent's RSS and CPU while idle (all
announced, no goal yet) and while busy (goal -> done), and the gossip messages received per
second across the swarm (``swarm_gossip_messages_received_total`` scraped from every agent).

``python -m agent bench --sections scale --scale-sizes 10,20,30``."""

from __future__ import annotations

import statistics
import time
import urllib.error
import urllib.request
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import psutil
import trio

from agent.demo import Child, DemoConfig, issue_credential_file, plan_children, start, stop
from agent.goals import make_goal
from agent.drivers.real.runtime import open_runtime
from agent.settings import load_settings
from agent.bench.fleet import cpu_seconds, roles_for, start_agents
from agent.bench.swarm import write_key

GOSSIP_METRIC = "swarm_gossip_messages_received_total"





@dataclass
class Usage:
    rss_mb: list[float] = field(default_factory=list)  # per agent, at the end of the window
    cpu_pct: list[float] = field(default_factory=list)  # per agent, mean over the window

    def summary(self) -> dict[str, float | None]:
        def med(xs: list[float]) -> float | None:
            return round(statistics.median(xs), 1) if xs else None

        return {"rss_mb_median": med(self.rss_mb), "rss_mb_max": round(max(self.rss_mb), 1) if self.rss_mb else None,
                "cpu_pct_median": med(self.cpu_pct),
                "cpu_pct_max": round(max(self.cpu_pct), 1) if self.cpu_pct else None}


@dataclass
class ScaleRun:
    agents: int
    roles: dict[str, int]
    ok: bool
    error: str = ""
    makespan_s: float | None = None
    ready_s: float | None = None  # start -> every agent announced itself to the submitter
    died: list[str] = field(default_factory=list)
    idle: dict[str, Any] = field(default_factory=dict)
    busy: dict[str, Any] = field(default_factory=dict)
    events: int = 0
    gossip_msgs_per_s: float | None = None
    load: list[float] = field(default_factory=list)
    electorate: int = 0  # scorers named in the goal (all of them unless capped)
    static_peers: int = 0  # static peers per agent (0: every other agent)
    decisions: int = 0  # nodes decided (a split or a leaf) in the finished plan
    deliveries: float = 0.0  # gossip messages received, summed over the agents, goal -> done
    cpu_s: float = 0.0  # CPU seconds of every agent process, goal -> done
    deliveries_per_decision: float | None = None
    cpu_s_per_decision: float | None = None
    cpu_ms_per_delivery: float | None = None  # all busy CPU over all deliveries (the issue's measure)


def _usage(procs: dict[str, psutil.Process], before: dict[str, float], seconds: float) -> Usage:
    after = cpu_seconds(procs)
    u = Usage()
    for name, p in procs.items():
        try:
            u.rss_mb.append(p.memory_info().rss / 2**20)
        except psutil.Error:
            continue
        if name in before and name in after and seconds > 0:
            u.cpu_pct.append(100 * (after[name] - before[name]) / seconds)
    return u


def _scrape_gossip(children: list[Child]) -> float:
    total = 0.0
    for c in children:
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{c.metrics_port}/metrics", timeout=5) as r:
                for line in r.read().decode().splitlines():
                    if line.startswith(GOSSIP_METRIC + " "):
                        total += float(line.split()[1])
        except (urllib.error.URLError, OSError, ValueError):
            pass
    return total


def _spy(children: list[Child], profile_dir: Path | None, n: int, seconds: float) -> list[Any]:
    """py-spy on the first agent of each role, then the rest in order (raw folded stacks)."""
    import os
    import subprocess
    import sys

    if profile_dir is None or n <= 0:
        return []
    profile_dir.mkdir(parents=True, exist_ok=True)
    spy = str(Path(sys.executable).parent / "py-spy")
    order = sorted(children, key=lambda c: (int(c.name.rsplit("-", 1)[1]) > 1, c.name))
    return [subprocess.Popen([spy, "record", "--format", "raw", "-r", "200", "-d", str(int(seconds)), "-p",
                              str(c.proc.pid), "-o", str(profile_dir / f"{c.name}.raw")],
                             stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
            for c in order[:n] if c.proc and os.path.exists(f"/proc/{c.proc.pid}")]


def _stop_spies(spies: list[Any]) -> None:
    import signal
    import subprocess

    for s in spies:
        if s.poll() is None:
            s.send_signal(signal.SIGINT)  # py-spy writes what it has on SIGINT
    for s in spies:
        try:
            s.wait(30)
        except subprocess.TimeoutExpired:
            s.kill()


async def _drive(cfg: DemoConfig, children: list[Child], root: Path, run: ScaleRun, idle_s: float,
                 timeout: float, electorate_cap: int = 0, profile_dir: Path | None = None,
                 profile_n: int = 0, ready_timeout: float = 300.0, client_peers: int = 0) -> None:
    settings = load_settings(
        swarm="demo", data_dir=root / "client", listen_host="127.0.0.1", listen_port=0,
        peers=[c.addr for c in (children[::max(1, len(children) // client_peers)] if client_peers else children)],
        mdns=False, scorers=cfg.scorers, max_depth=cfg.max_depth,
        max_children=cfg.max_children, max_rounds=cfg.max_rounds, log_level="warning",
        key=cfg.swarm_key, key_file=None, authority=cfg.authority_id, credential_file=None,
        credentials_dir=None, identity_file=None,
    )
    issue_credential_file(cfg, root / "client", ["submitter", "observer"])
    rt = open_runtime(settings, "submitter")
    procs = {c.name: psutil.Process(c.proc.pid) for c in children if c.proc}
    agents = [c for c in children if c.role != "observer"]
    t_start = time.monotonic()
    async with trio.open_nursery() as nursery:
        await nursery.start(rt.run)
        with trio.fail_after(ready_timeout):
            while not all(rt.plan.roles.get(c.peer_id) for c in agents):
                run.died = [c.name for c in children if c.proc and c.proc.poll() is not None]
                if run.died:
                    raise RuntimeError(f"agents exited: {run.died}")
                await trio.sleep(0.2)
        run.ready_s = round(time.monotonic() - t_start, 1)
        await trio.sleep(2.0)  # past every agent's start-up sync
        before, t0 = cpu_seconds(procs), time.monotonic()
        await trio.sleep(idle_s)
        usage = _usage(procs, before, time.monotonic() - t0)
        run.idle = asdict(usage) | usage.summary()
        scorers = [c.peer_id for c in children if c.role == "scorer"]
        # a committee of electorate_cap drawn from them (agent.core.committee); 0: every scorer
        settings = settings.model_copy(update={"committee": electorate_cap})
        body = make_goal(settings, cfg.goal, "", scorers, author=rt.me)
        run.electorate = len(body.params.electorate)
        g0 = await trio.to_thread.run_sync(_scrape_gossip, children)
        goal = await rt.publish(body)
        before, t0 = cpu_seconds(procs), time.monotonic()
        cpu0 = dict(before)
        spies = _spy(children, profile_dir, profile_n, timeout)
        try:
            with trio.fail_after(timeout):
                while not rt.tree().is_done(goal.id):
                    run.died = [c.name for c in children if c.proc and c.proc.poll() is not None]
                    await rt.wait_change(0.5)
        finally:
            busy_s = time.monotonic() - t0
            await trio.to_thread.run_sync(_stop_spies, spies)
        run.makespan_s = round(busy_s, 2)
        usage = _usage(procs, before, busy_s)
        run.busy = asdict(usage) | usage.summary()
        g1 = await trio.to_thread.run_sync(_scrape_gossip, children)
        run.gossip_msgs_per_s = round((g1 - g0) / busy_s, 1) if busy_s > 0 else None
        run.events = len(rt.plan.events)
        cpu1 = cpu_seconds(procs)
        run.cpu_s = round(sum(cpu1[k] - cpu0[k] for k in cpu1 if k in cpu0), 2)
        run.deliveries = g1 - g0
        run.decisions = sum(1 for n in rt.tree().walk() if n.decided is not None)
        if run.decisions:
            run.deliveries_per_decision = round(run.deliveries / run.decisions, 1)
            run.cpu_s_per_decision = round(run.cpu_s / run.decisions, 2)
        if run.deliveries:
            run.cpu_ms_per_delivery = round(1000 * run.cpu_s / run.deliveries, 2)
        run.died = [c.name for c in children if c.proc and c.proc.poll() is not None]
        nursery.cancel_scope.cancel()


def run_scale(n: int, root: Path, *, latency: float = 0.5, idle_s: float = 10.0, timeout: float = 900.0,
              max_depth: int = 2, max_children: int = 3, electorate_cap: int = 0, max_decomposers: int = 0,
              extra_env: dict[str, str] | None = None, profile_dir: Path | None = None,
              profile_n: int = 0, src: Path | None = None, peers: int = 0,
              ready_timeout: float = 300.0) -> ScaleRun:
    import os

    roles = roles_for(n, max_decomposers)
    run = ScaleRun(agents=n, roles=roles, ok=False, static_peers=peers)
    cfg = DemoConfig(decomposers=roles["decomposers"], scorers=roles["scorers"], executors=roles["executors"],
                     observers=roles["observers"], llm="scripted", scripted_latency=latency, web=False,
                     metrics=True, max_depth=max_depth, max_children=max_children,
                     extra_env={"SWARM_LOG_LEVEL": "warning", **(extra_env or {})})
    (root / "logs").mkdir(parents=True, exist_ok=True)
    for c in ("decomposer", "scorer", "executor", "observer"):
        for i in range(roles[c + "s"]):
            write_key(root / f"{c}-{i + 1}", f"{c}-{i + 1}", "scale")
    write_key(root / "client", "submitter", "scale")
    children = plan_children(cfg, root)
    if src is not None or peers:  # another checkout's agents (a baseline), or fewer static peers

        start_agents(cfg, children, root / "logs", src, peers)
    else:
        start(cfg, children, root / "logs")
    try:
        trio.run(_drive, cfg, children, root, run, idle_s, timeout, electorate_cap, profile_dir, profile_n,
                 ready_timeout, peers)
        run.ok = not run.died
        if run.died:
            run.error = f"agents exited: {run.died}"
    except (RuntimeError, trio.TooSlowError, OSError, ExceptionGroup) as exc:
        inner = exc.exceptions[0] if isinstance(exc, ExceptionGroup) and exc.exceptions else exc
        run.error = f"{type(inner).__name__}: {inner}"
    finally:
        run.load = [round(x, 2) for x in os.getloadavg()]
        stop(children)
    return run


def table(runs: list[dict[str, Any]]) -> list[str]:
    lines = ["| agents | roles (d/s/e/o) | completed | goal -> done s | died | RSS MB idle (med/max) | "
             "RSS MB busy (med/max) | CPU % idle (med/max) | CPU % busy (med/max) | gossip msgs/s | events | load | "
             "electorate | decisions | deliveries/decision | CPU s/decision | CPU ms/delivery |",
             "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in runs:
        ro = r["roles"]
        i, b = r.get("idle") or {}, r.get("busy") or {}
        lines.append(
            f"| {r['agents']} | {ro['decomposers']}/{ro['scorers']}/{ro['executors']}/{ro['observers']} | "
            f"{'yes' if r['ok'] else 'no: ' + r['error'][:80]} | {r.get('makespan_s')} | {len(r.get('died') or [])} | "
            f"{i.get('rss_mb_median')}/{i.get('rss_mb_max')} | {b.get('rss_mb_median')}/{b.get('rss_mb_max')} | "
            f"{i.get('cpu_pct_median')}/{i.get('cpu_pct_max')} | {b.get('cpu_pct_median')}/{b.get('cpu_pct_max')} | "
            f"{r.get('gossip_msgs_per_s')} | {r.get('events')} | {r.get('load')} | {r.get('electorate')} | "
            f"{r.get('decisions')} | {r.get('deliveries_per_decision')} | {r.get('cpu_s_per_decision')} | "
            f"{r.get('cpu_ms_per_delivery')} |")
    return lines


def main(sizes: list[int], out_dir: Path, **kw: Any) -> list[dict[str, Any]]:
    runs = []
    for n in sizes:
        r = run_scale(n, out_dir / f"scale-{n}", **kw)
        d = asdict(r)
        for k in ("idle", "busy"):
            d[k] = {x: y for x, y in d[k].items() if x not in ("rss_mb", "cpu_pct")}
        runs.append(d)
        print("\n".join(table([d])[2:]), flush=True)
    return runs


if __name__ == "__main__":
    import json
    import tempfile

    from agent.logging import configure_logging

    import argparse

    configure_logging("console", "error")
    ap = argparse.ArgumentParser(prog="python -m agent.bench.scale")
    ap.add_argument("sizes", nargs="?", default="10,20,30")
    ap.add_argument("--electorate", type=int, default=0, help="a committee of K electors drawn from the scorers (agent.core.committee); 0: all")
    ap.add_argument("--max-decomposers", type=int, default=0)
    ap.add_argument("--idle", type=float, default=10.0, help="seconds of the idle window")
    ap.add_argument("--timeout", type=float, default=900.0)
    ap.add_argument("--env", action="append", default=[], help="KEY=VALUE for every agent")
    ap.add_argument("--profile", type=Path, default=None, help="py-spy the busy window of --profile-n agents")
    ap.add_argument("--profile-n", type=int, default=4)
    ap.add_argument("--agent-src", type=Path, default=None, help="run the agents from this checkout")
    ap.add_argument("--keep", type=Path, default=None, help="keep every swarm's logs and keys here")
    ap.add_argument("--peers", type=int, default=0,
                    help="static peers per agent (ring + random; 0: every other agent)")
    ap.add_argument("--ready-timeout", type=float, default=300.0)
    a = ap.parse_args()
    sizes = [int(x) for x in a.sizes.split(",")]
    with tempfile.TemporaryDirectory(prefix="scale-") as tmp:
        runs = main(sizes, a.keep or Path(tmp), electorate_cap=a.electorate, max_decomposers=a.max_decomposers,
                    idle_s=a.idle, timeout=a.timeout, extra_env=dict(kv.split("=", 1) for kv in a.env),
                    profile_dir=a.profile, profile_n=a.profile_n,
                    src=a.agent_src.resolve() if a.agent_src else None, peers=a.peers,
                    ready_timeout=a.ready_timeout)
    if a.profile:
        from agent.bench.idle import buckets

        for raw in sorted(a.profile.glob("*.raw")):
            print(f"--- busy {raw.stem}: share of non-idle samples")
            for b, c, share in buckets(raw)[:14]:
                print(f"{share:6.1f}% {c:6d}  [{b}]")
    print("\n".join(table(runs)))
    print(json.dumps(runs))
