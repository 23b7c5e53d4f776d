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
"""

from __future__ import annotations

import collections
import itertools
import json
import threading
import time
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Iterable


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

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
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
