"""The one LLM interface every role uses, its errors, and a small JSON-schema validator.

Backends return a dict that is valid against ``req.schema``; anything else is an error from the
hierarchy below, so a role only ever has to handle ``LLMError`` (and may retry
``LLMUnavailable`` later).
"""

from __future__ import annotations

import abc
import dataclasses
import json
import math
from dataclasses import dataclass, field
from typing import Any, Callable, Literal, Mapping, TypeVar

T = TypeVar("T")

RequestKind = Literal["brief", "decompose", "rank", "atomic", "execute", "review", "synthesize"]


@dataclass(frozen=True)
class LLMRequest:
    kind: RequestKind
    system: str
    prompt: str
    schema: dict  # JSON schema of the answer object
    context: Mapping[str, Any] = field(default_factory=dict)  # facts the prompt was built from
    max_tokens: int = 512
    temperature: float = 0.7
    seed: int | None = None
    # the answer is free text, not JSON: backends send no constraint and answer {"text": ...}
    # (the quality benchmark's one direct call; no role asks for it)
    free_text: bool = False


@dataclass(frozen=True)
class Answer:
    """A schema-valid answer and what it cost, in the backend's own tokens (the scripted double
    estimates them)."""

    value: dict
    prompt_tokens: int
    completion_tokens: int


def estimate_tokens(text: str) -> int:
    """About four characters a token (English BPE tokenizers); for backends that report none."""
    return max(1, (len(text) + 3) // 4) if text else 0


class LLMError(Exception):
    """Any failure of the LLM layer."""


class LLMUnavailable(LLMError):
    """The server is unreachable, timed out or the backend cannot load; retry later."""


class ModelMissing(LLMError):
    """The configured model is not there; the message says how to fix it."""


class LLMBadOutput(LLMError):
    """The answer was not parseable or not valid against the schema (after retries)."""


class LLM(abc.ABC):
    backend: str = "?"  # "ollama" | "llamacpp" | "scripted"
    model: str = "?"  # model name or path, for logs

    async def complete(self, req: LLMRequest) -> Answer:
        """Answer ``req`` with a dict valid against ``req.schema`` and its token counts (summed
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


# ---------------------------------------------------------------------------------------------
# A tiny validator for the subset of JSON schema the prompts use (type, properties, required,
# additionalProperties, items, min/maxItems, min/maxLength, minimum/maximum, enum, const). It is strict
# about what it knows and ignores keywords it does not (such as "description").

_TYPES: dict[str, tuple[type, ...]] = {
    "object": (dict,),
    "array": (list,),
    "string": (str,),
    "boolean": (bool,),
    "integer": (int,),
    "number": (int, float),
    "null": (type(None),),
}


def schema_errors(instance: Any, schema: Mapping[str, Any], path: str = "$") -> list[str]:
    """Every way ``instance`` violates ``schema`` (empty when valid)."""
    errors: list[str] = []
    typ = schema.get("type")
    if typ is not None:
        types = [typ] if isinstance(typ, str) else list(typ)
        ok = False
        for t in types:
            py = _TYPES.get(t)
            if py is None:
                continue
            if isinstance(instance, bool) and t in ("integer", "number"):
                continue  # JSON booleans are not numbers
            if t == "integer" and isinstance(instance, float):
                ok = ok or instance.is_integer()
                continue
            if isinstance(instance, py):
                ok = True
        if not ok:
            return [f"{path}: expected {typ}, got {type(instance).__name__}"]
    if "const" in schema and instance != schema["const"]:
        errors.append(f"{path}: {instance!r} is not {schema['const']!r}")
    if "enum" in schema and instance not in schema["enum"]:
        errors.append(f"{path}: {instance!r} is not one of {schema['enum']!r}")
    if isinstance(instance, dict):
        props = schema.get("properties", {})
        for key in schema.get("required", ()):
            if key not in instance:
                errors.append(f"{path}: missing required property {key!r}")
        for key, value in instance.items():
            if key in props:
                errors.extend(schema_errors(value, props[key], f"{path}.{key}"))
            elif schema.get("additionalProperties") is False:
                errors.append(f"{path}: unexpected property {key!r}")
    elif isinstance(instance, list):
        if "minItems" in schema and len(instance) < schema["minItems"]:
            errors.append(f"{path}: {len(instance)} items, fewer than {schema['minItems']}")
        if "maxItems" in schema and len(instance) > schema["maxItems"]:
            errors.append(f"{path}: {len(instance)} items, more than {schema['maxItems']}")
        if "items" in schema:
            for i, item in enumerate(instance):
                errors.extend(schema_errors(item, schema["items"], f"{path}[{i}]"))
    elif isinstance(instance, str):
        if "minLength" in schema and len(instance) < schema["minLength"]:
            errors.append(f"{path}: string shorter than {schema['minLength']}")
        if "maxLength" in schema and len(instance) > schema["maxLength"]:
            errors.append(f"{path}: string longer than {schema['maxLength']}")
    elif isinstance(instance, (int, float)) and not isinstance(instance, bool):
        if isinstance(instance, float) and not math.isfinite(instance):
            errors.append(f"{path}: {instance!r} is not a finite number")
        if "minimum" in schema and instance < schema["minimum"]:
            errors.append(f"{path}: {instance} is below the minimum {schema['minimum']}")
        if "maximum" in schema and instance > schema["maximum"]:
            errors.append(f"{path}: {instance} is above the maximum {schema['maximum']}")
    return errors


def validate(instance: Any, schema: Mapping[str, Any]) -> dict:
    """Return ``instance`` if it is an object valid against ``schema``; else ``LLMBadOutput``."""
    if not isinstance(instance, dict):
        raise LLMBadOutput(f"answer is not a JSON object: {_short(instance)}")
    errors = schema_errors(instance, schema)
    if errors:
        more = f" (+{len(errors) - 3} more)" if len(errors) > 3 else ""
        raise LLMBadOutput("answer does not match the schema: " + "; ".join(errors[:3]) + more)
    return instance


def parse_json_answer(text: str | None, schema: Mapping[str, Any]) -> dict:
    """Parse a model's message content as JSON and validate it against ``schema``."""
    if not text or not text.strip():
        raise LLMBadOutput("empty answer")
    try:
        value = json.loads(text)
    except json.JSONDecodeError as exc:
        raise LLMBadOutput(f"answer is not JSON ({exc.msg} at {exc.pos}): {_short(text)}") from None
    return validate(value, schema)


def _short(value: Any, limit: int = 160) -> str:
    text = value if isinstance(value, str) else repr(value)
    return text if len(text) <= limit else text[:limit] + "..."
