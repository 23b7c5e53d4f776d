"""What a reader of a plan would hold against it, measured by code on the plan's text
(agent.eval.plans.PlanDoc), the same way for the swarm's plan and one direct call's:

- facts that contradict the goal or each other: amounts in a currency the goal does not use,
  dates outside the goal's time, places in countries the goal is not about, more different
  months than the plan's length allows (one plan, four calendars);
- essential work missing: the goal's aspects (agent.eval.goals) nobody covers;
- steps that are planning chores ("Identify and prioritize tasks") instead of the work;
- results written as diaries of things done ("I decided to upload my package");
- how concrete the text is (names, numbers, amounts per 100 words);
- a summary that leaves parts out or copies one part; cut fragments ("..."), placeholders;
- the same action in several steps ("Prepare a list of all necessary items" three times), amounts
  without their currency ("(50)"), empty fields ("('', '')"), actions that name nothing
  ("Visit the museums").

``quality`` folds them into one figure in [0, 100] (docs/quality.md); it must score the
failures above low and a good plan high (tests/test_eval_metrics.py shows it does).
"""

from __future__ import annotations

import math
import re
from typing import Any, Mapping, Sequence

from agent.core import facts as fx
from agent.core import text as tx
from agent.core.scoring import is_chore
from agent.eval.plans import PlanDoc


def aspect_coverage(texts: Sequence[str], aspects: Mapping[str, Sequence[str]]) -> tuple[float, list[str]]:
    """Share of the goal's aspects whose words (stemmed; phrases must appear whole) occur in the
    plan's text, and the aspects missed."""
    if not aspects:
        return 1.0, []
    stems: set[str] = set()
    joined = " ".join(" ".join(tx.tokens(t)) for t in texts)
    stemmed_text = " " + " ".join(tx.stem(w) for w in joined.split()) + " "
    for t in texts:
        stems |= {tx.stem(w) for w in tx.tokens(t)}
    missed = []
    for name, words in aspects.items():
        hit = False
        for w in words:
            parts = [tx.stem(p) for p in tx.tokens(w)]
            if len(parts) == 1:
                # prefixes like "fertil" or "advertis" match any inflection
                hit = parts[0] in stems or any(s.startswith(parts[0]) for s in stems if len(parts[0]) >= 5)
            else:
                hit = f" {' '.join(parts)} " in stemmed_text
            if hit:
                break
        if not hit:
            missed.append(name)
    return round(1 - len(missed) / len(aspects), 4), missed


_SPAN = re.compile(r"\b(\d+|one|two|three|four|five|six|seven|eight|nine|ten|twelve)[- ](day|week|month|year)s?\b",
                   re.IGNORECASE)
_NUMBERS = {"one": 1, "two": 2, "three": 3, "four": 4, "five": 5, "six": 6, "seven": 7, "eight": 8,
            "nine": 9, "ten": 10, "twelve": 12}


def months_allowed(goal_text: str) -> int:
    """How many different calendar months a plan for this goal may mention: its length in
    months, plus one for the run-up (two when the goal does not say)."""
    m = _SPAN.search(goal_text)
    if not m:
        return 3
    n = _NUMBERS.get(m.group(1).lower()) or int(m.group(1))
    days = n * {"day": 1, "week": 7, "month": 30, "year": 365}[m.group(2).lower()]
    return max(2, math.ceil(days / 30) + 1)


def reference_facts(goal: str, description: str = "") -> fx.BriefFacts:
    """What the goal itself pins (its currency, months and places): both planners are held
    to these, whatever assumptions they add."""
    text = f"{goal} {description}".strip()
    return fx.brief_facts({"place": text, "dates": text, "budget": description}, text)


_WEEKDAYS = frozenset("monday tuesday wednesday thursday friday saturday sunday".split())
_BARE_AMOUNT = re.compile(r"\((\d[\d,.]*)\s*[;)]")  # "(50)", "(50; 2026-12-06)": a cost without its currency
_EMPTY_FIELD = re.compile(r"''|\"\"")


def actions_of(text: str) -> list[str]:
    """A step's text as its actions: one per line, or per sentence when it is one line."""
    lines = [ln.strip(" -*•\t") for ln in str(text).splitlines() if ln.strip(" -*•\t")]
    if len(lines) == 1:
        lines = [x.strip(" ;") for x in re.split(r"(?<=[.!?;])\s+(?=[A-Z])", lines[0]) if x.strip(" ;")]
    return lines


def names_something(action: str, goal_stems: frozenset[str]) -> bool:
    """Whether an action names a particular place, company, product or person: a capitalised
    word after its first that is not a month, a weekday, a currency code or a word of the goal
    ("Visit the museums" names nothing; "Visit the Gulbenkian Museum" does)."""
    # a label is the step's own title said again ("**Hotel Selection**: Look for hotels"), not a name
    action = re.sub(r"^\W*(?:[\w'-]+\s+){0,5}[\w'-]+\W*:\s*", "", action.replace("**", ""))
    # an action's detail begins a sentence: its first word's capital names nothing ("Hold", "Use")
    action = re.sub(fx.DETAIL_SEP + r"(\w)", lambda m: fx.DETAIL_SEP + m.group(1).lower(), action)
    for m in re.finditer(r"\b[A-Z][a-zA-Z\u00c0-\u024f]{2,}", action):
        w = m.group(0)
        if m.start() == 0 or w.isupper() and len(w) == 3:
            continue
        low = w.lower()
        if any(low.startswith(mo[:3]) and (low == mo or len(low) == 3) for mo in fx.MONTHS) or low in _WEEKDAYS:
            continue
        if tx.content_stems(w) <= goal_stems:
            continue
        return True
    return False


