"""The LLM-shaped steps of each role: build the request, and turn the answer into an event
body (or a verdict). Pure; every driver runs the same code.

Two layers: ``*_for`` functions take plain values (titles, paths) and are what the quality
benchmark (agent.eval) drives in one process; the tree-based functions the behaviours call read
those values off the folded tree and delegate to them.
"""

from __future__ import annotations

from typing import Iterable, Sequence

from agent.core.events import Proposal, Result, Subgoal
from agent.core.scoring import (
    Verdict,
    check_split,
    combine,
    cross_branch_feedback,
    result_problem,
    title_problem,
)
from agent.core.text import english_goal
from agent.core.tree import NodeView, ProposalView, Tree
from agent.llm.base import LLMBadOutput, LLMRequest
from agent.llm.prompts import (
    STRATEGIES,
    atomic_request,
    decompose_request,
    execute_request,
    parse_atomic,
    parse_decomposition,
    parse_execution,
    parse_score,
    parse_synthesis,
    score_request,
    strategy_for,
    synthesis_request,
)

# A decomposer's preference; strategy_for() swaps it for one that suits the node when it does
# not (no "by place" split of a bakery).
DEFAULT_STRATEGIES = STRATEGIES
ELSEWHERE_MAX = 24  # titles from other branches shown to a model (the prompt must stay short)
NEUTRAL = {"specificity": 0.5, "non_overlap": 0.5, "coverage": 0.5, "feedback": ""}


# ============================================================== plain values (benchmark, roles)


def decompose_req_for(*, goal: str, path: Sequence[str], title: str, description: str,
                      preference: str, max_children: int, feedback: Iterable[str] = (),
                      previous: list[dict] | None = None, parent_split: Iterable[str] = (),
                      seed: int | None = None) -> LLMRequest:
    """``path``: titles from the goal down to the parent of this node (empty at the root);
    ``parent_split``: the parent's accepted split, this node among it."""
    return decompose_request(
        goal=goal, path=list(path), title=title, description=description,
        strategy=strategy_for(preference, goal, title, description), max_children=max_children,
        feedback=feedback, previous=previous, parent_split=parent_split, seed=seed,
    )


def subgoals_for(answer: dict, *, title: str, ancestors: Sequence[str], max_children: int,
                 elsewhere: Sequence[str] = ()) -> list[dict]:
    """The usable subgoals of a decomposition answer. Subgoals that restate the node or an
    ancestor, repeat a sibling or a title in another branch (``elsewhere``), or carry
    placeholders or non-words are dropped (the rest can still be a good split);
    ``LLMBadOutput`` when fewer than two remain."""
    subgoals = parse_decomposition(answer, max_children=max_children)
    kept: list[dict] = []
    dropped: list[str] = []
    for s in subgoals:
        problem = title_problem(s["title"], [title, *ancestors])
        if problem is None and any(check_split(title, [k["title"], s["title"]]).duplicates
                                   for k in kept):
            problem = f"'{s['title'][:40]}' overlaps another subgoal"
        if problem is None and check_split(title, [s["title"]], elsewhere=elsewhere).cross:
            problem = f"'{s['title'][:40]}' repeats another part of the plan"
        if problem:
            dropped.append(problem)
        else:
            kept.append(s)
    checks = check_split(title, [s["title"] for s in kept], ancestors=ancestors,
                         elsewhere=elsewhere)
    if checks.hard_fail:
        raise LLMBadOutput("split rejected before proposing: "
                           + "; ".join((dropped + list(checks.notes))[:3]))
    return kept


def score_req_for(*, goal: str, title: str, description: str, strategy: str,
                  subgoals: list[dict], scorer: str, elsewhere: Iterable[str] = (),
                  seed: int | None = None) -> LLMRequest:
    return score_request(goal=goal, title=title, description=description, strategy=strategy,
                         subgoals=subgoals, scorer=scorer,
                         elsewhere=list(elsewhere)[:ELSEWHERE_MAX], seed=seed)


