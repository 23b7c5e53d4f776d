"""A small HTTP server that speaks enough of the Ollama API for tests.

It runs on 127.0.0.1 on a free port in a background thread (stdlib ``http.server``), so the
official ``ollama`` client talks to it over real HTTP. Endpoints: POST /api/chat (honours
``format``: answers from a queue of canned replies, else with a minimal instance valid against
the schema), GET /api/tags, POST /api/show, GET /api/version. An unknown model gives
404 {"error": "model 'x' not found"}.

    with FakeOllama(models=["llama3.2:1b"]) as fake:
        fake.replies.append("not json")        # raw message content
        fake.replies.append({"result": "ok"})  # an object, sent as JSON content
        fake.replies.append(Reply(status=500, body={"error": "boom"}))
        ... OllamaLLM(fake.url, "llama3.2:1b") ...
        fake.requests  # [(method, path, body), ...]

With ``queue=QueueModel(...)`` /api/chat is served the way one Ollama server schedules one
loaded model, in real (wall-clock) time: ``parallel`` slots (OLLAMA_NUM_PARALLEL) serve requests
in arrival order; up to ``max_queue`` more wait (OLLAMA_MAX_QUEUE), and beyond that a request
gets Ollama's 503 "server busy"; an answer costs ``prompt_token_seconds`` per prompt token plus
``token_seconds`` per generated token, run at full speed in every slot (a GPU batching) or, with
``shared_compute``, sharing one compute among the active slots (a CPU: k active requests each
progress at 1/k speed); the model is loaded (``load_seconds``) by the first request and again
after it has been idle longer than keep_alive (the server's default, or the request's
``keep_alive``: seconds, a Go duration such as "5m", negative = forever). A client that gives
up (closes its connection) leaves the queue, or frees its slot mid-answer, as with Ollama.
``stream`` answers send their first chunk only when generation starts (after the queue and the
load), then one chunk per token. Every request is recorded in ``queue.calls`` (arrival, start,
first token, end, outcome); ``queue.summary()`` gives counts and p50/p95 latencies.

    with FakeOllama(queue=QueueModel(parallel=4, token_seconds=0.02, max_queue=64)) as fake:
        ... 16 agents ...
        fake.queue.summary()  # {"done": ..., "rejected": ..., "cancelled": ..., "p95_seconds": ...}
"""

from __future__ import annotations

import collections
import itertools
import json
import math
import re
import select
import socket
import threading
import time
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Callable, Iterable

# Ollama's answer when its queue is full (server/sched.go: ErrMaxQueue), with HTTP 503
SERVER_BUSY = "server busy, please try again.  maximum pending requests exceeded"
_DURATION_UNITS = {"ns": 1e-9, "us": 1e-6, "µs": 1e-6, "ms": 1e-3, "s": 1.0, "m": 60.0, "h": 3600.0}
_DURATION_PART = re.compile(r"(\d+(?:\.\d+)?)(ns|us|µs|ms|s|m|h)")


def parse_keep_alive(value: Any) -> float:
    """Ollama's keep_alive in seconds: a number of seconds or a Go duration ("5m", "1h30m",
    "-1m"); negative means forever (inf)."""
    if isinstance(value, bool):
        raise ValueError(f"bad keep_alive {value!r}")
    if isinstance(value, (int, float)):
        secs = float(value)
    else:
        text = str(value).strip()
        try:
            secs = float(text)
        except ValueError:
            body = text.lstrip("+-")
            parts = _DURATION_PART.findall(body)
            if not parts or "".join(n + u for n, u in parts) != body:
                raise ValueError(f"bad keep_alive {value!r}") from None
            secs = sum(float(n) * _DURATION_UNITS[u] for n, u in parts)
            if text.startswith("-"):
                secs = -secs
    return math.inf if secs < 0 else secs


def percentile(values: list[float], p: float) -> float | None:
    """Nearest-rank percentile (p in 0..100); None for no values."""
    if not values:
        return None
    xs = sorted(values)
    return xs[max(0, math.ceil(p / 100 * len(xs)) - 1)]


