"""Pure functions that build LLM requests and read the answers: the brief (a goal's working
assumptions), decompose (an ordered split), rank (a scorer's yardstick for a node's splits:
the essential work it needs), atomic (is a node one step), execute (a step's concrete actions), review (an elector's reading of a result)
and synthesize (a node's answer from all its children's). docs/quality.md explains the choices.

Every prompt starts with the same lines for a goal (the system message, the goal, today's date
and the brief), so a server's prompt cache reuses that prefix across every request of a plan.
Answers are shaped by the pydantic models in ``agent.llm.answers`` (their JSON schema
constrains decoding; ``max_tokens`` is derived from its bounds so the JSON is never cut off).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any, Iterable, Mapping, Sequence

from agent.core.events import BRIEF_FIELDS
from agent.core.facts import DETAIL_SEP, without_details
from agent.core.text import NOT_AN_ABBREVIATION, content_stems, cut_to_sentence, ends_at_sentence, tokens
from agent.llm.answers import (
    AtomicAnswer, BriefAnswer, CriteriaAnswer, ExecuteAnswer, ReviewAnswer, parse_as, schema_of,
    SynthesisAnswer, split_model,
)
from agent.llm.base import LLMBadOutput, LLMRequest

# Bounds of cleaned values (the contract with the rest of the code).
TITLE_MAX = 120
DESCRIPTION_MAX = 600
FEEDBACK_MAX = 400
RESULT_MAX = 4000
SCHEMA_TITLE_MAX = 70
SCHEMA_DESCRIPTION_MAX = 180
ATOMIC_STEPS_MAX = 3  # a node is atomic if it is one sitting of at most this many steps

SYSTEM = ("You are a practical planner in a team that writes one concrete plan together. You "
          "answer only with JSON.")


def token_budget(schema: dict) -> int:
    """Tokens that always suffice for compact JSON valid against ``schema``: one per character
    of every bounded string (a small model can fall to about one character a token) plus the
    punctuation and keys. Raises on an unbounded array or string."""
    typ = schema.get("type")
    if typ == "object":
        props = schema.get("properties", {})
        return 2 + sum(len(k) // 2 + 4 + token_budget(v) for k, v in props.items())
    if typ == "array":
        if "maxItems" not in schema:
            raise ValueError("unbounded array: add maxItems")
        return 2 + schema["maxItems"] * (token_budget(schema["items"]) + 1)
    if typ == "string":
        if "maxLength" not in schema and "enum" not in schema and "const" not in schema:
            raise ValueError("unbounded string: add maxLength")
        longest_enum = max((len(str(e)) for e in [*schema.get("enum", []), *([schema["const"]] if "const" in schema else [])]),
                           default=0)
        return 2 + schema.get("maxLength", longest_enum)
    if typ in ("integer", "number"):
        return 8
    if typ in ("boolean", "null"):
        return 2
    raise ValueError(f"no token budget for schema type {typ!r}")


# Strategies: generic, with no example words from any domain (small models copy a hint's words
# into every plan). "outline" is the whole job from the first step to the last, as one direct
# answer would write it: the swarm starts where one call ends.
STRATEGY_HINTS = {
    "outline": "as the complete list of steps from the first to the last, in the order they are done",
    "by phase": "in the order the work happens: one step per stage, from the first to the last",
    "by component": "one step per separate part or deliverable of the result, in the order they are made",
    "by stakeholder": "one step per person or group the task involves or serves, in the order they are needed",
    "by place": "one step per place where the task happens, in the order they are visited",
    "by time": "one step per period of time (days, weeks or months), in order",
}
STRATEGIES = tuple(STRATEGY_HINTS)
# how a draft of the whole plan cuts its sections, per strategy (outline: as the model likes)
SECTION_HINTS = {
    "by phase": "one section per stage of the work, from the first to the last",
    "by component": "one section per part or deliverable of the result, in the order they are made",
    "by stakeholder": "one section per person or group involved, in the order they are needed",
    "by place": "one section per place, in the order they are visited",
    "by time": "one section per period of time (days, weeks or months), in order",
}

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
    """The strategies that fit a task, best first: by time only when it has a time span, by
    place only when it names a place or is about travel, by stakeholder only when it involves
    people; outline, by phase and by component always fit."""
    text = f"{title} {description}"
    out = ["outline"]
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


# ------------------------------------------------------------------------------ the frame


@dataclass(frozen=True)
class Frame:
    """What every request of one goal starts with: the goal, the date it was set, its brief."""

    goal: str
    today: str = ""  # the goal's date (YYYY-MM-DD): "after today" means after the goal was set
    brief: Mapping[str, str] = field(default_factory=dict)
    about: str = ""  # the goal's description, as its submitter wrote it

    def lines(self) -> list[str]:
        out = [f"Goal: {_clip(self.goal, 200)}"]
        if self.about.strip():
            out.append(f"About the goal: {_clip(self.about, 400)}")
        if self.today:
            out.append(f"Today: {self.today}")
        text = brief_text(self.brief)
        if text:
            out.append(f"Brief (every step keeps to it): {text}")
        return out

    def context(self) -> dict[str, Any]:
        return {"goal": self.goal, "about": self.about, "today": self.today, "brief": dict(self.brief)}


_BRIEF_LABELS = {"duration": "duration", "dates": "dates", "budget": "budget", "currency": "currency",
                 "place": "place", "people": "people", "constraints": "constraints", "done": "done when"}


def brief_text(brief: Mapping[str, str] | None) -> str:
    if not brief:
        return ""
    return "; ".join(f"{_BRIEF_LABELS[k]}: {_clip(brief[k], 160)}" for k in BRIEF_FIELDS
                     if str(brief.get(k, "")).strip())


def _request(kind: str, frame: Frame, lines: list[str], model: type, context: dict[str, Any],
             temperature: float, seed: int | None) -> LLMRequest:
    schema = schema_of(model)
    return LLMRequest(kind=kind, system=SYSTEM, prompt="\n".join(frame.lines() + lines), answer=model,
                      context={**frame.context(), **context, "seed": seed},
                      max_tokens=token_budget(schema), temperature=temperature, seed=seed)


# ------------------------------------------------------------------------------ brief


def brief_request(frame: Frame, *, seed: int | None = None) -> LLMRequest:
    lines = [
        "Before the plan is made, settle the working assumptions that every step will follow. "
        "Keep everything the goal says (its length, dates, money, place, people). Where the goal says nothing, choose one realistic, typical value for a person doing "
        "this goal. duration: how long it takes in all: minutes or hours for what is done in one sitting "
        "(a recipe, a repair, cleaning), days to months for a project, a trip or an event. dates: the start and end date (YYYY-MM-DD), "
        "not before today; for a trip or an event, weeks later, so there is time to book. budget: the total amount of money for "
        "everything and everyone, with its currency, realistic for the goal. currency: the "
        "ISO code of the budget's currency (EUR, USD, JPY, GBP, ...). place: where it happens, "
        "and where the people start from. people: who does it or takes part, and how many. "
        "constraints: limits to respect. done: what is true when the goal is achieved."
    ]
    return _request("brief", frame, lines, BriefAnswer, {}, 0.4, seed)


_OTHER_SCRIPT = re.compile(r"[\u0400-\u04ff\u0590-\u08ff\u0e00-\u0eff\u3000-\u9fff\uac00-\ud7af\uf900-\ufaff\uff00-\uffef]+")


def parse_brief(answer: Any, *, english: bool = True) -> dict[str, str]:
    """The brief's fields, cleaned (for an English goal, without characters of other
    scripts); ``LLMBadOutput`` if too few say anything."""
    a = parse_as(BriefAnswer, answer, "brief")
    out = {}
    for k in BRIEF_FIELDS:
        # a stray character of another script ("... They have also赚", seen at a field's
        # length bound) and the half sentence it ends are not an assumption anyone keeps to
        raw = getattr(a, k)
        v = _clean_text(_OTHER_SCRIPT.sub("", raw) if english else raw, 300)
        if k in ("constraints", "done") and len(v) >= 40 and cut_to_sentence(v):
            v = cut_to_sentence(v)
        if v.lower().strip(" .") in ("", "none", "n/a", "na", "not specified", "unknown", "tbd", "-"):
            v = ""
        out[k] = v
    out["currency"] = a.currency.upper() if re.fullmatch(r"[A-Z]{3}", a.currency.upper()) else ""
    if sum(1 for k in ("duration", "dates", "budget", "place", "people", "done") if out[k]) < 3:
        raise LLMBadOutput("the brief leaves most assumptions open")
    return out


# ------------------------------------------------------------------------------ decompose


def decomposition_schema(max_children: int) -> dict:
    if max_children < 2:
        raise ValueError("max_children must be at least 2")
    return schema_of(split_model(max_children))


def decompose_request(
    frame: Frame,
    *,
    path: Sequence[str],
    title: str,
    description: str,
    strategy: str,
    max_children: int,
    feedback: Iterable[str] = (),
    previous: list[dict] | None = None,
    parent_split: Iterable[str] = (),
    seed: int | None = None,
) -> LLMRequest:
    """``path``: titles from the goal down to the node's parent; ``parent_split``: the titles
    of the parent's accepted split, this task among them, so the split stays inside this
    task's scope (titles of farther branches are not shown: models copied them)."""
    feedback = [str(f) for f in feedback if str(f).strip()]
    parent_split = [str(t) for t in parent_split if str(t).strip()]
    lines = []
    where = _path_line(path[1:] if path else [])
    if where:
        lines.append(f"Part of: {where}")
    if len(parent_split) > 1:
        parent = path[-1] if path else frame.goal
        lines.append(f"\"{_clip(parent, 80)}\" was split into: " + "; ".join(
            f"{i}. {_clip(t, 60)}" + (" (this task)" if t == title else "")
            for i, t in enumerate(parent_split[:8], 1)))
    lines.append(f"Task to split: {_clip(title, TITLE_MAX)}")
    if description.strip():
        lines.append(f"Details: {_clip(description, 300)}")
    if previous:
        lines.append("A reviewer criticised this earlier split: " + "; ".join(
            f"{i}. {_clip(s.get('title', ''), SCHEMA_TITLE_MAX)}" for i, s in enumerate(previous[:12], 1)))
        if feedback:
            lines.append("Feedback: " + " | ".join(_clip(f, 200) for f in feedback[:4]))
        lines.append("Write a better split that fixes the feedback and adds what is missing.")
    elif feedback:
        lines.append("Feedback to take into account: " + " | ".join(_clip(f, 200) for f in feedback[:4]))
    low = min(3, max_children)
    count = f"{low} to {max_children}" if low < max_children else f"{max_children}"
    lines.append(
        f"Write the {count} steps that get this task done, {strategy_hint(strategy)}. Each step "
        "is real work with its own result (something booked, bought, built, written, sent, "
        "paid or visited), not a planning chore such as 'research options' or 'make a plan'. "
        "Together the steps do all the essential work of the task; no two overlap; none repeats "
        "the task itself" + (" or the other parts above" if len(parent_split) > 1 else "") + ". "
        "title: a short action of 3 to 8 words with the real names from the goal and the brief, "
        "never a placeholder in brackets. description: one short sentence (at most 20 words) saying "
        "exactly what to do, keeping to the brief. after: the numbers of the earlier steps whose result this step "
        "needs (often none: [])."
    )
    model = split_model(max_children)
    return _request("decompose", frame, lines, model, {
        "path": list(path), "title": title, "description": description, "strategy": strategy,
        "max_children": max_children, "feedback": feedback,
        "previous": [dict(s) for s in previous] if previous is not None else None,
        "parent_split": parent_split,
    }, 0.7, seed)


