"""The LLM-shaped steps of each role: build the request, and turn the answer into an event
body (or a verdict). Pure; every driver runs the same code."""

from __future__ import annotations

from agent.core.events import Proposal, Result, Subgoal
from agent.core.scoring import Verdict, check_split, combine, result_problem
from agent.core.tree import NodeView, ProposalView, Tree
from agent.llm.base import LLMBadOutput, LLMRequest
from agent.llm.prompts import (
    decompose_request,
    execute_request,
    parse_decomposition,
    parse_execution,
    parse_score,
    score_request,
)

DEFAULT_STRATEGIES = ("by place", "by activity", "by day")


def goal_title(tree: Tree, node: NodeView) -> str:
    root = tree.node(node.root)
    return root.title if root else node.title


def _path(tree: Tree, node: NodeView) -> list[str]:
    return [n.title for n in tree.path(node)][:-1]


def decompose_req(tree: Tree, node: NodeView, strategy: str, seed: int | None,
                  previous: ProposalView | None = None) -> LLMRequest:
    prev = feedback = None
    if previous is not None:
        prev = [dict(s) for s in previous.subgoals]
        feedback = previous.feedback() or ["make the subgoals more specific and distinct"]
    return decompose_request(
        goal=goal_title(tree, node), path=_path(tree, node), title=node.title,
        description=node.description, strategy=strategy, max_children=node.params.max_children,
        feedback=feedback or [], previous=prev, seed=seed,
    )


def proposal_from(answer: dict, node: NodeView, strategy: str, refines: str | None) -> Proposal:
    """Raises LLMBadOutput when the split is unusable (so the caller retries with a new seed)."""
    subgoals = parse_decomposition(answer, max_children=node.params.max_children)
    checks = check_split(node.title, [s["title"] for s in subgoals])
    if checks.hard_fail:
        raise LLMBadOutput("split rejected before proposing: " + "; ".join(checks.notes[:3]))
    return Proposal(
        node=node.id, strategy=strategy[:40],
        subgoals=tuple(Subgoal(title=s["title"], description=s["description"], atomic=s["atomic"])
                       for s in subgoals),
        refines=refines,
    )


def score_req(tree: Tree, node: NodeView, prop: ProposalView, me: str, seed: int | None) -> LLMRequest:
    return score_request(
        goal=goal_title(tree, node), title=node.title, description=node.description,
        strategy=prop.strategy, subgoals=[dict(s) for s in prop.subgoals], scorer=me, seed=seed,
    )


def _checks(node: NodeView, prop: ProposalView):
    return check_split(node.title, [s["title"] for s in prop.subgoals])


def verdict_from(answer: dict, node: NodeView, prop: ProposalView) -> Verdict:
    return combine(parse_score(answer), _checks(node, prop))


NEUTRAL = {"specificity": 0.5, "non_overlap": 0.5, "coverage": 0.5, "feedback": ""}


def verdict_without_llm(node: NodeView, prop: ProposalView) -> Verdict:
    """When the LLM's judgment is unusable: the checks alone, the LLM's half held neutral."""
    return combine(NEUTRAL, _checks(node, prop))


def execute_req(tree: Tree, node: NodeView, seed: int | None) -> LLMRequest:
    return execute_request(
        goal=goal_title(tree, node), path=_path(tree, node), title=node.title,
        description=node.description, seed=seed,
    )


def synthesis_req(tree: Tree, node: NodeView, seed: int | None) -> LLMRequest:
    """Summarise a split node's done children into the node's answer."""
    parts = []
    for c in node.children:
        out = (c.result or {}).get("output", "")
        parts.append(f"{c.title}: {' '.join(out.split())[:300]}")
    return execute_request(
        goal=goal_title(tree, node), path=_path(tree, node), title=f"Summarise: {node.title}",
        description=" | ".join(parts)[:400], seed=seed,
    )


def result_from(answer: dict, node: NodeView, claim_id: str, *, strict: bool = True,
                prompt_tokens: int = 0, completion_tokens: int = 0) -> Result:
    """Raises LLMBadOutput for an unusable result (the executor retries with a new seed; its
    last attempt takes any schema-valid answer, so a weak model cannot stall a task forever)."""
    output = parse_execution(answer)[:8000]
    problem = result_problem(output)
    if problem and strict:
        raise LLMBadOutput(f"{problem}: {output[:80]!r}")
    return Result(node=node.id, claim=claim_id, output=output,
                  prompt_tokens=prompt_tokens, completion_tokens=completion_tokens)
