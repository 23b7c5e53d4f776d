"""Deterministic checks of a proposed split and of a task result, combined with an LLM's
judgment into a vote.

The checks catch what small models get wrong most often (measured, see docs/quality.md): a
subgoal that restates its parent or the goal, subgoals that restate each other ("go to Tokyo"
/ "visit Tokyo"), the same subgoal in another branch of the plan, template placeholders
("[city]"), titles that are not words, and results that are digit runs, templates or another
language. Words are compared after normalising and stemming (agent.core.text).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field, replace
from typing import Sequence

from agent.core import text as tx

VAGUE = tx.VAGUE
NEAR_DUP = tx.NEAR_DUPLICATE
APPROVE_THRESHOLD = 0.5


def words(text: str) -> frozenset[str]:
    """Normalised, stemmed meaning words of ``text``."""
    return tx.content_stems(text)


jaccard = tx.jaccard


@dataclass(frozen=True)
class Checks:
    n: int
    duplicates: int  # subgoals that duplicate or nearly duplicate an earlier one
    repeats_parent: int  # subgoals that restate the parent or another ancestor
    vague: int  # vague, placeholder or mostly non-word titles
    notes: tuple[str, ...] = field(default_factory=tuple)
    cross: int = 0  # subgoals that repeat a title in another branch (soft: feedback, score)
    coverage: float = 1.0  # share of the parent's meaning words the split mentions
    broken: int = 0  # titles with a placeholder or mostly not words (counted in vague too)

    @property
    def hard_fail(self) -> bool:
        # any restated parent, duplicate, placeholder or non-word title fails the split
        return (self.n < 2 or bool(self.duplicates or self.repeats_parent or self.broken)
                or 2 * self.vague >= self.n)

    @property
    def clean(self) -> bool:
        return not (self.duplicates or self.repeats_parent or self.vague or self.cross)


_MONTH = (r"(?:jan(?:uary)?|feb(?:ruary)?|mar(?:ch)?|apr(?:il)?|may|june?|july?|aug(?:ust)?|sep(?:t|tember)?|"
          r"oct(?:ober)?|nov(?:ember)?|dec(?:ember)?)")
_ONLY_A_TIME = re.compile(
    rf"^(?:(?:the )?\d{{1,2}}(?:st|nd|rd|th)?(?: of)? {_MONTH}(?:,? \d{{4}})?|{_MONTH} \d{{1,2}}(?:st|nd|rd|th)?(?:,? \d{{4}})?|"
    rf"{_MONTH}(?: \d{{4}})?|\d{{4}}-\d{{2}}-\d{{2}}|(?:week|day|month|phase|stage|step) \d+)[.:]?$",
    re.IGNORECASE)


def title_problem(title: str, ancestors: Sequence[str] = ()) -> str | None:
    """Why one subgoal title is unusable on its own, or None."""
    t = title.strip()
    if tx.placeholders(t):
        return f"'{t[:40]}' has a placeholder ({tx.placeholders(t)[0]})"
    ws = words(t)
    if not ws or ws <= VAGUE or len(t) < 3 or tx.mostly_nonwords(t):
        return f"'{t[:40]}' is vague or not words"
    if _ONLY_A_TIME.match(t):
        # Dublin, 2026-12-05: "16th December 2026", "1st January 2027" won as steps, naming no work
        return f"'{t[:40]}' names a time, not the work done in it"
    for a in ancestors:
        if a and tx.repeats(t, a):
            return f"'{t[:40]}' only repeats '{a[:40]}'"
    return None


def check_split(parent_title: str, subgoal_titles: Sequence[str], *,
                ancestors: Sequence[str] = (), elsewhere: Sequence[str] = (),
                descriptions: Sequence[str] = ()) -> Checks:
    """``ancestors``: titles above the parent (the goal first); ``elsewhere``: titles in other
    branches of the plan (siblings and cousins of the parent, their subgoals)."""
    dup = rep = vague = broken = 0
    notes: list[str] = []
    above = [parent_title, *ancestors]
    for i, title in enumerate(subgoal_titles):
        problem = title_problem(title, ())
        if problem:
            vague += 1
            broken += bool(tx.placeholders(title) or tx.mostly_nonwords(title))
            notes.append(problem)
        if any(a and tx.repeats(title, a) for a in above):
            rep += 1
            notes.append(f"'{title[:40]}' only repeats the parent task")
        if any(tx.near_duplicate(title, s) for s in subgoal_titles[:i]):
            dup += 1
            notes.append(f"'{title[:40]}' overlaps another subgoal")
    crossed = tx.cross_overlaps(subgoal_titles, elsewhere)
    for t, other in crossed[:3]:
        notes.append(f"'{t[:40]}' repeats '{other[:40]}' from another part of the plan")
    parent = words(parent_title)
    said = frozenset().union(*(words(t) for t in [*subgoal_titles, *descriptions])) if subgoal_titles else frozenset()
    coverage = len(parent & said) / len(parent) if parent else 1.0
    return Checks(len(subgoal_titles), dup, rep, vague, tuple(notes), len(crossed),
                  round(coverage, 3), broken)


def cross_branch_feedback(subgoal_titles: Sequence[str], elsewhere: Sequence[str]) -> list[str]:
    """Feedback lines for scorers: subgoals that repeat work elsewhere in the plan."""
    return [f"'{t[:50]}' repeats '{o[:50]}' from another part of the plan; give it a distinct scope"
            for t, o in tx.cross_overlaps(subgoal_titles, elsewhere)]


@dataclass(frozen=True)
class Verdict:
    specificity: float
    non_overlap: float
    coverage: float
    feedback: str
    hard_fail: bool
    rank: int | None = None  # its place among the node's splits judged side by side
    missing: str = ""  # essential work the split leaves out
    incomplete: bool = False  # does less than MIN_COVERAGE of the essential work

    @property
    def overall(self) -> float:
        return (self.specificity + self.non_overlap + self.coverage) / 3

    @property
    def acceptable(self) -> bool:
        return not self.hard_fail and not self.incomplete and self.overall >= APPROVE_THRESHOLD

    @property
    def usable(self) -> bool:
        """Not acceptable perhaps, but no check failed it: the best of these is voted once
        the refinements had their rounds (a plan is better than a goal done as one step)."""
        return not self.hard_fail

    def with_rank(self, rank: int) -> "Verdict":
        return replace(self, rank=rank)

    def with_feedback(self, feedback: str) -> "Verdict":
        return replace(self, feedback=feedback)


# Titles that name work about the work instead of the work itself ("Identify and prioritize
# tasks", "Research options"): a split made of them gets nothing done.
CHORE = re.compile(
    r"^(?:identify|prioriti[sz]e|brainstorm|gather|assess|evaluate|analy[sz]e|review|define|outline|"
    r"determine|consider|list|look into|think about|figure out|learn about|"
    # "Reflect and Learn", "Reflect on the Experience": the last of four steps of a WorFBench
    # how-to's winning split (2026-12-07), whose steps never made the chocolate eggs
    r"reflect(?:ions?|ing|s)?\b(?!\s+pools?)|"
    r"research (?:the )?(?:options|information|ideas|requirements|needs|tasks|possibilities)|"
    r"(?:create|make|write|draft) an? (?:plan|list|checklist|outline|timeline|strategy|roadmap)|"
    r"set (?:goals|objectives|priorities)|gather information|"
    # the section titles of a drafted plan ("Researching Japan", "Planning Phase", "Initial
    # Planning and Budget Review", "Finalizing the Plan"): measured on the 1.5B model
    r"research(?:ing)?|finali[sz](?:e|ing)(?: the plan)?|"
    r"plan(?:ning)? (?:phase|stage)|preparation and (?:research|planning)|"
    # money and people about the work ("Prepare the Budget", "Assign Tasks": Cardiff, measured)
    r"(?:prepar|set|creat|mak|build|establish|plan)\w* (?:the |a )?budget|budgeting$|"
    r"assign\w* (?:the )?(?:tasks|roles|responsibilities))\b",
    re.IGNORECASE,
)


# Words of a project's phases, not of any goal's work: a title made of them alone names no
# work ("Execution", "Reflection and Adjustments", "Monitoring and Control", "Next Steps").
# Measured: Japan, 2026-12-06, the winning split was "Planning and Research, Execution,
# Reflection and Adjustments, Follow-up" (one chore of four by the pattern above), over
# "Planning the Budget, Planning Accommodation, Planning Transportation, ..." (five of five).
_PHASE_WORDS = frozenset(
    "execution execute executing implementation implement implementing reflection reflect reflecting "
    "adjustment adjustments adjusting evaluation evaluate review reviewing monitoring monitor control "
    "controlling closure closing close initiation initiating follow followup up feedback preparation "
    "preparations preparing prepare planning plan research researching wrap assessment analysis "
    "improvement improvements optimization optimisation refinement refinements completion conclusion "
    "kickoff kick off next steps step overview introduction summary final initial post pre action "
    "actions tasks task general phase stage process finalization finalisation finalizing finalising "
    "finalize finalise".split())
_FILLER = frozenset("and the of a an your our for to january february march april may june july august "
                    "september october november december day days week weeks month months year years".split())
# "Planning Accommodation" is the accommodation; "Planning", "Initial Planning" and "Planning
# and Research" are about the work
_PLANNING = re.compile(r"^(?:initial |final |pre-?trip |trip |travel |event )?plan(?:ning)?\b\s*(.*)$",
                       re.IGNORECASE)


def phase_only(title: str) -> bool:
    ws = [w for w in re.findall(r"[a-z]+", title.casefold()) if w not in _FILLER]
    return bool(ws) and all(w in _PHASE_WORDS for w in ws)


def is_chore(title: str) -> bool:
    """Whether a step's title names work about the work (or a project phase) rather than work."""
    t = title.strip()
    if CHORE.match(t) or phase_only(t):
        return True
    m = _PLANNING.match(t)
    if m is None:
        return False
    rest = re.sub(r"^(?:the|your|our|a|an)\s+", "", m.group(1).strip(), flags=re.IGNORECASE)
    # "Plan Chores" (a WorFBench how-to's winning split, 2026-12-07); "Garden chores" is work
    return not rest or phase_only(rest) or rest.casefold() in ("chore", "chores") or bool(CHORE.match(rest))


