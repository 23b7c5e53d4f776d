"""A goal's token budget, as the fold enforces it (pure).

Every event that cost LLM work carries what it spent (``prompt_tokens``, ``completion_tokens``:
briefs, proposals, scores, votes carrying a node's one-step judgment, reviews, results and
releases that gave up on attempts), so every peer that holds the same events computes the same
spending per goal. Against ``PlanParams.token_budget`` a goal goes through three phases:

- ``open``: work as usual;
- ``no_splits`` (spent at least ``SPLIT_SHARE`` of the budget): no node is split further; the
  electors vote the undecided nodes LEAF, so what is left goes to executing leaves;
- ``spent`` (the whole budget): no new LLM work starts on the goal; tasks already claimed may
  finish, results under review are accepted as they are, and every node still without a result
  is unfinished. The goal is then over once nothing is claimed any more.

The bound (checked by the simulator): a goal spends at most its budget plus the work that was in
flight when it ran out, one call per LLM agent (an agent has at most one call at a time), plus
what attempts already given up on had spent (carried by their release).
"""

from __future__ import annotations

from typing import Literal

Phase = Literal["open", "no_splits", "spent"]
SPLIT_SHARE = 0.6
KINDS = ("brief", "decompose", "rank", "atomic", "review", "execute", "synthesize")


def phase(budget: int, spent: int) -> Phase:
    if budget <= 0:
        return "open"
    if spent >= budget:
        return "spent"
    if spent >= SPLIT_SHARE * budget:
        return "no_splits"
    return "open"


def kind_of(event_type: str, synthesis: bool = False) -> str:
    """Which kind of LLM work an event's tokens paid for."""
    return {"brief": "brief", "proposal": "decompose", "score": "rank", "vote": "atomic",
            "review": "review", "release": "execute"}.get(event_type,
                                                          "synthesize" if synthesis else "execute")
