"""`python -m agent ...`: every role and tool behind one command."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Optional

import orjson
import typer
from rich.console import Console

app = typer.Typer(add_completion=False, no_args_is_help=True,
                  help="A leaderless multi-agent planning swarm.")
err = Console(stderr=True)


@app.command()
def replay(
    log: Path = typer.Argument(..., help="JSON-lines event log"),
    as_json: bool = typer.Option(False, "--json", help="print the tree as JSON with its digest"),
    now: Optional[int] = typer.Option(None, help="'now' in ms for lease expiry (default: latest timestamp)"),
) -> None:
    """Verify and fold an event log, then print the plan tree."""
    from agent.core.plan import Plan
    from agent.core.reasons import Rejected
    from agent.logfile import read_log
    from agent.render import rich_tree

    try:
        events, bad = read_log(log)
    except OSError as exc:
        err.print(f"[red]error:[/red] cannot read {log}: {exc.strerror or exc}")
        raise typer.Exit(2)
    for b in bad:
        print(f"{log}:{b.line}: skipped: {b.reason}: {b.detail}", file=sys.stderr)
    plan = Plan()
    for ev in events:
        try:
            plan.apply(ev)
        except Rejected as exc:
            if exc.reason.value != "duplicate":
                print(f"{log}: event {ev.id[:12]} refused: {exc}", file=sys.stderr)
    for ev, key in plan.pending_events():
        print(f"{log}: event {ev.id[:12]} refused: unknown_dependency: waits for {key}", file=sys.stderr)
    tree = plan.tree(now)
    if as_json:
        sys.stdout.write(orjson.dumps(tree.to_json(), option=orjson.OPT_INDENT_2).decode() + "\n")
    else:
        Console().print(rich_tree(tree))


@app.command()
def simulate(
    seed: int = typer.Option(0, help="random seed: same seed, same log"),
    out: Path = typer.Option(..., "--out", help="where to write the signed event log (JSON lines)"),
    goal: str = typer.Option("Plan a two-week trip to Japan"),
    decomposers: int = typer.Option(3, min=1, max=20),
    scorers: int = typer.Option(5, min=1, max=51),
    executors: int = typer.Option(3, min=1, max=20),
    quorum: Optional[int] = typer.Option(None, min=1),
    max_depth: int = typer.Option(2, min=0, max=4),
    max_children: int = typer.Option(4, min=2, max=8),
    max_rounds: int = typer.Option(2, min=1, max=6),
    crash_probability: float = typer.Option(0.15, min=0.0, max=1.0),
) -> None:
    """Run the whole protocol in memory (virtual time, scripted LLM, no network)."""
    from agent.logfile import write_log
    from agent.sim import SimConfig, simulate as run_sim

    if quorum is not None and quorum > scorers:
        err.print(f"[red]error:[/red] quorum {quorum} exceeds {scorers} scorers")
        raise typer.Exit(2)
    cfg = SimConfig(seed=seed, goal=goal, decomposers=decomposers, scorers=scorers,
                    executors=executors, quorum=quorum, max_depth=max_depth,
                    max_children=max_children, max_rounds=max_rounds,
                    crash_probability=crash_probability)
    log, stats, plan = run_sim(cfg)
    write_log(out, log)
    tree = plan.tree()
    print(
        f"{'done' if stats.done else 'NOT done'}: {stats.events} events, {stats.proposals} proposals "
        f"({stats.refinements} refinements), {stats.votes} votes, max round {stats.max_round}, "
        f"{stats.claims} claims, {stats.collisions} collisions, {stats.takeovers} takeovers, "
        f"{stats.crashes} crashes, {stats.virtual_ms / 1000:.1f} s virtual; digest {tree.digest}",
        file=sys.stderr,
    )
    if not stats.done:
        raise typer.Exit(1)


def main() -> None:
    app()


def _settings(**overrides):
    from agent.logging import configure_logging
    from agent.settings import SettingsError, load_settings

    try:
        s = load_settings(**{k: v for k, v in overrides.items() if v is not None})
    except SettingsError as exc:
        err.print(f"[red]error:[/red] {exc}", markup=True, highlight=False)
        raise typer.Exit(2)
    configure_logging(s.log_format, s.log_level)
    return s


@app.command()
def run(
    role: Optional[str] = typer.Option(None, help="decomposer|scorer|executor|observer (or SWARM_ROLE)"),
) -> None:
    """Run one agent until SIGTERM (the container entrypoint; all settings from SWARM_* / .env)."""
    import trio

    from agent.app import serve

    s = _settings(role=role)
    if s.role is None:
        err.print("[red]error:[/red] no role: pass --role or set SWARM_ROLE")
        raise typer.Exit(2)
    trio.run(serve, s, s.role)


@app.command()
def submit(
    goal: str = typer.Argument(..., help="the goal, e.g. 'Plan a two-week trip to Japan'"),
    description: str = typer.Option("", help="more context for the goal"),
    timeout: float = typer.Option(60.0, help="seconds to find a peer and have the goal stored"),
) -> None:
    """Join the swarm, publish a goal, wait until a peer has stored it, print its id."""
    import trio

    from agent.app import SubmitError, submit as do_submit

    s = _settings()
    try:
        gid = trio.run(do_submit, s, goal, description, timeout)
    except SubmitError as exc:
        err.print(f"[red]error:[/red] {exc}")
        raise typer.Exit(1)
    print(gid)


@app.command()
def observe(
    once: bool = typer.Option(False, "--once", help="sync, print the tree, exit"),
    as_json: bool = typer.Option(False, "--json", help="with --once: print the tree as JSON"),
    timeout: float = typer.Option(30.0, help="with --once: seconds to find a peer"),
) -> None:
    """Watch the plan live (an observer never publishes), or take one snapshot with --once."""
    import trio

    from agent.app import SubmitError, observe_once, serve

    s = _settings()
    if not once:
        trio.run(serve, s, "observer")
        return
    try:
        data, answered = trio.run(observe_once, s, timeout)
    except SubmitError as exc:
        err.print(f"[red]error:[/red] {exc}")
        raise typer.Exit(1)
    err.print(f"synced from {answered} peer{'s' if answered != 1 else ''}")
    if as_json:
        sys.stdout.write(orjson.dumps(data, option=orjson.OPT_INDENT_2).decode() + "\n")
    else:
        for g in data["goals"]:
            print(f"{g['state']:>8}  {g['title']}")
        print(f"digest {data['digest']}")


@app.command()
def keygen(
    out: Optional[Path] = typer.Option(None, "--out", help="write it to this new file "
                                       "(mode 600) instead of stdout; never overwrites"),
) -> None:
    """Make a swarm key (libp2p swarm.key format) for a private swarm.

    Agents with SWARM_KEY_FILE=<that file> (or SWARM_KEY=<its content>) only talk to agents
    holding the same key; a peer without it cannot connect, read, sync or publish."""
    import os

    from agent.net.swarmkey import generate_swarm_key, key_id, parse_swarm_key

    text = generate_swarm_key()
    if out is None:
        sys.stdout.write(text)
        return
    try:
        fd = os.open(out, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except FileExistsError:
        err.print(f"[red]error:[/red] {out} exists; not overwriting a swarm key")
        raise typer.Exit(1)
    except OSError as exc:
        err.print(f"[red]error:[/red] cannot create {out}: {exc.strerror or exc}")
        raise typer.Exit(1)
    with os.fdopen(fd, "w") as fh:
        fh.write(text)
    err.print(f"wrote swarm key {key_id(parse_swarm_key(text))} to {out}")


@app.command()
def demo(
    goal: str = typer.Argument("Plan a two-week trip to Japan"),
    decomposers: int = typer.Option(3, min=1, max=10),
    scorers: int = typer.Option(3, min=1, max=15),
    executors: int = typer.Option(2, min=1, max=10),
    observers: int = typer.Option(1, min=0, max=3),
    llm: str = typer.Option("auto", help="auto|ollama|llamacpp|scripted"),
    mdns: bool = typer.Option(False, "--mdns", help="let the processes find each other by mDNS"),
    max_depth: int = typer.Option(2, min=0, max=4),
    max_children: int = typer.Option(4, min=2, max=8),
    max_rounds: int = typer.Option(2, min=1, max=6),
    timeout: float = typer.Option(1800.0, help="seconds before giving up"),
    out_dir: Optional[Path] = typer.Option(None, help="where logs and the event log go"),
    scripted_latency: float = typer.Option(0.2, help="with --llm scripted: seconds per answer"),
) -> None:
    """Start a local swarm of separate processes, submit GOAL, show progress, print the plan."""
    from agent.demo import DemoConfig, run_demo

    _settings(log_format="console" if sys.stderr.isatty() else "json", log_level="warning")
    cfg = DemoConfig(goal=goal, decomposers=decomposers, scorers=scorers, executors=executors,
                     observers=observers, llm=llm, mdns=mdns, max_depth=max_depth,
                     max_children=max_children, max_rounds=max_rounds, timeout=timeout,
                     out_dir=out_dir, scripted_latency=scripted_latency)
    raise typer.Exit(run_demo(cfg))
