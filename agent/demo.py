"""`python -m agent demo`: a local swarm of separate OS processes on 127.0.0.1, one goal,
live progress, the final plan, the event log; every process it started is stopped."""

from __future__ import annotations

import os
import random
import signal
import socket
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

import trio
from rich.console import Console

from agent.behaviour import strategy_for
from agent.goals import plan_params
from agent.procs import die_with_parent
from agent.core.events import Goal
from agent.progress import PlanProgress
from agent.core.identity import Identity
from agent.render import markdown_plan, rich_tree
from agent.drivers.real.runtime import load_identity, open_runtime
from agent.net.swarmkey import generate_swarm_key
from agent.settings import load_settings


@dataclass
class DemoConfig:
    goal: str = "Plan a two-week trip to Japan"
    decomposers: int = 3
    scorers: int = 3
    executors: int = 2
    observers: int = 1
    llm: str = "auto"
    mdns: bool = False
    # one level of subgoals, up to six: on a small model the plan's quality per token is best
    # there (docs/quality.md); --max-depth 2 splits each subgoal again
    max_depth: int = 1
    max_children: int = 6
    max_rounds: int = 2
    token_budget: int = 0  # the goal's token budget (0: none)
    timeout: float = 1800.0
    out_dir: Path | None = None
    scripted_latency: float = 0.2
    model: str | None = None  # embedded model name or GGUF path (SWARM_LLAMACPP_MODEL)
    out_markdown: Path | None = None  # also write the final plan here
    out_json: Path | None = None  # also write the final tree JSON here
    metrics: bool = False  # give every agent a /metrics port on 127.0.0.1
    web: bool = True  # the observers serve the web page on 127.0.0.1 (agent.web)
    keep: bool = False  # after the plan is done, keep the swarm (and its web page) up until Ctrl-C
    extra_env: dict[str, str] = field(default_factory=dict)
    # the embedded model runs once, in one shared llama.cpp server (agent.llm.server) that every
    # agent reaches over HTTP; False: each agent loads its own copy (the old way, for comparison)
    shared_llm: bool = True
    llm_parallel: int | None = None  # the shared server's slots (default: agent.llm.server's)
    llm_threads: int | None = None  # the shared server's threads (default: agent.llm.server's)
    # every demo is a private swarm of its own (with --mdns it would otherwise join, and be
    # joined by, any other open swarm named "demo" on the network)
    swarm_key: str = field(default_factory=lambda: generate_swarm_key(), repr=False)
    # and a swarm with an authority of its own: each process gets a credential for its role
    # (the observer's page: observer, submitter and scorer, so a person can submit and vote)
    authority: bool = True
    authority_seed: bytes = field(default_factory=lambda: os.urandom(32), repr=False)
    credential_days: float = 2.0

    @property
    def authority_id(self) -> str | None:
        return Identity(self.authority_seed).peer_id if self.authority else None


ROLES_OF = {"decomposer": ["decomposer"], "scorer": ["scorer"], "executor": ["executor"],
            "observer": ["observer", "submitter", "scorer"]}


def issue_credential_file(cfg: DemoConfig, data_dir: Path, roles: list[str]) -> Path | None:
    """The demo's authority signs a credential for the key in ``data_dir``: data_dir/credential.json
    (None when the demo runs without an authority)."""
    if not cfg.authority:
        return None
    import orjson

    from agent.core.membership import issue_credential
    from agent.credentials import CREDENTIAL_NAME, write_new

    now = time.time_ns() // 1_000_000
    cred = issue_credential(Identity(cfg.authority_seed), load_identity(data_dir).peer_id, roles, "demo",
                            now - 60_000, now + int(cfg.credential_days * 86_400_000))
    path = data_dir / CREDENTIAL_NAME
    write_new(path, orjson.dumps(cred.model_dump(mode="json")), overwrite=True)
    return path


