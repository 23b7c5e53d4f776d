"""The LLM-shaped steps of each role: build the request from the folded tree, and turn the
answer into an event body (or a verdict). Pure; every driver runs the same code.

Every request of a goal carries the same frame (agent.llm.prompts.Frame): the goal, the date it
was set and its settled brief, so every step keeps to the same working assumptions.
"""

from __future__ import annotations

import datetime as _dt
import re
from dataclasses import dataclass
from typing import Sequence

from agent.core import facts as fx
from agent.core import text as tx
from agent.core.events import Brief, Proposal, Result, Subgoal
from agent.core.scoring import (
    Verdict,
    check_split,
    EVENT_DAY,
    EVENT_ITSELF,
    GET_READY,
    TRIP_ITSELF,
    TRIP_DAYS,
    chore_count,
    umbrella_count,
    combine_criteria,
    days_left_out,
    named_places,
    misses_the_event,
    nothing_before_the_event,
    nothing_before_setting_off,
    SET_OFF_READY,
    returns_to_the_destination,
    misses_the_trip,
    one_step_for_the_trip,
    wrap_up_extra,
    covers,
    cross_branch_feedback,
    result_problem,
    title_problem,
    words,
)
from agent.core.text import english_goal
from agent.core.tree import NodeView, ProposalView, Tree
from agent.llm import prompts as P
from agent.llm.base import LLMBadOutput, LLMRequest

# A decomposer's preference; strategy_for() swaps it for one that suits the node when it does
# not (no "by place" split of a bakery). The first is the whole job in order, as one direct
# answer would write it.
DEFAULT_STRATEGIES = ("outline", "by phase", "by component", "by time", "by place", "by stakeholder")
ELSEWHERE_MAX = 24  # titles from other branches shown to a model (the prompt must stay short)


# ============================================================== the frame of a goal


def root_of(tree: Tree, node: NodeView) -> NodeView:
    return tree.node(node.root) or node


def goal_title(tree: Tree, node: NodeView) -> str:
    return root_of(tree, node).title


def frame(tree: Tree, node: NodeView) -> P.Frame:
    root = root_of(tree, node)
    today = _dt.datetime.fromtimestamp(root.since / 1000, _dt.timezone.utc).date().isoformat() if root.since else ""
    return P.Frame(root.title, today, dict(root.brief or {}), root.description)


def brief_facts(tree: Tree, node: NodeView) -> fx.BriefFacts:
    root = root_of(tree, node)
    return fx.brief_facts(root.brief, f"{root.title} {root.description}")


# ============================================================== brief


def brief_req(tree: Tree, root: NodeView, seed: int | None) -> LLMRequest:
    f = frame(tree, root)
    return P.brief_request(P.Frame(f.goal, f.today, {}, f.about), seed=seed)


def brief_from(answer: dict, tree: Tree, root: NodeView, prompt_tokens: int = 0, completion_tokens: int = 0,
               *, strict: bool = True) -> Brief:
    """A proposed brief; ``LLMBadOutput`` when it contradicts its goal (another length or
    currency than the goal states, dates in the past) while ``strict``."""
    goal = f"{root.title} {root.description}"
    today = frame(tree, root).today
    fields = fx.normalized_brief(P.parse_brief(answer, english=english_goal(goal)), goal, today)
    problems = fx.brief_problems(fields, goal, today)
    if problems and strict:
        raise LLMBadOutput("the brief contradicts its goal: " + "; ".join(problems))
    return Brief(node=root.id, prompt_tokens=prompt_tokens, completion_tokens=completion_tokens,
                 **{k: v[:Brief.model_fields[k].metadata[0].max_length] if k != "currency" else v
                    for k, v in fields.items()})


def brief_quality(facts: dict[str, str], goal: str) -> float:
    """How much a brief settles: its fields, a currency that is a real code its budget uses,
    dates that parse. Electors choose among competing briefs by it (deterministic)."""
    score = sum(1.0 for v in facts.values() if v) / 8 - len(fx.brief_problems(facts, goal))
    bf = fx.brief_facts(facts, goal)
    if facts.get("currency") and fx.money_in(facts.get("budget", "")):
        score += 0.5 if bf.budget else 0.0
    if bf.dated:
        score += 0.5
    return round(score, 3)


def best_brief(root: NodeView) -> str | None:
    if not root.briefs:
        return None
    goal = f"{root.title} {root.description}"
    return max(root.briefs, key=lambda b: (brief_quality(b.facts, goal), -b.wall, b.id)).id


# ============================================================== decompose


def _above(tree: Tree, node: NodeView) -> list[str]:
    """Titles from the goal down to this node's parent."""
    return [n.title for n in tree.path(node)][:-1]


