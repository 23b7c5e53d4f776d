"""Embedded llama.cpp through ``xllamacpp`` (a prebuilt wheel): the fallback when no Ollama runs.

The model is a GGUF file named by ``settings.llamacpp_model``: an embedded model's name or a
path (``agent.llm.models`` installs, verifies and locates the embedded ones). xllamacpp runs llama.cpp's server in-process; we call its handler
directly (it releases the GIL) from a worker thread, one call at a time. The server also binds
an HTTP port: it is kept on 127.0.0.1 and protected by a random API key.

Output is constrained by the request's JSON schema (llguidance grammar, compact JSON with no
free whitespace so the small model spends its tokens on content), then validated again here.
"""

from __future__ import annotations

import copy
import json
import random
import secrets
import time
from pathlib import Path
from typing import Any

import structlog
import trio

from agent.llm import models
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

log = structlog.get_logger()

# Extra sampling per request kind. Free text from SmolLM2 tends to loop (digit runs, the same
# phrase again); a mild repeat penalty fixed that for "execute" in our measurements, but on
# "decompose" it made the model stop after two subgoals, so it is only used for free text.
KIND_SAMPLING: dict[str, dict[str, Any]] = {"execute": {"repeat_penalty": 1.15},
                                           "synthesize": {"repeat_penalty": 1.15}}

def default_model_path() -> Path:
    """The GGUF used when no model is configured (see ``models.resolve``), or ``ModelMissing``."""
    return models.resolve(None)[1]


def resolve_model_path(model: str | Path | None, directory: str | Path | None = None) -> Path:
    """A model name (``smollm2-135m``, ``qwen2.5-0.5b``, ``qwen2.5-1.5b``), a GGUF path, or None
    for the default; verified, or ``ModelMissing``."""
    return models.resolve(model, directory)[1]


