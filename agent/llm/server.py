"""One llama.cpp HTTP server per host, shared by the agents on it (``python -m agent serve-llm``).

Every agent loading its own copy of the model made six copies share two cores (measured: a call
generated 2.5-7.7 tokens/s inside the demo against 22 alone). Here one process loads the model
once and serves it over HTTP in llama.cpp's own server, run in-process by ``xllamacpp``:
parallel slots with continuous batching (requests decode together in one batch), prompt caching
(a slot keeps the prompt it last ran, and a new request goes to the slot whose cached prompt
shares most of it, so the system message and the goal's brief are computed once), an
OpenAI-compatible API (``agent.llm.openai_backend`` talks to it, as to any such server).

In front of it the gate (``agent.llm.gate``): the API key, a bounded queue (``503`` beyond the
slots plus ``queue``), and a request its client gave up on aborted in llama.cpp too. llama.cpp
itself listens on 127.0.0.1 only, behind a key of its own; the gate listens on 127.0.0.1 unless
told otherwise (the Compose service binds its container's interface, behind the key).

The key is random per start, written to a file only its owner can read (mode 600); agents read
it from there (``SWARM_OPENAI_API_KEY_FILE``) and read it again when it changes, so a restarted
server (a new key) is picked up without restarting them.

The defaults come from measurements on a 2-core machine: docs/performance.md, "One shared model
server".
"""

from __future__ import annotations

import os
import secrets
import signal
import subprocess
import sys
import threading
import time
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any

import structlog
import trio

from agent import procs
from agent.llm import models
from agent.llm.base import LLMUnavailable, ModelMissing

log = structlog.get_logger()

# Chosen from docs/performance.md ("One shared model server"): see there for the figures.
DEFAULT_PARALLEL = 2
DEFAULT_CTX = 4096  # tokens per slot: the longest prompt plus its answer
DEFAULT_THREADS = 2
DEFAULT_BATCH = 512
DEFAULT_QUEUE = 32  # requests beyond the slots that may wait; more are refused with 503
DEFAULT_CACHE_RAM_MIB = 512  # llama.cpp's host-memory cache of slot prompts (its default: 8 GiB)
DEFAULT_PORT = 8088


def default_key_file() -> Path:
    base = os.environ.get("XDG_RUNTIME_DIR") or os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache"
    return Path(base) / "swarm-planner" / "llm-server.key"