@dataclass
class Call:
    """One /api/chat request as the queue saw it (monotonic seconds)."""

    seq: int
    arrived: float
    started: float | None = None  # got a slot
    first_token: float | None = None
    ended: float | None = None
    outcome: str = "queued"  # queued | running | done | rejected | cancelled
    paid_load: bool = False  # this request loaded the model
    prompt_tokens: int = 0
    tokens: int = 0

    @property
    def queued(self) -> float | None:
        """Seconds spent waiting for a slot."""
        end = self.started if self.started is not None else self.ended
        return None if end is None else end - self.arrived

    @property
    def total(self) -> float | None:
        return None if self.ended is None else self.ended - self.arrived


@dataclass
class QueueModel:
    """One model on one Ollama server: slots, a bounded FIFO queue, per-token cost, keep_alive."""

    parallel: int = 1  # OLLAMA_NUM_PARALLEL
    max_queue: int = 512  # OLLAMA_MAX_QUEUE: requests waiting for a slot before 503s
    token_seconds: float = 0.0  # per generated token, at full speed
    prompt_token_seconds: float = 0.0  # per prompt token, at full speed
    shared_compute: bool = False  # True: the active slots share one compute (a CPU)
    load_seconds: float = 0.0  # loading the model into memory
    keep_alive: float | str = "5m"  # OLLAMA_KEEP_ALIVE: idle time before the model is unloaded
    tokens: int | None = None  # generated tokens per answer (None: len(content) // 4)
    tick: float = 0.005  # granularity of the simulation

    def __post_init__(self) -> None:
        if self.parallel < 1 or self.max_queue < 0:
            raise ValueError("parallel >= 1 and max_queue >= 0")
        self.default_keep_alive = parse_keep_alive(self.keep_alive)
        self.calls: list[Call] = []
        self.max_active = 0
        self._cond = threading.Condition()
        self._waiting: collections.deque[Call] = collections.deque()
        self._active = 0
        self._seq = itertools.count(1)
        self._resident_until = -math.inf  # the model stays loaded until then (inf while in use)
        self._ready_at = -math.inf  # when the load in progress (if any) is done

    # ------------------------------------------------------------------ observing
    def snapshot(self) -> dict[str, int]:
        with self._cond:
            return self._snapshot()

    def _snapshot(self) -> dict[str, int]:
        outcomes = collections.Counter(c.outcome for c in self.calls)
        return {"arrived": len(self.calls), "waiting": len(self._waiting), "active": self._active,
                **{k: outcomes.get(k, 0) for k in ("done", "rejected", "cancelled")}}

    def wait_for(self, predicate: Callable[[dict[str, int]], bool], timeout: float = 10.0) -> dict[str, int]:
        """Block until predicate(snapshot) holds (tests wait on conditions, not on sleeps)."""
        with self._cond:
            if not self._cond.wait_for(lambda: predicate(self._snapshot()), timeout):
                raise TimeoutError(f"queue state never matched; last {self._snapshot()}")
            return self._snapshot()

    def summary(self) -> dict[str, Any]:
        with self._cond:
            calls = list(self.calls)
            max_active = self.max_active
        done = [c for c in calls if c.outcome == "done"]
        totals = [c.total for c in done if c.total is not None]
        waits = [c.queued for c in done if c.queued is not None]
        out: dict[str, Any] = {
            "calls": len(calls), "done": len(done),
            "rejected": sum(c.outcome == "rejected" for c in calls),
            "cancelled": sum(c.outcome == "cancelled" for c in calls),
            "cancelled_while_running": sum(c.outcome == "cancelled" and c.started is not None
                                           for c in calls),
            "loads": sum(c.paid_load for c in calls), "max_active": max_active,
        }
        for name, xs in (("seconds", totals), ("queued_seconds", waits)):
            out[f"p50_{name}"] = percentile(xs, 50)
            out[f"p95_{name}"] = percentile(xs, 95)
            out[f"max_{name}"] = max(xs) if xs else None
        return out

    # ------------------------------------------------------------------ serving
    def admit(self) -> Call:
        """A request arrives: queued, or rejected (outcome) when the queue is full."""
        with self._cond:
            now = time.monotonic()
            call = Call(seq=next(self._seq), arrived=now)
            self.calls.append(call)
            if self._active + len(self._waiting) >= self.parallel + self.max_queue:
                call.outcome, call.ended = "rejected", now
            else:
                self._waiting.append(call)
            self._cond.notify_all()
            return call

    def run(self, call: Call, *, gone: Callable[[], bool], prompt_tokens: int, tokens: int,
            keep_alive: Any = None, emit: Callable[[int, int], None] = lambda a, b: None) -> None:
        """Wait for a slot (FIFO), load the model if needed, generate ``tokens``; emit(a, b) is
        called as tokens a..b-1 come out. Sets call.outcome to done or cancelled (the client
        went away: ``gone()`` true, or emit raised a connection error)."""
        call.prompt_tokens, call.tokens = prompt_tokens, tokens
        keep = self.default_keep_alive if keep_alive is None else parse_keep_alive(keep_alive)
        with self._cond:
            while not (self._waiting[0] is call and self._active < self.parallel):
                if gone():
                    self._waiting.remove(call)
                    call.outcome, call.ended = "cancelled", time.monotonic()
                    self._cond.notify_all()
                    return
                self._cond.wait(0.02)
            self._waiting.popleft()
            self._active += 1
            self.max_active = max(self.max_active, self._active)
            now = time.monotonic()
            call.started, call.outcome = now, "running"
            if self._resident_until < now and self._ready_at <= now:  # unloaded, no load under way
                self._ready_at = now + self.load_seconds
                call.paid_load = True
            ready_at = self._ready_at
            self._resident_until = math.inf
            self._cond.notify_all()
        try:
            self._generate(call, gone, ready_at, prompt_tokens, tokens, emit)
        except (BrokenPipeError, ConnectionResetError):
            call.outcome = "cancelled"
        finally:
            with self._cond:
                self._active -= 1
                call.ended = time.monotonic()
                if self._active == 0:
                    self._resident_until = call.ended + keep
                self._cond.notify_all()

    def _generate(self, call: Call, gone: Callable[[], bool], ready_at: float, prompt_tokens: int,
                  tokens: int, emit: Callable[[int, int], None]) -> None:
        while (now := time.monotonic()) < ready_at:  # the model is loading
            if gone():
                call.outcome = "cancelled"
                return
            time.sleep(min(self.tick, ready_at - now))
        prompt_work = prompt_tokens * self.prompt_token_seconds
        total_work = prompt_work + tokens * self.token_seconds
        work, done, last = 0.0, 0, time.monotonic()
        while True:
            now = time.monotonic()
            speed = 1.0 / max(1, self._active) if self.shared_compute else 1.0
            work += (now - last) * speed
            last = now
            if work >= total_work:
                out = tokens
            elif work <= prompt_work or self.token_seconds <= 0:
                out = 0
            else:
                out = min(tokens, int((work - prompt_work) / self.token_seconds))
            if out > done:
                if call.first_token is None:
                    call.first_token = now
                emit(done, out)
                done = out
            if work >= total_work:
                call.outcome = "done"
                if call.first_token is None:
                    call.first_token = now
                return
            if gone():
                call.outcome = "cancelled"
                return
            time.sleep(self.tick)


