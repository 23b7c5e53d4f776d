"""Any OpenAI-compatible chat endpoint (``SWARM_LLM=openai``): the shared llama.cpp server of
``python -m agent serve-llm``, llama.cpp's ``llama-server``, vLLM, LM Studio, Ollama's ``/v1``,
or a hosted API.

POST ``{base_url}/chat/completions`` with httpx (on trio through anyio). Structured output: the
request's JSON schema goes in ``response_format`` (``json_schema``); a server that refuses it is
asked with ``json_object`` instead, then with the schema written into the prompt (the mode that
worked is kept for the backend's life); every answer is parsed and validated here either way.

Every call is bounded by ``timeout`` (``trio.fail_after`` around the whole exchange, httpx's own
for the connection); an unreachable server, a timeout, ``429`` and ``5xx`` are retried with
exponential backoff and jitter (``stamina``), as is an answer that breaks the schema (with
another seed); a wrong key or a missing model is reported at once in one line that says what to
fix. Cancelling the calling trio scope closes the HTTP connection, which makes llama.cpp drop
the request (a server that ignores a closed connection finishes it unread).

The API key comes from the constructor, or from a file read again whenever it changes (a
restarted ``serve-llm`` writes a new key; the agents pick it up without a restart).

Each call's figures are kept (``calls``, ``last_timings``): seconds, tokens, tokens/s and the
prompt tokens the server took from its cache when it says (llama.cpp's ``timings.cache_n``,
OpenAI's ``usage.prompt_tokens_details.cached_tokens``).
"""

from __future__ import annotations

import collections
import json
import re
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Callable, Literal

import httpx
import structlog
import trio

from agent.llm.base import (
    LLM,
    Answer,
    LLMBadOutput,
    LLMError,
    LLMRequest,
    LLMUnavailable,
    ModelMissing,
)
from agent.llm.answers import parse_answer
from agent.llm.retry import complete_retrying

log = structlog.get_logger()

SchemaMode = Literal["json_schema", "json_object", "prompt"]
MODES: tuple[SchemaMode, ...] = ("json_schema", "json_object", "prompt")
RETRIED_STATUS = frozenset({408, 409, 425, 429, 500, 502, 503, 504})
KEEP_CALLS = 10_000


class LLMAuthError(LLMError):
    """The server refused the API key (401/403): not retried, the message says what to set."""


@dataclass
class CallTiming:
    """One HTTP exchange that got an answer (a call's retries each have their own)."""

    kind: str
    seconds: float  # the whole exchange, as the client saw it (queueing at the server included)
    prompt_tokens: int
    completion_tokens: int
    cached_tokens: int | None  # prompt tokens the server reused from its cache (None: not said)
    tokens_per_second: float | None  # completion tokens / the server's generation time
    prompt_tokens_per_second: float | None
    finish_reason: str | None
    attempt: int
    outcome: str  # "ok" | "bad_output"
    mode: str

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def _short(text: str, limit: int = 200) -> str:
    text = " ".join(str(text).split())
    return text if len(text) <= limit else text[:limit] + "..."


def extract_json(text: str | None) -> str | None:
    """The JSON object inside a free-text answer (fences and chatter around it dropped)."""
    if not text:
        return text
    fenced = re.search(r"```(?:json)?\s*(.*?)```", text, re.S)
    if fenced:
        text = fenced.group(1)
    start, end = text.find("{"), text.rfind("}")
    return text[start:end + 1] if 0 <= start < end else text


