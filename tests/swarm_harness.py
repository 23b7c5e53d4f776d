"""A local multi-process swarm on 127.0.0.1 for tests (scripted LLM unless told otherwise)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import tempfile
from pathlib import Path

import trio

from agent.core.plan import Plan
from agent.core.tree import derive
from agent.demo import ROLES_OF, Child, DemoConfig, child_env, issue_credential_file, plan_children, stop
from agent.logfile import read_log
from agent.drivers.real.runtime import Runtime, open_runtime
from agent.settings import load_settings

FAST_ENV = {
    "SWARM_PROPOSAL_WINDOW": "0.6", "SWARM_VOTE_TIMEOUT": "0.5", "SWARM_SETTLE_WINDOW": "0.5",
    "SWARM_LEASE_SECONDS": "6", "SWARM_ROUND_TIMEOUT": "6", "SWARM_SYNC_INTERVAL": "2",
    "SWARM_RECONNECT_INTERVAL": "1", "SWARM_STARTUP_SYNC": "2", "SWARM_LOG_LEVEL": "info",
    # a dead rapporteur costs each result it would have read this long (a chaos test kills one)
    "SWARM_REVIEW_WINDOW": "15",
}


class LocalSwarm:
    """``agent_env``: extra settings for single agents by name (e.g. a clock offset for one);
    ``agent_prefix``: argv to run one agent under (e.g. ``nsenter`` into a mount namespace)."""

    def __init__(self, root: Path, **kw) -> None:
        extra = {**FAST_ENV, **kw.pop("extra_env", {})}
        self.agent_env: dict[str, dict[str, str]] = kw.pop("agent_env", {})
        self.agent_prefix: dict[str, list[str]] = kw.pop("agent_prefix", {})
        self.cfg = DemoConfig(llm=kw.pop("llm", "scripted"), scripted_latency=kw.pop("scripted_latency", 0.05),
                              extra_env=extra, **kw)
        self.root = root
        (root / "logs").mkdir(parents=True, exist_ok=True)
        self.children = plan_children(self.cfg, root)

    def __enter__(self) -> "LocalSwarm":
        try:
            for c in self.children:
                self.start_child(c)
        except BaseException:
            stop(self.children)
            raise
        return self

    def start_child(self, c: Child) -> None:
        """Start (or restart) one agent: agent.demo's environment plus its own overrides; its
        output is appended to logs/<name>.log."""
        idx = int(c.name.rsplit("-", 1)[1]) - 1
        env = {**child_env(self.cfg, c, self.children, idx), **self.agent_env.get(c.name, {})}
        with open(self.root / "logs" / f"{c.name}.log", "ab") as fh:
            c.proc = subprocess.Popen(
                [*self.agent_prefix.get(c.name, []), sys.executable, "-m", "agent", "run"], env=env,
                stdout=fh, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, start_new_session=True)

    def __exit__(self, *exc) -> None:
        stop(self.children)

    def child(self, name: str) -> Child:
        return next(c for c in self.children if c.name == name)

    def kill(self, name: str) -> None:
        c = self.child(name)
        os.kill(c.proc.pid, signal.SIGKILL)
        c.proc.wait()

    def add(self, role: str, count: int) -> list[Child]:
        """Start more agents of a role, peered with everyone (scaling up while a plan runs)."""
        from agent.demo import free_port
        from agent.drivers.real.runtime import load_identity

        new = []
        for _ in range(count):
            n = sum(1 for c in self.children if c.role == role) + 1
            name = f"{role}-{n}"
            d = self.root / name
            c = Child(name, role, free_port(), load_identity(d).peer_id, d)
            issue_credential_file(self.cfg, d, ROLES_OF.get(role, [role]))
            self.children.append(c)
            new.append(c)
        for c in new:
            self.start_child(c)
        return new

    def restart(self, name: str) -> None:
        self.start_child(self.child(name))

    def signal(self, name: str, sig: int) -> None:
        os.kill(self.child(name).proc.pid, sig)

    def log_text(self, name: str) -> str:
        return (self.root / "logs" / f"{name}.log").read_text(errors="replace")

    # the test's own hand (drivers, CLI tools): a member in every role, so tests can publish
    # whatever they need; agents get only their own role (agent.demo)
    TEST_ROLES = ["decomposer", "executor", "observer", "scorer", "submitter"]

    def driver(self, peers: list[Child] | None = None, data_dir: Path | None = None,
               roles: list[str] | None = None) -> Runtime:
        s = load_settings(swarm="demo", listen_host="127.0.0.1", listen_port=0, mdns=False,
                          peers=[c.addr for c in (peers or self.children)], scorers=self.cfg.scorers,
                          max_depth=self.cfg.max_depth, max_children=self.cfg.max_children,
                          max_rounds=self.cfg.max_rounds, sync_interval=2, reconnect_interval=1,
                          key=self.cfg.swarm_key, key_file=None, authority=self.cfg.authority_id,
                          credential_file=None, credentials_dir=None, identity_file=None)
        data_dir = data_dir or Path(tempfile.mkdtemp(prefix="driver-", dir=self.root))
        issue_credential_file(self.cfg, data_dir, roles or self.TEST_ROLES)
        return open_runtime(s, "submitter", data_dir=data_dir)

    def cli_identity(self) -> dict[str, str]:
        """SWARM_* for a CLI tool run by the test (`submit`, `observe`): its key and credential."""
        d = self.root / "cli-identity"
        cred = issue_credential_file(self.cfg, d, self.TEST_ROLES)
        if cred is None:
            return {}
        return {"SWARM_IDENTITY_FILE": str(d / "key.ed25519"), "SWARM_CREDENTIAL_FILE": str(cred)}

    def env(self, peers: list[Child], *, exactly: bool = False) -> dict[str, str]:
        # a submitter names as electorate the scorers it holds connections to (agent.goals):
        # it reaches them directly, as a user's SWARM_PEERS (or mDNS) must; ``exactly``: the
        # peers given and no others (a tool that must sync from one peer alone)
        if not exactly:
            peers = list(peers) + [c for c in self.children if c.role == "scorer" and c not in peers]
        env = {k: v for k, v in os.environ.items()
               if k not in ("SWARM_KEY_FILE", "SWARM_CREDENTIAL_FILE", "SWARM_CREDENTIALS_DIR", "SWARM_IDENTITY_FILE")}
        return {**env, **self.cli_identity(), "SWARM_AUTHORITY": self.cfg.authority_id or "",
                "SWARM_KEY": self.cfg.swarm_key,  # the swarm is private (agent.demo)
                "SWARM_SWARM": "demo", "SWARM_MDNS": "false", "SWARM_LISTEN_HOST": "127.0.0.1",
                "SWARM_PEERS": ",".join(c.addr for c in peers), "SWARM_SCORERS": str(self.cfg.scorers),
                "SWARM_MAX_DEPTH": str(self.cfg.max_depth), "SWARM_MAX_CHILDREN": str(self.cfg.max_children),
                "SWARM_MAX_ROUNDS": str(self.cfg.max_rounds), "SWARM_LOG_FORMAT": "json"}

    def stored_digest(self, name: str, now_ms: int) -> str:
        events, bad = read_log(self.child(name).data_dir / "events.jsonl")
        assert not bad, bad
        from agent.credentials import membership_of

        plan = Plan(membership_of(self))
        for e in events:
            plan.apply(e)
        return derive(plan, now_ms).digest

    # duck-typed settings for membership_of
    @property
    def authority(self) -> str | None:
        return self.cfg.authority_id

    swarm = "demo"


async def wait_ready(rt: Runtime, children: list[Child], timeout: float) -> None:
    agents = [c for c in children if c.role != "observer"]
    with trio.fail_after(timeout):
        while not all(rt.plan.roles.get(c.peer_id) for c in agents):
            dead = [c.name for c in children if c.proc and c.proc.poll() is not None]
            assert not dead, f"agents exited: {dead}"
            await trio.sleep(0.2)


async def cli(*args: str, env: dict[str, str], timeout: float = 120) -> subprocess.CompletedProcess:
    with trio.fail_after(timeout):
        return await trio.run_process([sys.executable, "-m", "agent", *args], env=env,
                                      capture_stdout=True, capture_stderr=True, check=False)