def write_key_file(path: Path, key: str) -> None:
    """Write ``key`` to ``path`` with mode 600, atomically (a reader sees the old or the new key,
    never half of one)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC, 0o600)
    try:
        os.fchmod(fd, 0o600)
        os.write(fd, (key + "\n").encode())
        os.fsync(fd)
    finally:
        os.close(fd)
    os.replace(tmp, path)


def is_loopback(host: str) -> bool:
    return host in ("127.0.0.1", "localhost", "::1") or host.startswith("127.")


@dataclass(frozen=True)
class ServerInfo:
    base_url: str  # what an OpenAI client is given: http://HOST:PORT/v1
    api_key: str
    key_file: Path | None
    model: str
    path: Path


class LocalLLMServer:
    """llama.cpp's HTTP server for one embedded model, behind the gate.

    Use as ``with LocalLLMServer("qwen2.5-1.5b", parallel=2) as srv:`` (blocking start and stop)
    or ``async with`` (the same, in a worker thread: the trio loop goes on meanwhile); then
    ``srv.base_url``, ``srv.api_key``, ``srv.model``. The gate runs its own trio loop in a thread
    of its own, so it serves whatever the caller's thread does."""

    def __init__(
        self,
        model: str | Path | None = None,
        parallel: int = DEFAULT_PARALLEL,
        ctx: int = DEFAULT_CTX,
        threads: int = DEFAULT_THREADS,
        *,
        batch: int = DEFAULT_BATCH,
        queue: int = DEFAULT_QUEUE,
        host: str = "127.0.0.1",
        port: int = 0,
        key_file: str | Path | None = None,
        api_key: str | None = None,
        model_dir: str | Path | None = None,
        cache_ram_mib: int = DEFAULT_CACHE_RAM_MIB,
        unified_kv: bool = False,
    ) -> None:
        if parallel < 1 or ctx < 256 or threads < 1 or batch < 16 or queue < 0:
            raise ValueError("parallel and threads must be >= 1, ctx >= 256, batch >= 16, queue >= 0")
        self.model, self.path = models.resolve(model, model_dir)  # ModelMissing says how to fix it
        self.parallel = parallel
        self.ctx = ctx
        self.threads = threads
        self.batch = batch
        self.queue = queue
        self.host = host
        self.port = port
        self.key_file = Path(key_file) if key_file is not None else None
        self.api_key = api_key or secrets.token_urlsafe(32)
        self.cache_ram_mib = cache_ram_mib
        self.unified_kv = unified_kv
        self.load_seconds: float | None = None
        self.gate: Any = None
        self._llama: Any = None
        self._upstream: str | None = None
        self._upstream_key: str | None = None
        self._thread: threading.Thread | None = None
        self._token: trio.lowlevel.TrioToken | None = None
        self._stop_event: trio.Event | None = None
        self._bound = threading.Event()
        self._bound_port: int | None = None
        self._error: BaseException | None = None
        self._lock = threading.Lock()

    @property
    def served_name(self) -> str:
        """The model's name on the API (``/v1/models``; what requests may name)."""
        return self.model if "/" not in self.model else self.path.stem

    # ------------------------------------------------------------------ lifecycle

    @property
    def running(self) -> bool:
        return self._thread is not None and self._thread.is_alive()

    @property
    def base_url(self) -> str:
        if self._bound_port is None:
            raise RuntimeError("the server is not started")
        host = self.host if self.host not in ("0.0.0.0", "::") else "127.0.0.1"
        host = f"[{host}]" if ":" in host else host
        return f"http://{host}:{self._bound_port}/v1"

    @property
    def info(self) -> ServerInfo:
        return ServerInfo(self.base_url, self.api_key, self.key_file, self.model, self.path)

    def start(self) -> "LocalLLMServer":
        """Start the gate, load the model, write the key file; blocking. Raises ``ModelMissing``
        or ``LLMUnavailable`` (with what went wrong) and leaves nothing running."""
        with self._lock:
            if self._llama is not None:
                return self
            # the gate first: a port in use is said at once, not after loading the model, and
            # while the model loads it answers 503 "loading" (a healthcheck waits on /health)
            self._start_gate()
            t0 = time.perf_counter()
            try:
                self._llama = self._load()
                self.load_seconds = time.perf_counter() - t0
                self.gate.set_upstream(self._upstream, self._upstream_key)
                if self.key_file is not None:
                    write_key_file(self.key_file, self.api_key)
            except BaseException:
                self._stop_locked(quiet=True)
                raise
        log.info("llm.server.up", url=self.base_url, model=self.model, parallel=self.parallel,
                 ctx_per_slot=self.ctx, threads=self.threads, batch=self.batch, queue=self.queue,
                 load_seconds=round(self.load_seconds, 2),
                 key_file=str(self.key_file) if self.key_file else None)
        return self

    def stop(self) -> None:
        """Stop the gate (requests in flight are cut), free the model, remove the key file
        (idempotent, blocking)."""
        with self._lock:
            self._stop_locked()

    def _stop_locked(self, quiet: bool = False) -> None:
        thread, self._thread = self._thread, None
        if thread is not None:
            if self._token is not None and self._stop_event is not None:
                try:
                    trio.from_thread.run_sync(self._stop_event.set, trio_token=self._token)
                except trio.RunFinishedError:
                    pass
            thread.join(timeout=30)
        llama, self._llama = self._llama, None
        if llama is not None:
            del llama  # the destructor stops llama.cpp's loop and frees the model
            if self.key_file is not None:
                try:
                    if self.key_file.read_text().strip() == self.api_key:
                        self.key_file.unlink()
                except OSError:
                    pass
            if not quiet:
                log.info("llm.server.stopped", model=self.model)

    def __enter__(self) -> "LocalLLMServer":
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    async def __aenter__(self) -> "LocalLLMServer":
        await trio.to_thread.run_sync(self.start)
        return self

    async def __aexit__(self, *exc: object) -> None:
        with trio.CancelScope(shield=True):
            await trio.to_thread.run_sync(self.stop)

    def stats(self) -> dict[str, Any]:
        g = self.gate.stats if self.gate is not None else None
        return {} if g is None else {
            "active": g.active, "peak_active": g.peak_active, "forwarded": g.forwarded,
            "busy": g.busy, "unauthorized": g.unauthorized, "aborted": g.aborted,
            "upstream_errors": g.upstream_errors,
        }

    # ------------------------------------------------------------------ llama.cpp

    def _load(self) -> Any:
        try:
            import xllamacpp
        except ImportError as exc:
            raise ModelMissing(
                f"the xllamacpp package is not importable ({exc}); run "
                "`pip install xllamacpp==2026.10.11549` (needs the system's libgomp1)") from None
        p = xllamacpp.CommonParams()
        p.model.path = str(self.path)
        p.offline = True  # never download anything
        p.model_alias = {self.served_name}
        p.n_parallel = self.parallel
        p.n_ctx = self.ctx * self.parallel  # llama.cpp divides it among the slots
        p.kv_unified = self.unified_kv
        p.n_batch = self.batch
        p.n_ubatch = self.batch
        p.cont_batching = True
        p.cache_prompt = True
        p.cache_ram_mib = self.cache_ram_mib
        p.cpuparams.n_threads = self.threads
        p.cpuparams_batch.n_threads = self.threads
        p.hostnames = ["127.0.0.1"]  # llama.cpp's own listener: loopback, behind a key of its own
        p.port = 0
        p.api_keys = [secrets.token_urlsafe(32)]
        # one handler thread per request the gate lets through, plus health and metrics
        p.n_threads_http = self.parallel + self.queue + 4
        p.endpoint_metrics = True
        p.verbosity = -1  # llama.cpp logs to stderr otherwise
        try:
            server = xllamacpp.Server(p)
        except Exception as exc:  # RuntimeError("Failed to init server ...")
            raise LLMUnavailable(f"llama.cpp could not load {self.path}: {exc}") from exc
        self._upstream = server.listening_address
        self._upstream_key = p.api_keys[0]
        return server

    # ------------------------------------------------------------------ the gate

    def _start_gate(self) -> None:
        self._bound.clear()
        self._error = None
        self._thread = threading.Thread(target=self._gate_thread, name="llm-gate", daemon=True)
        self._thread.start()
        self._bound.wait(timeout=60)
        if self._error is not None:
            self._thread.join(timeout=10)
            self._thread = None
            why = _leaf(self._error)
            raise LLMUnavailable(f"the LLM server could not listen on {self.host}:{self.port}: "
                                 f"{type(why).__name__}: {why}") from why
        if self._bound_port is None:
            raise LLMUnavailable("the LLM server's gate did not start within 60 s")

    def _gate_thread(self) -> None:
        try:
            trio.run(self._gate_main)
        except BaseException as exc:  # reported to start() through _error
            self._error = exc
        finally:
            self._bound.set()

    async def _gate_main(self) -> None:
        from hypercorn.config import Config
        from hypercorn.trio import serve

        from agent.llm.gate import Gate

        self._token = trio.lowlevel.current_trio_token()
        self._stop_event = trio.Event()
        self.gate = Gate(None, None, self.api_key,
                         max_active=self.parallel + self.queue,
                         describe_bound=f"{self.parallel} slots + a queue of {self.queue}", log=log,
                         to_grammar=compact_grammar, models=frozenset({self.served_name}))
        config = Config()
        config.bind = [f"[{self.host}]:{self.port}" if ":" in self.host else f"{self.host}:{self.port}"]
        config.accesslog = None
        config.errorlog = None
        config.graceful_timeout = 1.0
        config.keep_alive_timeout = 600  # agents keep one connection each between calls
        config.read_timeout = None
        try:
            async with trio.open_nursery() as nursery:
                binds = await nursery.start(partial(serve, self.gate, config,
                                                    shutdown_trigger=self._stop_event.wait))
                self._bound_port = int(binds[0].rsplit(":", 1)[1])
                self._bound.set()
        finally:
            await self.gate.aclose()


