"""A scripted LLM: a deterministic TEST DOUBLE for protocol tests, simulations and benchmarks.

It is never a product default. ``scripted_answer`` reads only ``req.context`` (the keyword
arguments given to the ``*_request`` builders in ``prompts``) and returns an answer valid
as ``req.answer``; the same context always gives the same answer, in any process.

- decompose: 3..5 (at most max_children) subgoals drawn from a facet list chosen by the
  strategy ("by place", "by activity", "by day", "by phase", anything else: a generic list
  rotated by the strategy's hash), titled "<facet> — <topic>" where the topic comes from the
  parent title. Facet names share no words, so a word-overlap check sees distinct subgoals.
  A refinement (context has previous or feedback) keeps the facets, makes every description
  specific ("... Done when ...") and adds a facet if there is room, so it scores higher.
- brief: working assumptions read off the goal (its length, a date some weeks after the
  goal's day, a budget in euros, the place it names).
- rank (a scorer's criteria): the node's topic, which every scripted split names, and one facet
  drawn by a hash of (scorer, title), so the splits that take it up rank first and scorers
  sometimes disagree; below a facet, the facet's own steps.
- execute: three actions naming the task's topic, a cost in the brief's currency and a day in
  its dates; review: accepts unless the result tells a story or has a placeholder;
  synthesize: a summary naming every child.
"""

from __future__ import annotations

import hashlib
import itertools
from typing import Any, Mapping, Sequence

import trio

from agent.core.scoring import chore_count
from agent.llm import prompts
import json

from agent.llm.answers import checked
from agent.llm.base import LLM, Answer, LLMRequest, estimate_tokens

# (name, what to do, concrete detail of a refinement, atomic)
Facet = tuple[str, str, str, bool]

PLACE: list[Facet] = [
    ("Arrival city and airport transfers", "Get from the airport to the first base",
     "Compare train and bus to the centre, buy the ticket, note the route", True),
    ("Capital city neighbourhoods", "Choose neighbourhoods of the capital to stay in and visit",
     "Pick two districts, list three sights in each, fix the hotel area", False),
    ("Historic old town quarter", "Explore the historic quarter",
     "List the old streets, shrines and museums, with opening hours and entry fees", False),
    ("Coastal towns and beaches", "Spend time on the coast",
     "Pick one coastal town, check the ferry or train, book one night near the sea", False),
    ("Mountain villages and trails", "Visit the mountains",
     "Choose a village with marked trails, check the weather season and the last bus back", False),
    ("Countryside day trips", "Plan day trips into the countryside",
     "Pick two trips under two hours away, with departure times and return trains", True),
    ("Lakeside resort area", "Stay a night by a lake",
     "Compare three lakeside inns by price and reviews, reserve the best one", True),
    ("Island excursion by ferry", "Take a ferry to an island",
     "Check the ferry timetable, book the crossing, list what to see on the island", True),
]
ACTIVITY: list[Facet] = [
    ("Transport tickets and passes", "Sort out transport between the stops",
     "Price a rail pass against single tickets for the route and buy the cheaper", True),
    ("Lodging reservations", "Book places to sleep",
     "Reserve each night with free cancellation, keep the confirmations in one list", True),
    ("Food tours and local dining", "Plan what and where to eat",
     "List five local dishes, one restaurant for each, and one booked food tour", False),
    ("Museums, temples and landmarks", "Choose the sights to visit",
     "Rank ten sights, keep the top six, note tickets that must be bought ahead", False),
    ("Outdoor hikes and nature walks", "Add time outdoors",
     "Pick two walks under four hours, with trail maps, gear and weather checks", False),
    ("Shopping markets and souvenirs", "Plan shopping",
     "Name two markets, their opening days, and a souvenir budget per person", True),
    ("Evening entertainment and nightlife", "Plan the evenings",
     "Pick one show or festival, buy tickets, and list three evening districts", True),
    ("Budget tracking and payments", "Keep the spending under control",
     "Set a daily budget, choose a card without fees, track costs in one sheet", True),
]
DAY: list[Facet] = [
    ("Day 1: arrival and orientation", "Arrive, check in and get oriented",
     "Land, reach the hotel, buy a local SIM, walk the nearby streets", True),
    ("Day 2: main sights walking tour", "See the main sights on foot",
     "Follow a route through the five best-known sights with a lunch stop", False),
    ("Day 3: regional excursion", "Leave the city for the region",
     "Take the morning train out, visit two places, return by the evening", False),
    ("Day 4: markets and local food", "Spend the day on markets and food",
     "Breakfast at the morning market, a cooking class, dinner at a local spot", True),
    ("Day 5: museums and culture", "Spend the day on museums and culture",
     "Two museums with timed tickets, a traditional performance at night", True),
    ("Day 6: rest and free exploration", "Keep a slow day",
     "No bookings; a park, a bath house, and time to revisit a favourite place", True),
]
DAY_LAST: Facet = ("Final day: departure and wrap-up", "Pack, check out and leave",
                   "Check out, reach the airport three hours early, settle the bills", True)