def elsewhere_titles(tree: Tree, node: NodeView) -> list[str]:
    """Titles in the other branches of the plan: every node that is neither an ancestor nor a
    descendant of ``node`` (siblings, cousins and their subgoals), nearest first."""
    ancestors: list[NodeView] = []
    cur = tree.node(node.parent) if node.parent else None
    while cur is not None:
        ancestors.append(cur)
        cur = tree.node(cur.parent) if cur.parent else None
    out: list[str] = []
    skip = node.id
    for anc in ancestors:  # nearest ancestor first: siblings, then cousins
        for child in anc.children:
            if child.id == skip:
                continue
            out.extend(n.title for n in child.walk())
        skip = anc.id
    return out


def _split_of(tree: Tree, node: NodeView) -> list[str]:
    parent = tree.node(node.parent) if node.parent else None
    return [c.title for c in parent.children] if parent is not None else []


def decompose_req(tree: Tree, node: NodeView, strategy: str, seed: int | None,
                  previous: ProposalView | None = None) -> LLMRequest:
    """A split of ``node``; with ``previous``, a refinement of that split answering the
    scorers' feedback on it (what they found missing first)."""
    prev = feedback = None
    if previous is not None:
        prev = [dict(s) for s in previous.subgoals]
        missing = agreed_missing(previous)
        others = [f for s in previous.scores for f in s.feedback.split("missing:", 1)[0].split("; ")
                  if f.strip()]
        feedback = ([f"missing: {'; '.join(missing)}"] if missing else []) + list(dict.fromkeys(others)) \
            or ["make the steps more concrete and complete"]
    strategy = P.strategy_for(strategy, goal_title(tree, node), node.title, node.description)
    if _outline(node):
        return P.outline_request(frame(tree, node), path=_above(tree, node), title=node.title,
                                 description=node.description, max_children=node.params.max_children,
                                 strategy=strategy, feedback=feedback or [], previous=prev, seed=seed)
    return P.decompose_request(
        frame(tree, node), path=_above(tree, node), title=node.title, description=node.description,
        strategy=strategy, max_children=node.params.max_children, feedback=feedback or [], previous=prev,
        parent_split=_split_of(tree, node), seed=seed,
    )


def agreed_missing(p: ProposalView) -> list[str]:
    """The essential work the electors agree a split leaves out: an item one elector's
    criteria name counts when another elector's also finds it missing (a lone elector's word
    counts when it is the only one). Each elector's criteria come from a small model and are
    noisy; fed whole to a refinement they became its sections (measured: a Japan trip refined
    into "Purchase a passport", "Purchase a car", "Purchase a map and guidebook", one
    elector's checklist)."""
    lists = [[m.strip() for m in s.feedback.split("missing:", 1)[1].split(";") if m.strip()]
             for s in p.scores if "missing:" in s.feedback]
    if len(lists) <= 1 or len(p.scores) <= 1:
        return lists[0][:4] if lists else []
    out: list[str] = []
    for i, items in enumerate(lists):
        for m in items:
            others = [o for j, o_items in enumerate(lists) if j != i for o in o_items]
            if any(covers(m, words(o)) or covers(o, words(m)) for o in others) \
                    and not any(covers(m, words(k)) for k in out):
                out.append(m)
    return out[:4]


def _outline(node: NodeView) -> bool:
    """The goal's splits are drafts of the whole plan written as text, each decomposer's cut
    its own way (agent.llm.prompts.outline_request): a small model writes a plan best as text
    (measured: its JSON splits of a Japan trip were "Research Japan", "Book accommodation",
    "Explore the city"; its text drafts name the cities and the sights), and the scorers pick
    the draft that does the most of the essential work. Below the goal, splits are short
    lists."""
    return node.depth == 0


def decompose_req_ahead(tree: Tree, parent: NodeView, split: ProposalView, index: int, strategy: str,
                        seed: int | None) -> LLMRequest:
    """The request ``decompose_req`` makes for child ``index`` of ``split``, made while that
    split is not decided yet (so the child has no NodeView): the same frame, path, title,
    description and sibling titles the child will have."""
    sub = split.subgoals[index]
    return P.decompose_request(
        frame(tree, parent), path=[n.title for n in tree.path(parent)], title=sub["title"],
        description=sub.get("description", ""),
        strategy=P.strategy_for(strategy, goal_title(tree, parent), sub["title"], sub.get("description", "")),
        max_children=parent.params.max_children, feedback=[], previous=None,
        parent_split=[s["title"] for s in split.subgoals], seed=seed,
    )