OUTLINE_TOKENS = 900  # a whole plan as one small model writes it (measured 600-740 tokens)


# Not asked for: the permits, insurance and safety steps readers found missing (a council
# permit for a beach clean-up, consent forms for a school trip). Asked for by name in the
# outline (2026-12-05, qwen2.5-1.5b, 2 goals x 2 seeds each way), the drafts' sections became
# "Permit and Licenses", "Goal Definition", "Scope", "Safety Phase" (a street party's six permits
# at 814 EUR each, in one measured plan), against "Venue Selection", "Catering and Food",
# "Decorations", "Secure the Tutors" without it; said as "inside the sections they belong to",
# still "Permit and Licenses" and "Project Monitoring and Control". A permit the electors' own
# checklist names (criteria_request) is asked for by a refinement, as any missing work is.


def outline_request(frame: Frame, *, path: Sequence[str], title: str, description: str, max_children: int,
                    strategy: str = "outline", feedback: Iterable[str] = (), previous: list[dict] | None = None,
                    seed: int | None = None) -> LLMRequest:
    """A split of the goal written as a plan in text, the way one direct call of the model
    writes best (sections and their steps, in order), with the brief to keep to; a strategy
    other than "outline" says how its sections are cut (by phase, by place, ...). Its sections
    become the subgoals and their steps each subgoal's description: the swarm starts where one
    call ends, several such drafts compete, and its executors and reviewers add what one call
    cannot. With ``previous`` and ``feedback``: the draft again, with what the scorers found
    missing."""
    task = frame.goal if not path else title
    feedback = [str(f) for f in feedback if str(f).strip()]
    lines = []
    where = _path_line(path[1:] if path else [])
    if where:
        lines.append(f"Part of: {where}")
    if path:
        lines.append(f"Task: {_clip(title, TITLE_MAX)}" + (f" ({_clip(description, 300)})" if description.strip() else ""))
    if previous:
        lines.append("An earlier draft had these sections: " + "; ".join(
            f"{i}. {_clip(s.get('title', ''), SCHEMA_TITLE_MAX)}" for i, s in enumerate(previous[:12], 1)))
        if feedback:
            lines.append("Reviewers said: " + " | ".join(_clip(f, 200) for f in feedback[:4]))
        lines.append("Write the plan again so that it does all of the essential work, including what is missing.")
    key = " ".join(strategy.lower().split())
    how = f" Cut it into {SECTION_HINTS[key]}." if key in SECTION_HINTS else ""
    lines.append(
        f"Write a complete, concrete plan for: {_clip(task, 200)}. Break it into sections and steps, in "
        f"the order they are done, and give the concrete content of each step.{how} "
        + (f"{min(3, max_children)} to {max_children}" if max_children > 3 else f"At most {max_children}")
        + " sections. Keep to the brief."
    )
    return LLMRequest(kind="decompose", system=SYSTEM.replace(" You answer only with JSON.", ""),
                      prompt="\n".join(frame.lines() + lines),
                      context={**frame.context(), "path": list(path), "title": title, "description": description,
                               "strategy": strategy, "max_children": max_children, "seed": seed, "outline": True,
                               "feedback": feedback,
                               "previous": [dict(s) for s in previous] if previous is not None else None},
                      max_tokens=OUTLINE_TOKENS, temperature=0.7, seed=seed, free_text=True)


def _unlabelled(item: Any) -> str:
    """An outline step without its label when the text says it again ("Visit the Colosseum:
    Visit the Colosseum to see ..." -> "Visit the Colosseum to see ...")."""
    head, sep, rest = item.text.partition(":")
    rest = rest.strip()
    if sep and rest.casefold().startswith(head.strip().casefold()):
        return rest
    return item.text


def parse_outline(text: str, *, max_children: int) -> list[dict]:
    """The sections of a plan written as text, as subgoals (in order; each section's steps in
    its description); a plan without sections gives its steps. Headings that frame the plan
    (its title over everything, an overview, a conclusion: ``outline.is_frame``) are not
    parts of the work: a framing heading with the real sections under it gives those sections.
    ``LLMBadOutput`` when fewer than two remain."""
    from agent.llm.outline import is_frame, parse_plan_text

    tp = parse_plan_text(text)
    parts: list[tuple[str, str]] = []
    work = [sec for sec in tp.sections if sec.nested or not is_frame(sec.title)]
    # one heading over every other (the model's "Plan for ..." or "1. The 5K run" with 1.1 ...
    # under it), or a framing heading with the plan under it: its sub-headings are the parts
    wrappers = [sec for sec in work if sec.nested and len(sec.items) >= 2]
    flatten = {id(sec) for sec in wrappers if is_frame(sec.title, over_sections=True) or len(work) - 1 < 2}
    if len(flatten) > 1:
        flatten = set()
    for sec in work:
        if id(sec) in flatten:
            parts += [(i.title, _unlabelled(i)) for i in sec.items if not is_frame(i.title)]
            continue
        steps = "; ".join(_clip(_unlabelled(i), 160) for i in sec.items) or sec.text
        parts.append((sec.title, steps))
    if len(parts) < 2:
        parts = [(i.title, i.text) for i in tp.loose] or parts
    subgoals = []
    seen: set[str] = set()
    for title, desc in parts:
        t = _clean_title(_clip(title, SCHEMA_TITLE_MAX).rstrip("."))
        if not t or t.casefold() in seen:
            continue
        seen.add(t.casefold())
        # sections come in the order they are done: each follows the one before, so its step
        # is written seeing what the earlier steps chose (measured, Bristol, written side by
        # side: the venue researched in three steps, the party hosted before its set-up)
        subgoals.append({"title": t, "description": _clean_text(desc, DESCRIPTION_MAX), "atomic": False,
                         "after": (len(subgoals),) if subgoals else ()})
        if len(subgoals) == max_children:
            break
    if len(subgoals) < 2:
        raise LLMBadOutput(f"the outline has {len(subgoals)} usable section(s); at least 2 are needed")
    return subgoals