PHASE: list[Facet] = [
    ("Preparation and research", "Gather what is needed before starting",
     "List requirements, collect three sources, write down open questions", True),
    ("Core execution work", "Do the main work",
     "Split the work into sessions, do them in order, record what was done", False),
    ("Review and quality check", "Check the result",
     "Compare the result against the requirements, fix the gaps found", True),
    ("Delivery and follow-up", "Hand over the result",
     "Share the result with the people involved, collect their comments", True),
]
GENERIC: list[Facet] = [
    ("Requirements and constraints", "Pin down what is required",
     "Write the must-haves, the limits of time and money, and who decides", True),
    ("Research of available options", "Find the options",
     "Collect at least three options, compare them on cost, time and quality", False),
    ("Budget and resources", "Decide the money and people needed",
     "Estimate each cost, add a tenth as reserve, name who does what", True),
    ("Schedule and milestones", "Put the work on a calendar",
     "Set dates for each milestone, with the order they depend on", True),
    ("Bookings and purchases", "Book and buy what is needed",
     "Make each booking, keep receipts and cancellation terms together", True),
    ("Risks and contingencies", "Prepare for what can go wrong",
     "List the three likeliest problems and a fallback for each", True),
    ("Communication with people involved", "Keep everyone informed",
     "Send a short summary to everyone involved and agree on one channel", True),
    ("Final review checklist", "Check that nothing is missing",
     "Go through a checklist of every part, tick each, fix what is open", True),
]

STRATEGY_FACETS: dict[str, list[Facet]] = {
    "by place": PLACE,
    "by activity": ACTIVITY,
    "by day": DAY,
    "by phase": PHASE,
}

_STOP = {
    "a", "an", "the", "to", "of", "for", "in", "on", "and", "or", "with", "at", "by", "from",
    "into", "our", "my", "your", "their", "its", "this", "that", "some", "all", "new",
}
_VERBS = {
    "plan", "organise", "organize", "prepare", "arrange", "make", "create", "build", "write",
    "do", "set", "run", "book", "explore", "design", "launch", "develop", "find", "get", "hold",
    "host", "start", "choose", "pick", "visit", "spend", "take", "decide", "sort", "keep",
}
_ARTICLES = {"a", "an", "the", "my", "our", "your", "their", "some", "this", "that"}
TOPIC_MAX = 30
SEP = " — "


def _hash(*parts: Any) -> int:
    data = "\x1f".join(str(p) for p in parts).encode("utf-8", "surrogatepass")
    return int.from_bytes(hashlib.sha256(data).digest()[:8], "big")


def _unit(*parts: Any) -> float:
    """A deterministic number in [0, 1)."""
    return (_hash(*parts) % 1_000_003) / 1_000_003


def _fit(text: str, limit: int) -> str:
    text = " ".join(text.split())
    if len(text) <= limit:
        return text
    cut = text[: limit - 1]
    space = cut.rfind(" ")
    if space > limit // 2:
        cut = cut[:space]
    return cut.rstrip(" ,;:-") + "…"