class LlamaCppLLM(LLM):
    backend = "llamacpp"

    def __init__(
        self,
        model_path: str | Path | None = None,
        *,
        model_dir: str | Path | None = None,
        threads: int = 1,
        ctx: int = 2048,
        timeout: float = 120.0,
        retries: int = 2,
    ) -> None:
        self.model, self.path = models.resolve(model_path, model_dir)
        self.threads = threads
        self.ctx = ctx
        self.timeout = timeout
        self.retries = retries
        self.load_seconds: float | None = None
        self.last_timings: dict[str, Any] = {}
        self._server: Any = None
        self._grammar_cache: dict[str, str | None] = {}
        self._lock = trio.Lock()
        self._closed = False

    @classmethod
    def from_settings(cls, settings: Any) -> "LlamaCppLLM":
        return cls(
            settings.llamacpp_model,
            model_dir=getattr(settings, "model_dir", None),
            threads=settings.llamacpp_threads,
            ctx=settings.llamacpp_ctx,
            timeout=settings.llm_timeout,
            retries=min(settings.llm_retries, 2),  # a bad answer is retried a couple of times
        )

    # -------------------------------------------------------------------------- loading

    async def load(self) -> None:
        """Load the model now (otherwise the first ``generate`` does)."""
        async with self._lock:
            await self._load_locked()

    async def _load_locked(self) -> None:
        if self._closed:
            raise LLMUnavailable("the llama.cpp backend is closed")
        if self._server is not None:
            return
        start = time.perf_counter()
        self._server = await trio.to_thread.run_sync(self._load_sync)
        self.load_seconds = time.perf_counter() - start
        log.info("llm.llamacpp.loaded", model=self.model, seconds=round(self.load_seconds, 3),
                 threads=self.threads, ctx=self.ctx)

    def _load_sync(self) -> Any:
        try:
            import xllamacpp
        except ImportError as exc:
            raise ModelMissing(
                f"the xllamacpp package is not importable ({exc}); "
                "run `pip install xllamacpp==2026.10.11549` (needs the system's libgomp1)"
            ) from None
        params = xllamacpp.CommonParams()
        params.model.path = str(self.path)
        params.offline = True  # never download anything
        params.n_ctx = self.ctx
        params.n_parallel = 1
        params.cpuparams.n_threads = self.threads
        params.cpuparams_batch.n_threads = self.threads
        params.hostnames = ["127.0.0.1"]  # its HTTP listener stays on loopback ...
        params.api_keys = [secrets.token_urlsafe(24)]  # ... and needs a key nobody knows
        params.verbosity = -1  # llama.cpp logs to stderr otherwise
        try:
            return xllamacpp.Server(params)
        except Exception as exc:  # RuntimeError("Failed to init server ...")
            raise LLMUnavailable(f"llama.cpp could not load {self.path}: {exc}") from exc

    # -------------------------------------------------------------------------- generating

    def _constraint(self, schema: dict) -> dict[str, Any]:
        """Body fields that constrain the answer to ``schema``."""
        key = json.dumps(schema, sort_keys=True)
        if key not in self._grammar_cache:
            grammar: str | None = None
            try:
                import xllamacpp

                compact = copy.deepcopy(schema)
                compact["x-guidance"] = {"whitespace_flexible": False}
                grammar = xllamacpp.json_schema_to_grammar(compact)
                if not grammar.startswith("%llguidance"):
                    grammar = None  # a GBNF build: let the server convert the schema itself
            except Exception:  # pragma: no cover - depends on the build
                grammar = None
            self._grammar_cache[key] = grammar
        grammar = self._grammar_cache[key]
        if grammar is not None:
            return {"grammar": grammar}
        return {"response_format": {"type": "json_schema",
                                    "json_schema": {"name": "answer", "schema": schema}}}

    def _body(self, req: LLMRequest, seed: int) -> dict[str, Any]:
        prompt_estimate = (len(req.system) + len(req.prompt)) // 3 + 64
        max_tokens = max(32, min(req.max_tokens, self.ctx - prompt_estimate))
        return {
            "messages": [
                {"role": "system", "content": req.system},
                {"role": "user", "content": req.prompt},
            ],
            "max_tokens": max_tokens,
            "temperature": req.temperature,
            "seed": seed,
            "stream": False,
            **KIND_SAMPLING.get(req.kind, {}),
            **({} if req.free_text else self._constraint(req.schema)),
        }

    async def complete(self, req: LLMRequest) -> Answer:
        attempts = self.retries + 1
        prompt_tokens = completion_tokens = 0
        base_seed = req.seed if req.seed is not None else random.randrange(2**31)
        last: LLMBadOutput | None = None
        for attempt in range(attempts):
            seed = (base_seed + attempt * 7919) % (2**31)
            body = self._body(req, seed)
            async with self._lock:
                await self._load_locked()
                server = self._server
                start = time.perf_counter()
                # On timeout or cancellation the worker thread is abandoned and finishes its
                # call in the background; the handler is thread-safe (llama.cpp's HTTP
                # threads share it), so a later call just queues behind it in llama.cpp.
                try:
                    with trio.fail_after(self.timeout):
                        resp = await trio.to_thread.run_sync(
                            server.handle_chat_completions, body, abandon_on_cancel=True
                        )
                except trio.TooSlowError:
                    raise LLMUnavailable(
                        f"llama.cpp did not answer a {req.kind} request within {self.timeout}s"
                    ) from None
                except (ValueError, RuntimeError) as exc:
                    raise LLMError(f"llama.cpp rejected the request: {exc}") from exc
                elapsed = time.perf_counter() - start
            if not isinstance(resp, dict) or "error" in resp or not resp.get("choices"):
                err = resp.get("error") if isinstance(resp, dict) else resp
                raise LLMError(f"llama.cpp returned an error for a {req.kind} request: {err}")
            usage = resp.get("usage") or {}
            prompt_tokens += int(usage.get("prompt_tokens") or 0)
            completion_tokens += int(usage.get("completion_tokens") or 0)
            choice = resp["choices"][0]
            content = (choice.get("message") or {}).get("content")
            timings = resp.get("timings") or {}
            self.last_timings = {
                "seconds": elapsed,
                "completion_tokens": (resp.get("usage") or {}).get("completion_tokens"),
                "prompt_tokens": (resp.get("usage") or {}).get("prompt_tokens"),
                "tokens_per_second": timings.get("predicted_per_second"),
                "finish_reason": choice.get("finish_reason"),
            }
            try:
                answer = {"text": content or ""} if req.free_text else parse_answer(content, req.answer)
            except LLMBadOutput as exc:
                last = exc
                log.warning("llm.llamacpp.bad_output", kind=req.kind, attempt=attempt + 1,
                            attempts=attempts, error=str(exc),
                            finish_reason=choice.get("finish_reason"))
                continue
            log.debug("llm.llamacpp.answer", kind=req.kind, **self.last_timings)
            cached = timings.get("cache_n")
            return Answer(answer, prompt_tokens, completion_tokens, timing={
                "tokens_per_second": timings.get("predicted_per_second"),
                "cached_tokens": None if cached is None else int(cached)})
        raise LLMBadOutput(
            f"llama.cpp gave no valid {req.kind} answer in {attempts} attempt(s): {last}"
        )

    async def aclose(self) -> None:
        async with self._lock:
            self._closed = True
            server, self._server = self._server, None
        if server is not None:
            # the destructor joins llama.cpp's main loop: drop the last reference off the loop
            box = [server]
            del server
            await trio.to_thread.run_sync(box.clear)