def chore_count(titles: Sequence[str]) -> int:
    return sum(1 for t in titles if is_chore(t))


# A span of the calendar in a title ("(Weeks 3-7)", "Months 2 to 4"): a phase, not a step
_SPAN = re.compile(r"\(?\b(?:weeks?|months?|days?|phases?|stages?)\s*\d+\s*(?:-|–|to|and|through)\s*\d+\s*\)?",
                   re.IGNORECASE)
# Words that name no work of their own: running a project in general, its "activities"
_UMBRELLA_WORDS = frozenset(
    "organize organise organizes organises organizing organising organization organisation run runs running "
    "manage managing management conduct conducting coordinate coordinating coordination handle handling "
    "carry carrying out activities activity things everything details overall operations operation event "
    "events it all".split())


# "Move Day", "Moving Day": the day the goal's own work is done, which is that work (the
# move's winning split, 2026-12-07, counted its "Move Day" as naming no work, 2 of 5 steps,
# and lost to "Prepare Documents and Files; Prepare Move List; Check In at New Flat")
_DAY_OF = re.compile(r"\b([a-z]+)[- ]day\b", re.IGNORECASE)


def _work_day(title: str) -> bool:
    m = _DAY_OF.search(title)
    if m is None or not tx.content_stems(m.group(1)) or re.search(r"\b(?:pre-|post-|before|for|after)", title, re.I):
        return False
    # "Move Day Planning", "Moving Day Preparations": the getting ready, named by a phase
    rest = {w for w in re.findall(r"[a-z]+", title.casefold())} - {m.group(1).casefold(), "day"}
    return m.group(1).casefold() not in _PHASE_WORDS | _UMBRELLA_WORDS | _FILLER and not rest & _PHASE_WORDS