def topic_of(title: str, goal: str = "") -> str:
    """A short topic for subgoal titles: the root topic after SEP, a proper noun, or the last
    content words of the title (of the goal if the title has none)."""
    for text in (title, goal):
        text = " ".join(str(text).split())
        if SEP in text:
            tail = text.split(SEP, 1)[1].strip()
            if prompts.words(tail):
                return _fit(tail, TOPIC_MAX)
            text = text.split(SEP, 1)[0]
        tokens = [t.strip(".,;:!?()[]{}\"'") for t in text.split(" ")]
        # "Renovate the kitchen": a first word followed by an article is a verb
        first = 1 if len(tokens) > 2 and tokens[1].casefold() in _ARTICLES else 0
        content = [
            (i, t) for i, t in enumerate(tokens)
            if i >= first and prompts.words(t) and not set(prompts.words(t)) <= (_STOP | _VERBS)
        ]
        if not content:
            continue
        proper = [t for i, t in content if i > 0 and t[:1].isupper()]
        picked = proper[-1] if proper else " ".join(t for _, t in content[-2:])
        return _fit(picked, TOPIC_MAX)
    return "the plan"


def _parent_facet(title: str) -> str:
    title = " ".join(str(title).split())
    return title.split(SEP, 1)[0].strip().casefold() if SEP in title else ""


def _facets_for(strategy: str, title: str, count: int) -> list[Facet]:
    key = " ".join(str(strategy).lower().split())
    parent = _parent_facet(title)
    if key in ("by day", "by time"):
        days = [f for f in DAY if f[0].casefold() != parent]
        chosen = days[: max(0, count - 1)]
        return chosen + ([DAY_LAST] if DAY_LAST[0].casefold() != parent else days[count - 1: count])
    pool = STRATEGY_FACETS.get(key, GENERIC)
    pool = [f for f in pool if f[0].casefold() != parent]
    start = _hash("facets", key, title) % len(pool)
    rotated = pool[start:] + pool[:start]
    return rotated[:count]


# How a subgoal that is itself a facet ("Budget and resources — bakery") splits: into the
# concrete steps of that facet's detail, so different branches never share a title (the
# checks drop repeats of another branch, as they should for a real model).
_FOLLOW_UP = "Confirm it with everyone involved"


def _facet_steps(facet: str) -> list[tuple[str, str]]:
    known = {f[0].casefold(): f for f in PLACE + ACTIVITY + DAY + [DAY_LAST] + PHASE + GENERIC}
    f = known.get(facet.casefold())
    if f is None:
        return [(f"Work out {facet.lower()}", facet), (f"Write up {facet.lower()}", facet), (_FOLLOW_UP, facet)]
    name, what, detail, _ = f
    steps = []
    for clause in detail.replace("; ", ", ").split(", "):
        clause = clause.strip().removeprefix("and ").strip()
        if len(clause.split()) >= 2 and not clause.casefold().startswith(("with ", "no ")):
            steps.append((clause[:1].upper() + clause[1:], f"{what}: {clause}"))
    if len(steps) < 3:
        steps.insert(0, (what, detail))
    if len(steps) < 3:
        steps.append((_FOLLOW_UP, detail))
    return steps


def _missing(ctx: Mapping[str, Any]) -> list[str]:
    """The work a scorer's feedback names as missing ("missing: a; b"), which a refinement
    takes up as subgoals of its own, as a sound model does."""
    out: list[str] = []
    for f in ctx.get("feedback") or ():
        for part in str(f).split("missing:")[1:]:
            out += [m.strip(" .") for m in part.split(";") if m.strip(" .")]
    return list(dict.fromkeys(out))