def parse_decomposition(answer: Any, *, max_children: int) -> list[dict]:
    """2..max_children cleaned subgoals, each {title, description, atomic: False, after}: the
    1-based positions of earlier kept subgoals it follows (references to later, dropped or
    itself are removed). ``LLMBadOutput`` when fewer than two usable distinct ones remain."""
    if not isinstance(answer, dict):
        raise LLMBadOutput(f"decomposition is not an object: {type(answer).__name__}")
    if isinstance(answer.get("text"), str) and "steps" not in answer:
        return parse_outline(answer["text"], max_children=max_children)
    items = answer.get("steps", answer.get("subgoals"))
    if not isinstance(items, list):
        raise LLMBadOutput("decomposition has no 'steps' list")
    cleaned: list[dict] = []
    seen: set[str] = set()
    position: dict[int, int] = {}  # answer position (1-based) -> kept position
    for n, item in enumerate(items, 1):
        if not isinstance(item, dict):
            continue
        title = _clean_title(item.get("title"))
        if not title or title.casefold() in seen:
            continue
        seen.add(title.casefold())
        refs = item.get("after") if isinstance(item.get("after"), list) else []
        after = sorted({position[a] for a in refs if isinstance(a, int) and a in position})
        cleaned.append({"title": title, "description": _clean_text(item.get("description"), DESCRIPTION_MAX),
                        "atomic": False, "after": tuple(after)})
        position[n] = len(cleaned)
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
    # ("Step 1. Set Up the Space" and "1.. Set Up" left ". Set Up the Space" as a title: a
    # charity bake sale, make demo 2026-12-07)
    text = re.sub(r"^(?:[-*•.]+|\d+[.)]+|step \d+\s*[:.)]?)\s*", "", text, flags=re.IGNORECASE)
    # a date said before the title ("10-19 November: Preparation and Planning", Leeds, measured):
    # the schedule gives each step its dates, and these contradicted them
    text = _DATED_TITLE.sub("", text)
    # a length or span said after it ("Online Bakery Setup (2 weeks)", dated two months by the
    # schedule; "Post-Event Activities (Weeks 8-10)" in a plan of 7 weeks: bakery and Warsaw,
    # measured): the schedule's dates are the step's, and these contradicted them
    text = _SPAN_AFTER.sub("", text)
    return text.strip(" ,;:-").strip()


_SPAN_AFTER = re.compile(
    r"\s*[(\[]\s*(?:(?:weeks?|months?|days?)\s*\d+(?:\s*(?:-|–|to|and|through)\s*\d+)?"
    r"|\d+(?:\s*(?:-|–|to)\s*\d+)?\s*(?:weeks?|months?|days?|hours?))\s*[)\]]\s*$", re.IGNORECASE)


_DATED_TITLE = re.compile(
    r"^(?:\d{1,2}(?:st|nd|rd|th)?(?:\s*[-–]\s*\d{1,2}(?:st|nd|rd|th)?)?\s+(?:jan|feb|mar|apr|may|jun|jul|aug|sep|oct|nov|dec)"
    r"[a-z]*\.?(?:\s+\d{4})?|(?:jan|feb|mar|apr|may|jun|jul|aug|sep|oct|nov|dec)[a-z]*\.?\s+\d{1,2}(?:\s*[-–]\s*\d{1,2})?"
    r"(?:,?\s+\d{4})?|\d{4}-\d{2}-\d{2}(?:\s*(?:to|[-–])\s*\d{4}-\d{2}-\d{2})?)\s*[:–-]\s+(?=\w)",
    re.IGNORECASE)


# ------------------------------------------------------------------------------ judging


def criteria_request(frame: Frame, *, path: Sequence[str], title: str, description: str, scorer: str,
                     elsewhere: Iterable[str] = (), seed: int | None = None) -> LLMRequest:
    """A scorer's yardstick for a node's splits: the essential work the task cannot be done
    without, asked before and apart from the splits. Measured on the 1.5B model: asked to
    compare splits it listed each split's own titles as "missing" and chose at random; asked
    what a task needs, it writes a sound checklist ("Book return flights", "Get a rail
    pass"). The splits are then ranked by code against it (agent.behaviour.work.judge_splits),
    so the ranking is a choice that cannot be read backwards.

    The work is asked for as "a verb and what it is done to", naming no verb: asked for "what
    is booked, bought, built, written, paid or done", the model wrote those verbs (2026-12-07,
    qwen2.5-1.5b, seven goals x 3 seeds): "buy water; buy gloves" to repot a plant, "buy
    items" for a garage sale, "buy food; buy hotel" for Japan, "buy 5-8 pieces of books;
    build a swap space; write a plan": 79 of 137 items began with buy, purchase, build, pay
    or write, and refinements added them as steps. Asked this way: 4 of 116 ("Buy new flat" twice for a
    move, "pay the rent", "Purchase tickets"), and "Knead dough; Shape into loaf" where the
    old words gave "buy flour; buy water; buy salt"."""
    lines = []
    where = _path_line(path[1:] if path else [])
    if where:
        lines.append(f"Part of: {where}")
    if path:
        lines.append(f"Task: {_clip(title, TITLE_MAX)}" + (f" ({_clip(description, 200)})" if description.strip() else ""))
    elsewhere = [str(t) for t in elsewhere if str(t).strip()]
    if elsewhere:
        lines.append("Other parts of the plan (not this task's work): " + "; ".join(_clip(t, 50) for t in elsewhere[:12]))
    task = "this task" if path else "the goal"
    lines.append(
        f"essential: the 5 to 8 pieces of work without which {task} is not done, most important "
        "first, each in 3 to 6 words naming the real work (a verb and what it is done to, with "
        "the names from the goal and the brief), never a planning chore such as research, decide "
        "or make a plan.")
    return _request("rank", frame, lines, CriteriaAnswer, {
        "path": list(path), "title": title, "description": description, "scorer": scorer,
        "elsewhere": elsewhere,
    }, 0.3, seed)


_CHORE_ITEM = re.compile(r"^(?:research|decide|plan|determine|identify|review|consider|brainstorm|think|"
                         # "Prepare for the trip; Prepare budget; Confirm dates; Finalize plan" (Japan,
                         # make demo 2026-12-07: two of three scorers' whole lists), "organize schedule"
                         r"finali[sz]e|confirm|prepare (?:for\b|(?:a |the )?budget)|(?:set|create|make) (?:a |an |the )?"
                         r"(?:budget|plan|itinerary|schedule)\b|organi[sz]e (?:the |a )?schedule)\b",
                         re.IGNORECASE)


# the request's own words said back as an item ("Book 5 to 8 pieces of work", measured)
_ECHO_ITEM = re.compile(r"\bpieces? of (?:real )?work\b|\b\d+ to \d+ (?:pieces|items|steps)\b", re.IGNORECASE)


