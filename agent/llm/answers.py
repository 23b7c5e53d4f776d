"""The shapes of LLM answers as pydantic models: one source for the JSON schema a backend
constrains its output with, for validation, and for the error messages.

Written for constrained decoding by small models: every list has a maximum, every string a
maximum length (the grammar itself then ends the answer; without maxItems a small model repeats
items until max_tokens cuts the JSON off). ``schema_of`` inlines the model's references so the
schema is one self-contained object, as llama.cpp's and Ollama's grammars want it.
"""

import json
from functools import lru_cache
from typing import Annotated, Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError, create_model

from agent.llm.errors import LLMBadOutput, _short


class Answer(BaseModel):
    model_config = ConfigDict(extra="forbid")


def Text(n: int, low: int = 0) -> Any:  # noqa: N802 - reads as a type
    return Annotated[str, Field(min_length=low, max_length=n)]


# ---------------------------------------------------------------------------------- brief
class BriefAnswer(Answer):
    duration: Text(60)
    dates: Text(80)
    budget: Text(80)
    # the grammar asks for an ISO code; parsing takes any case (servers without grammars)
    currency: Annotated[str, Field(min_length=3, max_length=3, json_schema_extra={"pattern": "^[A-Z]{3}$"})]
    place: Text(120)
    people: Text(80)
    constraints: Text(160)
    done: Text(160)


# ---------------------------------------------------------------------------------- splits
class StepAnswer(Answer):
    title: Text(70, 3)
    description: Text(180)
    after: Annotated[list[Annotated[int, Field(ge=1, le=12)]], Field(max_length=3)]


@lru_cache(maxsize=16)
def split_model(max_children: int) -> type[Answer]:
    low = min(3, max_children)
    return create_model(
        f"Split{max_children}", __base__=Answer,
        steps=(Annotated[list[StepAnswer], Field(min_length=low, max_length=max_children)], ...),
    )


# ---------------------------------------------------------------------------------- judging
class CriteriaAnswer(Answer):
    """A scorer's yardstick for a node's splits: the essential work the task needs, written
    before and without the splits, so it cannot be talked into a split's own words."""

    essential: Annotated[list[Text(60, 3)], Field(min_length=4, max_length=8)]


class AtomicAnswer(Answer):
    steps: Annotated[int, Field(ge=1, le=12)]
    one_sitting: bool


# ---------------------------------------------------------------------------------- results
class Action(Answer):
    # ``detail`` is in the grammar's required fields (the model always writes it) but may be
    # left out of a stored or scripted answer: an action read without one is its ``do`` alone
    model_config = ConfigDict(extra="forbid", json_schema_extra={"required": ["do", "detail", "cost", "when"]})

    do: Text(150, 8)  # prompts.ACTION_MAX
    # what a person needs to carry the action out: asked for because the bare actions read as a
    # list of headings beside one direct call's plan, which explains every step (bakery,
    # 2026-12-07: "Define the target audience (2026-12-08)." and nothing more)
    detail: Text(240) = ""  # prompts.DETAIL_MAX
    cost: Text(40)
    when: Text(40)


class ExecuteAnswer(Answer):
    actions: Annotated[list[Action], Field(min_length=3, max_length=6)]


class Problem(Answer):
    quote: Text(80)
    why: Text(100)


class ReviewAnswer(Answer):
    problems: Annotated[list[Problem], Field(max_length=3)]
    accept: bool


class SynthesisAnswer(Answer):
    """A node's answer: its summary. The ordered steps under it are written by code from each
    child's result (agent.core.facts.key_line): the 1.5B model, asked for a line per step,
    shifted them ("2. Layout and Planning: , Select cabinets ..." was step 1's second action)."""

    summary: Text(600, 20)


# ---------------------------------------------------------------------------------- helpers
@lru_cache(maxsize=64)
def _schema(model: type[Answer]) -> dict:
    return _inline(model.model_json_schema())


def schema_of(model: type[Answer]) -> dict:
    """The model's JSON schema, references inlined, titles dropped (a fresh copy)."""
    import copy

    return copy.deepcopy(_schema(model))


def _inline(schema: dict) -> dict:
    defs = schema.get("$defs", {})

    def walk(node: Any) -> Any:
        if isinstance(node, dict):
            if "$ref" in node:
                return walk(defs[node["$ref"].split("/")[-1]])
            out = {}
            for k, v in node.items():
                if k == "properties":  # names of fields, which may be "title" too
                    out[k] = {name: walk(sub) for name, sub in v.items()}
                elif k not in ("title", "$defs"):
                    out[k] = walk(v)
            return out
        if isinstance(node, list):
            return [walk(v) for v in node]
        return node

    return walk(schema)


def answer_errors(value: Any, model: type[Answer]) -> list[str]:
    """Every way ``value`` is not a valid ``model`` (empty when it is one), each "where: why"."""
    try:
        model.model_validate(value)
    except ValidationError as exc:
        return [f"{'.'.join(str(p) for p in e['loc']) or 'answer'}: {e['msg']}" for e in exc.errors()]
    return []


def checked(value: Any, model: type[Answer]) -> dict:
    """``value`` as the plain JSON object ``model`` makes of it, or ``LLMBadOutput``: what every
    backend returns for a request's answer."""
    if not isinstance(value, dict):
        raise LLMBadOutput(f"answer is not a JSON object: {_short(value)}")
    return parse_as(model, value, "answer does not match the schema").model_dump(mode="json")


def parse_answer(text: str | None, model: type[Answer]) -> dict:
    """A model's message content parsed as JSON and ``checked`` against ``model``."""
    if not text or not text.strip():
        raise LLMBadOutput("empty answer")
    try:
        value = json.loads(text)
    except json.JSONDecodeError as exc:
        raise LLMBadOutput(f"answer is not JSON ({exc.msg} at {exc.pos}): {_short(text)}") from None
    return checked(value, model)


def parse_as(model: type[Answer], value: Any, what: str) -> Any:
    """``value`` validated as ``model``, or ``LLMBadOutput`` naming the first problem."""
    try:
        return model.model_validate(value)
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first["loc"]) or "answer"
        raise LLMBadOutput(f"{what}: {where}: {first['msg']}") from None
