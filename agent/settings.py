"""All configuration, from SWARM_* environment variables or a .env file."""

from __future__ import annotations

import fcntl
import os
import re
import socket
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Literal

from pydantic import (
    Field, PrivateAttr, SecretStr, ValidationError, field_validator, model_validator,
)
from pydantic_settings import BaseSettings, NoDecode, SettingsConfigDict

if TYPE_CHECKING:
    from agent.behaviour.timing import Timing

Role = Literal["decomposer", "scorer", "executor", "observer"]

# ---------------------------------------------------------------- data dir templates
# SWARM_DATA_DIR may name its directory by placeholders, expanded once at load time, so that one
# volume shared by every container of a Compose project gives each agent its own directory that
# survives re-creation of the container (same key, same log, same peer):
#   {hostname}  socket.gethostname(): stable where the hostname is (Compose `hostname:`)
#   {slot}      the lowest n >= 1 whose directory no running process holds: for scaled
#               replicas, whose hostname is the container id (new on every re-creation)
# A templated directory is held for the life of the process by an exclusive flock on
# DATA_DIR_LOCK inside it (released by the kernel when the process dies, however it dies), so
# two live agents never share one key and log: `{slot}` skips a held directory, `{hostname}`
# refuses it. Replicas of one service are interchangeable, so which replica takes which slot
# does not matter: the set of peers is the same after `up --force-recreate`, `scale` down/up or
# a crash. The lock is advisory and needs a filesystem where flock works across processes
# (local disks and Docker/podman local volumes; not every network filesystem).
DATA_DIR_LOCK = "agent.lock"
DATA_DIR_PLACEHOLDERS = ("hostname", "slot")
MAX_SLOTS = 1000
_PLACEHOLDER = re.compile(r"\{([^{}]*)\}")
_held: dict[str, tuple[Path, int]] = {}  # expanded template -> (directory, locked fd), per process


