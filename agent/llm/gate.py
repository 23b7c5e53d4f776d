"""The gate in front of a shared llama.cpp server: the API key, a bounded queue, and a request
abandoned by its client aborted in llama.cpp too.

llama.cpp's own HTTP server queues every request it accepts, without bound, and its API key
check is all it has for access. The gate is a small ASGI app (served by hypercorn on trio) that
agents talk to instead:

- every path but ``/health`` needs ``Authorization: Bearer <key>`` (compared in constant time);
- at most ``max_active`` POSTs (the slots plus the queue) are forwarded at once; one more is
  answered ``503`` with ``Retry-After`` at once, so a runaway client meets a clear error instead
  of a queue that grows for ever (the agents retry with backoff);
- a chat request whose ``response_format`` is a JSON schema is sent on with that schema as a
  llguidance grammar in compact JSON instead (llama.cpp's own conversion allows free whitespace
  between tokens, and small models spend hundreds of tokens on it: measured on SmolLM2, 277
  completion tokens for a split against 96 compact); clients keep the standard API;
- a chat request is always asked of llama.cpp as a stream, and a client that asked for one
  answer gets the stream put back together into one. Why: measured, llama.cpp (as xllamacpp
  runs it) went on generating for a closed connection of a non-streamed request for the whole
  answer (90 s of a 1,500-token story), but stopped a stream within half a second of its
  connection closing. So when the client goes away (a trio cancellation, a dead agent) the gate
  closes the upstream stream and the slot is free at once.
"""

from __future__ import annotations

import hmac
from dataclasses import dataclass, field
from typing import Any, Awaitable, Callable

import httpx
import orjson
import trio

Scope = dict[str, Any]
Receive = Callable[[], Awaitable[dict[str, Any]]]
Send = Callable[[dict[str, Any]], Awaitable[None]]

MAX_BODY = 8 << 20  # a chat request is kilobytes; anything this big is not one
PUBLIC_PATHS = frozenset({"/health", "/v1/health"})
# hop-by-hop headers (RFC 9110 7.6.1) and what the ASGI server or the gate sets itself
_DROP = frozenset({b"connection", b"keep-alive", b"transfer-encoding", b"te", b"trailer",
                   b"upgrade", b"proxy-authorization", b"proxy-authenticate", b"host",
                   b"content-length", b"authorization"})
JSON_HEADERS = [(b"content-type", b"application/json; charset=utf-8")]


@dataclass
class GateStats:
    """What the gate saw, for /metrics and logs (counters only grow)."""

    active: int = 0
    forwarded: int = 0
    busy: int = 0  # refused with 503: the queue was full
    unauthorized: int = 0
    aborted: int = 0  # the client went away before the answer was complete
    upstream_errors: int = 0
    peak_active: int = 0
    by_status: dict[int, int] = field(default_factory=dict)

    def prometheus(self) -> str:
        lines = [
            "# HELP swarm_llm_gate_active Requests being forwarded to llama.cpp now (slots + queue)",
            "# TYPE swarm_llm_gate_active gauge",
            f"swarm_llm_gate_active {self.active}",
        ]
        for name, value, what in (
            ("forwarded", self.forwarded, "Requests forwarded to llama.cpp"),
            ("busy", self.busy, "Requests refused with 503 because the queue was full"),
            ("unauthorized", self.unauthorized, "Requests refused for a missing or wrong API key"),
            ("aborted", self.aborted, "Requests whose client went away before the answer"),
            ("upstream_errors", self.upstream_errors, "Requests llama.cpp did not answer"),
        ):
            lines += [f"# HELP swarm_llm_gate_{name}_total {what}",
                      f"# TYPE swarm_llm_gate_{name}_total counter",
                      f"swarm_llm_gate_{name}_total {value}"]
        return "\n".join(lines) + "\n"


def error_body(status: int, message: str, kind: str) -> bytes:
    """An error in the OpenAI envelope (what llama.cpp and OpenAI clients expect)."""
    return orjson.dumps({"error": {"code": status, "message": message, "type": kind}})