def umbrella(title: str, parent: str) -> bool:
    """A step that names no work but the goal's own, over a span of its calendar or as "running"
    it ("Organizing and Running the Conference (Weeks 3-7)", "Post-Event Activities (Weeks
    8-10)"): measured, Warsaw 2026-12-06, such a split of three phases won over two that named
    the venue, the catering and the promotion, because a step about everything seems to cover
    every criterion. Holding the event on its day (``EVENT_DAY``) is work, when no span says
    it lasts for weeks."""
    if (EVENT_DAY.search(title) or _work_day(title)) and not _SPAN.search(title):
        return False
    ws = [w for w in re.findall(r"[a-z]+", _SPAN.sub(" ", title).casefold())
          if w not in _FILLER and w not in _PHASE_WORDS and w not in _UMBRELLA_WORDS]
    return not (tx.content_stems(" ".join(ws)) - tx.content_stems(parent))


def umbrella_count(titles: Sequence[str], parent: str) -> int:
    """Steps that name no work (``umbrella``) and are not already counted as chores."""
    return sum(1 for t in titles if not is_chore(t) and umbrella(t, parent))


# Steps after the work is done. One is part of a plan. More is a plan of its aftermath: the
# Glasgow book fair's winning split was "Author Outreach, Event Execution, Post-event
# Follow-Up, Final Assessment and Reporting", with no venue and no promotion (measured, 2026-12-05;
# a blind reader gave its coverage 1 of 5).
WRAP_UP = re.compile(
    r"\b(?:post[- ]?(?:event|party|race|fair|trip|workshop|project|launch)|follow[- ]?ups?|wrap[- ]?up|"
    r"debrief\w*|lessons learned|(?:final )?(?:assessment|evaluation|reporting|report|documentation)|"
    r"finali[sz](?:e|ing) and document|feedback|close[- ]?out|aftermath|thank[- ]?you|thank(?:s|ing)?|"
    # "Summarize the Sale; Thank the Staff" after the sale (garage sale, make demo 2026-12-07);
    # a summary that is the work ("Write a Summary" of a book) is not
    r"summar(?:y|i[sz]e|i[sz]ing)\s+(?:of\s+)?(?:the\s+)?(?:sale|event|day|results?|takings|earnings|trip|party))\b",
    re.IGNORECASE,
)