def _decompose(ctx: Mapping[str, Any]) -> dict:
    title = str(ctx.get("title", ""))
    facet = " ".join(title.split()).split(SEP, 1)[0].strip() if SEP in title else ""
    if facet:
        return _decompose_facet(ctx, facet)
    goal = str(ctx.get("goal", ""))
    strategy = str(ctx.get("strategy", ""))
    path = list(ctx.get("path") or [])
    max_children = max(2, int(ctx.get("max_children", 5)))
    refined = bool(ctx.get("previous")) or bool(ctx.get("feedback"))
    count = min(max_children, 3 + _hash("count", strategy, title) % 3)  # schema: at least 3
    if refined and count < max_children:
        count += 1  # a refinement covers one more facet
    topic = topic_of(title, goal)
    parent = _fit(title, 60) or "the task"
    deep = len(path) >= 2
    subgoals = []
    for name, what, detail, atomic in _facets_for(strategy, title, count):
        sub_title = _fit(f"{name}{SEP}{topic}", prompts.SCHEMA_TITLE_MAX)
        if refined:
            desc = f"{what}: {detail}."
            done = " Done when it is written into the plan."
            if len(desc) + len(done) <= prompts.SCHEMA_DESCRIPTION_MAX:
                desc += done
        else:
            desc = f"{what}, as part of: {parent}."
        subgoals.append({
            "title": sub_title,
            "description": _fit(desc, prompts.SCHEMA_DESCRIPTION_MAX),
            "after": [],
        })
    del deep
    for item in _missing(ctx):
        if len(subgoals) >= max_children:
            break
        if item.casefold() not in " ".join(s["title"] for s in subgoals).casefold():
            subgoals.append({"title": _fit(f"{item}{SEP}{topic}", prompts.SCHEMA_TITLE_MAX),
                             "description": _fit(f"{item}, as part of: {parent}.", prompts.SCHEMA_DESCRIPTION_MAX),
                             "after": []})
    if strategy in ("outline", "by phase") and len(subgoals) >= 3:
        subgoals[-1]["after"] = [1]  # the last step uses the first one's result
    return {"steps": subgoals}


def _decompose_facet(ctx: Mapping[str, Any], facet: str) -> dict:
    max_children = max(2, int(ctx.get("max_children", 5)))
    refined = bool(ctx.get("previous")) or bool(ctx.get("feedback"))
    subgoals = []
    for title, desc in _facet_steps(facet)[:max_children]:
        if refined:
            desc += ". Done when it is written into the plan"
        subgoals.append({"title": _fit(title, prompts.SCHEMA_TITLE_MAX),
                         "description": _fit(desc + ".", prompts.SCHEMA_DESCRIPTION_MAX), "after": []})
    return {"steps": subgoals}


def _atomic(ctx: Mapping[str, Any]) -> dict:
    """Facets marked atomic above, and anything two levels down, take one sitting."""
    title = str(ctx.get("title", ""))
    facet = _parent_facet(title)
    known = {f[0].casefold(): f[3] for f in PLACE + ACTIVITY + DAY + [DAY_LAST] + PHASE + GENERIC}
    one = known.get(facet, False) or len(list(ctx.get("path") or [])) >= 2
    steps = 1 + _hash("steps", title) % 3 if one else 4 + _hash("steps", title) % 5
    return {"steps": steps, "one_sitting": bool(one)}


def _synthesize(ctx: Mapping[str, Any]) -> dict:
    title = _fit(str(ctx.get("title", "")) or "the task", 100)
    children = [(str(t), str(r)) for t, r in (ctx.get("children") or [])][:12]
    parts = [t for t, _ in children]
    summary = _fit(f"The plan for {title} takes {len(parts)} steps in order: "
                   + "; ".join(_fit(p, 60) for p in parts) + ".", 590)
    return {"summary": summary}


def _jaccard(a: str, b: str) -> float:
    """Word overlap of two titles, ignoring stop words."""
    wa, wb = set(prompts.words(a)) - _STOP, set(prompts.words(b)) - _STOP
    return len(wa & wb) / len(wa | wb) if wa | wb else 1.0


def base_scores(subgoals: Sequence[Mapping[str, Any]]) -> dict[str, float]:
    """The scorer-independent part of a score, in [0, 1]."""
    titles = [str(s.get("title", "")) for s in subgoals]
    descs = [str(s.get("description", "")) for s in subgoals]
    n = len(subgoals)
    mean_len = sum(len(d) for d in descs) / n if n else 0.0
    refined = sum(len(d) >= 100 for d in descs) * 2 > n if n else False
    overlap = max((_jaccard(a, b) for a, b in itertools.combinations(titles, 2)), default=1.0)
    return {
        "specificity": min(1.0, 0.3 + 0.55 * min(1.0, mean_len / 140)),
        "non_overlap": max(0.0, min(1.0, 0.95 - 0.9 * overlap)),
        "coverage": min(1.0, 0.35 + 0.1 * min(n, 5) + (0.1 if refined else 0.0)),
    }