@dataclass
class Child:
    name: str
    role: str
    port: int
    peer_id: str
    data_dir: Path
    metrics_port: int = 0
    web_port: int = 0
    proc: subprocess.Popen | None = None

    @property
    def addr(self) -> str:
        return f"/ip4/127.0.0.1/tcp/{self.port}/p2p/{self.peer_id}"


def _ephemeral_low() -> int:
    try:
        return int(open("/proc/sys/net/ipv4/ip_local_port_range").read().split()[0])
    except (OSError, ValueError, IndexError):
        return 32768  # Linux's default; elsewhere the OS's own range may differ


# ports this process handed out: 100 agents draw 100-200 ports from 20,000, so two of them
# drew the same one about every other run (a 100-agent scale run lost an agent: "cannot listen")
_handed_out: set[int] = set()


def free_port() -> int:
    """A port free now, below the range the OS draws outgoing connections' source ports from:
    an ephemeral port handed out by bind(0) and released was taken, before the agent bound it,
    by one of the swarm's own dials (seen: a scorer's /metrics 'Address already in use')."""
    low = _ephemeral_low()
    for _ in range(200):
        port = random.randrange(max(1024, low - 20_000), low)
        if port in _handed_out:  # free now, but already given to another agent of this run
            continue
        with socket.socket() as s:
            try:
                s.bind(("127.0.0.1", port))
            except OSError:
                continue
            _handed_out.add(port)
            return port
    with socket.socket() as s:  # a crowded range: any free port, the race as before
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def plan_children(cfg: DemoConfig, root: Path) -> list[Child]:
    out = []
    for role, n in (("decomposer", cfg.decomposers), ("scorer", cfg.scorers),
                    ("executor", cfg.executors), ("observer", cfg.observers)):
        for i in range(n):
            name = f"{role}-{i + 1}"
            d = root / name
            out.append(Child(name, role, free_port(), load_identity(d).peer_id, d,
                             free_port() if cfg.metrics else 0,
                             free_port() if cfg.web and role == "observer" else 0))
            issue_credential_file(cfg, d, ROLES_OF[role])
    return out


def child_env(cfg: DemoConfig, c: Child, everyone: list[Child], idx: int) -> dict[str, str]:
    env = dict(os.environ)
    for k in ("SWARM_KEY_FILE", "SWARM_CREDENTIAL_FILE", "SWARM_CREDENTIALS_DIR", "SWARM_IDENTITY_FILE"):
        env.pop(k, None)
    env.update({
        "SWARM_KEY": cfg.swarm_key, "SWARM_AUTHORITY": cfg.authority_id or "",
        "SWARM_SWARM": "demo", "SWARM_ROLE": c.role, "SWARM_NAME": c.name,
        "SWARM_DATA_DIR": str(c.data_dir), "SWARM_LISTEN_HOST": "127.0.0.1",
        "SWARM_LISTEN_PORT": str(c.port), "SWARM_MDNS": "true" if cfg.mdns else "false",
        "SWARM_PEERS": "" if cfg.mdns else ",".join(o.addr for o in everyone if o is not c),
        "SWARM_LLM": cfg.llm, "SWARM_LOG_FORMAT": "json", "SWARM_METRICS_PORT": str(c.metrics_port),
        "SWARM_METRICS_HOST": "127.0.0.1",
        "SWARM_WEB_PORT": str(c.web_port), "SWARM_WEB_HOST": "127.0.0.1",
        "SWARM_SCORERS": str(cfg.scorers), "SWARM_SCRIPTED_LATENCY": str(cfg.scripted_latency),
        "SWARM_STRATEGY": strategy_for(idx),
    })
    if cfg.model:
        env["SWARM_LLAMACPP_MODEL"] = cfg.model
    env.update(cfg.extra_env)
    return env