def _lock_dir(path: Path) -> int | None:
    """The fd of an exclusive flock on path/DATA_DIR_LOCK (written: host and pid), or None when
    another process holds it."""
    path.mkdir(parents=True, exist_ok=True)
    fd = os.open(path / DATA_DIR_LOCK, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        os.close(fd)
        return None
    except BaseException:
        os.close(fd)
        raise
    os.ftruncate(fd, 0)
    os.pwrite(fd, f"{socket.gethostname()} {os.getpid()}\n".encode(), 0)
    return fd


def expand_data_dir(template: str) -> Path:
    """SWARM_DATA_DIR with its placeholders expanded (see above); a plain path is returned as is.
    Idempotent within a process: the same template gives the directory already held."""
    names = _PLACEHOLDER.findall(template)
    if not names:
        return Path(template)
    unknown = sorted(set(names) - set(DATA_DIR_PLACEHOLDERS))
    if unknown:
        raise ValueError(f"unknown placeholder {{{unknown[0]}}} in {template!r} "
                         f"(known: {', '.join('{%s}' % n for n in DATA_DIR_PLACEHOLDERS)})")
    host = socket.gethostname()
    if not host or "/" in host:
        raise ValueError(f"hostname {host!r} cannot name a directory")
    base = template.replace("{hostname}", host)
    if base in _held:
        return _held[base][0]
    if "{slot}" not in base:
        fd = _lock_dir(Path(base))
        if fd is None:
            owner = (Path(base) / DATA_DIR_LOCK).read_text(errors="replace").strip() or "?"
            raise ValueError(f"{base} is in use by another agent (host and pid: {owner}). A second "
                             "command beside a running agent needs a SWARM_DATA_DIR of its own "
                             "(e.g. /tmp/x); replicas that share a hostname need {slot} in it")
        _held[base] = (Path(base), fd)
        return Path(base)
    for n in range(1, MAX_SLOTS + 1):
        path = Path(base.replace("{slot}", str(n)))
        fd = _lock_dir(path)
        if fd is not None:
            _held[base] = (path, fd)
            return path
    raise ValueError(f"all {MAX_SLOTS} slots of {template!r} are held by running agents")
LLMBackendName = Literal["auto", "ollama", "llamacpp", "openai", "scripted"]


class Settings(BaseSettings):
    model_config = SettingsConfigDict(
        env_prefix="SWARM_", env_file=".env", env_file_encoding="utf-8", extra="ignore"
    )

    # identity and storage
    swarm: str = Field("default", min_length=1, max_length=64, pattern=r"^[A-Za-z0-9_.-]+$")
    role: Role | None = None
    name: str | None = Field(None, max_length=64)
    data_dir: Path = Path("data")

    # network
    listen_host: str = "0.0.0.0"
    listen_port: int = Field(0, ge=0, le=65535)
    peers: Annotated[list[str], NoDecode] = Field(default_factory=list)
    mdns: bool = True
    dht: bool = Field(False, description="find members beyond the local network through a "
                      "Kademlia DHT, bootstrapped from SWARM_PEERS")
    reconnect_interval: float = Field(5.0, gt=0)
    sync_interval: float = Field(10.0, gt=0)
    # peers pulled per anti-entropy period, in turn (0: every connected peer each period)
    sync_fanout: int = Field(3, ge=0)
    # membership: a libp2p private network (pnet). The swarm.key file's content (or just its
    # 64 hex digits) in SWARM_KEY, or its path in SWARM_KEY_FILE. Unset: an open swarm.
    key: SecretStr | None = Field(None, repr=False, description="the swarm key (SWARM_KEY)")
    key_file: Path | None = Field(None, description="a swarm.key file (SWARM_KEY_FILE)")
    # membership per identity and role (agent.core.membership): the swarm's authority (its
    # public id, peer-id form; `python -m agent keygen --authority` makes the key) and this
    # agent's credential. Unset authority: no credentials, anyone with the swarm key may act.
    authority: str | None = Field(None, pattern=r"^[1-9A-HJ-NP-Za-km-z]{40,60}$",
                                  description="the swarm authority's public id (SWARM_AUTHORITY)")
    credential_file: Path | None = Field(None, description="this agent's credential (default: "
                                         "<data dir>/credential.json when there)")
    credentials_dir: Path | None = Field(None, description="one directory per agent, named like its data "
                                         "directory, with its key.ed25519 and credential.json (Compose)")
    identity_file: Path | None = Field(None, description="this agent's key (default <data dir>/key.ed25519)")
    credential_wait: float = Field(30.0, gt=0, description="seconds between looks for a missing credential")
    # bounds on what any author can make this agent hold (agent.core.intake)
    author_rate: float = Field(50.0, gt=0, description="events per second taken from one author")
    author_burst: float = Field(500.0, ge=1)
    metrics_port: int = Field(0, ge=0, le=65535, description="0 disables the /metrics endpoint")
    metrics_host: str = "0.0.0.0"

    # the observer's web view (agent.web): the live tree, splits, votes, submit form, person voter
    web_port: int = Field(0, ge=0, le=65535, description="0 disables the observer's web page")
    web_host: str = Field("127.0.0.1", description="anything but loopback requires SWARM_WEB_TOKEN")
    web_token: str | None = Field(None, min_length=16, max_length=200,
                                  description="required by the page when set; generated if exposed without one")
    web_throttle: float = Field(0.25, ge=0.02, le=10, description="least seconds between two page updates")
    grafana_url: str | None = Field(None, max_length=500, pattern=r"^https?://",
                                    description="the page links to this Grafana dashboard")

    # logging
    log_format: Literal["auto", "json", "console"] = "auto"
    log_level: Literal["debug", "info", "warning", "error"] = "info"

    # LLM
    llm: LLMBackendName = "auto"
    ollama_host: str = "http://127.0.0.1:11434"
    ollama_model: str = "llama3.2:1b"
    llm_timeout: float = Field(120.0, gt=0)
    llm_retries: int = Field(3, ge=0, le=20)
    # an embedded model's name (smollm2-135m, qwen2.5-0.5b, qwen2.5-1.5b) or a GGUF path;
    # unset: qwen2.5-1.5b when installed, else smollm2-135m (agent.llm.models.resolve)
    llamacpp_model: str | None = None
    model_dir: Path | None = Field(None, description="where split embedded models are assembled")
    llamacpp_threads: int = Field(1, ge=1, le=64)
    llamacpp_ctx: int = Field(2048, ge=256, le=32768)
    # any OpenAI-compatible server (SWARM_LLM=openai): the shared `python -m agent serve-llm`,
    # llama.cpp's llama-server, vLLM, LM Studio, Ollama's /v1, a hosted API
    openai_base_url: str | None = Field(None, max_length=500, pattern=r"^https?://",
                                        description="e.g. http://127.0.0.1:8088/v1 (serve-llm prints it)")
    openai_model: str | None = Field(None, max_length=200, description="default: the server's first model")
    openai_api_key: SecretStr | None = Field(None, repr=False)
    openai_api_key_file: Path | None = Field(None, description="read again whenever it changes")
    openai_connect_timeout: float = Field(5.0, gt=0, le=120)
    openai_response_format: Literal["auto", "json_schema", "json_object", "prompt"] = Field(
        "auto", description="auto: json_schema, falling back to json_object, then the schema in the prompt")
    scripted_latency: float = Field(0.0, ge=0)

    # plan parameters (carried in the goal event, so every peer folds with the same ones)
    scorers: int = Field(3, ge=1, le=101,
                         description="scorers a submitter waits to know before naming the electorate")
    quorum: int | None = Field(None, ge=1, le=101,
                               description="absolute quorum (a strict majority of the electorate); default majority")
    committee: int = Field(7, ge=0, le=101,
                           description="with more live scorers than this, a goal's electorate is a committee "
                                       "of this many drawn from them (agent.core.committee); 0: all of them")
    max_depth: int = Field(2, ge=0, le=6)
    max_children: int = Field(5, ge=2, le=12)
    max_rounds: int = Field(2, ge=1, le=10)
    brief: bool = Field(True, description="settle a goal's working assumptions (a brief) before its tree grows")
    token_budget: int = Field(0, ge=0, le=1_000_000_000,
                              description="tokens a new goal may spend in all (prompt + completion); 0: no limit")
    max_attempts: int = Field(2, ge=1, le=9,
                              description="attempts a task gets: results before the last are reviewed by the electorate")
    max_lease_seconds: float = Field(300.0, ge=1, le=3600,
                                     description="no claim holds a task longer, renewals included")

    # role timing: liveness and speed only, never safety
    strategy: str | None = Field(None, max_length=40)
    seed: int | None = Field(None, ge=0, description="the role's random seed (reproducible tests); default random")
    proposal_window: float = Field(1.5, ge=0, description="least wait for competing splits (s)")
    decomposers_per_node: int = Field(3, ge=0, description="a node's home decomposers, who propose for it "
                                      "(rendezvous hashing); the others only if none did within a minute; 0: all")
    executors_per_task: int = Field(4, ge=0, description="executors that take over a ready task its home "
                                    "executor left (rendezvous hashing); the others only after 30 s; 0: all")
    proposal_window_max: float = Field(120.0, ge=0)
    proposal_window_ratio: float = Field(2.0, ge=0,
                                         description="wait this many times the first split's delay")
    vote_timeout: float = Field(1.0, ge=0, description="prevote/precommit timeouts (s)")
    round_timeout: float = Field(30.0, gt=0)
    open_timeout: float = Field(600.0, gt=0, description="vote on a node nobody proposes for after (s)")
    review_window: float = Field(90.0, ge=0,
                                 description="wait for the rapporteur's reading of a result before voting on the checks alone (s)")
    settle_window: float = Field(1.0, ge=0)
    lease_seconds: float = Field(30.0, gt=0)
    startup_sync: float = Field(10.0, ge=0, description="wait for peers' logs before acting (s)")
    # clocks
    max_ahead_ms: int = Field(2_000, ge=0, description="events stamped further ahead are held until due")
    max_drift_ms: int = Field(60_000, gt=0, description="events stamped further ahead are refused")
    clock_offset_ms: int = Field(0, ge=-86_400_000, le=86_400_000,
                                 description="FAULT INJECTION ONLY: shift this agent's clock (tests)")

    @field_validator("data_dir", mode="before")
    @classmethod
    def _expand_data_dir(cls, v: object) -> object:
        if isinstance(v, (str, Path)) and "{" in str(v):
            try:
                return expand_data_dir(str(v))
            except OSError as exc:  # mkdir or the lock file: read-only, no permission, a file
                raise ValueError(f"cannot use {v}: {exc.strerror or exc}") from None
        return v

    @field_validator("llamacpp_model", mode="before")
    @classmethod
    def _model_as_text(cls, v: object) -> object:
        return str(v) if isinstance(v, Path) else v

    @field_validator("peers", mode="before")
    @classmethod
    def _split_peers(cls, v: object) -> object:
        if isinstance(v, str):
            return [p.strip() for p in v.split(",") if p.strip()]
        return v

    @field_validator("peers")
    @classmethod
    def _check_peers(cls, v: list[str]) -> list[str]:
        # refused here, before any command joins the swarm, rather than by the network layer
        if v:
            from agent.net.discovery import parse_peer_addr

            for text in v:
                parse_peer_addr(text)  # ValueError names the bad entry and the expected form
        return v

    _psk: bytes | None = PrivateAttr(None)

    @model_validator(mode="after")
    def _load_swarm_key(self) -> "Settings":
        from agent.net.swarmkey import SwarmKeyError, parse_swarm_key

        if self.key is not None and self.key_file is not None:
            raise ValueError("set SWARM_KEY or SWARM_KEY_FILE, not both")
        if self.key_file is not None:
            try:
                text = self.key_file.read_text(encoding="ascii")
            except (OSError, UnicodeDecodeError) as exc:
                raise ValueError(f"cannot read swarm key file {self.key_file}: {exc}") from None
            source = f"swarm key file {self.key_file}"
        elif self.key is not None:
            text, source = self.key.get_secret_value(), "SWARM_KEY"
        else:
            return self
        try:
            self._psk = parse_swarm_key(text)
        except SwarmKeyError as exc:
            raise ValueError(f"{source}: {exc}") from None
        return self

    def swarm_psk(self) -> bytes | None:
        """The 32-byte private-network key, or None for an open swarm."""
        return self._psk

    @field_validator("web_token", "grafana_url", "key", "key_file", "authority", "credential_file",
                     "credentials_dir", "identity_file", mode="before")
    @classmethod
    def _empty_is_none(cls, v: object) -> object:
        return None if isinstance(v, str) and not v.strip() else v

    @model_validator(mode="after")
    def _check_quorum(self) -> "Settings":
        from agent.core.events import majority

        if self.quorum is not None and self.quorum > self.scorers:
            raise ValueError(
                f"quorum {self.quorum} exceeds the scorer count {self.scorers}: no split could pass"
            )
        if self.quorum is not None and self.quorum < majority(self.scorers):
            raise ValueError(
                f"quorum {self.quorum} is not a strict majority of {self.scorers} scorers: two splits "
                "could both pass"
            )
        return self

    def quorum_for(self, electorate: int) -> int:
        """The quorum for an electorate of this size: the configured one, raised to a strict
        majority if the electorate is larger than expected."""
        from agent.core.events import quorum_for

        return quorum_for(electorate, self.quorum)

    def timing(self) -> "Timing":
        from agent.behaviour.timing import Timing

        vote_ms = int(self.vote_timeout * 1000)
        return Timing(
            proposal_window_min_ms=int(self.proposal_window * 1000),
            proposal_window_max_ms=int(self.proposal_window_max * 1000),
            proposal_window_ratio=self.proposal_window_ratio,
            open_timeout_ms=int(self.open_timeout * 1000),
            prevote_timeout_ms=vote_ms, precommit_timeout_ms=vote_ms,
            round_timeout_ms=int(self.round_timeout * 1000),
            review_window_ms=int(self.review_window * 1000),
            settle_ms=int(self.settle_window * 1000),
            lease_ms=int(self.lease_seconds * 1000),
            startup_sync_ms=int(self.startup_sync * 1000),
            decomposers_per_node=self.decomposers_per_node,
            executors_per_task=self.executors_per_task,
        )


class SettingsError(RuntimeError):
    """Configuration is invalid; the message names every bad field."""


def check_data_dir(path: Path) -> None:
    """SettingsError unless an agent can keep its key and log in ``path``: created if missing,
    and a file written, synced and removed there. Checked before the agent joins the swarm, so
    a read-only or full volume is one line at start rather than a traceback once it has peers."""
    probe = path / f".write-test-{os.getpid()}"
    try:
        path.mkdir(parents=True, exist_ok=True)
        fd = os.open(probe, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        try:
            os.write(fd, b"ok")
            os.fsync(fd)
        finally:
            os.close(fd)
        probe.unlink()
    except OSError as exc:
        raise SettingsError(f"SWARM_DATA_DIR {path} is not writable: {exc.strerror or exc} "
                            "(an agent keeps its key and event log there)") from None


def check_temp_dir() -> Path:
    """The directory a short-lived tool (submit, observe --once, publish) keeps its temporary
    key and log in, or SettingsError: the tool joins the swarm as a peer of its own there, so
    where no temporary directory is writable (a read-only container, a bad TMPDIR with /tmp
    read-only) it says so in one line before joining, not in a traceback."""
    import tempfile

    try:
        return Path(tempfile.gettempdir())  # the first of TMPDIR, /tmp, ... a file can be written in
    except OSError as exc:
        raise SettingsError(f"TMPDIR: no writable temporary directory for this tool's key and log "
                            f"({exc.strerror or exc}); set TMPDIR to a writable one") from None


def load_settings(**overrides: object) -> Settings:
    try:
        return Settings(**overrides)  # type: ignore[arg-type]
    except ValidationError as exc:
        parts = []
        for err in exc.errors():
            loc = ".".join(str(p) for p in err["loc"]) or "settings"
            env = f"SWARM_{loc.upper()}" if err["loc"] else "settings"
            msg = err["msg"].removeprefix("Value error, ").replace("\n", " ")
            parts.append(f"{env}: {msg}")
        # one line: what a user reads in a terminal or a container log
        raise SettingsError("invalid configuration: " + "; ".join(parts)) from None