def _client_gone(h: BaseHTTPRequestHandler) -> bool:
    """The client closed its connection (it timed out or was cancelled)."""
    try:
        readable, _, _ = select.select([h.connection], [], [], 0)
        return bool(readable) and h.connection.recv(1, socket.MSG_PEEK) == b""
    except OSError:
        return True


class _Server(ThreadingHTTPServer):
    request_queue_size = 256  # listen backlog: many agents connect at once under load
    daemon_threads = True


@dataclass
class Reply:
    """A canned HTTP reply for /api/chat (an error, or a delayed answer)."""

    status: int = 200
    body: Any = None  # for status != 200: the JSON error body
    content: Any = None  # for status 200: the message content (dict -> JSON, str -> raw)
    delay: float = 0.0


def minimal_instance(schema: dict, counter: Iterable[int] | None = None) -> Any:
    """A small instance valid against ``schema`` (distinct strings, minimal sizes)."""
    counter = counter if counter is not None else itertools.count(1)
    counter = iter(counter)
    if "enum" in schema:
        return schema["enum"][0]
    if "const" in schema:
        return schema["const"]
    typ = schema.get("type")
    if isinstance(typ, list):
        typ = typ[0]
    if typ == "object":
        props = schema.get("properties", {})
        return {k: minimal_instance(v, counter) for k, v in props.items()}
    if typ == "array":
        n = max(schema.get("minItems", 0), 1 if schema.get("maxItems", 1) >= 1 else 0)
        return [minimal_instance(schema.get("items", {}), counter) for _ in range(n)]
    if typ == "string":
        text = f"text {next(counter)}"
        lo, hi = schema.get("minLength", 0), schema.get("maxLength", 10**6)
        text = text.ljust(lo, "x")
        return text[:hi]
    if typ == "integer":
        return int(schema.get("minimum", 0))
    if typ == "number":
        return float(schema.get("minimum", 0.0))
    if typ == "boolean":
        return False
    return None


