"""Pure functions that build LLM requests and check the answers: decompose, score, atomic
(is a node doable in one sitting), execute (a leaf, with its siblings in view) and synthesize
(a node's answer from its children's). docs/quality.md explains the choices.

The schemas are written for constrained decoding by a very small model (SmolLM2-135M): every
array has minItems/maxItems and every string a maxLength, so the grammar itself ends the answer
(without maxItems the small model repeats items until max_tokens cuts the JSON off). The
``max_tokens`` of each request is derived from those bounds so the JSON is never cut off.
"""

from __future__ import annotations

import re
from typing import Any, Iterable

from agent.core.text import cut_to_sentence
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
# a result of "3 to 5 sentences, at most 90 words" is ~600 characters; the grammar cuts at this
# bound and parse_execution then ends the text at its last full sentence
SCHEMA_RESULT_MAX = 700
SCHEMA_ANSWER_MAX = 900  # a synthesis: "at most 120 words"

SCORE_KEYS = ("specificity", "non_overlap", "coverage")
RATING_MAX = 10  # the model rates 0..10 (integers suit a small model); parse_score maps to 0..1
ATOMIC_STEPS_MAX = 3  # a node is atomic if it is one sitting of at most this many steps


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


# Generic strategies: no example words from any domain. Small models copy the words of a hint
# into every plan (the old "transport, lodging, food" hint turned up in a bakery's plan).
STRATEGY_HINTS = {
    "by phase": "in the order the work happens: one subgoal per stage, from the first to the last",
    "by component": "one subgoal per separate part or deliverable of the result",
    "by stakeholder": "one subgoal per person or group the task involves or serves",
    "by place": "one subgoal per place where the task happens, named as in the goal",
    "by time": "one subgoal per period of time (days, weeks or months), in order",
}
STRATEGIES = tuple(STRATEGY_HINTS)

SYSTEM_DECOMPOSE = (
    "You are an expert planner. You split a task into smaller subgoals that are specific, do "
    "not overlap, and together complete the task. Answer only with JSON."
)
SYSTEM_SCORE = (
    "You are a strict reviewer of plans. You rate how a task was split into subgoals. "
    "Answer only with JSON."
)
SYSTEM_ATOMIC = "You judge how much work a task is. Answer only with JSON."
SYSTEM_EXECUTE = (
    "You carry out one task of a larger plan and report what you did and decided, in plain "
    "English. Answer only with JSON."
)
SYSTEM_SYNTHESIZE = (
    "You combine the results of the parts of a plan into one clear answer, in plain English. "
    "Answer only with JSON."
)

_PLACE_WORDS = frozenset(
    "trip travel tour visit city country town region abroad holiday vacation journey move "
    "relocate route".split()
)
_TIME_WORDS = re.compile(
    r"\b(?:day|days|week|weeks|month|months|year|semester|season|weekend|daily|weekly|"
    r"monthly|schedule|\d+[- ](?:day|week|month)s?|(?:one|two|three|four|five|six|seven|eight|"
    r"nine|ten|twelve)[- ](?:day|week|month)s?)\b",
    re.IGNORECASE,
)
_PEOPLE_WORDS = frozenset(
    "guests guest people person team customers customer attendees attendee speakers family "
    "friends members volunteers donors users clients staff community sponsors students "
    "children kids partners".split()
)


def _has_place(text: str) -> bool:
    ws = text.split()
    named = [w for i, w in enumerate(ws) if i > 0 and w[:1].isupper() and w.strip(".,;:").isalpha()]
    return bool(named) or bool(_PLACE_WORDS & set(words(text)))


def suitable_strategies(goal: str, title: str, description: str = "") -> list[str]:
    """The strategies that fit a task, best first: by place only when the task names a place
    or is about travel, by time only when it has a time span, by stakeholder only when it
    involves people; by phase and by component always fit."""
    text = f"{title} {description}"
    out = []
    if _TIME_WORDS.search(text):
        out.append("by time")
    if _has_place(text):
        out.append("by place")
    if _PEOPLE_WORDS & set(words(text)) or re.search(r"\d+[- ](?:person|people|guests?)", text):
        out.append("by stakeholder")
    out += ["by phase", "by component"]
    return out


def strategy_for(preference: str, goal: str, title: str, description: str = "") -> str:
    """The decomposer's preferred strategy if it suits the task, else a suitable one picked by
    the preference (so decomposers with different preferences still differ)."""
    key = " ".join(str(preference).lower().split())
    fits = suitable_strategies(goal, title, description)
    if key in fits or key not in STRATEGY_HINTS:
        return key or fits[0]
    order = list(STRATEGY_HINTS)
    return fits[order.index(key) % len(fits)]


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


