"""The LLM-shaped steps of each role, split into 'build the request' and 'turn the answer into
an event body'. Network roles await a real backend between the two; the simulator calls the
scripted answer function. Both therefore run the same logic."""

from __future__ import annotations

from agent.core.decide import ProposeTask, RefineTask, path_titles
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


def decompose_req(tree: Tree, task: ProposeTask | RefineTask, strategy: str, seed: int | None) -> LLMRequest:
    n = task.node
    previous = feedback = None
    if isinstance(task, RefineTask):
        prev = next(p for p in n.proposals if p.id == task.previous)
        previous = [dict(s) for s in prev.subgoals]
        feedback = list(task.feedback) or ["make the subgoals more specific and distinct"]
    return decompose_request(
        goal=goal_title(tree, n), path=path_titles(tree, n)[:-1], title=n.title,
        description=n.description, strategy=strategy, max_children=n.params.max_children,
        feedback=feedback or [], previous=previous, seed=seed,
    )


def proposal_from(answer: dict, task: ProposeTask | RefineTask, strategy: str) -> Proposal:
    """Raises LLMBadOutput when the split is unusable (so the caller retries with a new seed)."""
    n = task.node
    subgoals = parse_decomposition(answer, max_children=n.params.max_children)
    checks = check_split(n.title, [s["title"] for s in subgoals])
    if checks.hard_fail:
        raise LLMBadOutput("split rejected before proposing: " + "; ".join(checks.notes[:3]))
    # children one level above the depth limit are leaves anyway; don't let them claim atomicity
    return Proposal(
        node=n.id, strategy=strategy[:40],
        subgoals=tuple(Subgoal(title=s["title"], description=s["description"], atomic=s["atomic"])
                       for s in subgoals),
        refines=task.previous if isinstance(task, RefineTask) else None,
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
        goal=goal_title(tree, node), path=path_titles(tree, node)[:-1], title=node.title,
        description=node.description, seed=seed,
    )


def result_from(answer: dict, node: NodeView, claim_id: str, *, strict: bool = True) -> Result:
    """Raises LLMBadOutput for an unusable result (the executor retries with a new seed; its
    last attempt takes any schema-valid answer, so a weak model cannot stall a task forever)."""
    output = parse_execution(answer)[:8000]
    problem = result_problem(output)
    if problem and strict:
        raise LLMBadOutput(f"{problem}: {output[:80]!r}")
    return Result(node=node.id, claim=claim_id, output=output)