def _leaf(exc: BaseException) -> BaseException:
    """The first error inside (nested) exception groups: the one worth a line."""
    while isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        exc = exc.exceptions[0]
    return exc


def compact_grammar(schema: dict) -> str | None:
    """A llguidance grammar for ``schema`` with no free whitespace, or None when this build of
    llama.cpp has no llguidance (then llama.cpp converts the schema itself)."""
    import xllamacpp

    compact = dict(schema)
    compact["x-guidance"] = {"whitespace_flexible": False}
    grammar = xllamacpp.json_schema_to_grammar(compact)
    return grammar if grammar.startswith("%llguidance") else None


class ServerProcess:
    """``python -m agent serve-llm`` as a child process (what ``python -m agent demo`` starts):
    its own process, so the model's threads and memory go away with it, whatever the parent
    does meanwhile."""

    def __init__(self, proc: subprocess.Popen, base_url: str, key_file: Path, model: str | None,
                 log_path: Path) -> None:
        self.proc = proc
        self.base_url = base_url
        self.key_file = key_file
        self.model = model
        self.log_path = log_path

    def env(self) -> dict[str, str]:
        """What an agent needs to use it."""
        out = {"SWARM_LLM": "openai", "SWARM_OPENAI_BASE_URL": self.base_url,
               "SWARM_OPENAI_API_KEY_FILE": str(self.key_file)}
        if self.model:
            out["SWARM_OPENAI_MODEL"] = self.model
        return out

    def stop(self, grace: float = 10.0) -> int | None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(grace)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        return self.proc.returncode