def verdict_for(answer: dict | None, *, title: str, subgoals: Sequence[dict],
                ancestors: Sequence[str] = (), elsewhere: Sequence[str] = ()) -> Verdict:
    """The scorer's verdict: the LLM's ratings (``None``: unusable, held neutral) blended with
    the checks; overlap with other branches goes into the feedback."""
    titles = [s["title"] for s in subgoals]
    checks = check_split(title, titles, ancestors=ancestors, elsewhere=elsewhere,
                         descriptions=[s.get("description", "") for s in subgoals])
    llm = NEUTRAL if answer is None else parse_score(answer)
    v = combine(llm, checks)
    extra = [f for f in cross_branch_feedback(titles, elsewhere) if f[:30] not in v.feedback]
    if extra:
        v = Verdict(v.specificity, v.non_overlap, v.coverage,
                    "; ".join([*extra[:1], v.feedback])[:400].strip("; "), v.hard_fail)
    return v


def atomic_req_for(*, goal: str, path: Sequence[str], title: str, description: str,
                   seed: int | None = None) -> LLMRequest:
    return atomic_request(goal=goal, path=list(path), title=title, description=description,
                          seed=seed)


def atomic_from(answer: dict) -> bool:
    """A scorer's judgment: is the node doable in one sitting? (``LLMBadOutput`` if unusable;
    the caller should then treat the node as not atomic, so it is split.)"""
    return parse_atomic(answer)


def execute_req_for(*, goal: str, path: Sequence[str], title: str, description: str,
                    siblings: Iterable[str] = (), parent_split: Iterable[str] = (),
                    decided: Iterable[tuple[str, str]] = (),
                    seed: int | None = None) -> LLMRequest:
    return execute_request(goal=goal, path=list(path), title=title, description=description,
                           siblings=siblings, parent_split=parent_split, decided=decided,
                           seed=seed)


def result_text_for(answer: dict, *, goal: str, strict: bool = True) -> str:
    """The result text; ``LLMBadOutput`` for an unusable one when ``strict`` (the executor
    retries with a new seed; its last attempt takes any schema-valid answer, so a weak model
    cannot stall a task forever)."""
    output = parse_execution(answer)[:8000]
    problem = result_problem(output, english=english_goal(goal))
    if problem and strict:
        raise LLMBadOutput(f"{problem}: {output[:80]!r}")
    return output


def synthesis_req_for(*, goal: str, path: Sequence[str], title: str, description: str,
                      children: Iterable[tuple[str, str]], seed: int | None = None) -> LLMRequest:
    return synthesis_request(goal=goal, path=list(path), title=title, description=description,
                             children=children, seed=seed)


def synthesis_text_for(answer: dict, *, goal: str, strict: bool = True) -> str:
    text = parse_synthesis(answer)
    problem = result_problem(text, english=english_goal(goal))
    if problem and strict:
        raise LLMBadOutput(f"{problem}: {text[:80]!r}")
    return text


# ============================================================== tree-based (the behaviours)


def goal_title(tree: Tree, node: NodeView) -> str:
    root = tree.node(node.root)
    return root.title if root else node.title


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
    scorers' feedback on it."""
    prev = feedback = None
    if previous is not None:
        prev = [dict(s) for s in previous.subgoals]
        feedback = previous.feedback() or ["make the subgoals more specific and distinct"]
    return decompose_req_for(
        goal=goal_title(tree, node), path=_above(tree, node), title=node.title,
        description=node.description, preference=strategy, max_children=node.params.max_children,
        feedback=feedback or [], previous=prev, parent_split=_split_of(tree, node), seed=seed,
    )


def decompose_req_ahead(tree: Tree, parent: NodeView, split: ProposalView, index: int, strategy: str,
                       seed: int | None) -> LLMRequest:
    """The request ``decompose_req`` makes for child ``index`` of ``split``, made while that
    split is not decided yet (so the child has no NodeView): the same goal, path, title,
    description and sibling titles the child will have."""
    sub = split.subgoals[index]
    return decompose_req_for(
        goal=goal_title(tree, parent), path=[n.title for n in tree.path(parent)], title=sub["title"],
        description=sub.get("description", ""), preference=strategy,
        max_children=parent.params.max_children, feedback=[], previous=None,
        parent_split=[s["title"] for s in split.subgoals], seed=seed,
    )


