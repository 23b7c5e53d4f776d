"""Ollama through its official client (``ollama.AsyncClient``: httpx on anyio, runs on trio).

Structured output: the request's JSON schema goes in ``format``; the message content is
parsed and validated again here. Every call is bounded by ``timeout`` (``trio.fail_after``
and the httpx timeout); unavailability and bad answers are retried (``agent.llm.retry``); a
missing model is reported at once with the command that fixes it.
"""

from __future__ import annotations

from typing import Any

import httpx
import ollama
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


def model_matches(name: str | None, wanted: str) -> bool:
    """Ollama names carry a tag; an untagged name means ``:latest``."""
    if not name:
        return False
    if name == wanted:
        return True
    if ":" not in wanted:
        return name == f"{wanted}:latest"
    return wanted.endswith(":latest") and name == wanted.rsplit(":", 1)[0]


class OllamaLLM(LLM):
    backend = "ollama"

    def __init__(
        self,
        host: str,
        model: str,
        *,
        timeout: float = 120.0,
        retries: int = 3,
        backoff_initial: float = 0.5,
        backoff_max: float = 10.0,
    ) -> None:
        self.host = host.rstrip("/")
        self.model = model
        self.timeout = timeout
        self.retries = retries
        self.backoff_initial = backoff_initial
        self.backoff_max = backoff_max
        self.last_timings: dict[str, Any] = {}
        self._client = ollama.AsyncClient(host=self.host, timeout=timeout)

    @classmethod
    def from_settings(cls, settings: Any) -> "OllamaLLM":
        return cls(
            settings.ollama_host,
            settings.ollama_model,
            timeout=settings.llm_timeout,
            retries=settings.llm_retries,
        )

    def _missing(self) -> ModelMissing:
        return ModelMissing(
            f"model {self.model} is not on the Ollama server at {self.host}; "
            f"run `ollama pull {self.model}`"
        )

    def _unreachable(self, exc: BaseException | str) -> LLMUnavailable:
        return LLMUnavailable(f"Ollama at {self.host} is unreachable: {exc}")

    async def probe(self, timeout: float = 2.0) -> tuple[bool, str]:
        """(usable, reason): is the server reachable within ``timeout`` and has it the model?"""
        client = ollama.AsyncClient(host=self.host, timeout=timeout)
        try:
            with trio.fail_after(timeout):
                listing = await client.list()
        except trio.TooSlowError:
            return False, f"Ollama at {self.host} did not answer within {timeout}s"
        except ollama.ResponseError as exc:
            return False, f"Ollama at {self.host} answered GET /api/tags with an error: {exc}"
        except (ConnectionError, httpx.HTTPError, OSError, ValueError) as exc:
            return False, f"Ollama at {self.host} is unreachable: {exc}"
        finally:
            with trio.CancelScope(shield=True):
                await client.close()
        names = [m.model for m in listing.models]
        if any(model_matches(n, self.model) for n in names):
            return True, f"Ollama at {self.host} has {self.model}"
        present = ", ".join(n for n in names if n) or "no models"
        return False, f"{self._missing()} (it has: {present})"

    async def complete(self, req: LLMRequest) -> Answer:
        return await complete_retrying(self._once, req, retries=self.retries,
                                       backoff_initial=self.backoff_initial, backoff_max=self.backoff_max)

    async def _once(self, req: LLMRequest, seed: int | None, n: int, attempts: int,
                    spent: list[int]) -> Answer:
        options: dict[str, Any] = {"temperature": req.temperature, "num_predict": req.max_tokens}
        if seed is not None:
            options["seed"] = seed
        try:
            with trio.fail_after(self.timeout):
                resp = await self._client.chat(
                    model=self.model,
                    messages=[
                        {"role": "system", "content": req.system},
                        {"role": "user", "content": req.prompt},
                    ],
                    format=None if req.free_text else req.schema,
                    options=options,
                    stream=False,
                )
        except trio.TooSlowError:
            raise LLMUnavailable(
                f"Ollama at {self.host} did not answer a {req.kind} request within {self.timeout}s"
            ) from None
        except ollama.ResponseError as exc:
            text = str(exc.error)
            if exc.status_code == 404 or ("not found" in text.lower() and "model" in text.lower()):
                raise self._missing() from None
            if exc.status_code >= 500 or exc.status_code in (-1, 408, 429):
                raise LLMUnavailable(f"Ollama at {self.host} failed: {exc}") from None
            raise LLMError(f"Ollama at {self.host} rejected the request: {exc}") from None
        except ConnectionError as exc:  # the client's wrapper of httpx.ConnectError
            raise self._unreachable(exc) from None
        except httpx.TransportError as exc:  # read errors, protocol errors, httpx timeouts
            raise self._unreachable(f"{type(exc).__name__}: {exc}") from None
        except ValueError as exc:  # the server's envelope was not JSON / not a chat response
            raise LLMBadOutput(
                f"Ollama at {self.host} sent an unreadable response: {exc}"
            ) from None
        self.last_timings = {
            "completion_tokens": resp.eval_count,
            "prompt_tokens": resp.prompt_eval_count,
            "seconds": (resp.total_duration or 0) / 1e9,
        }
        # an answer rejected below was still paid for: the counts add up over attempts
        spent[0] += int(resp.prompt_eval_count or 0)
        spent[1] += int(resp.eval_count or 0)
        try:
            if req.free_text:
                return Answer({"text": resp.message.content or ""}, *spent)
            return Answer(parse_answer(resp.message.content, req.answer), *spent)
        except LLMBadOutput as exc:
            log.warning("llm.ollama.bad_output", kind=req.kind, model=self.model,
                        attempt=n, attempts=attempts, error=str(exc))
            raise

    async def aclose(self) -> None:
        with trio.CancelScope(shield=True):
            await self._client.close()