def subgoals_for(answer: dict, *, title: str, ancestors: Sequence[str], max_children: int,
                 elsewhere: Sequence[str] = ()) -> list[dict]:
    """The usable subgoals of a decomposition answer. Subgoals that restate the node or an
    ancestor, repeat a sibling or a title in another branch, or carry placeholders or
    non-words are dropped (the rest can still be a good split; ``after`` references are
    renumbered); ``LLMBadOutput`` when fewer than two remain."""
    subgoals = P.parse_decomposition(answer, max_children=max_children)
    kept: list[dict] = []
    renumber: dict[int, int] = {}
    dropped: list[str] = []
    for n, s in enumerate(subgoals, 1):
        problem = title_problem(s["title"], [title, *ancestors])
        if problem is None and any(check_split(title, [k["title"], s["title"]]).duplicates for k in kept):
            problem = f"'{s['title'][:40]}' overlaps another subgoal"
        if problem is None and check_split(title, [s["title"]], elsewhere=elsewhere).cross:
            problem = f"'{s['title'][:40]}' repeats another part of the plan"
        if problem:
            dropped.append(problem)
            continue
        after = tuple(sorted({renumber[a] for a in s["after"] if a in renumber}))
        kept.append({**s, "after": after})
        renumber[n] = len(kept)
    checks = check_split(title, [s["title"] for s in kept], ancestors=ancestors, elsewhere=elsewhere)
    if checks.hard_fail:
        raise LLMBadOutput("split rejected before proposing: " + "; ".join((dropped + list(checks.notes))[:3]))
    return kept


def proposal_from(answer: dict, node: NodeView, strategy: str, refines: str | None,
                  tree: Tree | None = None, prompt_tokens: int = 0, completion_tokens: int = 0) -> Proposal:
    """Raises LLMBadOutput when the split is unusable (so the caller retries with a new seed).
    With ``tree``, subgoals restating any ancestor or another branch are dropped too."""
    ancestors = _above(tree, node) if tree is not None else []
    elsewhere = elsewhere_titles(tree, node) if tree is not None else []
    subgoals = subgoals_for(answer, title=node.title, ancestors=ancestors,
                            max_children=node.params.max_children, elsewhere=elsewhere)
    return Proposal(
        node=node.id, strategy=P.strategy_for(strategy, "", node.title, node.description)[:40],
        subgoals=tuple(Subgoal(title=s["title"], description=s["description"], atomic=False,
                               after=s["after"]) for s in subgoals),
        refines=refines, prompt_tokens=prompt_tokens, completion_tokens=completion_tokens,
    )


# ============================================================== judging splits


def rank_req(tree: Tree, node: NodeView, me: str, seed: int | None) -> LLMRequest:
    """A scorer's criteria for ``node``'s splits (the essential work it needs): asked once per
    node, whatever splits come, and the splits are ranked against it by ``judge_splits``."""
    return P.criteria_request(frame(tree, node), path=_above(tree, node), title=node.title,
                              description=node.description, scorer=me,
                              elsewhere=elsewhere_titles(tree, node)[:ELSEWHERE_MAX], seed=seed)


def criteria_from(answer: dict, title: str = "") -> tuple[str, ...]:
    return P.parse_criteria(answer, title=title)


@dataclass(frozen=True)
class Judged:
    """A scorer's side-by-side judgment of a node's splits: a verdict per split (its rank among
    them, 1 the best) in the order of ``props``."""

    verdicts: tuple[Verdict, ...]
    llm_used: bool


MIN_LAST_STEPS = 3  # a split whose steps are the plan's leaves has at least these (when allowed)


def rank_splits(title: str, splits: Sequence[Sequence[dict]], essential: Sequence[str] | None, *,
                ancestors: Sequence[str] = (), elsewhere: Sequence[str] = (),
                facts: fx.BriefFacts | None = None, min_steps: int = 0) -> list[Verdict]:
    """Verdicts for the ``splits`` of the node ``title``, side by side: each against the same
    criteria (the essential work of the node; ``None`` or empty: the checks alone) and the
    deterministic checks, with its rank among them (1 the best, by acceptable, usable,
    overall). Every split is measured against one yardstick, so the ranking compares them
    instead of rating each on its own."""
    essential = tuple(essential or ())
    facts = facts or fx.brief_facts({}, title)
    known = words(" ".join(named_places(" ".join([title, *ancestors]))))
    verdicts = []
    for subs in splits:
        titles = [s["title"] for s in subs]
        descs = [s.get("description", "") for s in subs]
        checks = check_split(title, titles, ancestors=ancestors, elsewhere=elsewhere, descriptions=descs)
        text = "\n".join(f"{t}. {d}" for t, d in zip(titles, descs))
        said = frozenset().union(*(words(f"{t} {d}") for t, d in zip(titles, descs)))
        home = None if ancestors else returns_to_the_destination(title, titles)
        wrong = fx.foreign_places(text, facts) + fx.wrong_currency(text, facts) + ([home] if home else [])
        concrete = sum(fx.concrete_marks(f"{t}. {d}") for t, d in zip(titles, descs)) / max(1, len(titles))
        event = [] if ancestors else [EVENT_ITSELF] if misses_the_event(title, titles) \
            else [GET_READY] if nothing_before_the_event(title, titles) \
            else [TRIP_ITSELF] if misses_the_trip(title, titles) \
            else [TRIP_DAYS] if one_step_for_the_trip(title, titles, facts.days) \
            else [SET_OFF_READY] if nothing_before_setting_off(title, titles, descs, facts.days) else []
        gap = None if ancestors else days_left_out(title, titles, facts.days, descs)
        event += [gap] if gap else []
        if len(titles) < min_steps:
            # the steps a person follows, when they are the plan's last level: "Setting the
            # Stage; Running the Sale" won for a garage sale, and the plan was two lists of
            # things to do on the day (make demo 2026-12-07)
            event.append(f"the work in {min_steps} or more steps of their own (this split has {len(titles)})")
        v = combine_criteria(checks, chores=chore_count(titles) + umbrella_count(titles, title),
                             essential=essential, said=said,
                             wrong=wrong, concrete=concrete, wrap_up=wrap_up_extra(titles), also_missing=event,
                             known=known, misplaced=fx.misplaced_sights(text, facts))
        extra = [f for f in cross_branch_feedback(titles, elsewhere) if f[:30] not in v.feedback]
        if extra:
            v = v.with_feedback("; ".join([*extra[:1], v.feedback])[:400].strip("; "))
        verdicts.append(v)
    order = sorted(range(len(splits)), key=lambda i: (not verdicts[i].acceptable, not verdicts[i].usable,
                                                      -verdicts[i].overall, i))
    ranked = list(verdicts)
    for place, i in enumerate(order, 1):
        ranked[i] = verdicts[i].with_rank(place)
    return ranked