def wrap_up_extra(titles: Sequence[str]) -> int:
    """Steps after the work beyond the first, leaving out those already counted as chores."""
    after = [t for t in titles if WRAP_UP.search(t)]
    not_chores = [t for t in after if not is_chore(t)]
    return min(len(not_chores), max(0, len(after) - 1))


# Verbs that say how work is done, not which work: "Book a hotel" is covered by a step about
# the hotel, whatever its verb ("Stay at a ryokan hotel in Kyoto").
_WORK_VERBS = frozenset(tx.stem(w) for w in (
    "book buy purchase reserve choose select find research check apply obtain hire contact "
    "schedule install build arrange pay order write learn sign register confirm secure complete "
    "finish try explore enjoy attend fit connect").split())
MIN_COVERAGE = 0.5  # a split that does less than half the essential work is sent back for more
FULL_SPLIT = 5  # subgoals at which a split counts as fully detailed


def essential_stems(item: str) -> frozenset[str]:
    """The words of an essential piece of work that name the work itself."""
    ws = tx.content_stems(item)
    return (ws - _WORK_VERBS) or ws


def named_places(text: str) -> list[str]:
    """The places a text names (the gazetteer's cities and countries)."""
    from agent.core.places import candidate_names, gazetteer

    gz = gazetteer()
    return [n for n in dict.fromkeys(candidate_names(text)) if gz.lookup(n)]


def covers(item: str, said: frozenset[str], known: frozenset[str] = frozenset()) -> bool:
    """Whether a split that says ``said`` (its stems) takes up ``item``: half of the item's
    naming words, at least one. Words of ``known`` (the places of the node and the nodes above
    it, which every split of it names) say nothing the split adds: "Flights to Japan" was
    covered by "Arrival in Japan; Exploring Tokyo; ..." through "Japan" alone (make demo
    2026-12-07, no flight in the plan). Only places: "Party food" is still covered by "Party
    catering", the goal's other words being how a split says its own work."""
    need = essential_stems(item)
    need = (need - known) or need
    return not need or len(need & said) >= (len(need) + 1) // 2


# A step that is the event itself: a plan to organise a bake sale must hold it (Cardiff,
# 2026-12-05: the winning split was "Set the Date and Venue, Organise a Team, Prepare the
# Budget, Create a Menu, Plan the Decorations, Assign Tasks", and no step sold a cake).
EVENT_DAY = re.compile(
    r"\b(?:on the day|(?:event|race|sale|party|fair|show|festival|wedding|match|game|conference|workshop|"
    r"launch|market|clean-?up|quiz)[- ]day|day of the|(?:the|big) day|execution|executing|running|run the|"
    r"hold(?:ing)? the|host(?:ing)? the|deliver(?:ing|y)?|opening|go[- ]live)\b",
    re.IGNORECASE,
)
EVENT_ITSELF = "the event itself, on its day"


TRIP_ITSELF = "the days of the trip itself, where it goes and what is done there"
TRIP_DAYS = "the days of the trip in two or more steps of their own, where it goes and what is done there"
# a step of a journey that is not on the trip: getting ready for it, or after it
_OFF_THE_TRIP = re.compile(r"\b(?:prepar\w*|document\w*|insurance|budget\w*|purchas\w*|buy\w*|research\w*|plan\w*|"
                           r"objectives?|book\w*|reserv\w*|visas?|pack\w*|return\w*|post-trip|after the trip|"
                           r"reflect\w*|follow[- ]?up)\b", re.IGNORECASE)