def _stop(proc: subprocess.Popen) -> None:
    proc.terminate()
    try:
        proc.wait(10)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


def spawn_server(*, log_path: Path, key_file: Path, model: str | None = None, port: int = 0,
                 parallel: int | None = None, threads: int | None = None, ctx: int | None = None,
                 extra_args: list[str] | None = None, env: dict[str, str] | None = None,
                 timeout: float = 300.0, die_with_parent: bool = False) -> ServerProcess:
    """Start ``serve-llm`` and wait for the base URL it prints (``LLMUnavailable`` with its
    log's tail if it exits or says nothing within ``timeout``). Interrupted while it loads the
    model (Ctrl-C, a signal turned into an exception), it stops the server before passing the
    interruption on. ``die_with_parent``: the server also gets SIGTERM when this process dies
    (``agent.procs``; call from the main thread then)."""
    args = [sys.executable, "-m", "agent", "serve-llm", "--port", str(port), "--key-file", str(key_file)]
    for flag, value in (("--model", model), ("--parallel", parallel), ("--threads", threads),
                        ("--ctx", ctx)):
        if value is not None:
            args += [flag, str(value)]
    args += extra_args or []
    log_path.parent.mkdir(parents=True, exist_ok=True)
    box: list[str] = []
    # Ctrl-C inside Popen would leave a server nobody stops: signals wait until the handle is ours
    with procs.HeldSignals() as held:
        with open(log_path, "ab") as log_fh:
            proc = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=log_fh, stdin=subprocess.DEVNULL,
                                    env=env, start_new_session=True,
                                    preexec_fn=procs.die_with_parent() if die_with_parent else None)
        try:
            held.release()
            assert proc.stdout is not None
            reader = threading.Thread(target=lambda: box.append(proc.stdout.readline().decode().strip()),
                                      daemon=True)
            reader.start()
            reader.join(timeout)
        except BaseException:
            _stop(proc)
            raise
    url = box[0] if box else ""
    if not url.startswith("http"):
        if proc.poll() is None:
            proc.kill()
        proc.wait()
        tail = "\n".join(log_path.read_text(errors="replace").splitlines()[-6:])
        raise LLMUnavailable(f"the LLM server did not start (exit {proc.returncode}): {tail}")
    name = model
    if name is None or "/" in str(name):
        name = None  # the server's own name for it
    return ServerProcess(proc, url, key_file, name, log_path)


__all__ = ["DEFAULT_BATCH", "DEFAULT_CTX", "DEFAULT_PARALLEL", "DEFAULT_PORT", "DEFAULT_QUEUE",
           "DEFAULT_THREADS", "LocalLLMServer", "ServerInfo", "ServerProcess", "default_key_file",
           "spawn_server", "write_key_file"]