def judge_splits(essential: Sequence[str] | None, tree: Tree, node: NodeView,
                 props: Sequence[ProposalView]) -> Judged:
    """``rank_splits`` for a node's proposals (ties broken by the order given)."""
    # (the root's only: a sub-task's two steps, "Compare fares; Book the flight", can be whole)
    last_level = node.depth == 0 and node.params.max_depth <= 1
    verdicts = rank_splits(node.title, [[dict(s) for s in p.subgoals] for p in props], essential,
                           ancestors=_above(tree, node), elsewhere=elsewhere_titles(tree, node),
                           facts=brief_facts(tree, node),
                           min_steps=min(MIN_LAST_STEPS, node.params.max_children) if last_level else 0)
    return Judged(tuple(verdicts), bool(essential))


def atomic_req(tree: Tree, node: NodeView, seed: int | None) -> LLMRequest:
    return P.atomic_request(frame(tree, node), path=_above(tree, node), title=node.title,
                            description=node.description, seed=seed)


def atomic_from(answer: dict) -> bool:
    """A scorer's judgment: is the node one step? (``LLMBadOutput`` if unusable; the caller
    should then treat the node as not atomic, so it is split.)"""
    return P.parse_atomic(answer)


# ============================================================== execution and synthesis


def child_answer(child: NodeView) -> str:
    """A child's contribution to its parent's synthesis: its accepted result (for a split
    child, that is its own synthesis)."""
    return str((child.result or {}).get("output", ""))


def _earlier_attempt(node: NodeView) -> tuple[str, list[str]]:
    if not node.history:
        return "", []
    last = node.history[-1]
    text = str((last.get("result") or {}).get("output", ""))
    feedback = [p for r in last.get("reviews", ()) for p in r.get("problems", ())]
    feedback += [r["feedback"] for r in last.get("reviews", ()) if r.get("feedback")]
    return text, list(dict.fromkeys(feedback))