def _criteria(ctx: Mapping[str, Any]) -> dict:
    """A scorer's essential work for a node, as a sound model writes it: the node's own topic
    (which every scripted split names) and one facet drawn by a hash of (scorer, title), so
    splits that take it up rank first and scorers sometimes disagree; below a facet, that
    facet's own steps."""
    title = str(ctx.get("title", ""))
    scorer = str(ctx.get("scorer", ""))
    facet = " ".join(title.split()).split(SEP, 1)[0].strip() if SEP in title else ""
    if len(facet) >= 3:  # a facet of a dash alone (hypothesis: the title " — ") names no work
        steps = [_fit(t, 58) for t, _d in _facet_steps(facet)[:4]]
        return {"essential": (steps + [_fit(facet, 58)] * 4)[:4]}
    topic = topic_of(title, str(ctx.get("goal", "")))
    pool = [f[0] for f in GENERIC + PHASE if not chore_count([f[0]])]
    pick = pool[_hash("criteria", scorer, title) % len(pool)]
    return {"essential": [_fit(f"Book the {topic}", 58), _fit(f"Pay for the {topic}", 58),
                          _fit(f"Finish the {topic}", 58), _fit(pick, 58)]}


_DAYS = ("3", "5", "8", "10", "12", "14")


def _execute(ctx: Mapping[str, Any]) -> dict:
    title = _fit(str(ctx.get("title", "")) or "the task", 100)
    brief = ctx.get("brief") or {}
    currency = str(brief.get("currency") or "EUR")
    months = [m for m in ("January February March April May June July August September October "
                          "November December").split() if m in str(brief.get("dates", ""))]
    month = months[0] if months else ""
    from agent.core.facts import date_range

    span = date_range(str(ctx.get("window") or "")) or date_range(str(brief.get("dates", "")))
    h = _hash("execute", title, ctx.get("previous") or "")
    topic = topic_of(title, str(ctx.get("goal", "")))
    actions = []
    for i, (verb, what, detail) in enumerate((
            ("Reserve", "the first option", "Hold {n} places at the desk until the deposit is paid"),
            ("Pay", "the deposit", "Pay by card at the desk and keep the receipt for the records"),
            ("Confirm", "the booking reference", "Write the reference down and send it to everyone in the brief"))):
        # a model that keeps to the share of the budget its prompt names (two costs within it)
        top = max(20, min(400, int(ctx.get("budget_share") or 0) // 2 - 20)) if ctx.get("budget_share") else 400
        cost = f"{(h >> (4 * i)) % top + 20} {currency}" if i < 2 else ""
        if span is not None:  # a day of this step's part of the schedule, as the prompt asks
            import datetime as _dt

            days = (span[1] - span[0]).days + 1
            when = (span[0] + _dt.timedelta(days=(h >> (8 + 4 * i)) % days)).isoformat()
        else:
            when = f"{_DAYS[(h >> (8 + 4 * i)) % len(_DAYS)]} {month}".strip() if month else ""
        step = _fit(title.split(SEP)[0].strip().lower(), 50)
        actions.append({"do": _fit(f"{verb} {what} for {step} in {topic} with the {topic.title()} Service Desk", 140),
                        "detail": detail.format(n=2 + (h >> (12 + 4 * i)) % 3), "cost": cost, "when": when})
    return {"actions": actions}


def _single_plan(ctx: Mapping[str, Any], sections: int = 4) -> str:
    """What one direct call of a model writes for a whole goal: sections and steps."""
    goal = str(ctx.get("goal", "")) or "the goal"
    topic = topic_of(goal)
    lines = [f"Here is a plan for {goal}:", ""]
    for i, (name, what, detail, _a) in enumerate(PHASE[: max(2, sections)], 1):
        lines.append(f"Section {i}: {name}{SEP}{topic}")
        for j, clause in enumerate(detail.split(", ")[:3], 1):
            lines.append(f"{j}. {clause[:1].upper() + clause[1:]} for {topic}.")
        lines.append("")
    return "\n".join(lines).strip()


def _outline_plan(ctx: Mapping[str, Any]) -> str:
    """A decomposer's draft of the whole plan as text: sections from its strategy's facets
    (as ``_decompose`` picks them), each with the facet's concrete steps; a refinement takes
    up one more facet."""
    title = str(ctx.get("title", "")) or str(ctx.get("goal", ""))
    strategy = str(ctx.get("strategy", ""))
    max_children = max(2, int(ctx.get("max_children") or 4))
    refined = bool(ctx.get("previous")) or bool(ctx.get("feedback"))
    count = min(max_children, 3 + _hash("count", strategy, title) % 3 + (1 if refined else 0))
    topic = topic_of(title, str(ctx.get("goal", "")))
    lines = [f"Here is a plan for {title}:", ""]
    facets = _facets_for(strategy, title, count)
    names = " ".join(f[0] for f in facets).casefold()
    facets += [(m, m, f"Get {m.lower()} done", True) for m in _missing(ctx) if m.casefold() not in names]
    for i, (name, what, detail, _a) in enumerate(facets[:max_children], 1):
        lines.append(f"Section {i}: {name}{SEP}{topic}")
        for j, clause in enumerate(detail.replace("; ", ", ").split(", ")[:3], 1):
            lines.append(f"{j}. {clause[:1].upper() + clause[1:]}.")
        lines.append("")
    return "\n".join(lines).strip()


def _brief(ctx: Mapping[str, Any]) -> dict:
    goal = str(ctx.get("goal", ""))
    about = str(ctx.get("about", ""))
    text = f"{goal} {about}".casefold()
    duration = ("14 days" if "two-week" in text or "two week" in text or "2-week" in text
                else "7 days" if "week" in text else "2 days" if "weekend" in text else "4 weeks")
    today = str(ctx.get("today") or "2027-01-01")
    year, month = (int(today[:4]), int(today[5:7])) if len(today) >= 7 and today[:4].isdigit() else (2027, 1)
    month = month % 12 + 2 if month <= 10 else month - 10
    year += 1 if month <= 2 else 0
    names = ("January February March April May June July August September October November "
             "December").split()
    said = [n for n in names if n.casefold() in text.split() or n.casefold() + "," in text.split()]
    name = said[0] if said else names[month - 1]
    proper = [w.strip(".,") for w in goal.split()[1:] if w[:1].isupper()]
    return {"duration": duration, "dates": f"1 {name} {year} to 28 {name} {year}",
            "budget": "3000 EUR in total", "currency": "EUR",
            "place": _fit(" and ".join(proper) if proper else "at home", 110),
            "people": "2 people", "constraints": "no more than the budget",
            "done": _fit(f"{goal} is done as planned", 150)}


def _review(ctx: Mapping[str, Any]) -> dict:
    result = str(ctx.get("result", ""))
    problems = []
    for marker in ("I ", "We ", "[", "Done:"):
        at = result.find(marker)
        if at >= 0:
            problems.append({"quote": _fit(result[at:at + 30], 78), "why": "not plan content"})
            break
    return {"problems": problems, "accept": not problems}


def scripted_answer(req: LLMRequest) -> dict:
    """The deterministic answer to ``req`` (valid as ``req.answer``)."""
    ctx = req.context or {}
    if req.free_text:
        if ctx.get("outline"):
            return {"text": _outline_plan(ctx)}
        return {"text": _single_plan(ctx, int(ctx.get("max_children") or 4))}
    if req.kind == "brief":
        return _brief(ctx)
    if req.kind == "decompose":
        return _decompose(ctx)
    if req.kind == "rank":
        return _criteria(ctx)
    if req.kind == "review":
        return _review(ctx)
    if req.kind == "execute":
        return _execute(ctx)
    if req.kind == "atomic":
        return _atomic(ctx)
    if req.kind == "synthesize":
        return _synthesize(ctx)
    raise ValueError(f"unknown request kind {req.kind!r}")


class ScriptedLLM(LLM):
    """Answers with ``scripted_answer`` after ``latency`` seconds. A test double."""

    backend = "scripted"
    model = "scripted"

    def __init__(self, latency: float = 0.0) -> None:
        self.latency = latency
        self.calls = 0

    async def complete(self, req: LLMRequest) -> Answer:
        self.calls += 1
        if self.latency > 0:
            await trio.sleep(self.latency)
        else:
            await trio.lowlevel.checkpoint()
        value = scripted_answer(req) if req.free_text else checked(scripted_answer(req), req.answer)
        # a deterministic estimate: the same request always costs the same
        return Answer(value, estimate_tokens(req.system + "\n" + req.prompt),
                      estimate_tokens(json.dumps(value, separators=(",", ":"))))