def plan_metrics(doc: PlanDoc, *, description: str = "",
                 aspects: Mapping[str, Sequence[str]] | None = None) -> dict[str, Any]:
    goal_text = f"{doc.goal} {description}".strip()
    ref = reference_facts(doc.goal, description)
    units = [("summary", doc.summary)] if doc.summary else []
    units += [(s.title, f"{s.title}. {s.text}") for s in doc.steps]
    units += [(s.title, s.text) for s in doc.sections if s.text]
    all_text = "\n".join(t for _, t in units)
    words = len(tx.tokens(all_text))

    off: list[str] = []
    for title, text in units:
        found = ([f"currency {c}" for c in fx.wrong_currency(text, ref)]
                 + [f"date {d}" for d in fx.off_dates(text, ref)]
                 + [f"place {p}" for p in fx.foreign_places(text, ref)]
                 + [f"place {w} (for {real})" for w, real in fx.misspelt_places(text, ref)]
                 + [f"people '{p}'" for p in fx.wrong_headcount(text, ref)])
        off += [f"{title[:40]}: {f}" for f in found]
    months = {m for _y, m in fx.months_in(all_text)}
    allowed = months_allowed(goal_text) if not ref.dated else len(ref.months) + 1
    calendar_conflicts = max(0, len(months) - allowed)
    currencies = {codes[0] for _a, codes in fx.money_in(all_text) if codes}
    steps = doc.steps or []
    diary = [s.title for s in steps if fx.diary_phrase(s.text)]
    chores = [s.title for s in steps if is_chore(s.title)]
    concreteness = (sum(fx.concrete_marks(t) for _, t in units) / words * 100) if words else 0.0
    # a goal of the user's own has no aspects: its coverage is not measured (None), not 1.0
    coverage, missed = aspect_coverage([all_text], aspects) if aspects else (None, [])
    sections = doc.sections or []
    synthesis_coverage = None
    copies = False
    if doc.summary and len(sections) >= 2:
        stems = tx.content_stems(doc.summary)
        parts = [(s.title, s.text or " ".join(t.text for t in steps if t.section == s.title)) for s in sections]
        used = sum(1 for t, r in parts if fx._mentions(stems, t, r))
        synthesis_coverage = round(used / len(parts), 3)
        copies = any(r and tx.jaccard(stems, tx.content_stems(r)) > 0.7 for _t, r in parts)
    fragments = all_text.count("...") + all_text.count("…") + len(_EMPTY_FIELD.findall(all_text))
    # the planner's own instructions said back as content (Leeds, 2026-12-05: "Keep the places,
    # products and choices it names, drop what is wrong for the goal ..." as an action)
    fragments += sum(1 for st in steps if fx.echoed(st.text, _instructions()))
    # the same action in two steps: each step against every other
    lines = sum(len(actions_of(st.text)) for st in steps)
    repeated = sum(len(fx.repeated_actions("\n".join(actions_of(st.text)),
                                           [(o.title, "\n".join(actions_of(o.text))) for o in steps if o is not st]))
                   for st in steps)
    bare = len(_BARE_AMOUNT.findall(all_text)) if ref.currency else 0
    goal_stems = tx.content_stems(goal_text)
    acts = [a for st in steps for a in actions_of(st.text)]
    named = sum(1 for a in acts if names_something(a, goal_stems))
    # a budget with no amount anywhere: nothing shows the plan fits it
    unpriced = ref.budget is not None and not [a for a, _c in fx.money_in(all_text) if a != ref.budget]
    placeholders = len(tx.placeholders(all_text))
    # figures that contradict the plan itself: readers held a plan's own wrong figures against it
    # more than a plan with none ("its specific figures would actively mislead"): a total over the
    # budget it states (or the goal's), a weekday named with a date it is not, a range that ends
    # before it starts
    own = fx.brief_facts(doc.brief, goal_text) if doc.brief else ref
    budget = own.budget or ref.budget
    cur = own.currency or ref.currency
    spent = sum(fx.costs_of(st.text, own) for st in steps) if cur and budget else 0.0
    over_budget = round(spent / budget, 3) if budget and spent > 1.1 * budget else None
    contradictions = sum(1 for _t, text in units if fx.wrong_weekdays(text)) + len(
        fx.backwards_ranges(all_text)) + order_breaks(steps) + title_date_breaks(steps) + double_stays(steps, own, goal_text)
    m: dict[str, Any] = {
        "steps": len(steps),
        "words": words,
        "coverage": coverage,
        "missed_aspects": missed,
        "off_goal_facts": len(off),
        "off_goal": off[:12],
        "months_mentioned": len(months),
        "calendar_conflicts": calendar_conflicts,
        "currencies": sorted(currencies),
        "diary_steps": round(len(diary) / len(steps), 3) if steps else 0.0,
        "chore_steps": round(len(chores) / len(steps), 3) if steps else 0.0,
        "concreteness": round(concreteness, 2),
        "synthesis_coverage": synthesis_coverage,
        "synthesis_copies": copies,
        "fragments": fragments,
        "placeholders": placeholders,
        "repeated_actions": round(repeated / lines, 3) if lines else 0.0,
        "bare_amounts": bare,
        "named_actions": round(named / len(acts), 3) if acts else 0.0,
        "unpriced": unpriced,
        "over_budget": over_budget,
        "contradictions": contradictions,
    }
    m["quality"] = quality(m)
    return m