LONG_TRIP_DAYS = 7


def one_step_for_the_trip(goal: str, titles: Sequence[str], days: int | None) -> bool:
    """Whether a split of a journey of a week or more gives the trip itself at most one step,
    the rest being getting ready and coming back (Japan, make demo 2026-12-07: "Define
    Objectives; Research and Planning; Purchase Necessary Items; Travel Preparation; Travel
    Documentation; Travel Execution" won over "Booking and Arriving in Japan; Exploring Tokyo;
    Exploring Kyoto; Planning for the Return; Post-Trip", and the fortnight was one step)."""
    from agent.core.facts import journey

    if not journey(goal) or (days or 0) < LONG_TRIP_DAYS or len(titles) < 3:
        return False
    return sum(1 for t in titles if not _OFF_THE_TRIP.search(t)) < 2


def misses_the_trip(goal: str, titles: Sequence[str]) -> bool:
    """Whether a split of a journey is all getting ready (research, booking, packing:
    ``facts.DEPARTURE_PREP``) with no step on the trip itself (Japan, make demo 2026-12-06:
    "Research Japan, Choose a Travel Agency, Schedule Your Trip, Plan Accommodation, Book Your
    Accommodation, Plan Transportation" won, and the plan went nowhere)."""
    from agent.core.facts import DEPARTURE_PREP, journey

    return journey(goal) and bool(titles) and all(DEPARTURE_PREP.search(t.strip()) for t in titles)


SET_OFF_READY = "getting there and the stay booked before setting off (flights or trains, rooms, documents)"
# what a journey's first step names when it gets there too ("Arrival and Check-in :: Book
# Flights: Book your flights to Tokyo ...")
_GETTING_THERE = re.compile(r"\b(?:book\w*|reserv\w*|arrang\w*|secur\w*|flights?|fly|plane|airfare|tickets?|visas?|"
                            r"passports?|insurance|(?:rail|jr) pass)\b", re.IGNORECASE)
# ... or goes there: to the goal's places, not a ride within them ("Take the train to the
# Ropeway" in Tokyo counted as the way to Japan: make demo 2026-12-07, no flight in the plan)
_GOES_TO = r"\b(?:trains?|ferry|drive|travel\w*|journey|coach|bus|get(?:ting)?) to"
# a goal where someone goes away, not a visit hosted or a product tour
_GOING_AWAY = re.compile(r"\b(?:trip|travel\w*|holiday|vacation|journey|getaway|honeymoon|backpack\w*|"
                         r"(?:tour|visit) (?:of|to)|road ?trip)\b", re.IGNORECASE)


def nothing_before_setting_off(goal: str, titles: Sequence[str], descriptions: Sequence[str] = (),
                               days: int | None = None) -> bool:
    """Whether a split of a journey is all on the trip, from its arrival on: no step books the
    way there or the stay, and its first step does not either (Japan, make demo 2026-12-07:
    "Arrival in Japan; Traveling to Tokyo; Exploring the Tokyo Area; Traveling to Kyoto;
    Exploring the Kyoto Area" won, and the plan had no flight and two hotels for the whole
    fortnight). Only for a stay of two days or more (``days``, the brief's): a day out needs
    no room booked."""
    from agent.core.facts import DEPARTURE_PREP, journey

    if not journey(goal) or not _GOING_AWAY.search(goal) or (days or 0) < 2 or len(titles) < 2 \
            or any(DEPARTURE_PREP.search(t.strip()) for t in titles):
        return False
    places = named_places(goal)
    goes_there = re.compile(_GOES_TO + (rf"\s+(?:the\s+)?(?:{'|'.join(map(re.escape, places))})\b" if places else r"\b"),
                            re.IGNORECASE)
    # any step that gets there ("Learn Basic Japanese; Fly London to Tokyo; ...")
    return not any(_GETTING_THERE.search(f"{t} {d}") or goes_there.search(f"{t} {d}")
                   for t, d in zip(titles, list(descriptions) + [""] * len(titles)))