def _share(lo: _dt.date, hi: _dt.date, k: int, m: int) -> tuple[_dt.date, _dt.date]:
    """The ``k``-th of ``m`` even parts of the days from ``lo`` to ``hi``."""
    days = (hi - lo).days + 1
    a = lo + _dt.timedelta(days=days * k // m)
    b = lo + _dt.timedelta(days=days * (k + 1) // m - 1)
    return a, max(a, b)


def one_day(tree: Tree, node: NodeView) -> str:
    """The plan's one day (ISO), when its brief is a task done in one sitting on one date
    (``facts.in_one_sitting``); else ""."""
    root = root_of(tree, node)
    brief = root.brief or {}
    rng = fx.date_range(brief.get("dates", ""))
    if rng is None or rng[0] != rng[1] or not fx.in_one_sitting(brief.get("duration", "")) \
            or fx.journey(root.title) or fx.holds_an_event(root.title) or fx.prepared_event(root.title):
        return ""  # (a trip's or an event's hours are its own: what is booked for it comes before)
    return rng[0].isoformat()


def step_window(tree: Tree, node: NodeView) -> tuple[_dt.date, _dt.date] | None:
    """This step's part of the brief's dates: each split divides its parent's days evenly
    among its subgoals in their order (a split is ordered as the work is done), so the plan's
    dates run from the first step to the last instead of bunching at the start. At the root of
    an event to get ready for, the step that holds it gets the event's own days, the steps
    before it share the days to get ready, those after it the week after (Dublin, measured: an
    even split put "Event Execution" on 7-17 February, the workshop being on 27-28). At the
    root of a journey, the steps before setting off (``facts.DEPARTURE_PREP``) share the days
    before its dates, from the day the goal was set, and the rest share its dates (Japan,
    measured: "Research and Planning" took the trip's first two days and the flights were
    booked two days before departure)."""
    root = root_of(tree, node)
    rng = fx.date_range((root.brief or {}).get("dates", ""))
    if rng is None:
        return None
    start, end = rng
    event = fx.event_span(root.brief or {}, root.title)
    for depth, n in enumerate(tree.path(node)[1:]):
        parent = tree.node(n.parent) if n.parent else None
        sibs = parent.children if parent else []
        i = next((k for k, c in enumerate(sibs) if c.id == n.id), None)
        if i is None:
            return None
        before = _before_setting_off(root, sibs, start) if depth == 0 and event is None else None
        if before is not None:
            prep, lead = before
            if i < prep:
                start, end = _share(lead, start - _dt.timedelta(days=1), i, prep)
            else:
                start, end = _share(start, end, i - prep, len(sibs) - prep)
            continue
        held = next((k for k, c in enumerate(sibs) if EVENT_DAY.search(c.title)), None) \
            if depth == 0 and event else None
        if held is not None and event is not None:
            if i == held:
                start, end = event
            elif i < held:
                start, end = _share(start, max(start, event[0] - _dt.timedelta(days=1)), i, held)
            else:
                start, end = _share(event[1] + _dt.timedelta(days=1), event[1] + _dt.timedelta(days=fx.WRAP_UP_DAYS),
                                    i - held - 1, len(sibs) - held - 1)
        else:
            start, end = _share(start, end, i, len(sibs))
    return start, end


def _before_setting_off(root: NodeView, sibs: Sequence[NodeView], start: _dt.date) -> tuple[int, _dt.date] | None:
    """(how many of a journey's first steps come before setting off, the first day they have),
    or None when the goal is no journey, no step or every step is preparation, or no day is
    left between the day the goal was set and the start."""
    if not fx.journey(root.title):
        return None
    prep = next((k for k, c in enumerate(sibs) if not fx.DEPARTURE_PREP.search(c.title.strip())), len(sibs))
    if prep == 0 or prep == len(sibs):
        return None
    lead = start - _dt.timedelta(days=fx.TRIP_LEAD_DAYS)
    if root.since:
        lead = max(lead, _dt.datetime.fromtimestamp(root.since / 1000, _dt.timezone.utc).date())
    return (prep, lead) if lead < start else None


def holds_the_event(tree: Tree, node: NodeView) -> bool:
    """Whether this step is the event itself: the first step of an event's root split that
    names its day (``scoring.EVENT_DAY``), the one ``step_window`` gives the event's days."""
    root = root_of(tree, node)
    if node.parent != root.id or fx.event_span(root.brief or {}, root.title) is None:
        return False
    return next((c.id for c in root.children if EVENT_DAY.search(c.title)), None) == node.id


def step_budget(tree: Tree, node: NodeView) -> tuple[float, float, float] | None:
    """(the whole budget, what the other done leaves spend, this step's share): each split
    divides its parent's share evenly among its subgoals, as the dates are divided, so the
    share follows from the tree's shape alone; None without a budget in the brief's currency.
    (Measured without it: a garden party's gift baskets took the whole 400 GBP; a Rome plan's
    costs came to 2,270 EUR of 1,500.)"""
    facts = brief_facts(tree, node)
    if not facts.budget or not facts.currency:
        return None
    share = facts.budget
    for n in tree.path(node)[1:]:
        parent = tree.node(n.parent) if n.parent else None
        share /= max(1, len(parent.children) if parent else 1)
    spent = sum(fx.costs_of(child_answer(n), facts) for n in root_of(tree, node).walk()
                if n.id != node.id and not n.children and child_answer(n))
    return facts.budget, spent, share


def execute_req(tree: Tree, node: NodeView, seed: int | None) -> LLMRequest:
    parent = tree.node(node.parent) if node.parent else None
    siblings = parent.children if parent else []
    position = next((i for i, c in enumerate(siblings, 1) if c.id == node.id), 0)
    follows_ids = {siblings[a - 1].id for a in node.after if 0 < a <= len(siblings)}
    follows = [(c.title, child_answer(c)) for c in siblings if c.id in follows_ids]
    # (without details: the prompt shows each in 160 characters, the first action's detail
    # would fill them)
    decided = [(c.title, fx.without_details(child_answer(c))) for c in siblings
               if c.id != node.id and c.id not in follows_ids and child_answer(c)]
    previous, feedback = _earlier_attempt(node)
    # a task done in one sitting: its steps are not parts of a schedule (its one day still
    # bounds the dates, ``early_in_its_step``)
    win = None if one_day(tree, node) else step_window(tree, node)
    money = step_budget(tree, node)
    return P.execute_request(
        frame(tree, node), path=_above(tree, node), title=node.title, description=node.description,
        parent_split=[c.title for c in siblings], position=position, follows=follows,
        decided=decided, previous=previous, feedback=feedback, seed=seed,
        money=(money[1], money[2]) if money else None,
        window=(win[0].isoformat() if win[0] == win[1] else f"{win[0].isoformat()} to {win[1].isoformat()}")
        if win else "",
        programme=holds_the_event(tree, node),
    )


def synthesis_req(tree: Tree, node: NodeView, seed: int | None) -> LLMRequest:
    """The synthesis task of a split node whose children are all done: every child's result
    in full."""
    previous, feedback = _earlier_attempt(node)
    children = [(c.title, child_answer(c)) for c in node.children]
    return P.synthesis_request(
        frame(tree, node), path=_above(tree, node), title=node.title, description=node.description,
        children=children, previous=previous, feedback=feedback, seed=seed,
        total=fx.summary_total(children, brief_facts(tree, node)),
    )


_LISTED = re.compile(r"(?:^|[\s:;])\d{1,2}[.)]\s+[A-Z]")


_TRAILING_FIELDS = re.compile(r"\s*\([^()]*\)\s*\.?\s*$")


def _label_action(output: str, title: str) -> str | None:
    """An action that is only a label of its prompt or the step's own title ("Draft of this
    step", "Event Execution": an event's step, measured), or None."""
    said = {*P.PROMPT_LABELS, " ".join(title.lower().split()).strip(" .:")}
    for ln in str(output).splitlines():
        if not ln.lstrip().startswith(("-", "*", "•")):
            continue
        head = fx.action_head(ln.strip().lstrip("-*• "))
        text = " ".join(_TRAILING_FIELDS.sub("", head).lower().split()).strip(" .:")
        if text in said or text.startswith(("write the programme", "write its programme")):
            return _TRAILING_FIELDS.sub("", head).strip()
    return None


def result_checks(tree: Tree, node: NodeView, output: str, *, synthesis: bool) -> list[str]:
    """What is wrong with a result as plan content (empty: nothing found): the form checks,
    then the facts against the brief and the siblings (a synthesis: against its children)."""
    goal = goal_title(tree, node)
    problem = result_problem(output, english=english_goal(goal))
    out = [problem] if problem else []
    echo = fx.echoed(output, P.INSTRUCTIONS)
    if echo:
        out.append(f"says its instructions back ('{echo}'): write the plan's content")
    if not synthesis:
        label = _label_action(output, node.title)
        if label:
            out.append(f"'{label}' is the step's title or the prompt's words, not an action: write what is done")
    facts = brief_facts(tree, node)
    if synthesis:
        # the model wrote the summary; the steps under it are each child's own key content
        # (written by code), so the summary is what may leave children out or copy one: a
        # summary of a few sentences takes up at least half of them
        summary = P.synthesis_summary(output)
        if len(_LISTED.findall(summary)) >= 2:
            # the steps are listed under it by code: a summary listing them again ("The 3 steps
            # are: 1. Launch ...: Set up the stall ... 2. Scaling ...", measured) adds nothing
            out.append("lists the steps one by one: sum the plan up in a few sentences instead")
        return out + fx.synthesis_problems(summary,
                                           [(c.title, child_answer(c)) for c in node.children], facts,
                                           left_out=0.5)
    parent = tree.node(node.parent) if node.parent else None
    siblings = [(c.title, child_answer(c)) for c in (parent.children if parent else []) if c.id != node.id]
    repeat = repeat_problem(tree, node, output)
    dear = budget_problem(tree, node, output)
    if dear:
        out.append(dear)
    late = outside_plan_dates(tree, node, output)
    if late:
        out.append(late)
    unreal = fx.impossible_dates(output)
    if unreal:
        out.append(f"dated {unreal[0]}, a day that does not exist: date it on a real day")
    gone = fx.dropped_names(output, node.description, facts, goal) if node.description else []
    if gone:
        out.append(f"drops the draft's names ({', '.join(gone[:3])}): keep the real places, products and "
                   "choices the draft names")
    return out + ([repeat] if repeat else []) + fx.result_problems(
        output, facts, siblings=siblings, step=f"{node.title}: {node.description}".strip(" :"), goal=goal)


def outside_plan_dates(tree: Tree, node: NodeView, output: str) -> str | None:
    """A step dated after the plan's last day, or before the goal was set: the timeline the
    brief settled contradicted (measured: a Leeds run's venue set up on 5-15 June for a run on
    30 May; readers held such steps against the plan more than any other fault). Dates before
    the plan's first day are fine: what is booked or bought ahead."""
    root = root_of(tree, node)
    rng = fx.date_range(str((root.brief or {}).get("dates", "")))
    today = frame(tree, node).today
    dates = fx.calendar_dates(output)
    if rng is not None and fx.event_span(root.brief or {}, root.title):
        rng = (rng[0], rng[1] + _dt.timedelta(days=fx.WRAP_UP_DAYS))  # the week after an event
    if rng is not None:
        late = [d for d in dates if d > rng[1]]
        if late:
            return (f"dated {late[0].isoformat()}, after the plan's last day ({rng[1].isoformat()}): "
                    "date every action within the plan")
    if today:
        past = [d for d in dates if d.isoformat() < today]
        if past:
            return f"dated {past[0].isoformat()}, before today ({today}): date every action from today on"
    return early_in_its_step(tree, node, output)


def early_in_its_step(tree: Tree, node: NodeView, output: str) -> str | None:
    """An action of this step dated before the step's part of the schedule that is not work
    done ahead, by more than a part's length (measured, Bristol: "Host the party (2027-07-14)"
    in the fourth of five steps of a plan from 07-11 to 07-31, after the set-up step's 07-19 to
    07-31: the party before its own set-up). The slack is one part because the parts are only an
    even split of the brief's dates: the steps' real lengths differ."""
    win = step_window(tree, node)
    if win is None:
        return None
    first = win[0] - _dt.timedelta(days=max(1, (win[1] - win[0]).days + 1))
    for ln in output.splitlines():
        act = ln.strip().lstrip("-*• ").strip()
        early = [d for d in fx.dates_done(act) if d < first]
        if early:
            return (f"'{act[:60]}' is dated {early[0].isoformat()}, before this step's part of the schedule "
                    f"({win[0].isoformat()} to {win[1].isoformat()}): only what is booked, bought or prepared "
                    "ahead comes before it")
    return None


def _others(tree: Tree, node: NodeView) -> list[tuple[str, str]]:
    """What a leaf's result must not say again: every other done leaf's counted result in the
    goal, and the titles of its siblings (a small model copies the parent's split into its
    actions: "Book the venue", "Schedule catering")."""
    parent = tree.node(node.parent) if node.parent else None
    done = [(n.title, child_answer(n)) for n in root_of(tree, node).walk()
            if n.id != node.id and not n.children and child_answer(n)]
    return done + [(c.title, c.title) for c in (parent.children if parent else []) if c.id != node.id]


def _without_repeats(tree: Tree, node: NodeView, output: str, *, strict: bool) -> str:
    """A leaf's result without the actions another step of the plan already has (each step
    of a trip told to "prepare a packing list"); a result that is little else is asked again
    (while ``strict``). The last try keeps what it adds, however little: its repeats would
    count unreviewed (Japan, 2026-12-06: a step sent back for repeating three actions of the
    step before came back the same, and the plan showed them twice)."""
    repeats = fx.repeated_actions(output, _others(tree, node))
    if not repeats:
        return output
    drop = {ln for ln, _t in repeats}
    kept = [ln for ln in output.splitlines() if ln not in drop]
    if len(kept) >= 2:
        return "\n".join(kept)
    if strict:
        raise LLMBadOutput(f"repeats the step '{repeats[0][1][:50]}': {repeats[0][0][:80]!r}")
    return "\n".join(kept) if kept else output


def _without_echoes(output: str) -> str:
    """A leaf's result without its lines that say the step prompt back, when two lines remain
    (Japan, make demo 2026-12-06, evening: "Drop what is wrong for the goal or belongs to
    another step, and add what is missing (60 EUR)" was published as an action, on the last
    try, which takes any usable answer)."""
    lines = output.splitlines()
    kept = [ln for ln in lines if not fx.echoed(ln, P.INSTRUCTIONS)]
    return "\n".join(kept) if len(kept) >= 2 and len(kept) < len(lines) else output


def repeat_problem(tree: Tree, node: NodeView, output: str) -> str | None:
    """The review's view of repeats: a result that says again what steps already counted say
    (they were accepted first, so this one goes back), when that is two of its actions or a
    third of them."""
    repeats = fx.repeated_actions(output, _others(tree, node))
    lines = [ln for ln in output.splitlines() if ln.strip()]
    if repeats and (len(repeats) >= 2 or 3 * len(repeats) >= len(lines)):
        line, title = repeats[0]
        return f"repeats '{line.strip(' -')[:60]}' of the step '{title[:50]}' ({len(repeats)} such actions)"
    return None


def result_from(answer: dict, tree: Tree, node: NodeView, claim_id: str, *, synthesis: bool = False,
                strict: bool = True, prompt_tokens: int = 0, completion_tokens: int = 0,
                key: str | None = None) -> Result:
    """A leaf's result or a split node's synthesis, for the task key ``key`` (default: the
    node's current attempt). Raises LLMBadOutput for one the checks find wrong while
    ``strict`` (the executor retries with a new seed; its last attempt takes any
    schema-valid answer, so a weak model cannot stall a task; the review may still send it
    back)."""
    if synthesis:
        facts = brief_facts(tree, node)
        output = P.parse_synthesis(answer, [c.title for c in node.children],
                                   [fx.key_line(child_answer(c), facts, title=c.title,
                                                window=None if one_day(tree, c) else step_window(tree, c))
                                    for c in node.children])
    else:
        output = P.parse_execution(answer, currency=brief_facts(tree, node).currency or "",
                                   one_day=one_day(tree, node))
        output = tx.without_goal_echo(output, goal_title(tree, node))
        if english_goal(goal_title(tree, node)):
            output = tx.without_stray_script(output)
        output = _without_repeats(tree, node, output, strict=strict)
        output = _without_echoes(output)
    result = Result(node=key or node.task_key, claim=claim_id, output=output[:8000],
                    prompt_tokens=prompt_tokens, completion_tokens=completion_tokens)
    problems = result_checks(tree, node, output, synthesis=synthesis)
    if strict and problems:
        raise CheckedOut(f"{problems[0]}: {output[:80]!r}", result, len(problems))
    return result


class CheckedOut(LLMBadOutput):
    """A usable answer the checks found wrong: sent back for another try, and kept with how
    many problems it has, so the last try can be the best of them (``best_of``)."""

    def __init__(self, message: str, result: Result, problems: int) -> None:
        super().__init__(message)
        self.result, self.problems = result, problems


def best_of(tree: Tree, node: NodeView, last: Result, earlier: "CheckedOut | None", *,
            synthesis: bool) -> Result:
    """The last try's result, or an earlier try's with fewer problems (the last try takes any
    usable answer so a weak model cannot stall a task; it had as many problems as the first
    and more, measured: a home office's second try dated its steps 2027-12-05 to 2027-02-02),
    carrying every try's tokens, without figures not to be believed or lines about places
    outside the goal."""
    if earlier is None or len(result_checks(tree, node, last.output, synthesis=synthesis)) <= earlier.problems:
        chosen = last
    else:
        chosen = earlier.result.model_copy(update={"prompt_tokens": last.prompt_tokens,
                                                   "completion_tokens": last.completion_tokens})
    if not synthesis and untrusted_costs(tree, node, chosen.output):
        chosen = chosen.model_copy(update={"output": fx.without_costs(chosen.output)})
    if not synthesis:
        kept = fx.without_foreign_lines(chosen.output, brief_facts(tree, node))
        chosen = chosen.model_copy(update={"output": kept}) if kept != chosen.output else chosen
    return chosen


SHARE_STRETCH = 3.0  # a step may cost this many times its even share (a venue costs more than invitations)


def untrusted_costs(tree: Tree, node: NodeView, output: str) -> str | None:
    """Why a leaf's figures are not to be published, if they are not: the plan goes past its
    budget with them, the step costs far more than its share, or one amount is copied onto
    most actions. The last try publishes such a result without its amounts (``best_of``):
    readers held wrong figures against a plan more than none (docs/quality.md)."""
    facts = brief_facts(tree, node)
    if not facts.currency:
        return None
    same = fx.uniform_cost(output, facts)
    if same is not None:
        return f"one amount ({same:,.0f} {facts.currency}) on most actions"
    each = fx.per_head_cost(output)
    if each:
        return f"a cost per person ({each}): give what the action pays for everyone in the brief"
    return budget_problem(tree, node, output)


def budget_problem(tree: Tree, node: NodeView, output: str) -> str | None:
    """A leaf's costs that take the plan past its budget, or the step far past its share (the
    plan's other leaves may be running at the same time, so what is spent so far does not
    show what they will spend)."""
    money = step_budget(tree, node)
    if money is None:
        return None
    budget, spent, share = money
    facts = brief_facts(tree, node)
    cur = facts.currency
    mine = fx.costs_of(output, facts)
    copied = [ln.strip(" -*•")[:50] for ln, c in zip([x for x in output.splitlines() if x.strip()],
                                                     fx.action_costs(output, facts))
              if share >= 10 and c > 0 and abs(c - share) <= 1]
    if copied:
        # the prompt's "This step's share of the budget: about 167 GBP" copied onto an action
        # ("Choose a menu (167 GBP)", Cardiff, measured): a share is a limit, not a price
        return (f"prices '{copied[0]}' at this step's share of the budget ({share:,.0f} {cur}): price "
                "what each action buys, and nothing for what costs nothing")
    if mine > 0 and spent + mine > 1.1 * budget:
        return (f"its costs ({mine:,.0f} {cur}) take the plan to {spent + mine:,.0f} {cur}, over the "
                f"budget of {budget:,.0f} {cur}: choose cheaper options")
    if mine > SHARE_STRETCH * share:
        return (f"its costs ({mine:,.0f} {cur}) are over {SHARE_STRETCH:g} times this step's share of the "
                f"budget ({share:,.0f} {cur}): choose cheaper options")
    return None


# ============================================================== review


def review_req(tree: Tree, node: NodeView, output: str, seed: int | None) -> LLMRequest:
    parent = tree.node(node.parent) if node.parent else None
    siblings = [(c.title, child_answer(c)) for c in (parent.children if parent else [])
                if c.id != node.id and child_answer(c)]
    return P.review_request(frame(tree, node), path=_above(tree, node), title=node.title,
                            description=node.description, result=output, siblings=siblings, seed=seed)


def review_from(answer: dict, output: str) -> tuple[bool, list[str]]:
    return P.parse_review(answer, output)