class StreamError(Exception):
    """llama.cpp reported an error inside a stream, or the stream is not one."""

    def __init__(self, status: int, body: bytes) -> None:
        super().__init__(body.decode(errors="replace"))
        self.status = status
        self.body = body


class Assembler:
    """A chat completion stream (server-sent ``chat.completion.chunk`` events) put back together
    into the one ``chat.completion`` a non-streaming request gets."""

    def __init__(self) -> None:
        self.head: dict[str, Any] = {}
        self.choices: dict[int, dict[str, Any]] = {}
        self.extra: dict[str, Any] = {}
        self.done = False

    def feed(self, line: str) -> None:
        if not line.startswith("data:"):
            return  # blank separators, comments, event names
        data = line[5:].strip()
        if data == "[DONE]":
            self.done = True
            return
        try:
            chunk = orjson.loads(data)
        except orjson.JSONDecodeError:
            raise StreamError(502, error_body(502, f"llama.cpp sent an unreadable chunk: {data[:200]}",
                                              "server_error")) from None
        if not isinstance(chunk, dict):
            return
        if "error" in chunk:
            err = chunk["error"] if isinstance(chunk["error"], dict) else {"message": str(chunk["error"])}
            status = int(err.get("code") or 500) if str(err.get("code", "")).isdigit() else 500
            raise StreamError(status, orjson.dumps({"error": err}))
        for k in ("id", "created", "model", "system_fingerprint"):
            if k in chunk and k not in self.head:
                self.head[k] = chunk[k]
        for k in ("usage", "timings"):
            if chunk.get(k):
                self.extra[k] = chunk[k]
        for c in chunk.get("choices") or ():
            slot = self.choices.setdefault(int(c.get("index", 0)), {"content": [], "reasoning": [],
                                                                     "finish_reason": None})
            delta = c.get("delta") or {}
            if delta.get("content"):
                slot["content"].append(delta["content"])
            if delta.get("reasoning_content"):
                slot["reasoning"].append(delta["reasoning_content"])
            if c.get("finish_reason"):
                slot["finish_reason"] = c["finish_reason"]

    def result(self) -> dict[str, Any]:
        choices = []
        for i in sorted(self.choices):
            c = self.choices[i]
            msg: dict[str, Any] = {"role": "assistant", "content": "".join(c["content"])}
            if c["reasoning"]:
                msg["reasoning_content"] = "".join(c["reasoning"])
            choices.append({"index": i, "finish_reason": c["finish_reason"], "message": msg})
        return {**self.head, "object": "chat.completion", "choices": choices, **self.extra}


