"""A small OpenAI-compatible HTTP server for the backend's error paths (a test double).

What a real llama.cpp server cannot be made to do on demand is done here: refuse
``response_format``, answer 429/500/503, say a model does not exist, answer slowly. The real
server (``agent.llm.server``) is what the backend's main tests use.

    with FakeOpenAI(models=["m"]) as fake:
        fake.replies.append(Reply(status=400, body={"error": {"message": "response_format ..."}}))
        fake.replies.append('{"result": "ok"}')     # message content, status 200
        ... OpenAILLM(fake.url, "m", api_key="k") ...
        fake.requests   # [(method, path, headers, body), ...]

With no reply queued, a chat request is answered with the minimal instance of its schema (from
``response_format``) or ``{}``. ``key`` set: every request must carry it (else 401).
"""

from __future__ import annotations

import json
import threading
import time
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from support.fake_ollama import minimal_instance


@dataclass
class Reply:
    status: int = 200
    body: Any = None  # a dict sent as JSON; a str sent as message content (status 200)
    delay: float = 0.0


@dataclass
class FakeOpenAI:
    models: list[str] = field(default_factory=lambda: ["fake-model"])
    key: str | None = None
    replies: list[Any] = field(default_factory=list)
    requests: list[tuple[str, str, dict, Any]] = field(default_factory=list)

    def start(self) -> "FakeOpenAI":
        fake = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args: Any) -> None:
                pass

            def _send(self, status: int, obj: Any) -> None:
                data = json.dumps(obj).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def _authorized(self) -> bool:
                if fake.key is None:
                    return True
                return self.headers.get("Authorization") == f"Bearer {fake.key}"

            def do_GET(self) -> None:
                fake.requests.append(("GET", self.path, dict(self.headers), None))
                if not self._authorized():
                    return self._send(401, {"error": {"message": "Invalid API Key", "code": 401}})
                if self.path == "/v1/models":
                    return self._send(200, {"object": "list", "data": [
                        {"id": m, "object": "model", "owned_by": "fake"} for m in fake.models]})
                self._send(404, {"error": {"message": f"no route {self.path}"}})

            def do_POST(self) -> None:
                n = int(self.headers.get("Content-Length") or 0)
                body = json.loads(self.rfile.read(n) or b"{}")
                fake.requests.append(("POST", self.path, dict(self.headers), body))
                if not self._authorized():
                    return self._send(401, {"error": {"message": "Invalid API Key", "code": 401}})
                if self.path != "/v1/chat/completions":
                    return self._send(404, {"error": {"message": f"no route {self.path}"}})
                if body.get("model") and body["model"] not in fake.models:
                    return self._send(404, {"error": {"message": f"The model `{body['model']}` does not exist"}})
                reply = fake.replies.pop(0) if fake.replies else None
                if not isinstance(reply, Reply):
                    reply = Reply(body=reply)
                if reply.delay:
                    time.sleep(reply.delay)
                if reply.status != 200:
                    return self._send(reply.status, reply.body or {"error": {"message": "failed"}})
                content = reply.body
                if content is None:
                    schema = ((body.get("response_format") or {}).get("json_schema") or {}).get("schema")
                    content = minimal_instance(schema) if schema else {}
                if not isinstance(content, str):
                    content = json.dumps(content)
                self._send(200, {
                    "id": "chatcmpl-1", "object": "chat.completion", "model": body.get("model", "x"),
                    "choices": [{"index": 0, "finish_reason": "stop",
                                 "message": {"role": "assistant", "content": content}}],
                    "usage": {"prompt_tokens": 11, "completion_tokens": 7, "total_tokens": 18,
                              "prompt_tokens_details": {"cached_tokens": 3}},
                })

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        self._server.shutdown()
        self._server.server_close()

    def __enter__(self) -> "FakeOpenAI":
        return self.start()

    def __exit__(self, *exc: Any) -> None:
        self.stop()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self._server.server_address[1]}/v1"

    def chats(self) -> list[dict]:
        return [b for m, p, _h, b in self.requests if m == "POST"]