def _listing(titles: Iterable[str], limit: int = 12, width: int = 60) -> str:
    items = [_clip(t, width) for t in titles if str(t).strip()][:limit]
    return "; ".join(items)


# ------------------------------------------------------------------------------ decompose


def decomposition_schema(max_children: int) -> dict:
    if max_children < 2:
        raise ValueError("max_children must be at least 2")
    # No "atomic" field: small models said true for everything and the flag was trusted, which
    # kept every plan one level deep. Whether a node is atomic is judged separately (atomic_*).
    return {
        "type": "object",
        "properties": {
            "subgoals": {
                "type": "array",
                # at least 3 when allowed: small models often restate the task first, and the
                # parser drops that; two more still make a split
                "minItems": min(3, max_children),
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
                    },
                    "required": ["title", "description"],
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
    parent_split: Iterable[str] = (),
    seed: int | None = None,
) -> LLMRequest:
    """``parent_split``: the titles of the parent's accepted split, this task among them, so
    the split stays inside this task's scope. Titles of farther branches are not shown: models
    copied them into their split (measured); ``agent.behaviour.work.subgoals_for`` drops such copies."""
    feedback = [str(f) for f in feedback if str(f).strip()]
    parent_split = [str(t) for t in parent_split if str(t).strip()]
    lines = [f"Goal: {_clip(goal, 200)}"]
    where = _path_line(path)
    if where:
        lines.append(f"Part of: {where}")
    if len(parent_split) > 1:
        parent = path[-1] if path else goal
        lines.append(f"\"{_clip(parent, 80)}\" was split into: " + "; ".join(
            f"{i}. {_clip(t, 60)}" + (" (this task)" if t == title else "")
            for i, t in enumerate(parent_split[:8], 1)))
    lines.append(f"Task to split: {_clip(title, TITLE_MAX)}")
    if description.strip():
        lines.append(f"Details: {_clip(description, 300)}")
    lines.append(f"Split the task {strategy_hint(strategy)}.")
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
    low = min(3, max_children)
    count = f"{low} to {max_children}" if low < max_children else f"{max_children}"
    lines.append(
        f"Write {count} subgoals of this task. Rules: each title is a short action (3 to 8 "
        "words) that names one concrete piece of the task; no two "
        "subgoals cover the same thing; no subgoal repeats the task itself"
        + (" or the other parts of the split above" if len(parent_split) > 1 else "")
        + "; together they complete the task; use the real names from the goal, never "
        "placeholders in brackets. Each description says in one sentence what exactly to do."
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
            "parent_split": parent_split,
            "seed": seed,
        },
        max_tokens=token_budget(schema),
        temperature=0.7,
        seed=seed,
    )