def _restates(item: str, title: str) -> bool:
    """An item that is the task itself ("Organise a beach clean-up in Brighton for 60 people
    on a 60%" for that goal): nothing a split could take up as one part of it, and every split
    is then "missing" it."""
    mine, task = content_stems(item), content_stems(title)
    both = len(mine & task)
    # most of the task's words, and little else: "Run the beach clean-up" is a part of it
    return len(task) >= 3 and both >= max(3, (2 * len(task) + 2) // 3) and both >= (2 * len(mine) + 2) // 3


def parse_criteria(answer: Any, *, title: str = "") -> tuple[str, ...]:
    """The essential work, cleaned: list debris gone, chores, the request said back, the task
    (``title``) restated and repeats dropped; ``LLMBadOutput`` when fewer than three items
    remain."""
    a = parse_as(CriteriaAnswer, answer, "criteria")
    out: list[str] = []
    seen: set[str] = set()
    for item in a.essential:
        # the coder model sometimes writes paths ("/book/japan/train"): words all the same
        t = _clean_title(re.sub(r"[/_]+", " ", item)).rstrip(".")
        if not t or _CHORE_ITEM.match(t) or t.casefold() in seen or len(words(t)) < 1:
            continue
        if _ECHO_ITEM.search(t) or (title and _restates(t, title)):
            continue
        seen.add(t.casefold())
        out.append(t)
    if len(out) < 3:
        raise LLMBadOutput(f"the criteria name {len(out)} piece(s) of real work; at least 3 are needed")
    return tuple(out)


# ------------------------------------------------------------------------------ atomic


def atomic_schema() -> dict:
    return schema_of(AtomicAnswer)


def atomic_request(frame: Frame, *, path: Sequence[str], title: str, description: str,
                   seed: int | None = None) -> LLMRequest:
    """Is this node one step of the plan (written up in one go), or does it need splitting?
    Two questions, because a small model's bare yes/no is nearly always yes."""
    lines = []
    where = _path_line(path[1:] if path else [])
    if where:
        lines.append(f"Part of: {where}")
    lines.append(f"Task: {_clip(title, TITLE_MAX)}")
    if description.strip():
        lines.append(f"Details: {_clip(description, 300)}")
    lines.append(
        "steps: how many distinct steps does this task take (1 to 12)? one_sitting: can one "
        "person plan this whole task in a single sitting of at most two hours? Say false if it "
        "involves several different decisions, places, people or days."
    )
    return _request("atomic", frame, lines, AtomicAnswer,
                    {"path": list(path), "title": title, "description": description}, 0.2, seed)


def parse_atomic(answer: Any) -> bool:
    """True if the node is atomic: one sitting and at most ``ATOMIC_STEPS_MAX`` steps."""
    a = parse_as(AtomicAnswer, answer, "atomic judgment")
    return a.one_sitting and a.steps <= ATOMIC_STEPS_MAX


# ------------------------------------------------------------------------------ execute


def execution_schema() -> dict:
    return schema_of(ExecuteAnswer)


# asked for "the real name of a place, company, product, service or person", the 1.5B model made
# names up when it knew none ("ABC/XYZ" vendors, "Hotel Sixty"; a blind reader held them against
# the plan): a real name where it knows one, the kind of thing otherwise
EXECUTE_INSTRUCTION = (
    "Write 3 to 6 actions that carry out this step, in the order they are done, as many as the step needs and "
    "never the same action twice. do: one short instruction (at most "
    "20 words) with the specific choice it makes (what exactly and how many; the name of a real place, product or "
    "service only where you know one, never a made-up name).")
# with only ``do``, the actions read as a list of headings beside one direct call's plan (which
# explains each of its steps); asked for the content too, the 1.5B model wrote what each action
# settles ("Select reliable payment gateways (e.g., PayPal) for secure transactions", bakery,
# 2026-12-07)
DETAIL_INSTRUCTION = ("detail: what a person needs to carry it out, in one or two sentences: the concrete answer it "
                      "settles (which, how many, what exactly, by whom), with real names only where you know them.")
DETAIL_MAX = 240  # answers.Action.detail
EXECUTE_RULES = ("Instructions only: never 'I' or 'we', never a story of what was done, no placeholders, nothing "
                 "that belongs to the other steps.")


# said back as an action ("Keep the places, products and choices it names, drop what is wrong
# for the goal ... (21-22 November)", Leeds, measured): one of the INSTRUCTIONS a result must not echo
DRAFT_RULE = ("Its actions carry out the draft in order: keep the places, products and choices it names, drop what is "
              "wrong for the goal or belongs to another step, and add what is missing.")


# the step that holds an event, asked for actions like any other, listed the logistics of
# getting ready (book the venue, assign the instructors) on the event's own days, and nothing of
# what happens there; one direct call's plan of a photography course gave its two days' topics,
# and a blind reader followed it for that (Edinburgh, measured 2026-12-05)
# said as "write its programme, 4 to 6 parts", the 1.5B model answered the prompt's labels
# ("Draft of this step", "Event Execution", "Write the programme"; Manchester, measured): it is
# asked for actions, as every step is, that run the event in the order they happen
PROGRAMME_INSTRUCTION = (
    "This step is the event itself. Write 4 to 6 actions that run it, in the order they happen on the day. "
    "do: the time of day and what is done then, with its content (for a course or workshop, what that "
    "session teaches; for a party, fair or quiz, what is on and who runs it).")
# the labels of an execute prompt's lines: an action that is only one of them is no action
PROMPT_LABELS = ("part of", "the plan for", "done before this step", "already decided in another step",
                 "this step", "draft of this step", "this step's part of the schedule",
                 "this step's share of the budget", "an earlier version was sent back", "why",
                 "write the programme", "write its programme")


def execute_request(
    frame: Frame,
    *,
    path: Sequence[str],
    title: str,
    description: str,
    parent_split: Sequence[str] = (),
    position: int = 0,
    follows: Iterable[tuple[str, str]] = (),
    decided: Iterable[tuple[str, str]] = (),
    previous: str = "",
    feedback: Iterable[str] = (),
    seed: int | None = None,
    window: str = "",
    money: tuple[float, float] | None = None,
    programme: bool = False,
) -> LLMRequest:
    """``programme``: the step is the event itself, written as what happens when
    (``PROGRAMME_INSTRUCTION``) rather than as things to arrange;
    ``window``: this step's part of the brief's dates (agent.behaviour.work.step_window);
    ``money``: (what the steps done so far spend, this step's share of the budget).
    ``parent_split``: the parent's split in order, this step at ``position`` (1-based);
    ``follows``: (title, result) of the earlier steps this one needs; ``decided``: other
    siblings already done, so this result agrees with them; ``previous`` and ``feedback``: the
    attempt the electors sent back, and why."""
    parent_split = [str(t) for t in parent_split if str(t).strip()]
    follows = [(str(t), str(r)) for t, r in follows if str(r).strip()]
    decided = [(str(t), str(r)) for t, r in decided if str(r).strip()]
    feedback = [str(f) for f in feedback if str(f).strip()]
    currency = str(frame.brief.get("currency") or "").strip()
    lines = []
    where = _path_line(path[1:] if path else [])
    if where:
        lines.append(f"Part of: {where}")
    if parent_split:
        parent = path[-1] if path else frame.goal
        lines.append(f"The plan for \"{_clip(parent, 80)}\": " + "; ".join(
            f"{i}. {_clip(t, 60)}" + (" (this step)" if i == position else "")
            for i, t in enumerate(parent_split[:12], 1)))
    for t, r in follows[:3]:
        lines.append(f"Done before this step (use it, do not repeat it): {_clip(t, 60)}: {_clip(r, 500)}")
    # other steps' results are for agreeing with (one hotel, one date), not for copying: a
    # small model copies them (measured: "Explore the City" answered with the accommodation
    # step's actions), so they are kept short and this step's own content is said last
    for t, r in decided[:3]:
        lines.append(f"Already decided in another step (agree with it, do not repeat it): {_clip(t, 50)}: "
                     f"{_clip(r, 160)}")
    lines.append(f"This step: {_clip(title, TITLE_MAX)}")
    if description.strip():
        # the step's draft from the plan (an outline's items): the 1.5B model, shown it as
        # the step's own text, wrote generic actions; told it is the draft to keep and
        # develop, it kept the named places and added what was missing
        lines.append(f"Draft of this step: {_clip(description, 500)}")
        lines.append(DRAFT_RULE)
    if window:
        lines.append(f"This step's part of the schedule: {window} (what must be booked, bought or "
                     "prepared ahead is dated before it)")
    share = 0
    if money is not None and currency:
        spent, share = round(money[0]), max(1, round(money[1]))
        lines.append(f"This step's share of the budget: about {share:,} {currency}"
                     + (f" (the steps done so far spend {spent:,} {currency})" if spent else "")
                     + "; the whole plan keeps to the brief's budget")
    if previous:
        lines.append(f"An earlier version was sent back: {_clip(previous, 400)}")
        if feedback:
            lines.append("Why: " + " | ".join(_clip(f, 160) for f in feedback[:4]))
    lines.append(
        (PROGRAMME_INSTRUCTION if programme else EXECUTE_INSTRUCTION) + " " + DETAIL_INSTRUCTION + " cost: what this action pays" + (f", in {currency}," if currency else "")
        + " for everyone in the brief, priced on its own ('' if it pays nothing). when: the date (YYYY-MM-DD) or deadline, within "
        + ("this step's part of the schedule" if window else "the brief's dates") + ", or ''. "
        + EXECUTE_RULES
    )
    return _request("execute", frame, lines, ExecuteAnswer, {
        "path": list(path), "title": title, "description": description,
        "parent_split": parent_split, "position": position,
        "follows": [list(f) for f in follows], "decided": [list(d) for d in decided],
        "previous": previous, "feedback": feedback, "window": window, "budget_share": share,
        "programme": programme,
    }, 0.6, seed)


ACTION_MAX = 150  # answers.Action.do


_BARE_AMOUNT = re.compile(r"^((?:about |around |approx\.? |~)?\d[\d,.']*)(\s*(?:per|/|a|each)\s+\w+)?$", re.IGNORECASE)
_NO_VALUE = frozenset({"", "none", "n/a", "na", "free", "0", "0.0", "0.00", "-", "tbd", "unknown", "null"})


_ZERO = re.compile(r"^(?:about |around |approx\.? |~)?(?:[$€£¥]\s?)?0+(?:[.,]0+)?(?:\s*[A-Za-z]{3}|\s*(?:euros?|dollars?|pounds?|yen))?$",
                   re.IGNORECASE)


_FIELD_LABEL = re.compile(r"^(?:when|date|dates|cost|price|amount)\s*:\s*", re.IGNORECASE)
# a field written as a sentence, cut at its bound ("The cost for this action is 500 JPY for",
# Japan, make demo 2026-12-07, shown as "(The cost for this action is 500 JPY for; ...)"):
# its value
_FIELD_SAID = re.compile(r"^(?:the |this |its )?(?:total |estimated |approximate )?(?:cost|price|fee|date|day)s?"
                         r"(?: (?:for|of) (?:this|the|each) (?:action|step|item|task))?"
                         r"\s+(?:is|are|will be|would be|should be)\s+(?:about |around |approximately )?(?=\S)",
                         re.IGNORECASE)
_DANGLING_WORD = re.compile(r"(?:\s+(?:for|per|of|to|and|in|at|on|by|the|a|an))+$", re.IGNORECASE)


FIELD_BOUND = 40  # answers.Action.cost and .when


def _field_said(part: str, at_bound: bool) -> str:
    """A field written as a sentence, as its value; empty when it was cut where its value was
    ("The estimated cost for this action is 12" of "... 120,000 JPY") or a "per ..." went."""
    value = _FIELD_SAID.sub("", part)
    bare = _DANGLING_WORD.sub("", value)
    if re.search(r"\bper$", value, re.IGNORECASE) or (at_bound and bare == value and re.search(r"[\d,.]$", value)):
        return ""
    return bare


def _extra(value: Any, currency: str) -> str:
    """A cost or date field as shown after its action: '' for the empty answers a small model
    writes (quotes, 'none', '0'); a bare number gets the brief's currency, since '(50)' says
    nothing and does not add up against the budget."""
    # a field that names itself ("when: 2027-01-12; 2027-01-13", Warsaw, measured) is its value
    parts = [_FIELD_LABEL.sub("", p.strip(" '\"`.;,")).strip(" '\"`.;,") for p in _clean_text(value, 40).split(";")]
    parts = [_field_said(p, len(str(value).strip()) >= FIELD_BOUND - 2) if _FIELD_SAID.match(p) else p
             for p in parts]
    parts = [p for p in parts if p]
    # "0 EUR", "about 0 EUR": nothing paid, said as a price (seen on every free action)
    parts = [p for p in dict.fromkeys(parts) if p.casefold() not in _NO_VALUE and not _ZERO.match(p)]
    if not parts:
        return ""
    text = "; ".join(parts)
    m = _BARE_AMOUNT.match(text) if currency else None
    if m:
        return f"{m.group(1)} {currency}{m.group(2) or ''}"
    return text


# Actions that pay nothing by their nature: the 1.5B model fills the cost field anyway ("Define
# the Event Coordinator (50 GBP)", "Research venues (200 EUR)"), and those figures took plans
# past their budgets and read as nonsense. A figure the action itself names is kept.
_UNPAID = re.compile(
    r"^(?:(?:regularly|then|first|also|finally) )?"
    r"(?:define|decide|research|plan|list|draft|outline|write down|meet|contact|send|update|assign|report|share|"
    # setting a price is no spending ("Price the Event (15000 PLN)", Warsaw, make demo 2026-12-07)
    r"price|set (?:the |a )?(?:ticket )?prices?|"
    r"(?:choose|select)(?! (?:\w+ ){0,3}and (?:book|buy|order|hire|rent|pay|reserve))|divide|allocate|"
    r"set (?:the )?(?:date|deadlines?|goals?|roles?)|set aside|budget|reserve \d+|"
    r"email|e-mail|call|phone|review|check|compare|identify|determine|discuss|agree|confirm|"
    r"announce|thank|collect|gather feedback|evaluate|assess|estimate|calculate|set up a meeting|"
    # "Create a detailed schedule (50,000 PLN)" (Warsaw, make demo 2026-12-07)
    # (not "Make a grocery list and buy ...", "Develop a training plan with a coach", "Create 200
    # printed agendas", "Make two budget-friendly dinners": those pay)
    r"(?:create|make|draw up|develop) (?:a |an |the |your )?(?:(?!printed\b|architect)[a-z-]+ ){0,2}"
    r"(?:list|schedule|timeline|checklist|budget|plan|agenda|itinerary)s?(?![\w-])"
    r"(?! (?:\w+ ){0,3}(?:and|with|from|by|printed|printing|signs?|boards?|banners?)\b)|"
    r"brainstorm|note|track|monitor|inform|notify|remind|prepare a (?:list|schedule|plan|budget))\b",
    re.IGNORECASE)


# the answer's fields written into the action's text ("Prepare a list of recipes. Cost: 2,000
# CAD, when: 2027-01-09 to 2027-01-26", measured): taken out and used as the fields
_FIELDS_IN = re.compile(r"[\s.,;]*\(?\s*\bcost\s*:\s*(?P<cost>[^,;()\d]{0,12}\d(?:[^,;()]|,(?=\d{3}))*?)"
                        r"(?:\s*[,;]?\s*\bwhen\s*:\s*(?P<when>[^()]*?))?\s*\)?[\s.]*$", re.IGNORECASE)


# the step prompt's own words copied into a field ("2027-05-25 (what must be booked, bought",
# measured), and a "(cost; date)" the model wrote at the end of the action as well as in its
# fields ("... a role (20 GBP; 2027-05-24) (2027-05-23).", measured): shown once
# ("2027-01-15 to 2027-01-17 (what must be", cut by the field's bound: Japan, measured 2026-12-07)
_PROMPT_BITS = re.compile(r"\s*\(\s*what must be\b[^)]*\)?|\s*\bwhat must be booked[^)]*\)?", re.IGNORECASE)
_ISO_DAY = re.compile(r"\b\d{4}-\d{2}-\d{2}\b")
_FIELDS_AT_END = re.compile(r"\s*\(((?=[^()]*(?:\d{4}-\d{2}-\d{2}|[£$€¥]\s?\d|\d[\d,.]*\s?(?-i:[A-Z]{3})\b))[^()]*)\)\s*[.]?\s*$")


def _fields_in(text: str) -> tuple[str, str, str]:
    m = _FIELDS_IN.search(text)
    if not m or m.start() == 0:
        return text, "", ""
    return text[:m.start()], (m.group("cost") or "").strip(), (m.group("when") or "").strip()


# a heading written as an action, with nothing under it ("Payment and Confirmation:.", Lisbon,
# measured): no action
_LABEL_ONLY = re.compile(r"^[^:.!?]{1,60}:\s*\.?$")
# an action that is none ("Do nothing.", the third of three in a houseplant's step that needed
# two: the schema asks for at least three)
_NO_ACTION = re.compile(r"^(?:do |does )?(?:nothing|none|no action|n/?a|skip(?: this)?)(?: (?:else|here|more|further))?"
                        r"(?: (?:is )?(?:needed|required))?\s*[.!]?$", re.IGNORECASE)


def parse_execution(answer: Any, *, currency: str = "", one_day: str = "") -> str:
    """The step's result as text: one line per action, "- Do this — what it settles (cost;
    when).", the detail left out when the answer has none. ``one_day``: the whole plan's one
    day (ISO), which no action needs to be dated with (a houseplant repotted in an hour had
    "(2026-12-07)" on every line, and a blind reader held it against the plan)."""
    a = parse_as(ExecuteAnswer, answer, "execution result")
    lines: list[str] = []
    said: list[frozenset[str]] = []  # each line's meaning words
    seen: set[str] = set()
    told_by: list[set[str]] = []  # each line's detail sentences, as words
    details: list[str] = []  # each line's detail
    # every action's own words: a detail that is another action of the answer said again is
    # no content of this one ("Make sure to book your flight and train tickets ahead of time -
    # Choose a flight from Tokyo ... using the flight you selected in Stage 2", the action
    # before it: Japan, make demo 2026-12-07)
    actions_said = [content_stems(_unlabelled_do(x.do)) for x in a.actions]
    for k, act in enumerate(a.actions):
        raw = act.do
        # cut by its length bound ("... Consider the"; "... designing a unique and", 143 characters
        # once its spaces were squeezed: bakery, measured): its whole sentences
        if len(raw) >= ACTION_MAX - 5 or (len(raw) >= ACTION_MAX - 20 and _DANGLING.search(raw.rstrip(" ."))):
            raw = _whole(raw) or raw
        raw, said_cost, said_when = _fields_in(_PROMPT_BITS.sub("", raw))
        fields = _FIELDS_AT_END.search(raw)
        if fields and fields.start() > 0:  # "Form a team (20 GBP; 2027-05-24)" and the same in the fields
            raw = raw[:fields.start()]
            got = [p.strip() for p in fields.group(1).split(";") if p.strip()]
            said_cost = said_cost or next((p for p in got if not _ISO_DAY.search(p)), "")
            said_when = said_when or next((p for p in got if _ISO_DAY.search(p)), "")
        # (the separator is the line's own: an action that holds it would split the line there)
        do = _sentence(_label_said_again(_unfinished(raw.replace(DETAIL_SEP.strip(), "-"), ACTION_MAX)))
        raw_detail = act.detail
        if len(raw_detail) >= DETAIL_MAX - 5 or (len(raw_detail) >= DETAIL_MAX - 20
                                                  and _DANGLING.search(raw_detail.rstrip(" ."))):
            # cut at its bound: its whole sentences, decided on the whole of it (a part of it
            # moved into the action would no longer look cut)
            raw_detail = _whole(raw_detail) or raw_detail
        own_words = content_stems(_unlabelled_do(do))
        do, act_detail = _said_fuller(do, raw_detail)
        if not do or do.casefold() in seen or _LABEL_ONLY.match(do) or _NO_ACTION.match(do):
            continue
        seen.add(do.casefold())
        # (a small model often writes the cost and date into the action too: not twice)
        act_cost, act_when = _PROMPT_BITS.sub("", act.cost), _PROMPT_BITS.sub("", act.when)
        cost = "" if _UNPAID.match(do) else _extra(act_cost if _extra(act_cost, currency) else said_cost, currency)
        when = _extra(act_when if _extra(act_when, "") else said_when, "")
        if one_day and one_day in when and not re.search(rf"\b(?:before|after|until)\s+{one_day}", when, re.I):
            # "2026-12-07 (morning)": what is left of it ("morning") says more than the day
            when = re.sub(rf"(?:\b(?:on|by)\s+)?{one_day}", "", when, flags=re.I)
            when = re.sub(r"[()]", " ", when).strip(" ,;.:-")
            when = " ".join(when.split())
        extra = []
        for x in (cost, when):
            if x and x.casefold() not in do.casefold() and x.casefold() not in (e.casefold() for e in extra):
                extra.append(x)
        # the same action said again in the same step, with less or more ("Assign chairs and
        # microphones", then "... for the conference app"; "Review Plan: Review the overall
        # plan ...": Warsaw and Japan, measured): once, in its fuller words, where it came first
        # (an action's own words, not the detail sentence it took: "Confirm the booking" made
        # fuller by its detail "... with the hotel" is no "Book the hotel" said again)
        words = own_words
        if len(words) >= 2 and any(words <= w for w in said):
            continue
        fuller = [i for i, w in enumerate(said) if len(w) >= 2 and w < words]
        others = [w for j, w in enumerate(actions_said) if j != k and len(w) >= 3]
        detail = _detail(" ".join(x for x in _SENTENCES.split(act_detail)
                                  if len(content_stems(x)) < 3 or not any(content_stems(x) <= w for w in others)), do)
        # a detail's sentence said under an earlier action that stays goes ("The garage is
        # located at 123 Elm St, Los Angeles" under three actions of one step: garage sale,
        # make demo 2026-12-07)
        mine: set[str] = set()
        if detail:
            told = set().union(*(t for i, t in enumerate(told_by) if i not in fuller))
            kept = [x for x in _SENTENCES.split(detail) if x.strip() and _as_words(x) not in told]
            mine = {_as_words(x) for x in kept if len(tokens(x)) >= 3}
            detail = _sentence(" ".join(kept), DETAIL_MAX) if kept else ""
        text = f"{do[:-1]}{DETAIL_SEP}{detail}" if detail else do
        line = f"- {text[:-1]} ({'; '.join(extra)})." if extra else f"- {text}"
        if fuller:
            # the detail of the action it replaces stays where this one's does not say it
            # ("The sale is on Saturday" under "Set up tables", then "Set up tables and
            # chairs" without it)
            lost = [x for i in fuller for x in _SENTENCES.split(details[i])
                    if x.strip() and not content_stems(x) <= content_stems(f"{do} {detail}")]
            while lost and len(" ".join([detail] * bool(detail) + lost)) > DETAIL_MAX:
                lost.pop()
            if lost:
                detail = _sentence(" ".join([detail] * bool(detail) + lost), DETAIL_MAX)
                mine |= {_as_words(x) for x in lost if len(tokens(x)) >= 3}
                text = f"{do[:-1]}{DETAIL_SEP}{detail}"
                line = f"- {text[:-1]} ({'; '.join(extra)})." if extra else f"- {text}"
            lines[fuller[0]], said[fuller[0]], told_by[fuller[0]], details[fuller[0]] = line, words, mine, detail
            for i in reversed(fuller[1:]):
                del lines[i], said[i], told_by[i], details[i]
            continue
        lines.append(line)
        said.append(words)
        told_by.append(mine)
        details.append(detail)
    if not lines:
        raise LLMBadOutput("execution result has no usable action")
    return "\n".join(lines)[:RESULT_MAX]


def _said_fuller(do: str, detail: str) -> tuple[str, str]:
    """An action and its detail when the detail's first sentence is the action said again with
    more ("Choose a reputable travel guide that covers Japan - Choose a reputable travel guide
    that covers Japan and use it to plan your trip", make demo 2026-12-07: read as the plan
    saying everything twice): the action in its fuller words, the detail what is left."""
    parts = [p for p in _SENTENCES.split(str(detail).strip()) if p.strip()]
    if not do or not parts:
        return do, detail
    m = _SHORT_LABEL.match(do)
    label = do[:m.end()] if m and _unlabelled_do(do) != do else ""
    mine, first = tokens(do[len(label):]), tokens(parts[0])
    if len(mine) >= 3 and len(first) > len(mine) and first[:len(mine)] == mine:
        fuller = _sentence(label + parts[0].replace(DETAIL_SEP.strip(), "-"), ACTION_MAX + 40)
        if len(fuller) <= ACTION_MAX:
            return fuller, " ".join(parts[1:])
    return do, detail


def _as_words(sentence: str) -> str:
    return " ".join(tokens(sentence)).casefold()


def _unfinished(text: str, bound: int) -> str:
    """Text near its length ``bound`` whose last sentence is unfinished ("... for your baked
    goods. Ensure the website is resp", bakery, make demo 2026-12-07, 149 characters of 150:
    cut, though short of the bound once squeezed) without it, when the whole sentences before
    it are most of the text. A last sentence without its full stop well within the bound is
    whole ("... PayPal for wallets. Both charge per sale")."""
    t = text.strip()
    if len(t) < bound - 30 or ends_at_sentence(t.rstrip(" )")):
        return text
    whole = cut_to_sentence(t)
    return whole if whole and len(whole) >= len(t) / 2 else text


# a detail's sentence that says the other fields in the prompt's words ("It pays 0 USD for
# everyone in the brief. It should be done on 2026-12-07", a houseplant's repotting, make demo
# 2026-12-07): the cost and the date have their own fields
_FIELD_TALK = re.compile(r"\bfor everyone in the brief\b|^\s*(?:it|this)\s+(?:pays|costs)\b.*\bpriced on its own\b"
                         r"|^\s*(?:it|this(?:\s+(?:action|step))?)\s+(?:pays|costs)\b.*\bfor everyone in \d+\b"
                         r"|^\s*(?:it|this)\s+(?:should|must|will|is to) be done (?:on|by|before)\s+"
                         r"(?:\d{4}-\d{2}-\d{2}|the brief's dates|this step's part of the schedule)\s*\.?\s*$"
                         # "This action pays $0.00 for everyone in 20" (the houseplant again, 756b7e9)
                         # ("It costs nothing" is content: the cost field hides a zero)
                         r"|^\s*(?:it|this(?:\s+(?:action|step))?)\s+pays\s+(?:nothing|[$€£¥]?\s?0+"
                         r"(?:[.,]0+)?(?:\s*[A-Za-z]{3})?)\s*\.?\s*$",
                         re.IGNORECASE)
# a detail that says who does the action before saying it again ("The person needs to gently
# lift the plant out of the old container using a sharp knife", the houseplant, 756b7e9)
# (only the reader: "They must RSVP by Friday" is the guests' work, "You must not" and "You
# should be" are no instructions once cut)
_WHO_MUST = re.compile(r"^(?:(?:the (?:person|reader)|you)\s+(?:needs? to|ha(?:s|ve) to|should|must|will (?:need|have) to)"
                       # "The best option is to mix the new soil with the old soil" (the houseplant)
                       r"|the best (?:option|choice|way|thing) (?:here )?is to)\s+(?!not\b|never\b|be\b)(?=[a-z])",
                       re.IGNORECASE)


def _detail(raw: str, do: str) -> str:
    """An action's detail as one clean sentence or two, or empty when it only says the action
    again (its content words all in the action's) or is the prompt's words."""
    if len(raw) >= DETAIL_MAX - 5 or (len(raw) >= DETAIL_MAX - 20 and _DANGLING.search(raw.rstrip(" ."))):
        raw = _whole(raw) or raw
    raw, _cost, _when = _fields_in(_PROMPT_BITS.sub("", raw))
    fields = _FIELDS_AT_END.search(raw)
    if fields and fields.start() > 0:
        raw = raw[:fields.start()]
    # (the separator is the line's own: a detail that holds it would split the line twice)
    text = _sentence(_unfinished(raw.replace(DETAIL_SEP.strip(), "-"), DETAIL_MAX), DETAIL_MAX)
    # its sentences that only say the action again go ("Publicize the event to attract
    # attendees - Publicize the event to attract attendees using ...": the rest is its content;
    # Warsaw, make demo 2026-12-07)
    mine = content_stems(do)
    parts = [_WHO_MUST.sub("", p.strip()) for p in _SENTENCES.split(text) if p.strip() and not _FIELD_TALK.search(p)]
    parts = [p[:1].upper() + p[1:] for p in parts if p]
    while parts and content_stems(parts[0]) <= mine:
        parts.pop(0)
    # a later sentence that only says the action again goes too ("Be careful not to damage the
    # roots", in the action and again in its detail), when its very words are the action's
    # ("Stay in Kyoto" after "Visit Nara and Kyoto" is where to sleep, not the visit again)
    said = set(tokens(do))
    parts = parts[:1] + [p for p in parts[1:] if not set(tokens(p)) <= said]
    if parts:
        head = _SAID_AGAIN.match(parts[0])
        # its very words, not only its stems: "Check out of the Hotel Granvia by 11 am" is not
        # "Check in at the Hotel Granvia" said again
        if head and content_stems(head.group(1)) <= mine and len(head.group(1)) >= 0.6 * len(_SENTENCES.split(_unlabelled_do(do))[0]) \
                and (len(parts) == 1 or set(tokens(head.group(1))) <= said):
            parts[0] = parts[0][head.end():]
    text = _sentence(" ".join(parts), DETAIL_MAX) if parts else ""
    # a detail that adds a word or none to its action says nothing more ("Create a website ...
    # schedule" - "... schedule, and registration")
    if not text or len(content_stems(text) - mine) < 2 or _LABEL_ONLY.match(text):
        return ""
    return text


_LABELLED = re.compile(r"^([^:.!?]{3,60}):\s+(\S.*)$")
_SHORT_LABEL = re.compile(r"^([^:.!?\d]{3,30}):\s+")
# a label that says when or which way is part of the action ("Day two:", "Return:", "Saturday:")
_WHEN_LABEL = re.compile(
    r"\b(?:one|two|three|four|five|six|seven|eight|nine|ten|first|second|third|fourth|fifth|last|final|next"
    r"|morning|afternoon|evening|night|noon|lunch|dinner|breakfast|weekend|today|tomorrow"
    r"|(?:mon|tues|wednes|thurs|fri|satur|sun)day|january|february|march|april|may|june|july|august"
    r"|september|october|november|december|return|outbound|arrival|departure|inbound|before|after|during)\b",
    re.IGNORECASE)


def _unlabelled_do(text: str) -> str:
    """An action without a short draft label in front ("Unroot: Gently lift the plant ..."),
    for telling one action from another: "Unroot: Gently lift the plant out" and "Remove the
    roots: Gently lift the plant out ... with a trowel" are one action (the houseplant, 756b7e9).
    A label with a number ("Day 3:") says when, and is part of the action."""
    m = _SHORT_LABEL.match(text.strip())
    if not m or _WHEN_LABEL.search(m.group(1)):
        return text
    rest = text.strip()[m.end():]
    # ("Call the venue: confirm the date, headcount and parking" and "Call the caterer: ..."
    # are two calls: only a text specific on its own is the action without its label)
    return rest if len(content_stems(rest)) >= 5 else text


def _label_said_again(text: str) -> str:
    """An action without the label it repeats ("Develop a Marketing Plan: Develop a marketing
    plan to promote the conference", Warsaw, make demo 2026-12-07: a draft's "Label: text"
    items copied into the actions)."""
    m = _LABELLED.match(text.strip())
    if m and content_stems(m.group(1)) and content_stems(m.group(1)) <= content_stems(m.group(2)):
        return m.group(2)
    return text


_SENTENCES = re.compile(NOT_AN_ABBREVIATION + r"(?<=[.!?])\s+(?=[A-Z])")
# an action said again, then carried on ("Publicize the event to attract attendees using various
# marketing channels such as ..."): what follows its words
_SAID_AGAIN = re.compile(r"^(.{12,}?)\s+(?=(?:using|with|by|through|via|such as|including|in|at|from|for)\b)",
                         re.IGNORECASE)


def _sentence(text: str, limit: int = 200) -> str:
    # "Review the project details;" ends in the separator the model meant for the next
    # action: shown as "...details; (50 PLN)." and, in a key line, ";;" (Warsaw, measured)
    t = _clean_text(text, limit).strip(" -*•").rstrip(" ,;")
    if not t:
        return ""
    t = t[0].upper() + t[1:]
    return t if t[-1] in ".!?" else t + "."


# ------------------------------------------------------------------------------ review


def review_schema() -> dict:
    return schema_of(ReviewAnswer)


def review_request(frame: Frame, *, path: Sequence[str], title: str, description: str, result: str,
                   siblings: Iterable[tuple[str, str]] = (), seed: int | None = None) -> LLMRequest:
    """An elector's reading of one step's result, problems quoted from the result itself."""
    siblings = [(str(t), str(r)) for t, r in siblings if str(r).strip()]
    lines = []
    where = _path_line(path[1:] if path else [])
    if where:
        lines.append(f"Part of: {where}")
    lines.append(f"Step: {_clip(title, TITLE_MAX)}" + (f": {_clip(description, 300)}" if description.strip() else ""))
    for t, r in siblings[:3]:
        lines.append(f"Another step, already done: {_clip(t, 50)}: {_clip(r, 200)}")
    lines.append(f"Its result:\n{_clip(result, 1200)}")
    lines.append(
        "Check the result. A problem is one of: it tells a story of having done the work "
        "instead of saying what to do; it contradicts the brief (other dates, currency, "
        "budget, place or people) or another step; it names no concrete choice; it does "
        "something other than this step. For each problem quote the exact words of the result "
        "that show it, and say why in a few words. accept: true if there is no real problem."
    )
    return _request("review", frame, lines, ReviewAnswer, {
        "path": list(path), "title": title, "description": description, "result": result,
        "siblings": [list(s) for s in siblings],
    }, 0.2, seed)


def parse_review(answer: Any, result: str) -> tuple[bool, list[str]]:
    """(accept, problems). A problem counts only if its quote is in the result (a model may
    not invent what it objects to); a rejection without one counted problem, or an acceptance
    with two or more, contradicts itself and is refused (``LLMBadOutput``)."""
    a = parse_as(ReviewAnswer, answer, "review")
    haystack = " ".join(result.split()).casefold()
    problems = []
    for p in a.problems:
        quote = " ".join(p.quote.split()).strip(" '\"").casefold()
        if len(quote) >= 4 and quote in haystack:
            problems.append(f"\"{_clip(p.quote.strip(), 80)}\": {_clean_text(p.why, 100)}")
    if not a.accept and not problems:
        raise LLMBadOutput("the review rejects without quoting a problem from the result")
    if a.accept and len(problems) >= 2:
        raise LLMBadOutput("the review accepts a result it found two problems in")
    return a.accept, problems


# ------------------------------------------------------------------------------ synthesize


def synthesis_schema() -> dict:
    return schema_of(SynthesisAnswer)


# amounts: the model restated single actions' costs as a step's ("100 GBP for post-event
# follow-up", a step of 450 GBP; measured): the steps' own totals are listed under it by code
SYNTHESIS_SUMMARY = ("summary: 3 to 5 sentences a person reads first: what the plan does and its key choices "
                     "(names, dates), taking up every step in order; of money only the total; keep to the brief; "
                     "no '...'.")
# without a total added up against a budget, the model adds its steps' guesses up itself and
# calls the sum the plan's price ("The total cost of the trip is 570 EUR", Japan, measured)
SYNTHESIS_SUMMARY_NO_MONEY = SYNTHESIS_SUMMARY.replace("of money only the total", "no amounts of money")
SYNTHESIS_STEPS = "steps{of}, in order, with what each does:"
# what a result must not say back (a small model echoes its instructions as content; measured:
# a beach clean-up's summary "The 3 steps, in order, with what each does are as follows: 1. ...",
# its first step copied in full)
INSTRUCTIONS = (EXECUTE_INSTRUCTION, PROGRAMME_INSTRUCTION, DETAIL_INSTRUCTION, EXECUTE_RULES, DRAFT_RULE, SYNTHESIS_SUMMARY,
                SYNTHESIS_SUMMARY_NO_MONEY, SYNTHESIS_STEPS.format(of=""))


def synthesis_request(frame: Frame, *, path: Sequence[str], title: str, description: str,
                      children: Iterable[tuple[str, str]], previous: str = "",
                      feedback: Iterable[str] = (), seed: int | None = None, total: str = "") -> LLMRequest:
    """A node's answer from its children's (title, result) pairs, in split order, each in
    full: the summary a person reads first (the steps under it are listed by code,
    ``parse_synthesis``). At the root it is the plan's answer. ``total``: what the children
    cost in all, added up by code ("2,100 GBP of the 3,000 GBP budget")."""
    children = [(str(t), str(a)) for t, a in children]
    if not children:
        raise ValueError("a synthesis needs the children's results")
    feedback = [str(f) for f in feedback if str(f).strip()]
    root = len([p for p in path if str(p).strip()]) == 0
    lines = []
    where = _path_line(path[1:] if path else [])
    if where:
        lines.append(f"Part of: {where}")
    if not root:
        lines.append(f"Task: {_clip(title, TITLE_MAX)}")
    per_child = max(300, 3600 // len(children))
    lines.append(f"The {len(children)} " + SYNTHESIS_STEPS.format(of="" if root else " of this task"))
    for i, (t, a) in enumerate(children[:12], 1):
        # every action of a step, without details when the whole will not fit: cut, a step
        # showed its first action and its detail alone, and the summary of a Warsaw
        # conference was about its steering committee (make demo 2026-12-07)
        a = a if len(a) <= per_child else without_details(a)
        lines.append(f"{i}. {_clip(t, 70)}:\n{_clip(a, per_child)}")
    if total:
        lines.append(f"Total: {total}")
    if previous:
        lines.append(f"An earlier answer was sent back: {_clip(previous, 300)}")
        if feedback:
            lines.append("Why: " + " | ".join(_clip(f, 160) for f in feedback[:4]))
    what = "the whole plan" if root else f"\"{_clip(title, 80)}\""
    lines.append(f"Write the answer for {what}. " + (SYNTHESIS_SUMMARY if total else SYNTHESIS_SUMMARY_NO_MONEY))
    return _request("synthesize", frame, lines, SynthesisAnswer, {
        "path": list(path), "title": title, "description": description,
        "children": [list(c) for c in children], "previous": previous, "feedback": feedback,
    }, 0.4, seed)


def parse_synthesis(answer: Any, titles: Sequence[str], keys: Sequence[str] = ()) -> str:
    """The answer as text: the summary, then one numbered line per child, "N. Title: key",
    where ``keys`` (each child's key content, written by code from its result) has one."""
    a = parse_as(SynthesisAnswer, answer, "synthesis")
    summary = cut_to_sentence(_clean_text(a.summary, 900)) or _clean_text(a.summary, 900)
    summary = _without_said_again(summary)
    out = [summary, ""]
    keys = list(keys) + [""] * (len(titles) - len(keys))
    for i, (t, k) in enumerate(zip(titles, keys), 1):
        k = _clean_text(k, 400)
        out.append(f"{i}. {t}: {k}" if k else f"{i}. {t}.")
    return "\n".join(out).strip()[:RESULT_MAX]


_MONTH_OR_NUMBER = re.compile(r"\d+(?:[:.,]\d+)*|\b(?:jan|feb|mar|apr|may|jun|jul|aug|sep|oct|nov|dec)[a-z]*\b", re.IGNORECASE)


def _without_said_again(text: str) -> str:
    """A summary without its sentences said again, with other numbers or dates or none ("The
    sale will be held on December 7, 2026, at 6:00 PM. The sale will be held on December 8,
    ..." six times: a garage sale, make demo 2026-12-07): each once, the first."""
    seen: list[frozenset[str]] = []
    kept = []
    for part in _SENTENCES.split(text):
        key = content_stems(_MONTH_OR_NUMBER.sub(" ", part))
        if len(key) >= 3 and any(key <= k for k in seen):
            continue
        seen.append(key)
        kept.append(part)
    return " ".join(kept)


def synthesis_summary(text: str) -> str:
    """The summary of an answer ``parse_synthesis`` wrote (what the model wrote of it)."""
    return str(text).split("\n\n", 1)[0].strip()


def _whole(text: str) -> str:
    """A step line cut off by its length bound ("... (3000 EUR; 2026"): back to its last whole
    sentence, or else without the open bracket it was cut in."""
    t = text.strip()
    whole = cut_to_sentence(t)
    if whole:
        return whole
    if t.count("(") > t.count(")"):
        return t[:t.rfind("(")].rstrip(" ,;:-")
    # one long sentence cut mid-word ("... the desired revenue and s", measured): back to its
    # last whole word, without the words that only lead on to what was cut; or back to its
    # last whole clause, where the cut one was begun after a comma ("... freshness, texture,
    # and taste, including using", bakery, measured)
    t = re.sub(r"\s+\S*$", "", t)
    comma = t.rfind(", ")
    if comma >= 40 and len(t) - comma <= 80:
        return t[:comma].rstrip(" ,;:-")
    return _DANGLING.sub("", t).rstrip(" ,;:-")


_DANGLING = re.compile(r"(?:\s+(?:and|or|but|to|the|a|an|of|for|with|in|on|at|by|from|such as|including|as|that|"
                       r"which|if|so|your|its|their))+\s*$", re.IGNORECASE)
_WORD = re.compile(r"[^\W_]+", re.UNICODE)


def words(text: str) -> list[str]:
    """Lower-case word tokens (shared by the scripted backend and tests)."""
    return [w.casefold() for w in _WORD.findall(text)]