class Gate:
    def __init__(self, upstream: str | None, upstream_key: str | None, api_key: str, *,
                 max_active: int, describe_bound: str = "", log: Any = None,
                 to_grammar: Callable[[dict], str | None] | None = None,
                 models: frozenset[str] = frozenset()) -> None:
        self.upstream: str | None = None
        # llama.cpp answers with its one model whatever a request names; a client naming another
        # is told, as an OpenAI server would (404), instead of getting a model it did not ask for
        self.models = models
        self.upstream_key = ""
        if upstream is not None:
            self.set_upstream(upstream, upstream_key or "")
        self.api_key = api_key.encode()
        self.max_active = max_active
        self.describe_bound = describe_bound or f"{max_active} requests"
        self.stats = GateStats()
        self.log = log
        self.to_grammar = to_grammar
        self._grammars: dict[bytes, str | None] = {}
        # no timeouts: the client owns them, and its going away cancels the upstream request
        self.client = httpx.AsyncClient(timeout=httpx.Timeout(None, connect=10.0),
                                        limits=httpx.Limits(max_connections=max_active + 8,
                                                            max_keepalive_connections=max_active + 8))

    def set_upstream(self, upstream: str, upstream_key: str) -> None:
        """llama.cpp is ready there; until then every request is answered 503 "loading"."""
        self.upstream_key = upstream_key
        self.upstream = upstream.rstrip("/")

    async def aclose(self) -> None:
        with trio.CancelScope(shield=True):
            await self.client.aclose()

    def _authorized(self, headers: list[tuple[bytes, bytes]]) -> bool:
        for k, v in headers:
            if k == b"authorization":
                scheme, _, token = v.partition(b" ")
                return scheme.lower() == b"bearer" and hmac.compare_digest(token.strip(), self.api_key)
        return False

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "lifespan":
            while True:
                msg = await receive()
                if msg["type"] == "lifespan.startup":
                    await send({"type": "lifespan.startup.complete"})
                elif msg["type"] == "lifespan.shutdown":
                    await send({"type": "lifespan.shutdown.complete"})
                    return
        if scope["type"] != "http":
            return
        path, method = scope["path"], scope["method"]
        if self.upstream is None:
            await _reply(send, 503, error_body(503, "Loading model", "unavailable_error"),
                         extra=[(b"retry-after", b"5")])
            return
        if path not in PUBLIC_PATHS and not self._authorized(scope["headers"]):
            self.stats.unauthorized += 1
            await _reply(send, 401, error_body(401, "Invalid API Key", "authentication_error"))
            return
        try:
            body = await _read_body(receive)
        except _Gone:
            self.stats.aborted += 1
            return
        if body is None:
            await _reply(send, 413, error_body(413, "request body too large", "invalid_request_error"))
            return
        assemble = False
        if method == "POST" and path.endswith("/chat/completions"):
            body, assemble, model = self._rewrite(body)
            if model is not None and self.models and model not in self.models:
                await _reply(send, 404, error_body(
                    404, f"The model `{str(model)[:100]}` does not exist here; this server serves "
                    f"{', '.join(sorted(self.models))}", "invalid_request_error"))
                return
        counted = method == "POST"
        if counted and self.stats.active >= self.max_active:
            self.stats.busy += 1
            await _reply(send, 503, error_body(
                503, f"server busy: {self.stats.active} requests in flight, the most it takes is "
                f"{self.describe_bound}; retry later", "unavailable_error"),
                extra=[(b"retry-after", b"1")])
            return
        if counted:
            self.stats.active += 1
            self.stats.peak_active = max(self.stats.peak_active, self.stats.active)
        try:
            await self._forward(scope, body, receive, send, path, assemble)
        finally:
            if counted:
                self.stats.active -= 1

    # ------------------------------------------------------------------ the request

    def _rewrite(self, body: bytes) -> tuple[bytes, bool, Any]:
        """(the body to send on, whether its stream is to be put back together, the model it
        names): a stream always, the schema as a compact grammar when it can be. A body that
        cannot be read goes on as it is (llama.cpp answers it)."""
        try:
            data = orjson.loads(body)
        except orjson.JSONDecodeError:
            return body, False, None
        if not isinstance(data, dict):
            return body, False, None
        assemble = not data.get("stream")
        if assemble:
            data["stream"] = True
            data["stream_options"] = {"include_usage": True}
        rf = data.get("response_format")
        if self.to_grammar is not None and isinstance(rf, dict) and rf.get("type") == "json_schema" \
                and "grammar" not in data:
            schema = (rf.get("json_schema") or {}).get("schema") if isinstance(rf.get("json_schema"), dict) else None
            grammar = self._grammar(schema) if isinstance(schema, dict) else None
            if grammar is not None:
                del data["response_format"]
                data["grammar"] = grammar
        return orjson.dumps(data), assemble, data.get("model") or None

    def _grammar(self, schema: dict) -> str | None:
        key = orjson.dumps(schema, option=orjson.OPT_SORT_KEYS)
        if key not in self._grammars:
            if len(self._grammars) > 1000:
                self._grammars.clear()
            try:
                self._grammars[key] = self.to_grammar(schema) if self.to_grammar else None
            except Exception:  # noqa: BLE001 - the library's conversion: then llama.cpp's own
                self._grammars[key] = None
        return self._grammars[key]

    async def _forward(self, scope: Scope, body: bytes, receive: Receive, send: Send, path: str,
                       assemble: bool) -> None:
        headers = [(k, v) for k, v in scope["headers"] if k not in _DROP]
        headers.append((b"authorization", b"Bearer " + self.upstream_key.encode()))
        url = self.upstream + path + (("?" + scope["query_string"].decode()) if scope.get("query_string") else "")
        state = {"started": False, "done": False}
        async with trio.open_nursery() as nursery:
            async def watch_disconnect() -> None:
                while True:
                    msg = await receive()
                    if msg["type"] == "http.disconnect":
                        if not state["done"]:
                            self.stats.aborted += 1
                        nursery.cancel_scope.cancel()  # closes the upstream stream: llama.cpp stops
                        return

            nursery.start_soon(watch_disconnect)
            try:
                req = self.client.build_request(scope["method"], url, content=body, headers=headers)
                resp = await self.client.send(req, stream=True)
            except httpx.HTTPError as exc:
                self.stats.upstream_errors += 1
                await _reply(send, 502, error_body(502, f"llama.cpp did not answer: {type(exc).__name__}: {exc}",
                                                   "server_error"))
                nursery.cancel_scope.cancel()
                return
            try:
                self.stats.forwarded += 1
                self.stats.by_status[resp.status_code] = self.stats.by_status.get(resp.status_code, 0) + 1
                streamed = resp.headers.get("content-type", "").startswith("text/event-stream")
                if assemble and resp.status_code == 200 and streamed:
                    await self._assembled(resp, send, state)
                else:
                    await self._relay(resp, send, state, path)
            except httpx.HTTPError as exc:
                self.stats.upstream_errors += 1
                if not state["started"]:
                    await _reply(send, 502, error_body(502, f"llama.cpp failed: {exc}", "server_error"))
                else:  # the status is sent: all that is left is to end the body short
                    await send({"type": "http.response.body", "body": b"", "more_body": False})
            finally:
                with trio.CancelScope(shield=True):
                    await resp.aclose()
            nursery.cancel_scope.cancel()

    async def _assembled(self, resp: httpx.Response, send: Send, state: dict) -> None:
        asm = Assembler()
        try:
            async for line in resp.aiter_lines():
                asm.feed(line)
                if asm.done:
                    break
        except StreamError as exc:
            state["started"] = state["done"] = True
            await _reply(send, exc.status, exc.body)
            return
        if not asm.choices:
            raise httpx.RemoteProtocolError("the stream ended before any answer")
        out = orjson.dumps(asm.result())
        state["started"] = state["done"] = True
        await _reply(send, 200, out)

    async def _relay(self, resp: httpx.Response, send: Send, state: dict, path: str) -> None:
        out = [(k.lower(), v) for k, v in resp.headers.raw if k.lower() not in _DROP]
        extra = self.stats.prometheus().encode() if path == "/metrics" and resp.status_code == 200 else b""
        await send({"type": "http.response.start", "status": resp.status_code, "headers": out})
        state["started"] = True
        async for chunk in resp.aiter_raw():
            await send({"type": "http.response.body", "body": chunk, "more_body": True})
        state["done"] = True
        await send({"type": "http.response.body", "body": extra, "more_body": False})


async def _read_body(receive: Receive) -> bytes | None:
    parts: list[bytes] = []
    size = 0
    while True:
        msg = await receive()
        if msg["type"] == "http.disconnect":
            raise _Gone()
        chunk = msg.get("body", b"")
        size += len(chunk)
        if size > MAX_BODY:
            return None
        parts.append(chunk)
        if not msg.get("more_body"):
            return b"".join(parts)


class _Gone(Exception):
    """The client went away while sending its request."""


async def _reply(send: Send, status: int, body: bytes, extra: list[tuple[bytes, bytes]] | None = None) -> None:
    await send({"type": "http.response.start", "status": status,
                "headers": [*JSON_HEADERS, (b"content-length", str(len(body)).encode()), *(extra or [])]})
    await send({"type": "http.response.body", "body": body, "more_body": False})


__all__ = ["Assembler", "Gate", "GateStats", "error_body"]
