"""A scripted LLM: a deterministic TEST DOUBLE for protocol tests, simulations and benchmarks.

It is never a product default. ``scripted_answer`` reads only ``req.context`` (the keyword
arguments given to the ``*_request`` builders in ``prompts``) and returns an answer valid
against ``req.schema``; the same context always gives the same answer, in any process.

- decompose: 3..5 (at most max_children) subgoals drawn from a facet list chosen by the
  strategy ("by place", "by activity", "by day", "by phase", anything else: a generic list
  rotated by the strategy's hash), titled "<facet> — <topic>" where the topic comes from the
  parent title. Facet names share no words, so a word-overlap check sees distinct subgoals.
  A refinement (context has previous or feedback) keeps the facets, makes every description
  specific ("... Done when ...") and adds a facet if there is room, so it scores higher.
- score: specificity from description lengths, non_overlap from title word overlap, coverage
  from the count and whether most descriptions are detailed (>= 100 chars), each moved
  by up to ±0.15 by a hash of (scorer, titles), so
  scorers sometimes disagree about competing splits. Feedback names the weakest point.
- execute: a few deterministic lines about the task.
"""

from __future__ import annotations

import hashlib
import itertools
from typing import Any, Mapping, Sequence

import trio

from agent.llm import prompts
import json

from agent.llm.base import LLM, Answer, LLMRequest, estimate_tokens, validate

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
        })
    del deep
    return {"subgoals": subgoals}


def _decompose_facet(ctx: Mapping[str, Any], facet: str) -> dict:
    max_children = max(2, int(ctx.get("max_children", 5)))
    refined = bool(ctx.get("previous")) or bool(ctx.get("feedback"))
    subgoals = []
    for title, desc in _facet_steps(facet)[:max_children]:
        if refined:
            desc += ". Done when it is written into the plan"
        subgoals.append({"title": _fit(title, prompts.SCHEMA_TITLE_MAX),
                         "description": _fit(desc + ".", prompts.SCHEMA_DESCRIPTION_MAX)})
    return {"subgoals": subgoals}


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
    parts = [str(t) for t, _ in (ctx.get("children") or [])]
    lines = [f"Plan for {title}: {len(parts)} parts, done in this order."]
    lines += [f"{i}. {_fit(p, 80)}." for i, p in enumerate(parts[:8], 1)]
    return {"answer": "\n".join(lines)[: prompts.SCHEMA_ANSWER_MAX]}


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


def _score(ctx: Mapping[str, Any]) -> dict:
    subgoals = [s for s in (ctx.get("subgoals") or []) if isinstance(s, Mapping)]
    scorer = str(ctx.get("scorer", ""))
    titles = [str(s.get("title", "")) for s in subgoals]
    base = base_scores(subgoals)
    values: dict[str, float] = {}
    for key in prompts.SCORE_KEYS:
        jitter = (_unit("score", scorer, key, *titles) - 0.5) * 0.3  # ±0.15
        values[key] = min(1.0, max(0.0, base[key] + jitter))
    answer: dict[str, Any] = {
        k: int(round(v * prompts.RATING_MAX)) for k, v in values.items()
    }
    answer["feedback"] = _fit(_feedback(ctx, subgoals, values), prompts.SCHEMA_FEEDBACK_MAX)
    return answer


def _feedback(ctx: Mapping[str, Any], subgoals: list[Mapping[str, Any]],
              values: Mapping[str, float]) -> str:
    weakest = min(prompts.SCORE_KEYS, key=lambda k: (values[k], k))
    if not subgoals:
        return "There are no subgoals; split the task into at least two concrete parts."
    if weakest == "specificity":
        vague = min(subgoals, key=lambda s: (len(str(s.get("description", ""))),
                                             str(s.get("title", ""))))
        return (f"'{_fit(str(vague.get('title', '')), 50)}' is vague: say exactly what it "
                "involves and when it is done.")
    if weakest == "non_overlap" and len(subgoals) >= 2:
        a, b = max(itertools.combinations(subgoals, 2),
                   key=lambda p: (_jaccard(str(p[0].get("title", "")),
                                           str(p[1].get("title", ""))),
                                  str(p[0].get("title", "")), str(p[1].get("title", ""))))
        return (f"'{_fit(str(a.get('title', '')), 45)}' and '{_fit(str(b.get('title', '')), 45)}'"
                " overlap: give each a separate scope.")
    present = " ".join(str(s.get("title", "")) for s in subgoals).casefold()
    missing = next((f[0] for f in GENERIC if f[0].casefold() not in present), GENERIC[0][0])
    return (f"The split misses part of '{_fit(str(ctx.get('title', '')), 50)}': "
            f"add a subgoal for {missing.lower()}.")


_OUTCOMES = ["the cheapest option that fits the dates", "the option with the best reviews",
             "the quickest option", "the option closest to the other stops"]


def _execute(ctx: Mapping[str, Any]) -> dict:
    title = _fit(str(ctx.get("title", "")) or "the task", 100)
    h = _hash("execute", title)
    options = 2 + h % 3
    outcome = _OUTCOMES[(h >> 8) % len(_OUTCOMES)]
    hours = 1 + (h >> 16) % 6
    lines = [
        f"Done: {title}.",
        f"- Compared {options} options; chose {outcome}.",
        f"- Time needed: about {hours} hour{'s' if hours > 1 else ''}.",
        "- Next: confirm it and note the reference in the plan.",
    ]
    return {"result": "\n".join(lines)[: prompts.SCHEMA_RESULT_MAX]}


def scripted_answer(req: LLMRequest) -> dict:
    """The deterministic answer to ``req`` (valid against ``req.schema``)."""
    ctx = req.context or {}
    if req.kind == "decompose":
        return _decompose(ctx)
    if req.kind == "score":
        return _score(ctx)
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
        value = validate(scripted_answer(req), req.schema)
        # a deterministic estimate: the same request always costs the same
        return Answer(value, estimate_tokens(req.system + "\n" + req.prompt),
                      estimate_tokens(json.dumps(value, separators=(",", ":"))))
