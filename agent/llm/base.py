"""The one LLM interface every role uses and its errors.

Backends return a dict that is valid as ``req.answer`` (a pydantic model of
``agent.llm.answers``, whose JSON schema ``req.schema`` constrains their decoding); anything
else is an error of ``agent.llm.errors`` (handed on here), so a role only ever has to handle ``LLMError`` (and
may retry ``LLMUnavailable`` later).
"""

from __future__ import annotations

import abc
import dataclasses
import json
from dataclasses import dataclass, field
from typing import Any, Callable, Literal, Mapping, TypeVar

from agent.llm.answers import schema_of
from agent.llm.errors import LLMBadOutput, LLMError, LLMUnavailable, ModelMissing, _short

__all__ = ["Answer", "LLM", "LLMBadOutput", "LLMError", "LLMRequest", "LLMUnavailable", "ModelMissing",
           "RequestKind", "estimate_tokens", "_short"]

T = TypeVar("T")

RequestKind = Literal["brief", "decompose", "rank", "atomic", "execute", "review", "synthesize"]


@dataclass(frozen=True)
class LLMRequest:
    kind: RequestKind
    system: str
    prompt: str
    # the answer's pydantic model (agent.llm.answers): its schema for constrained decoding, its
    # validation for what comes back; None only for a free-text request
    answer: Any = None
    context: Mapping[str, Any] = field(default_factory=dict)  # facts the prompt was built from
    max_tokens: int = 512
    temperature: float = 0.7
    seed: int | None = None
    # the answer is free text, not JSON: backends send no constraint and answer {"text": ...}
    # (the quality benchmark's one direct call; no role asks for it)
    free_text: bool = False

    def __post_init__(self) -> None:
        if self.answer is None and not self.free_text:
            raise ValueError(f"a {self.kind} request for JSON needs the answer's model")

    @property
    def schema(self) -> dict:
        """The answer's JSON schema, references inlined ({} for free text)."""
        if self.answer is None:
            return {}
        return schema_of(self.answer)


@dataclass(frozen=True)
class Answer:
    """A schema-valid answer and what it cost, in the backend's own tokens (the scripted double
    estimates them)."""

    value: dict
    prompt_tokens: int
    completion_tokens: int
    # what the server said about the call, when it says (benchmarks read it from the agents'
    # logs): ``tokens_per_second`` (completion tokens over the server's generation time),
    # ``cached_tokens`` (prompt tokens taken from its prompt cache); None when it says nothing
    timing: Mapping[str, Any] | None = field(default=None, compare=False)


def estimate_tokens(text: str) -> int:
    """About four characters a token (English BPE tokenizers); for backends that report none."""
    return max(1, (len(text) + 3) // 4) if text else 0


class LLM(abc.ABC):
    backend: str = "?"  # "ollama" | "llamacpp" | "scripted"
    model: str = "?"  # model name or path, for logs

    async def complete(self, req: LLMRequest) -> Answer:
        """Answer ``req`` with a dict valid as ``req.answer`` and its token counts (summed
        over the backend's own retries: they were spent too).

        Backends override this. A backend written before token accounting overrides only
        ``generate``; its counts are then estimated from the text."""
        if type(self).generate is LLM.generate:
            raise NotImplementedError(f"{type(self).__name__} implements neither complete nor generate")
        value = await self.generate(req)
        return Answer(value, estimate_tokens(req.system + req.prompt),
                      estimate_tokens(json.dumps(value, separators=(",", ":"))))

    async def generate(self, req: LLMRequest) -> dict:
        """``complete`` without the token counts, for callers that do not account for them."""
        if type(self).complete is LLM.complete:
            raise NotImplementedError(f"{type(self).__name__} implements neither complete nor generate")
        return (await self.complete(req)).value

    async def aclose(self) -> None:  # noqa: B027 - optional hook
        """Release the backend's resources (idempotent)."""

    def __repr__(self) -> str:
        return f"<{type(self).__name__} backend={self.backend} model={self.model}>"


async def generate_parsed(
    llm: LLM, req: LLMRequest, parse: Callable[[dict], T], *, attempts: int = 3
) -> T:
    """``parse(await llm.generate(req))``, asking again with another seed when ``parse``
    rejects a schema-valid answer (e.g. a small model's split whose titles are all the same).
    Raises the last ``LLMBadOutput`` after ``attempts`` answers."""
    last: LLMBadOutput | None = None
    for n in range(max(1, attempts)):
        seed = None if req.seed is None else (req.seed + 104_729 * n) % (2**31)
        attempt = req if n == 0 else dataclasses.replace(req, seed=seed)
        try:
            return parse(await llm.generate(attempt))
        except LLMBadOutput as exc:
            last = exc
    assert last is not None
    raise last