def parse_decomposition(answer: dict, *, max_children: int) -> list[dict]:
    """2..max_children cleaned subgoals (``atomic`` is always False: atomicity is judged, not
    proposed), or ``LLMBadOutput``."""
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
        title = _clean_title(item.get("title"))
        if not title:
            continue
        key = title.casefold()
        if key in seen:
            continue
        seen.add(key)
        cleaned.append(
            {
                "title": title,
                "description": _clean_text(item.get("description"), DESCRIPTION_MAX),
                "atomic": False,
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


def _clean_title(value: Any) -> str:
    # "deluxe dining," / "1. Book flights" / "- Venue": list debris the model leaves in titles
    text = _clean_text(value, TITLE_MAX)
    text = re.sub(r"^(?:[-*•]|\d+[.)]|step \d+:?)\s*", "", text, flags=re.IGNORECASE)
    return text.strip(" ,;:-").strip()


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
    elsewhere: Iterable[str] = (),
    seed: int | None = None,
) -> LLMRequest:
    elsewhere = [str(t) for t in elsewhere if str(t).strip()]
    lines = [f"Goal: {_clip(goal, 200)}", f"Task: {_clip(title, TITLE_MAX)}"]
    if description.strip():
        lines.append(f"Details: {_clip(description, 300)}")
    if elsewhere:
        lines.append(f"Other parts of the plan: {_listing(elsewhere)}")
    lines.append(f"It was split {_clip(strategy, 40)} into:")
    for i, sub in enumerate(subgoals[:12], 1):
        desc = _clip(sub.get("description", ""), 120)
        head = f"{i}. {_clip(sub.get('title', ''), SCHEMA_TITLE_MAX)}"
        lines.append(f"{head}: {desc}" if desc else head)
    lines.append(
        "Rate the split from 0 (bad) to 10 (good). specificity: each subgoal is one concrete "
        "piece of this task, not a vague area or a copy of the task. non_overlap: no two "
        "subgoals, and no subgoal and another part of the plan, cover the same thing. coverage: "
        "together the subgoals complete the task, with nothing important missing. In feedback "
        "name the weakest subgoal or what is missing, and how to fix it."
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
            "elsewhere": elsewhere,
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


# ------------------------------------------------------------------------------ atomic


def atomic_schema() -> dict:
    return {
        "type": "object",
        "properties": {
            "steps": {"type": "integer", "minimum": 1, "maximum": 12},
            "one_sitting": {"type": "boolean"},
        },
        "required": ["steps", "one_sitting"],
        "additionalProperties": False,
    }


def atomic_request(
    *, goal: str, path: list[str], title: str, description: str, seed: int | None = None
) -> LLMRequest:
    """Is this node doable in one sitting? A scorer's judgment (the proposer's own word is not
    trusted: small models called everything atomic). Two questions, because a small model's
    bare yes/no is nearly always yes: how many distinct steps, and one sitting or not."""
    lines = [f"Goal: {_clip(goal, 200)}"]
    where = _path_line(path)
    if where:
        lines.append(f"Part of: {where}")
    lines.append(f"Task: {_clip(title, TITLE_MAX)}")
    if description.strip():
        lines.append(f"Details: {_clip(description, 300)}")
    lines.append(
        "steps: how many distinct steps does this task take (1 to 12)? one_sitting: can one "
        "person finish the whole task in a single sitting of at most two hours? Say false if "
        "it involves several different decisions, places, people or days."
    )
    schema = atomic_schema()
    return LLMRequest(
        kind="atomic",
        system=SYSTEM_ATOMIC,
        prompt="\n".join(lines),
        schema=schema,
        context={"goal": goal, "path": list(path), "title": title, "description": description,
                 "seed": seed},
        max_tokens=token_budget(schema),
        temperature=0.2,  # a judgment, not a creative answer
        seed=seed,
    )


def parse_atomic(answer: dict) -> bool:
    """True if the node is atomic: one sitting and at most ``ATOMIC_STEPS_MAX`` steps."""
    if not isinstance(answer, dict):
        raise LLMBadOutput(f"atomic judgment is not an object: {type(answer).__name__}")
    steps, one = answer.get("steps"), answer.get("one_sitting")
    if isinstance(steps, bool) or not isinstance(steps, int) or not isinstance(one, bool):
        raise LLMBadOutput(f"atomic judgment lacks steps/one_sitting: {answer!r}")
    return one and steps <= ATOMIC_STEPS_MAX


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
    *,
    goal: str,
    path: list[str],
    title: str,
    description: str,
    siblings: Iterable[str] = (),
    parent_split: Iterable[str] = (),
    decided: Iterable[tuple[str, str]] = (),
    seed: int | None = None,
) -> LLMRequest:
    """``parent_split``: the titles of the parent's accepted split (this task among them);
    ``siblings``: the others, done by other executors, which this result must not repeat;
    ``decided``: (title, result) of siblings already done, so this result agrees with them
    (leaves deciding alone gave one conference three different dates)."""
    siblings = [str(t) for t in siblings if str(t).strip()]
    parent_split = [str(t) for t in parent_split if str(t).strip()]
    decided = [(str(t), str(r)) for t, r in decided if str(r).strip()]
    lines = [f"Goal: {_clip(goal, 200)}"]
    where = _path_line(path)
    if where:
        lines.append(f"Part of: {where}")
    if parent_split:
        parent = path[-1] if path else goal
        lines.append(f"\"{_clip(parent, 80)}\" was split into: "
                     + "; ".join(f"{i}. {_clip(t, 60)}" for i, t in enumerate(parent_split[:8], 1)))
    lines.append(f"Your task: {_clip(title, TITLE_MAX)}")
    if description.strip():
        lines.append(f"Details: {_clip(description, 400)}")
    if decided:
        lines.append("Already decided in the other subgoals (stay consistent with it):")
        lines.extend(f"- {_clip(t, 50)}: {_clip(r, 160)}" for t, r in decided[:4])
    if siblings:
        lines.append("Do only your task: the other subgoals are done by others, do not repeat them.")
    lines.append(
        "Write the result as if you had done the task: what you decided, with concrete names, "
        "dates, amounts or steps that fit the goal. 3 to 5 complete sentences in English, at "
        "most 90 words, no placeholders."
    )
    schema = execution_schema()
    return LLMRequest(
        kind="execute",
        system=SYSTEM_EXECUTE,
        prompt="\n".join(lines),
        schema=schema,
        context={"goal": goal, "path": list(path), "title": title, "description": description,
                 "siblings": siblings, "parent_split": parent_split,
                 "decided": [list(d) for d in decided], "seed": seed},
        max_tokens=token_budget(schema),
        temperature=0.7,
        seed=seed,
    )


def _prose(raw: Any, what: str, limit: int) -> str:
    if not isinstance(raw, str):
        raise LLMBadOutput(f"{what} has no text")
    lines = [" ".join(line.split()) for line in raw.splitlines()]
    # stray JSON/bracket debris before the first word ("}I will confirm ...", seen)
    text = "\n".join(line for line in lines if line).strip().lstrip("{}[],;:)").strip()
    if not text:
        raise LLMBadOutput(f"{what} is empty")
    if len(text) > limit:
        text = text[:limit]
    # the schema's maxLength stops the grammar mid-sentence: keep whole sentences only. Text
    # without any sentence end is kept as it is: the result check (agent.core.scoring) rejects
    # it while the executor has attempts left, and the last attempt must never stall a task.
    return cut_to_sentence(text) or text


def parse_execution(answer: dict) -> str:
    """The task's result: whole sentences only, at most 4000 characters (line breaks kept,
    other runs of blanks collapsed)."""
    if not isinstance(answer, dict):
        raise LLMBadOutput(f"execution result is not an object: {type(answer).__name__}")
    return _prose(answer.get("result"), "execution result", RESULT_MAX)


# ------------------------------------------------------------------------------ synthesize


def synthesis_schema() -> dict:
    return {
        "type": "object",
        "properties": {
            "answer": {"type": "string", "minLength": 1, "maxLength": SCHEMA_ANSWER_MAX},
        },
        "required": ["answer"],
        "additionalProperties": False,
    }


def synthesis_request(
    *,
    goal: str,
    path: list[str],
    title: str,
    description: str,
    children: Iterable[tuple[str, str]],
    seed: int | None = None,
) -> LLMRequest:
    """A node's answer from its children's (title, answer-or-result) pairs, in split order. At
    the root the answer is the plan's executive summary."""
    children = [(str(t), str(a)) for t, a in children]
    if not children:
        raise ValueError("a synthesis needs the children's results")
    root = not [p for p in path if str(p).strip()]
    lines = [f"Goal: {_clip(goal, 200)}"]
    where = _path_line(path)
    if where:
        lines.append(f"Part of: {where}")
    if not root:
        lines.append(f"Task: {_clip(title, TITLE_MAX)}")
    if description.strip():
        lines.append(f"Details: {_clip(description, 300)}")
    # keep the prompt inside a 2048-token context whatever the number of children
    per_child = max(120, 1500 // len(children))
    lines.append("It was split into these parts, each already done:")
    for i, (t, a) in enumerate(children[:12], 1):
        lines.append(f"{i}. {_clip(t, 70)}: {_clip(a, per_child)}")
    what = ("the executive summary of the whole plan for the goal" if root
            else f"the answer for \"{_clip(title, 80)}\"")
    lines.append(
        f"Write {what}: combine the parts into one coherent plan, in order, keeping their "
        "concrete details and leaving out repetition. 3 to 6 complete sentences in English, "
        "at most 120 words."
    )
    schema = synthesis_schema()
    return LLMRequest(
        kind="synthesize",
        system=SYSTEM_SYNTHESIZE,
        prompt="\n".join(lines),
        schema=schema,
        context={"goal": goal, "path": list(path), "title": title, "description": description,
                 "children": [list(c) for c in children], "seed": seed},
        max_tokens=token_budget(schema),
        temperature=0.5,
        seed=seed,
    )


def parse_synthesis(answer: dict) -> str:
    if not isinstance(answer, dict):
        raise LLMBadOutput(f"synthesis is not an object: {type(answer).__name__}")
    return _prose(answer.get("answer"), "synthesis", RESULT_MAX)


_WORD = re.compile(r"[^\W_]+", re.UNICODE)


def words(text: str) -> list[str]:
    """Lower-case word tokens (shared by the scripted backend and tests)."""
    return [w.casefold() for w in _WORD.findall(text)]