def proposal_from(answer: dict, node: NodeView, strategy: str, refines: str | None,
                  tree: Tree | None = None, prompt_tokens: int = 0, completion_tokens: int = 0) -> Proposal:
    """Raises LLMBadOutput when the split is unusable (so the caller retries with a new seed).
    With ``tree``, subgoals restating any ancestor or another branch are dropped too."""
    ancestors = _above(tree, node) if tree is not None else []
    elsewhere = elsewhere_titles(tree, node) if tree is not None else []
    subgoals = subgoals_for(answer, title=node.title, ancestors=ancestors,
                            max_children=node.params.max_children, elsewhere=elsewhere)
    # the proposer's `atomic` is only a hint nobody trusts: electors judge leaves themselves
    return Proposal(
        node=node.id, strategy=strategy_for(strategy, "", node.title, node.description)[:40],
        subgoals=tuple(Subgoal(title=s["title"], description=s["description"], atomic=False)
                       for s in subgoals),
        refines=refines, prompt_tokens=prompt_tokens, completion_tokens=completion_tokens,
    )


def score_req(tree: Tree, node: NodeView, prop: ProposalView, me: str, seed: int | None) -> LLMRequest:
    return score_req_for(
        goal=goal_title(tree, node), title=node.title, description=node.description,
        strategy=prop.strategy, subgoals=[dict(s) for s in prop.subgoals], scorer=me,
        elsewhere=elsewhere_titles(tree, node), seed=seed,
    )


def verdict_from(answer: dict, node: NodeView, prop: ProposalView, tree: Tree | None = None) -> Verdict:
    return verdict_for(answer, title=node.title, subgoals=prop.subgoals,
                       ancestors=_above(tree, node) if tree is not None else (),
                       elsewhere=elsewhere_titles(tree, node) if tree is not None else ())


def verdict_without_llm(node: NodeView, prop: ProposalView, tree: Tree | None = None) -> Verdict:
    """When the LLM's judgment is unusable: the checks alone, the LLM's half held neutral."""
    return verdict_for(None, title=node.title, subgoals=prop.subgoals,
                       ancestors=_above(tree, node) if tree is not None else (),
                       elsewhere=elsewhere_titles(tree, node) if tree is not None else ())


def atomic_req(tree: Tree, node: NodeView, seed: int | None) -> LLMRequest:
    return atomic_req_for(goal=goal_title(tree, node), path=_above(tree, node), title=node.title,
                          description=node.description, seed=seed)


def child_answer(child: NodeView) -> str:
    """A child's contribution to its parent's synthesis: its counted result (for a split child,
    that is its own synthesis)."""
    return str((child.result or {}).get("output", ""))


def execute_req(tree: Tree, node: NodeView, seed: int | None) -> LLMRequest:
    split = _split_of(tree, node)
    parent = tree.node(node.parent) if node.parent else None
    decided = [(c.title, child_answer(c)) for c in (parent.children if parent else [])
               if c.id != node.id and child_answer(c)]
    return execute_req_for(
        goal=goal_title(tree, node), path=_above(tree, node), title=node.title,
        description=node.description, siblings=[t for t in split if t != node.title],
        parent_split=split, decided=decided, seed=seed,
    )


def synthesis_req(tree: Tree, node: NodeView, seed: int | None) -> LLMRequest:
    """The synthesis task of a split node whose children are all done."""
    return synthesis_req_for(
        goal=goal_title(tree, node), path=_above(tree, node), title=node.title,
        description=node.description,
        children=[(c.title, child_answer(c)) for c in node.children], seed=seed,
    )


def result_from(answer: dict, tree: Tree, node: NodeView, claim_id: str, *, synthesis: bool = False,
                strict: bool = True, prompt_tokens: int = 0, completion_tokens: int = 0) -> Result:
    """A leaf's result or a split node's synthesis. Raises LLMBadOutput for an unusable one (the
    executor retries with a new seed; its last attempt takes any schema-valid answer, so a weak
    model cannot stall a task forever)."""
    goal = goal_title(tree, node)
    if synthesis:
        output = synthesis_text_for(answer, goal=goal, strict=strict)
    else:
        output = result_text_for(answer, goal=goal, strict=strict)
    return Result(node=node.id, claim=claim_id, output=output[:8000],
                  prompt_tokens=prompt_tokens, completion_tokens=completion_tokens)