# "Day 3", "Days 4-6", "Day 10 to 12" in a step's title
# "Day 3", "Days 4-6", "Day 10 to Day 12", "Days 1, 2 and 3"; not "4 days 3 nights" (a count)
_DAY_STEP = re.compile(r"(?<!\d)(?<!\d\s)\bdays?\s+(\d{1,3})((?:\s*(?:-|–|—|to|through|,|and|&)\s*(?:days?\s+)?\d{1,3})*)"
                       r"(?!\s*nights?\b)(?!\d)", re.IGNORECASE)
_DAY_MORE = re.compile(r"(-|–|—|to|through|,|and|&)\s*(?:days?\s+)?(\d{1,3})", re.IGNORECASE)
# the steps of a journey around its days: getting there, staying, getting about, its money
_TRIP_LOGISTICS = re.compile(
    r"^(?:travel|transport\w*|transfers?|accommodation|lodging|hotels?|stays?|getting (?:there|around|about)|"
    r"logistics|budget\w*|money|packing|insurance|visas?|flights?|(?:rail|train|jr) pass\w*)\b", re.IGNORECASE)


def _day_numbers(text: str, days: int) -> set[int]:
    out: set[int] = set()
    for m in _DAY_STEP.finditer(text):
        last = int(m.group(1))
        got = {last}
        for sep, n in _DAY_MORE.findall(m.group(2) or ""):
            n = int(n)
            if sep.lower() in ("-", "–", "—", "to", "through") and last < n:
                got.update(range(last + 1, n + 1))
            got.add(n)
            last = n
        out |= {d for d in got if 1 <= d <= 2 * days}
    return out


def days_left_out(goal: str, titles: Sequence[str], days: int | None,
                  descriptions: Sequence[str] = ()) -> str | None:
    """The days of a journey that a split by days leaves without a step: Japan, make demo
    2026-12-07, "Travel; Accommodation; Day 1: Tokyo; Day 2: Ueno Park; Day 3: Kyoto" won for
    a two-week trip, and eleven of its fourteen days had no plan. A split by days is one whose
    every step is a numbered day or span of days, or the trip's logistics (getting there,
    staying, packing: ``_TRIP_LOGISTICS``, ``facts.DEPARTURE_PREP``); a step named for a place
    ("Osaka and Nara") covers days of its own, so such a split is not read. None when the split
    does not go by numbered days, or names them all (in its titles or descriptions)."""
    from agent.core.facts import DEPARTURE_PREP, journey

    if not days or days < 2 or not journey(goal):
        return None
    named: set[int] = set()
    by_day = 0
    for t in titles:
        mine = _day_numbers(t, days)
        if mine:
            by_day += 1
            named |= mine
        elif not (_TRIP_LOGISTICS.match(t.strip()) or DEPARTURE_PREP.match(t.strip())):
            return None
    if not by_day:
        return None
    for d in descriptions:
        named |= _day_numbers(d, days)
    missing = [d for d in range(1, days + 1) if d not in named]
    if not missing:
        return None
    first, last = missing[0], missing[-1]
    which = f"day {first}" if first == last else f"days {first}-{last}" if last - first + 1 == len(missing) \
        else f"{len(missing)} of its days ({first}-{last})"
    return f"{which} of the {days}-day trip: each day needs a step, or a step for several"


def misses_the_event(goal: str, titles: Sequence[str]) -> bool:
    """Whether a split of an event to get ready for (``facts.prepared_event``, or any event
    the goal holds: ``facts.holds_an_event``) has no step that holds it."""
    from agent.core.facts import holds_an_event, prepared_event

    return (prepared_event(goal) or holds_an_event(goal)) and not any(EVENT_DAY.search(t) for t in titles)


_RETURN_TO = re.compile(r"^(?:days?\s+\d+(?:\s*[-–]\s*\d+)?\s*:\s*)?return(?:ing)?\s+(?:back\s+)?to\s+"
                        r"(?:the\s+)?([a-z][a-z .'-]*?)\s*(?:\(.*\)|:.*)?$", re.IGNORECASE)


def returns_to_the_destination(goal: str, titles: Sequence[str]) -> str | None:
    """A journey whose last step returns to the country it goes to ("Returning to Japan", the
    last of four steps of a two-week trip to Japan, make demo 2026-12-07, and of two drafts of
    it): the trip ends by going home from there. Says what is wrong, or None. A town is left
    alone ("Return to Tokyo" to fly home from it), and so is where the trip starts ("from
    London ... Return to London")."""
    from agent.core.facts import journey
    from agent.core.places import gazetteer

    if not titles or not journey(goal):
        return None
    m = _RETURN_TO.match(titles[-1].strip())
    if m is None:
        return None
    place = m.group(1).strip()
    countries = {n.casefold() for n in gazetteer().country_names.values()}
    if place.casefold() not in countries or not re.search(rf"\b{re.escape(place)}\b", goal, re.IGNORECASE) \
            or re.search(rf"\bfrom\s+(?:the\s+)?{re.escape(place)}\b", goal, re.IGNORECASE):
        return None
    return f"'{titles[-1].strip()[:40]}' as the last step (the trip ends by going home from {place})"