def llm_used(log_dir: Path) -> str:
    """Which backend and model the agents selected, read from their logs (llm.selected)."""
    import json

    seen: set[str] = set()
    for log in sorted(log_dir.glob("*.log")):
        for line in log.read_text(errors="replace").splitlines():
            if '"llm.selected"' not in line:
                continue
            try:
                rec = json.loads(line)
            except ValueError:
                continue
            model = str(rec.get("model") or "")
            seen.add(f"{rec.get('backend', '?')} {Path(model).name if '/' in model else model}".strip())
    return ", ".join(sorted(seen)) or "unknown"


def start_one(cfg: DemoConfig, c: Child, children: list[Child], log_dir: Path) -> None:
    idx = int(c.name.rsplit("-", 1)[1]) - 1
    fh = open(log_dir / f"{c.name}.log", "ab")
    # its own session: a Ctrl-C on the terminal reaches the demo only, which stops the agents
    # in order (stop()); the demo's death reaches them through the parent-death signal
    c.proc = subprocess.Popen(
        [sys.executable, "-m", "agent", "run"], env=child_env(cfg, c, children, idx),
        stdout=fh, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, start_new_session=True,
        preexec_fn=die_with_parent(),
    )
    fh.close()


def start(cfg: DemoConfig, children: list[Child], log_dir: Path) -> None:
    for c in children:
        start_one(cfg, c, children, log_dir)


def stop(children: list[Child], grace: float = 5.0) -> None:
    for c in children:
        if c.proc and c.proc.poll() is None:
            c.proc.send_signal(signal.SIGTERM)
    deadline = time.monotonic() + grace
    for c in children:
        if c.proc is None:
            continue
        try:
            c.proc.wait(max(0.1, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            c.proc.kill()
            c.proc.wait()


def _tail(path: Path, n: int = 8) -> str:
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-n:])
    except OSError:
        return "(no log)"


