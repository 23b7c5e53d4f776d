"""Pure functions that build LLM requests and check the answers.

The schemas are written for constrained decoding by a very small model (SmolLM2-135M): every
array has minItems/maxItems and every string a maxLength, so the grammar itself ends the answer
(without maxItems the small model repeats items until max_tokens cuts the JSON off). The
``max_tokens`` of each request is derived from those bounds so the JSON is never cut off.
"""

from __future__ import annotations

import re
from typing import Any, Iterable

from agent.llm.base import LLMBadOutput, LLMRequest

# Bounds of a cleaned subgoal (the contract with the rest of the code).
TITLE_MAX = 120
DESCRIPTION_MAX = 600
FEEDBACK_MAX = 400
RESULT_MAX = 4000

# Tighter bounds inside the schemas: they cap what the model may generate (and so its time).
SCHEMA_TITLE_MAX = 80
SCHEMA_DESCRIPTION_MAX = 160
SCHEMA_FEEDBACK_MAX = 200
SCHEMA_RESULT_MAX = 500

SCORE_KEYS = ("specificity", "non_overlap", "coverage")
RATING_MAX = 10  # the model rates 0..10 (integers suit a small model); parse_score maps to 0..1


def token_budget(schema: dict) -> int:
    """Tokens that always suffice for compact JSON valid against ``schema``.

    Counts one token per character of every bounded string (SmolLM2 falls to about one
    character a token when it degenerates into digit runs, measured) plus the punctuation and
    keys. Only bounded schemas have a budget: this raises on an unbounded array or string.
    """
    typ = schema.get("type")
    if typ == "object":
        props = schema.get("properties", {})
        return 2 + sum(len(k) // 2 + 4 + token_budget(v) for k, v in props.items())
    if typ == "array":
        if "maxItems" not in schema:
            raise ValueError("unbounded array: add maxItems")
        return 2 + schema["maxItems"] * (token_budget(schema["items"]) + 1)
    if typ == "string":
        if "maxLength" not in schema and "enum" not in schema:
            raise ValueError("unbounded string: add maxLength")
        longest_enum = max((len(str(e)) for e in schema.get("enum", [])), default=0)
        return 2 + schema.get("maxLength", longest_enum)
    if typ in ("integer", "number"):
        return 8
    if typ in ("boolean", "null"):
        return 2
    raise ValueError(f"no token budget for schema type {typ!r}")


STRATEGY_HINTS = {
    "by place": "one subgoal per city, region or venue; name the place in each title",
    "by activity": "one subgoal per kind of activity (transport, lodging, food, sights...)",
    "by day": "one subgoal per day or block of days, in order; start each title with the day",
    "by phase": "one subgoal per phase (prepare, do, finish), in order",
    "by stakeholder": "one subgoal per person or group involved",
}

SYSTEM_DECOMPOSE = (
    "You are a planner. You split a task into smaller subgoals. "
    "Each subgoal is one concrete, different piece of work. Answer only with JSON."
)
SYSTEM_SCORE = (
    "You review how a task was split into subgoals and rate the split strictly. "
    "Answer only with JSON."
)
SYSTEM_EXECUTE = (
    "You carry out one small task of a plan and report the result. Answer only with JSON."
)


def strategy_hint(strategy: str) -> str:
    key = " ".join(strategy.lower().split())
    if key in STRATEGY_HINTS:
        return STRATEGY_HINTS[key]
    return f"split it {strategy.strip()}" if strategy.strip() else "split it into distinct parts"


def _clip(text: str, limit: int) -> str:
    text = " ".join(str(text).split())
    return text if len(text) <= limit else text[: limit - 3].rstrip() + "..."


def _path_line(path: Iterable[str]) -> str:
    parts = [_clip(p, 60) for p in path if str(p).strip()]
    return " > ".join(parts[-4:])


# ------------------------------------------------------------------------------ decompose


def decomposition_schema(max_children: int) -> dict:
    if max_children < 2:
        raise ValueError("max_children must be at least 2")
    return {
        "type": "object",
        "properties": {
            "subgoals": {
                "type": "array",
                "minItems": 2,
                "maxItems": max_children,
                "items": {
                    "type": "object",
                    "properties": {
                        "title": {"type": "string", "minLength": 3, "maxLength": SCHEMA_TITLE_MAX},
                        "description": {
                            "type": "string",
                            "minLength": 0,
                            "maxLength": SCHEMA_DESCRIPTION_MAX,
                        },
                        "atomic": {"type": "boolean"},
                    },
                    "required": ["title", "description", "atomic"],
                    "additionalProperties": False,
                },
            }
        },
        "required": ["subgoals"],
        "additionalProperties": False,
    }


def decompose_request(
    *,
    goal: str,
    path: list[str],
    title: str,
    description: str,
    strategy: str,
    max_children: int,
    feedback: Iterable[str] = (),
    previous: list[dict] | None = None,
    seed: int | None = None,
) -> LLMRequest:
    feedback = [str(f) for f in feedback if str(f).strip()]
    lines = [f"Goal: {_clip(goal, 200)}"]
    where = _path_line(path)
    if where:
        lines.append(f"Part of: {where}")
    lines.append(f"Task to split: {_clip(title, TITLE_MAX)}")
    if description.strip():
        lines.append(f"Details: {_clip(description, 300)}")
    lines.append(f"Strategy: {strategy_hint(strategy)}.")
    if previous:
        lines.append("A reviewer criticised this earlier split:")
        lines.extend(f"- {_clip(s.get('title', ''), SCHEMA_TITLE_MAX)}" for s in previous[:12])
        if feedback:
            lines.append("Feedback:")
            lines.extend(f"- {_clip(f, 200)}" for f in feedback[:5])
        lines.append("Write a better split that fixes the feedback.")
    elif feedback:
        lines.append("Feedback to take into account:")
        lines.extend(f"- {_clip(f, 200)}" for f in feedback[:5])
    lines.append(
        f"Write 2 to {max_children} subgoals. Each title names one specific thing "
        "(a place, an activity, a day, an item) and differs from the other titles. "
        "Do not repeat the task title. The description says what exactly to do. "
        "atomic is true if one person can do it in one sitting."
    )
    schema = decomposition_schema(max_children)
    return LLMRequest(
        kind="decompose",
        system=SYSTEM_DECOMPOSE,
        prompt="\n".join(lines),
        schema=schema,
        context={
            "goal": goal,
            "path": list(path),
            "title": title,
            "description": description,
            "strategy": strategy,
            "max_children": max_children,
            "feedback": feedback,
            "previous": [dict(s) for s in previous] if previous is not None else None,
            "seed": seed,
        },
        max_tokens=token_budget(schema),
        temperature=0.7,
        seed=seed,
    )


def parse_decomposition(answer: dict, *, max_children: int) -> list[dict]:
    """2..max_children cleaned subgoals, or ``LLMBadOutput``."""
    if not isinstance(answer, dict):
        raise LLMBadOutput(f"decomposition is not an object: {type(answer).__name__}")
    items = answer.get("subgoals")
    if not isinstance(items, list):
        raise LLMBadOutput("decomposition has no 'subgoals' list")
    cleaned: list[dict] = []
    seen: set[str] = set()
    for item in items:
        if not isinstance(item, dict):
            continue
        title = _clean_text(item.get("title"), TITLE_MAX)
        if not title:
            continue
        key = title.casefold()
        if key in seen:
            continue
        seen.add(key)
        atomic = item.get("atomic", False)
        cleaned.append(
            {
                "title": title,
                "description": _clean_text(item.get("description"), DESCRIPTION_MAX),
                "atomic": atomic if isinstance(atomic, bool) else False,
            }
        )
        if len(cleaned) == max_children:
            break
    if len(cleaned) < 2:
        raise LLMBadOutput(
            f"decomposition has {len(cleaned)} usable distinct subgoal(s); at least 2 are needed"
        )
    return cleaned


def _clean_text(value: Any, limit: int) -> str:
    if not isinstance(value, str):
        return ""
    text = " ".join(value.split())
    return text[:limit].rstrip()


# ------------------------------------------------------------------------------ score


def score_schema() -> dict:
    rating = {"type": "integer", "minimum": 0, "maximum": RATING_MAX}
    return {
        "type": "object",
        "properties": {
            "specificity": rating,
            "non_overlap": rating,
            "coverage": rating,
            "feedback": {"type": "string", "minLength": 0, "maxLength": SCHEMA_FEEDBACK_MAX},
        },
        "required": ["specificity", "non_overlap", "coverage", "feedback"],
        "additionalProperties": False,
    }


def score_request(
    *,
    goal: str,
    title: str,
    description: str,
    strategy: str,
    subgoals: list[dict],
    scorer: str,
    seed: int | None = None,
) -> LLMRequest:
    lines = [f"Goal: {_clip(goal, 200)}", f"Task: {_clip(title, TITLE_MAX)}"]
    if description.strip():
        lines.append(f"Details: {_clip(description, 300)}")
    lines.append(f"It was split {_clip(strategy, 40)} into:")
    for i, sub in enumerate(subgoals[:12], 1):
        desc = _clip(sub.get("description", ""), 120)
        head = f"{i}. {_clip(sub.get('title', ''), SCHEMA_TITLE_MAX)}"
        lines.append(f"{head}: {desc}" if desc else head)
    lines.append(
        "Rate the split from 0 (bad) to 10 (good): specificity (each subgoal is concrete), "
        "non_overlap (no two subgoals cover the same thing), coverage (together they complete "
        "the task). In feedback name the weakest subgoal and say how to fix it."
    )
    schema = score_schema()
    return LLMRequest(
        kind="score",
        system=SYSTEM_SCORE,
        prompt="\n".join(lines),
        schema=schema,
        context={
            "goal": goal,
            "title": title,
            "description": description,
            "strategy": strategy,
            "subgoals": [dict(s) for s in subgoals],
            "scorer": scorer,
            "seed": seed,
        },
        max_tokens=token_budget(schema),
        temperature=0.7,
        seed=seed,
    )


def parse_score(answer: dict) -> dict:
    """{specificity, non_overlap, coverage} in [0, 1] and feedback (<= 400 chars)."""
    if not isinstance(answer, dict):
        raise LLMBadOutput(f"score is not an object: {type(answer).__name__}")
    out: dict[str, Any] = {}
    for key in SCORE_KEYS:
        value = answer.get(key)
        if isinstance(value, bool) or not isinstance(value, (int, float)) or value != value:
            raise LLMBadOutput(f"score has no numeric {key!r}: {value!r}")
        out[key] = min(1.0, max(0.0, float(value) / RATING_MAX))
    feedback = answer.get("feedback", "")
    out["feedback"] = _clean_text(feedback, FEEDBACK_MAX) if isinstance(feedback, str) else ""
    return out


# ------------------------------------------------------------------------------ execute


def execution_schema() -> dict:
    return {
        "type": "object",
        "properties": {
            "result": {"type": "string", "minLength": 1, "maxLength": SCHEMA_RESULT_MAX},
        },
        "required": ["result"],
        "additionalProperties": False,
    }


def execute_request(
    *, goal: str, path: list[str], title: str, description: str, seed: int | None = None
) -> LLMRequest:
    lines = [f"Goal: {_clip(goal, 200)}"]
    where = _path_line(path)
    if where:
        lines.append(f"Part of: {where}")
    lines.append(f"Task: {_clip(title, TITLE_MAX)}")
    if description.strip():
        lines.append(f"Details: {_clip(description, 400)}")
    lines.append(
        "Do this task and write the result: what you decided or found, with concrete details "
        "(names, times, amounts). At most five sentences."
    )
    schema = execution_schema()
    return LLMRequest(
        kind="execute",
        system=SYSTEM_EXECUTE,
        prompt="\n".join(lines),
        schema=schema,
        context={"goal": goal, "path": list(path), "title": title, "description": description,
                 "seed": seed},
        max_tokens=token_budget(schema),
        temperature=0.7,
        seed=seed,
    )


def parse_execution(answer: dict) -> str:
    """The task's result text, 1..4000 characters (line breaks kept, other runs of blanks
    collapsed)."""
    if not isinstance(answer, dict):
        raise LLMBadOutput(f"execution result is not an object: {type(answer).__name__}")
    raw = answer.get("result")
    if not isinstance(raw, str):
        raise LLMBadOutput("execution result has no 'result' text")
    lines = [" ".join(line.split()) for line in raw.splitlines()]
    text = "\n".join(line for line in lines if line).strip()
    if not text:
        raise LLMBadOutput("execution result is empty")
    if len(text) > RESULT_MAX:
        text = text[: RESULT_MAX - 3].rstrip() + "..."
    return text


_WORD = re.compile(r"[^\W_]+", re.UNICODE)


def words(text: str) -> list[str]:
    """Lower-case word tokens (shared by the scripted backend and tests)."""
    return [w.casefold() for w in _WORD.findall(text)]