GET_READY = "the work to get ready, in steps before the event's day"
_EVENTS = (r"(?:event|sale|party|fair|show|festival|wedding|match|game|conference|workshop|launch|market|"
           r"clean-?up|quiz|race)s?")
# a step that is the event happening (narrower than EVENT_DAY, which also takes "Delivery",
# "Opening" and "Running" as holding it: a first step "Deliver Invitations" or "Running Social
# Media Ads" is getting ready)
_THE_EVENT_ITSELF = re.compile(
    rf"\b(?:on the day|{_EVENTS}[- ]day|day of the {_EVENTS}|execution|executing|go[- ]live|"
    rf"(?:running|run|hosting|host|holding|hold)(?: the| your| our)? (?:\w+ )?{_EVENTS})\b", re.IGNORECASE)
_GETTING_READY = re.compile(r"\b(?:before|for|prepar\w*|pre-|leading|choos\w*|pick\w*|set|meeting|"
                            r"invit\w*|registration|tickets?|ads?|advert\w*)\b", re.IGNORECASE)


def nothing_before_the_event(goal: str, titles: Sequence[str]) -> bool:
    """Whether a split of an event to get ready for starts with the event itself, so nothing
    is done before it (garage sale, make demo 2026-12-07: "Execution; Evaluation; Summarize
    the Sale; Thank the Staff" won, with no pricing, no signs and no advertising before the
    sale, over "Preparing the Space; Preparing the Cash; Preparing the Promotion; ..." which
    had no step named for the day)."""
    from agent.core.facts import holds_an_event, prepared_event

    first = titles[0] if titles else ""
    return (len(titles) > 1 and (prepared_event(goal) or holds_an_event(goal))
            and bool(_THE_EVENT_ITSELF.search(first)) and not _GETTING_READY.search(first))


def combine_criteria(checks: Checks, *, chores: int, essential: Sequence[str], said: frozenset[str],
                     wrong: Sequence[str] = (), concrete: float = 0.0, wrap_up: int = 0,
                     also_missing: Sequence[str] = (), known: frozenset[str] = frozenset(),
                     misplaced: Sequence[str] = ()) -> Verdict:
    """A split's verdict from the checks and a scorer's criteria (the essential work of the
    node, ``essential``; empty: no usable criteria, the checks alone). ``said``: the split's
    stems (titles and descriptions; ``known``: the places above it, which a split names anyway;
    ``misplaced``: famous sights abroad in it, which make it incomplete);
    ``wrong``: facts in it that contradict the goal (places abroad, another currency);
    ``concrete``: names and figures per subgoal. Coverage is the
    share of the essential work the split takes up, so a split of planning chores loses to
    one that names the real work; what it leaves out is its feedback ("missing: ...")."""
    n = max(checks.n, 1)
    chore_share = chores / n
    spec = 1 - checks.vague / n - 0.5 * checks.repeats_parent / n - 0.8 * chore_share - 0.8 * wrap_up / n
    # names and figures in a split's steps (a drafted plan's sections carry their items) are
    # what a reader can act on: the criteria are one small model's checklist, this is measured
    spec += 0.3 * min(1.0, concrete / 4) - 0.15 * min(3, len(wrong)) - 0.2
    non_overlap = max(0.0, 1 - (checks.duplicates + 0.5 * checks.cross) / n)
    # (what the rules know is missing first: the criteria's list is cut at 300 characters, and
    # a refinement reads only its first items)
    missing = list(also_missing) + [e for e in essential if not covers(e, said, known)]
    if essential:
        share = 1 - len(missing) / (len(essential) + len(also_missing))
        # a plan of three parts does less than one of five that takes up the same essentials
        # (measured: "Arrival / Exploring / Returning" for two weeks in Japan, no flights)
        coverage = share * (1 - 0.5 * checks.repeats_parent / n) * (0.7 + 0.3 * min(1.0, n / FULL_SPLIT))
    else:
        share = None
        coverage = (0.5 + 0.5 * checks.coverage) * (1 - 0.5 * checks.repeats_parent / n)
        coverage *= 0.7 if also_missing else 1.0
    parts = list(checks.notes[:3])
    if chores:
        parts.append(f"{chores} of {checks.n} steps are planning chores, not the work itself")
    if wrap_up:
        parts.append(f"{wrap_up + 1} steps come after the work is done (follow-up, reports): one is enough")
    if wrong:
        parts.append("wrong for this goal: " + ", ".join(wrong[:3]))
    miss = "; ".join(missing)[:300]
    if miss:
        parts.append(f"missing: {miss}")
    r = lambda x: round(min(1.0, max(0.0, x)), 3)  # noqa: E731
    hard = checks.hard_fail or 2 * chores > checks.n
    # work that must be there whatever the criteria say (the event itself) makes a split
    # incomplete: it is refined for it, and voted only once the refinements had their rounds;
    # so does a famous sight abroad (``misplaced``; Japan, make demo 2026-12-07: an outline with
    # "Visit the Eiffel Tower" in Tokyo was accepted by two of three scorers who both named it).
    # Not every place abroad: an airline ("Air France"), a dish ("Roast Turkey") or a name the
    # gazetteer misreads ("York" in New York) would block every split (a review)
    return Verdict(r(spec), r(non_overlap), r(coverage), "; ".join(parts)[:400], hard, missing=miss,
                   incomplete=(share is not None and share < MIN_COVERAGE) or bool(also_missing) or bool(misplaced))