async def _drive(cfg: DemoConfig, children: list[Child], root: Path, console: Console) -> tuple[int, str]:
    settings = load_settings(
        swarm="demo", data_dir=root / "demo-client", listen_host="127.0.0.1", listen_port=0,
        peers=[] if cfg.mdns else [c.addr for c in children], mdns=cfg.mdns, scorers=cfg.scorers,
        max_depth=cfg.max_depth, max_children=cfg.max_children, max_rounds=cfg.max_rounds,
        token_budget=cfg.token_budget, log_level="warning", key=cfg.swarm_key, key_file=None, authority=cfg.authority_id,
        credential_file=None, credentials_dir=None, identity_file=None,
    )
    issue_credential_file(cfg, root / "demo-client", ["submitter", "observer"])
    rt = open_runtime(settings, "submitter")
    agents = [c for c in children if c.role != "observer"]
    t0 = time.monotonic()
    async with trio.open_nursery() as nursery:
        await nursery.start(rt.run)
        # Everyone announces itself once its LLM is loaded: wait for all before posting the goal.
        with trio.move_on_after(min(cfg.timeout, 600)) as ready_scope:
            while True:
                dead = [c for c in children if c.proc and c.proc.poll() is not None]
                if dead:
                    c = dead[0]
                    nursery.cancel_scope.cancel()
                    return 2, f"{c.name} exited with {c.proc.returncode}:\n{_tail(root / 'logs' / (c.name + '.log'))}"
                ready = {a for a, roles in rt.plan.roles.items() if roles}
                if all(c.peer_id in ready for c in agents):
                    break
                await trio.sleep(0.3)
        if ready_scope.cancelled_caught:
            waiting = [c for c in agents if c.peer_id not in {a for a, r in rt.plan.roles.items() if r}]
            nursery.cancel_scope.cancel()
            return 3, (f"{len(waiting)} agents never became ready (no LLM?), e.g. {waiting[0].name}:\n"
                       + _tail(root / "logs" / (waiting[0].name + ".log"), 4))
        console.print(f"[dim]{len(agents)} agents ready after {time.monotonic() - t0:.1f}s; posting the goal[/dim]")
        electorate = [c.peer_id for c in children if c.role == "scorer"]
        goal = await rt.publish(Goal(title=cfg.goal, params=plan_params(settings, electorate)))
        t_goal = time.monotonic()
        with trio.move_on_after(cfg.timeout) as scope, PlanProgress(console) as progress:
            while not rt.tree().is_done(goal.id):
                progress.update(rt.tree().counts())
                await rt.wait_change(1.0)
                dead = [c for c in children if c.proc and c.proc.poll() is not None]
                if dead:
                    names = ", ".join(f"{c.name} (exit {c.proc.returncode})" for c in dead)
                    nursery.cancel_scope.cancel()
                    return 2, f"agents died: {names}\n{_tail(root / 'logs' / (dead[0].name + '.log'))}"
            progress.update(rt.tree().counts())
        tree = rt.tree()
        nursery.cancel_scope.cancel()
    if scope.cancelled_caught:
        console.print(rich_tree(tree))
        return 1, f"plan not done after {cfg.timeout:.0f}s: " + ", ".join(f"{k}={v}" for k, v in tree.counts().items() if v)
    console.print(rich_tree(tree))
    console.rule("Final plan")
    plan_md = markdown_plan(tree, goal.id)
    console.print(plan_md, markup=False, highlight=False)
    if cfg.out_markdown is not None:
        cfg.out_markdown.parent.mkdir(parents=True, exist_ok=True)
        cfg.out_markdown.write_text(plan_md)
        console.print(f"plan written to {cfg.out_markdown}", markup=False, highlight=False)
    if cfg.out_json is not None:
        import orjson

        cfg.out_json.parent.mkdir(parents=True, exist_ok=True)
        cfg.out_json.write_bytes(orjson.dumps(tree.to_json(), option=orjson.OPT_INDENT_2))
        console.print(f"tree JSON written to {cfg.out_json}", markup=False, highlight=False)
    log_path = root / "events.jsonl"
    with open(log_path, "wb") as fh:
        for raw in rt.store.read_from(0, len(rt.store)):
            fh.write(raw.rstrip(b"\n") + b"\n")
    console.print(f"done in {time.monotonic() - t_goal:.1f}s (goal to plan; {t_goal - t0:.1f}s to start "
                  f"the agents) with LLM {llm_used(root / 'logs')}; {len(rt.plan)} events; digest "
                  f"{tree.digest}; event log {log_path}", markup=False, highlight=False)
    return 0, ""


def _route_signals() -> dict[int, object]:
    """SIGINT, SIGTERM and SIGHUP all stop the demo the same way, wherever it is (starting
    agents, inside trio, holding the swarm with --keep): SIGINT raises KeyboardInterrupt (trio
    delivers it at a safe point), and SIGTERM/SIGHUP are turned into a SIGINT to ourselves.
    SIGINT gets Python's handler back even when it was ignored at start: a background job of a
    script (`demo &`) starts with SIGINT ignored, and `kill -INT` must still stop it.
    Returns the previous handlers."""
    got: dict[str, int] = {}

    def forward(signum: int, _frame: object) -> None:
        got.setdefault("signal", signum)
        os.kill(os.getpid(), signal.SIGINT)

    before = {sig: signal.getsignal(sig) for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)}
    signal.signal(signal.SIGINT, signal.default_int_handler)
    signal.signal(signal.SIGTERM, forward)
    signal.signal(signal.SIGHUP, forward)
    _route_signals.got = got  # type: ignore[attr-defined]
    return before


def wants_shared_server(cfg: DemoConfig) -> bool:
    """Whether the agents would run the embedded model: then one shared server runs it."""
    if not cfg.shared_llm or cfg.llm not in ("auto", "llamacpp"):
        return False
    if cfg.llm == "llamacpp":
        return True
    from agent.llm.ollama_backend import OllamaLLM

    settings = load_settings()
    if settings.openai_base_url:
        return False  # auto: the agents take the configured OpenAI-compatible server first
    ollama = OllamaLLM.from_settings(settings)

    async def probe() -> bool:
        try:
            return (await ollama.probe(timeout=2.0))[0]
        finally:
            await ollama.aclose()

    return not trio.run(probe)