class OpenAILLM(LLM):
    backend = "openai"

    def __init__(
        self,
        base_url: str,
        model: str | None = None,
        api_key: str | None = None,
        *,
        api_key_file: str | Path | None = None,
        timeout: float = 120.0,
        connect_timeout: float = 5.0,
        retries: int = 3,
        backoff_initial: float = 0.5,
        backoff_max: float = 10.0,
        mode: str = "auto",
        on_call: Callable[[CallTiming], None] | None = None,
    ) -> None:
        if not base_url or not re.match(r"^https?://", base_url):
            raise LLMError(f"the OpenAI-compatible base URL must start with http:// or https://, "
                           f"got {base_url!r} (set SWARM_OPENAI_BASE_URL, e.g. http://127.0.0.1:8088/v1)")
        if mode != "auto" and mode not in MODES:
            raise LLMError(f"unknown structured-output mode {mode!r}; one of auto, {', '.join(MODES)}")
        self.base_url = base_url.rstrip("/")
        self.model = model or ""  # "": the server's first model (asked once)
        self._static_key = api_key
        self.api_key_file = Path(api_key_file).expanduser() if api_key_file else None
        self.timeout = timeout
        self.connect_timeout = min(connect_timeout, timeout)
        self.retries = retries
        self.backoff_initial = backoff_initial
        self.backoff_max = backoff_max
        self.mode: SchemaMode = "json_schema" if mode == "auto" else mode  # type: ignore[assignment]
        self._fallback = mode == "auto"
        self.on_call = on_call
        self.calls: collections.deque[CallTiming] = collections.deque(maxlen=KEEP_CALLS)
        self.last_timings: dict[str, Any] = {}
        self._key_cache: tuple[tuple[int, int] | None, str | None] = (None, None)
        self._client = httpx.AsyncClient(
            timeout=httpx.Timeout(timeout, connect=self.connect_timeout),
            limits=httpx.Limits(max_keepalive_connections=4, keepalive_expiry=300),
        )

    @classmethod
    def from_settings(cls, settings: Any) -> "OpenAILLM":
        if not settings.openai_base_url:
            raise LLMError("SWARM_LLM=openai needs SWARM_OPENAI_BASE_URL (e.g. http://127.0.0.1:8088/v1, "
                           "what `python -m agent serve-llm` prints)")
        key = settings.openai_api_key.get_secret_value() if settings.openai_api_key else None
        return cls(settings.openai_base_url, settings.openai_model, key,
                   api_key_file=settings.openai_api_key_file, timeout=settings.llm_timeout,
                   connect_timeout=settings.openai_connect_timeout, retries=settings.llm_retries,
                   mode=settings.openai_response_format)

    # ------------------------------------------------------------------ the key

    def api_key(self) -> str | None:
        """The key: given, or the file's content (read again when its size or mtime change)."""
        if self._static_key is not None or self.api_key_file is None:
            return self._static_key
        try:
            st = self.api_key_file.stat()
        except OSError as exc:
            raise LLMUnavailable(f"cannot read the API key file {self.api_key_file}: "
                                 f"{exc.strerror or exc} (is the LLM server started?)") from None
        stamp = (st.st_mtime_ns, st.st_size)
        if self._key_cache[0] != stamp:
            try:
                key = self.api_key_file.read_text().strip() or None
            except OSError as exc:
                raise LLMUnavailable(f"cannot read the API key file {self.api_key_file}: "
                                     f"{exc.strerror or exc}") from None
            self._key_cache = (stamp, key)
        return self._key_cache[1]

    def _headers(self) -> dict[str, str]:
        key = self.api_key()
        return {"Authorization": f"Bearer {key}"} if key else {}

    # ------------------------------------------------------------------ errors

    def _where(self) -> str:
        return f"the OpenAI-compatible server at {self.base_url}"

    def _unreachable(self, exc: BaseException) -> LLMUnavailable:
        return LLMUnavailable(f"{self._where()} is unreachable: {type(exc).__name__}: {_short(str(exc)) or 'no answer'}")

    def _auth(self, status: int) -> LLMAuthError:
        source = (f"the key in {self.api_key_file}" if self._static_key is None and self.api_key_file
                  else "SWARM_OPENAI_API_KEY" if self._static_key else "no API key")
        return LLMAuthError(f"{self._where()} refused {source} ({status}); set SWARM_OPENAI_API_KEY "
                            "or SWARM_OPENAI_API_KEY_FILE to the server's key")

    @staticmethod
    def _message(resp: httpx.Response) -> str:
        try:
            data = resp.json()
        except ValueError:
            return _short(resp.text) or resp.reason_phrase
        err = data.get("error") if isinstance(data, dict) else None
        if isinstance(err, dict):
            return _short(str(err.get("message") or err))
        if isinstance(err, str):
            return _short(err)
        return _short(json.dumps(data))

    # ------------------------------------------------------------------ probing

    async def list_models(self, timeout: float | None = None) -> list[str]:
        """The model ids ``GET /models`` lists; errors as for a call."""
        try:
            with trio.fail_after(timeout or self.timeout):
                resp = await self._client.get(f"{self.base_url}/models", headers=self._headers(),
                                              timeout=timeout or self.timeout)
        except trio.TooSlowError:
            raise LLMUnavailable(f"{self._where()} did not answer GET /models within "
                                 f"{timeout or self.timeout}s") from None
        except httpx.HTTPError as exc:
            raise self._unreachable(exc) from None
        if resp.status_code in (401, 403):
            raise self._auth(resp.status_code)
        if resp.status_code == 404:
            raise LLMError(f"{self._where()} has no /models (404): the base URL usually ends in /v1")
        if resp.status_code != 200:
            cls = LLMUnavailable if resp.status_code in RETRIED_STATUS else LLMError
            raise cls(f"{self._where()} answered GET /models with {resp.status_code}: {self._message(resp)}")
        try:
            data = resp.json().get("data") or []
            return [str(m["id"]) for m in data if isinstance(m, dict) and m.get("id")]
        except (ValueError, AttributeError, KeyError) as exc:
            raise LLMError(f"{self._where()} sent an unreadable model list: {exc}") from None

    async def probe(self, timeout: float = 2.0) -> tuple[bool, str]:
        """(usable, reason): does the server answer within ``timeout``, accept the key, and
        serve the model?"""
        try:
            names = await self.list_models(timeout)
        except LLMError as exc:
            return False, str(exc)
        if not self.model:
            if not names:
                return False, f"{self._where()} lists no model"
            self.model = names[0]  # ask for it by name from now on
            return True, f"{self._where()} serves {names[0]}"
        if self.model in names or not names:
            return True, f"{self._where()} serves {self.model}"
        return False, str(self._missing(names))

    def _missing(self, names: list[str] | None = None, said: str = "") -> ModelMissing:
        have = f" (it serves: {', '.join(names)})" if names else f" ({said})" if said else ""
        return ModelMissing(f"model {self.model} is not served by {self._where()}{have}; set "
                            "SWARM_OPENAI_MODEL to one it serves")

    # ------------------------------------------------------------------ calls

    def _body(self, req: LLMRequest, seed: int | None, mode: SchemaMode) -> dict[str, Any]:
        prompt = req.prompt
        if req.free_text:
            mode = "free"  # type: ignore[assignment]  # prose: no schema, no response_format
        if mode == "prompt":
            # after the prompt: the shared prefix (system message, the start of the prompt)
            # stays the same, so the server's prompt cache still hits
            prompt += ("\n\nAnswer with one JSON object and nothing else. It must be valid against "
                       "this JSON schema:\n" + json.dumps(req.schema, separators=(",", ":")))
        body: dict[str, Any] = {
            "messages": [{"role": "system", "content": req.system},
                         {"role": "user", "content": prompt}],
            "max_tokens": req.max_tokens,
            "temperature": req.temperature,
            "stream": False,
        }
        if self.model:
            body["model"] = self.model
        if seed is not None:
            body["seed"] = seed
        if mode == "json_schema":
            body["response_format"] = {"type": "json_schema", "json_schema": {
                "name": f"{req.kind}_answer", "schema": req.schema}}
        elif mode == "json_object":
            body["response_format"] = {"type": "json_object"}
        return body

    async def complete(self, req: LLMRequest) -> Answer:
        return await complete_retrying(self._once, req, retries=self.retries,
                                       backoff_initial=self.backoff_initial, backoff_max=self.backoff_max)

    async def _post(self, body: dict[str, Any], kind: str, headers: dict[str, str]) -> httpx.Response:
        try:
            with trio.fail_after(self.timeout):
                return await self._client.post(f"{self.base_url}/chat/completions", json=body,
                                               headers=headers)
        except trio.TooSlowError:
            raise LLMUnavailable(f"{self._where()} did not answer a {kind} request within "
                                 f"{self.timeout}s") from None
        except httpx.HTTPError as exc:
            raise self._unreachable(exc) from None

    async def _once(self, req: LLMRequest, seed: int | None, n: int, attempts: int,
                    spent: list[int]) -> Answer:
        while True:  # once per structured-output mode, until one is accepted
            mode = self.mode
            headers = self._headers()
            key_used = self._key_cache[0]
            t0 = time.perf_counter()
            resp = await self._post(self._body(req, seed, mode), req.kind, headers)
            elapsed = time.perf_counter() - t0
            status = resp.status_code
            if status == 200:
                break
            text = self._message(resp)
            if status in (401, 403):
                self.api_key()  # the file may hold a new key (a restarted server)
                if self._key_cache[0] != key_used:
                    continue
                raise self._auth(status)
            if status == 404 and "model" in text.lower():
                raise self._missing(said=text)
            if status == 404:
                raise LLMError(f"{self._where()} has no /chat/completions (404: {text}); the base "
                               "URL usually ends in /v1")
            if status in (400, 422) and self._fallback and mode != "prompt" and _about_format(text):
                self.mode = MODES[MODES.index(mode) + 1]
                log.warning("llm.openai.response_format_refused", url=self.base_url, mode=mode,
                            next_mode=self.mode, error=text)
                continue
            if status in RETRIED_STATUS:
                raise LLMUnavailable(f"{self._where()} failed ({status}): {text}")
            raise LLMError(f"{self._where()} rejected a {req.kind} request ({status}): {text}")
        try:
            data = resp.json()
            choice = data["choices"][0]
            content = (choice.get("message") or {}).get("content")
        except (ValueError, KeyError, IndexError, TypeError, AttributeError):
            raise LLMBadOutput(f"{self._where()} sent an unreadable chat response: "
                               f"{_short(resp.text)}") from None
        usage = data.get("usage") or {}
        timings = data.get("timings") or {}
        prompt_tokens = int(usage.get("prompt_tokens") or 0)
        completion_tokens = int(usage.get("completion_tokens") or 0)
        spent[0] += prompt_tokens
        spent[1] += completion_tokens
        details = usage.get("prompt_tokens_details") or {}
        cached = timings.get("cache_n", details.get("cached_tokens"))
        gen_s = (timings.get("predicted_ms") or 0) / 1000
        timing = CallTiming(
            kind=req.kind, seconds=round(elapsed, 4), prompt_tokens=prompt_tokens,
            completion_tokens=completion_tokens, cached_tokens=None if cached is None else int(cached),
            tokens_per_second=(round(completion_tokens / gen_s, 2) if gen_s > 0 else
                               round(completion_tokens / elapsed, 2) if elapsed > 0 else None),
            prompt_tokens_per_second=(round(timings["prompt_per_second"], 1)
                                      if timings.get("prompt_per_second") else None),
            finish_reason=choice.get("finish_reason"), attempt=n, outcome="ok", mode=mode)
        try:
            if req.free_text:
                if not (content or "").strip():
                    raise LLMBadOutput("an empty answer to a free-text request")
                value = {"text": content}
            else:
                value = parse_answer(extract_json(content) if mode != "json_schema" else content,
                                     req.answer)
        except LLMBadOutput as exc:
            timing.outcome = "bad_output"
            self._record(timing)
            cut = " (cut off by max_tokens)" if choice.get("finish_reason") == "length" else ""
            log.warning("llm.openai.bad_output", kind=req.kind, model=self.model or "?", attempt=n,
                        attempts=attempts, error=str(exc) + cut)
            raise LLMBadOutput(f"{exc}{cut}") from None
        self._record(timing)
        log.debug("llm.openai.answer", **timing.as_dict())
        return Answer(value, *spent, timing={"tokens_per_second": timing.tokens_per_second,
                                             "cached_tokens": timing.cached_tokens})

    def _record(self, timing: CallTiming) -> None:
        self.calls.append(timing)
        self.last_timings = timing.as_dict()
        if self.on_call is not None:
            self.on_call(timing)

    async def aclose(self) -> None:
        with trio.CancelScope(shield=True):
            await self._client.aclose()


def _about_format(message: str) -> bool:
    """Does a 400 say the server cannot do this structured-output request (rather than, say,
    that the prompt is too long)?"""
    m = message.lower()
    return any(w in m for w in ("response_format", "json_schema", "json_object", "schema",
                                "grammar", "structured", "guided"))


__all__ = ["CallTiming", "LLMAuthError", "OpenAILLM", "extract_json"]