@dataclass
class FakeOllama:
    models: list[str] = field(default_factory=lambda: ["llama3.2:1b"])
    replies: collections.deque = field(default_factory=collections.deque)
    requests: list[tuple[str, str, Any]] = field(default_factory=list)
    version: str = "0.6.3-fake"
    queue: QueueModel | None = None  # None: answer at once (after a Reply's delay)

    def __post_init__(self) -> None:
        self._lock = threading.Lock()
        self._server: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None

    # ------------------------------------------------------------------ lifecycle
    def start(self) -> "FakeOllama":
        fake = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:  # keep test output quiet
                pass

            def do_GET(self) -> None:
                fake._handle(self, "GET")

            def do_POST(self) -> None:
                fake._handle(self, "POST")

        self._server = _Server(("127.0.0.1", 0), Handler)
        self._thread = threading.Thread(
            target=self._server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True
        )
        self._thread.start()
        return self

    def stop(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None
        if self._thread is not None:
            self._thread.join(timeout=5)
            self._thread = None

    def __enter__(self) -> "FakeOllama":
        return self.start()

    def __exit__(self, *exc: Any) -> None:
        self.stop()

    @property
    def port(self) -> int:
        assert self._server is not None, "not started"
        return self._server.server_address[1]

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def chat_requests(self) -> list[dict]:
        with self._lock:
            return [body for method, path, body in self.requests if path == "/api/chat"]

    # ------------------------------------------------------------------ protocol
    def _handle(self, h: BaseHTTPRequestHandler, method: str) -> None:
        body: Any = None
        length = int(h.headers.get("Content-Length") or 0)
        if length:
            raw = h.rfile.read(length)
            try:
                body = json.loads(raw)
            except ValueError:
                self._send(h, 400, {"error": "invalid JSON body"})
                return
        with self._lock:
            self.requests.append((method, h.path, body))
        route = (method, h.path.split("?")[0])
        if route == ("GET", "/api/version"):
            self._send(h, 200, {"version": self.version})
        elif route == ("GET", "/api/tags"):
            self._send(h, 200, {"models": [self._model_entry(m) for m in self.models]})
        elif route == ("POST", "/api/show"):
            name = (body or {}).get("model") or (body or {}).get("name")
            if name not in self.models:
                self._send(h, 404, {"error": f"model '{name}' not found"})
            else:
                self._send(h, 200, {
                    "modelfile": f"FROM {name}", "parameters": "", "template": "{{ .Prompt }}",
                    "details": self._model_entry(name)["details"], "model_info": {},
                    "capabilities": ["completion"],
                })
        elif route == ("POST", "/api/chat"):
            self._chat(h, body or {})
        else:
            self._send(h, 404, {"error": f"{method} {h.path} not found"})

    def _chat(self, h: BaseHTTPRequestHandler, body: dict) -> None:
        model = body.get("model")
        if model not in self.models:
            self._send(h, 404, {"error": f"model '{model}' not found"})
            return
        with self._lock:
            reply = self.replies.popleft() if self.replies else None
        if not isinstance(reply, Reply):
            reply = Reply(content=reply)
        if reply.delay:
            time.sleep(reply.delay)
        if reply.status != 200:
            self._send(h, reply.status, reply.body if reply.body is not None else {"error": "fail"})
            return
        content = reply.content
        if content is None:
            schema = body.get("format")
            content = minimal_instance(schema) if isinstance(schema, dict) else "ok"
        if not isinstance(content, str):
            content = json.dumps(content)
        if self.queue is not None:
            self._chat_queued(h, body, model, content)
            return
        message = {
            "model": model,
            "created_at": "2026-01-01T00:00:00Z",
            "message": {"role": "assistant", "content": content},
            "done": True,
            "done_reason": "stop",
            "total_duration": 1_000_000,
            "prompt_eval_count": 10,
            "eval_count": max(1, len(content) // 4),
        }
        if body.get("stream", True):
            self._send(h, 200, message, ndjson=True)
        else:
            self._send(h, 200, message)

    def _chat_queued(self, h: BaseHTTPRequestHandler, body: dict, model: str, content: str) -> None:
        q = self.queue
        assert q is not None
        call = q.admit()
        if call.outcome == "rejected":
            self._send(h, 503, {"error": SERVER_BUSY})
            return
        messages = body.get("messages") or []
        prompt_tokens = max(1, sum(len(str(m.get("content", ""))) for m in messages) // 4)
        tokens = q.tokens if q.tokens is not None else max(1, len(content) // 4)
        num_predict = (body.get("options") or {}).get("num_predict")
        if isinstance(num_predict, int) and num_predict > 0:
            tokens = min(tokens, num_predict)
        stream = body.get("stream", True)
        step = max(1, math.ceil(len(content) / tokens))
        pieces = [content[i * step:(i + 1) * step] for i in range(tokens)]
        started = {"headers": False}

        def headers() -> None:
            if not started["headers"]:
                started["headers"] = True
                h.send_response(200)
                h.send_header("Content-Type", "application/x-ndjson")
                h.end_headers()  # no length: HTTP/1.0, the body ends when the connection closes

        def emit(a: int, b: int) -> None:
            if stream:
                headers()
                h.wfile.write((json.dumps({
                    "model": model, "created_at": "2026-01-01T00:00:00Z",
                    "message": {"role": "assistant", "content": "".join(pieces[a:b])},
                    "done": False}) + "\n").encode())
                h.wfile.flush()

        try:
            q.run(call, gone=lambda: _client_gone(h), prompt_tokens=prompt_tokens, tokens=tokens,
                  keep_alive=body.get("keep_alive"), emit=emit)
        except ValueError as exc:  # a bad keep_alive
            self._send(h, 400, {"error": str(exc)})
            return
        if call.outcome != "done":
            return  # the client went away: nobody to answer
        ns = 1_000_000_000
        load = (call.started or call.arrived) if call.paid_load else None
        final = {
            "model": model, "created_at": "2026-01-01T00:00:00Z",
            "message": {"role": "assistant", "content": "" if stream else content},
            "done": True, "done_reason": "stop",
            "total_duration": int((call.ended - call.arrived) * ns),
            "load_duration": int(q.load_seconds * ns) if load is not None else 0,
            "prompt_eval_count": prompt_tokens,
            "prompt_eval_duration": int(prompt_tokens * q.prompt_token_seconds * ns),
            "eval_count": tokens,
            "eval_duration": int(tokens * q.token_seconds * ns),
        }
        if not stream:
            self._send(h, 200, final)
            return
        try:
            headers()
            h.wfile.write((json.dumps(final) + "\n").encode())
            h.wfile.flush()
        except (BrokenPipeError, ConnectionResetError):
            pass

    @staticmethod
    def _model_entry(name: str) -> dict:
        return {
            "name": name,
            "model": name,
            "modified_at": "2026-01-01T00:00:00Z",
            "size": 1_000_000,
            "digest": "sha256:" + "0" * 64,
            "details": {"format": "gguf", "family": "llama", "parameter_size": "1B",
                        "quantization_level": "Q4_0"},
        }

    @staticmethod
    def _send(h: BaseHTTPRequestHandler, status: int, obj: Any, ndjson: bool = False) -> None:
        data = (json.dumps(obj) + ("\n" if ndjson else "")).encode()
        try:
            h.send_response(status)
            h.send_header("Content-Type", "application/x-ndjson" if ndjson else "application/json")
            h.send_header("Content-Length", str(len(data)))
            h.end_headers()
            h.wfile.write(data)
        except (BrokenPipeError, ConnectionResetError):  # the client gave up (timeout tests)
            pass