LLM_WEIGHT = 0.5  # a small local model's judgment is noisy: the checks carry half the score


def combine(llm: dict[str, float | str], checks: Checks, llm_weight: float = LLM_WEIGHT) -> Verdict:
    """Blend the LLM's scores with what the checks measured; feedback lists the checks'
    findings first. A hard failure of the checks can never be approved, and the checks' own
    non-overlap caps the blended one (a model may not talk duplicates away)."""
    n = max(checks.n, 1)
    own_spec = max(0.0, 1 - checks.vague / n - 0.5 * checks.repeats_parent / n)
    own_non_overlap = max(0.0, 1 - (checks.duplicates + 0.5 * checks.cross) / n)
    # coverage by the checks: does the split mention what the parent is about (not a count)
    own_coverage = (0.5 + 0.5 * checks.coverage) * (1 - 0.5 * checks.repeats_parent / n)
    w = llm_weight
    spec = w * float(llm["specificity"]) + (1 - w) * own_spec
    non_overlap = min(w * float(llm["non_overlap"]) + (1 - w) * own_non_overlap, own_non_overlap)
    coverage = w * float(llm["coverage"]) + (1 - w) * own_coverage
    parts = list(checks.notes[:3])
    if llm.get("feedback"):
        parts.append(str(llm["feedback"]))
    feedback = "; ".join(parts)[:400]
    r = lambda x: round(min(1.0, max(0.0, x)), 3)  # noqa: E731
    return Verdict(r(spec), r(non_overlap), r(coverage), feedback, checks.hard_fail)


def result_problem(output: str, *, english: bool = True) -> str | None:
    """Why a task result (or a synthesis) is unusable, or None if it reads like prose:
    too short, placeholders or template braces, digit runs, mostly non-words, another
    language (when the goal is English), or no complete sentence."""
    text = output.strip()
    # the "(cost; when)" after each action is figures by design: prose is judged without it
    prose = re.sub(r"\([^()]*\)|\b\d{4}-\d{2}-\d{2}\b", " ", text)
    if tx.long_digit_run(text) or tx.digit_share(prose) > 0.3:
        return "the result is mostly digits"
    ws = [w for w in tx.tokens(text) if any(c.isalpha() for c in w) and len(w) >= 2]
    if len(ws) < 4:
        return "the result has fewer than four words"
    made_up = tx.stand_ins(text)
    if made_up:
        return (f"'{made_up[0][:40]}' is a made-up name: name a real one you are sure of, "
                "or say what kind of place, business or person it is")
    if "{{" in text or "}}" in text or tx.placeholders(text):
        return "the result contains template placeholders"
    if tx.nonword_share(text) > 0.3:
        return "the result is mostly not words"
    if english and not tx.looks_english(prose):
        return "the result is not in English"
    if not tx.ends_at_sentence(text):
        return "the result stops mid-sentence"
    return None