def start_shared_server(cfg: DemoConfig, root: Path, console: Console):
    from agent.llm import models
    from agent.llm.server import spawn_server

    settings = load_settings()
    model = models.resolve(cfg.model or settings.llamacpp_model, settings.model_dir)[0]  # or ModelMissing
    console.print(f"starting one shared LLM server ({model}); log in {root / 'logs' / 'llm-server.log'}",
                  highlight=False, markup=False)
    srv = spawn_server(log_path=root / "logs" / "llm-server.log", key_file=root / "llm-server.key",
                       model=model, parallel=cfg.llm_parallel, threads=cfg.llm_threads,
                       die_with_parent=True)
    env = srv.env()
    # one server for every agent: a request may wait behind one of every other agent
    env.setdefault("SWARM_LLM_TIMEOUT", os.environ.get("SWARM_LLM_TIMEOUT", "600"))
    cfg.extra_env = {**env, **cfg.extra_env}
    console.print(f"LLM server up at {srv.base_url}", highlight=False, markup=False)
    return srv


def run_demo(cfg: DemoConfig) -> int:
    console = Console()
    root = cfg.out_dir or Path("out") / time.strftime("demo-%Y%m%d-%H%M%S")
    (root / "logs").mkdir(parents=True, exist_ok=True)
    before = _route_signals()
    children: list[Child] = []
    llm_server = None
    code, reason = 1, "interrupted"
    try:
        if wants_shared_server(cfg):
            from agent.llm.base import LLMError

            try:
                llm_server = start_shared_server(cfg, root, console)
            except LLMError as exc:
                code, reason = 2, str(exc)
                return _report(console, code, reason)
        children = plan_children(cfg, root)
        console.print(f"starting {len(children)} agents ({cfg.decomposers} decomposers, {cfg.scorers} scorers, "
                      f"{cfg.executors} executors, {cfg.observers} observers; llm={cfg.llm}); logs in {root / 'logs'}")
        start(cfg, children, root / "logs")
        for c in children:
            if c.web_port:
                console.print(f"web view ({c.name}): [bold]http://127.0.0.1:{c.web_port}/[/bold]  "
                              "(the live tree, splits, votes, claims; submit goals and vote from the page)")
        code, reason = trio.run(_drive, cfg, children, root, console)
        if cfg.keep and code == 0:
            urls = [f"http://127.0.0.1:{c.web_port}/" for c in children if c.web_port]
            console.print(f"the swarm keeps running{' (web view ' + urls[0] + ')' if urls else ''}: "
                          "submit more goals; Ctrl-C stops every agent")
            while all(c.proc is None or c.proc.poll() is None for c in children):
                time.sleep(0.5)
    except BaseException as exc:
        # trio's nurseries deliver Ctrl-C wrapped in exception groups
        if not (isinstance(exc, KeyboardInterrupt) or (
                isinstance(exc, BaseExceptionGroup) and exc.subgroup(KeyboardInterrupt) is not None)):
            raise
        sig = _route_signals.got.get("signal", signal.SIGINT)  # type: ignore[attr-defined]
        if not (cfg.keep and code == 0):
            code, reason = 128 + sig, f"stopped by {signal.Signals(sig).name}"
    finally:
        # a second signal must not cut the stopping short and orphan an agent
        for sig in before:
            signal.signal(sig, signal.SIG_IGN)
        try:
            stop(children)
            if llm_server is not None:
                llm_server.stop()
        finally:
            for sig, handler in before.items():
                signal.signal(sig, handler)  # type: ignore[arg-type]
    return _report(console, code, reason)


def _report(console: Console, code: int, reason: str) -> int:
    if code > 128:
        console.print(f"demo {reason}: every agent it started is stopped", highlight=False)
    elif code:
        console.print(f"[red]demo failed:[/red] {reason}", highlight=False)
    return code