def _instructions() -> tuple[str, ...]:
    from agent.llm.prompts import INSTRUCTIONS

    return INSTRUCTIONS


def title_date_breaks(steps: Sequence[Any]) -> int:
    """Steps whose title names months none of their own dated actions fall in (Leeds: "10-19
    November: Preparation and Planning" over actions dated 19-28 October; Dublin: "1st January
    2027" over 14-28 February)."""
    breaks = 0
    for st in steps:
        named = {m for _y, m in fx.months_in(st.title)}
        dated = fx.calendar_dates(st.text)
        if named and dated and not any(d.month in named for d in dated):
            breaks += 1
    return breaks


def double_stays(steps: Sequence[Any], facts: fx.BriefFacts, goal: str) -> int:
    """Steps of a journey that book a room for nights an earlier step has one for, or for more
    nights than the trip has (``facts.double_stays``)."""
    if not fx.journey(goal):
        return 0
    return sum(1 for i, st in enumerate(steps)
               if fx.double_stays("\n".join(actions_of(st.text)),
                                  [(o.title, "\n".join(actions_of(o.text))) for o in steps[:i]], facts))


def order_breaks(steps: Sequence[Any]) -> int:
    """Steps whose own work (``facts.dates_done``: not what is booked or bought ahead) is all
    dated before an earlier step's own work begins: a plan's order contradicted by its dates
    (Bristol, 2026-12-05: the party hosted on 07-14, its set-up step dated 07-19 to 07-31; the
    blind reader put it first among the plan's faults)."""
    spans = []
    for st in steps:
        days = [d for a in actions_of(st.text) for d in fx.dates_done(a)]
        spans.append((min(days), max(days)) if days else None)
    breaks = 0
    for j, sj in enumerate(spans):
        if sj and any(si and sj[1] < si[0] for si in spans[:j]):
            breaks += 1
    return breaks


def quality(m: Mapping[str, Any]) -> float:
    """One figure in [0, 100]: coverage of the essential work, times a factor for each kind of
    failure, so any one of them pulls it down (docs/quality.md has the reasoning)."""
    if not m["steps"]:
        return 0.0
    q = 0.4 + 0.6 * float(m["coverage"]) if m["coverage"] is not None else 1.0
    q *= 1 - min(0.6, 0.15 * m["off_goal_facts"])
    q *= 1 - min(0.4, 0.1 * m["calendar_conflicts"])
    q *= 1 - float(m["diary_steps"])
    q *= 1 - 0.5 * float(m["chore_steps"])
    q *= 0.7 + 0.3 * min(1.0, float(m["concreteness"]) / 8)
    if m["synthesis_coverage"] is not None:
        q *= 0.7 + 0.3 * float(m["synthesis_coverage"])
    if m["synthesis_copies"]:
        q *= 0.8
    q *= 1 - min(0.3, 0.1 * (m["fragments"] + m["placeholders"]))
    q *= 1 - min(0.4, float(m.get("repeated_actions", 0.0)))
    q *= 1 - min(0.2, 0.05 * m.get("bare_amounts", 0))
    q *= 0.6 + 0.4 * min(1.0, float(m.get("named_actions", 1.0)) / 0.5)
    if m.get("unpriced"):
        q *= 0.8
    if m.get("over_budget"):  # its own total past its own budget: x0.5 at twice the budget
        q *= max(0.4, 1 - 0.5 * (float(m["over_budget"]) - 1))
    q *= 1 - min(0.3, 0.1 * m.get("contradictions", 0))
    return round(100 * q, 1)


def aggregate(per_goal: Sequence[Mapping[str, Any]]) -> dict[str, float]:
    """Mean of each numeric metric over goals."""
    if not per_goal:
        return {}
    def numeric(v: Any) -> bool:
        return isinstance(v, (int, float)) and not isinstance(v, bool)

    keys = sorted({k for g in per_goal for k, v in g.items() if numeric(v)})
    out = {}
    for k in keys:  # a metric not measured for a goal (None: no aspects, no synthesis) is left out
        vals = [float(g[k]) for g in per_goal if numeric(g.get(k))]
        out[k] = round(sum(vals) / len(vals), 4)
    return out
