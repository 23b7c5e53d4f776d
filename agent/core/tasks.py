"""When a node became a task, in stamps: a claim must be stamped after it (pure).

A node is a task once every decision on its path chose it (and, for a leaf by vote, its own
LEAF decision), once each step it follows is done, and, for a synthesis, once each child is
done (its review accepted a result, or its last attempt has a valid one). A claim stamped
before that is a pre-claim: made before anyone could know the task, it must never win a race
against claims made after. So a claim is filed only once the fold holds the evidence that it
came after: for each of those decisions, the votes stamped before the claim already decide it
(a quorum of precommits in one round); for each step it follows and each child, the same
evidence of being done, stamped before it (``done_before``).

A later attempt (task key ``<node>#<k>``) also needs the review decision that sent the
attempt before back, stamped before it. Until then it waits under the key of the first missing
piece ("task:<slot>" for a decision, "done:<child>" for a child): more votes and results can only add evidence (a late precommit
stamped earlier), never take it away, so the outcome for a set of events does not depend on
the order they came in. A claim still waiting when its wait ends is refused as ``backdated``
(or ``not_claimable`` if its node never became a task at all), never filed with its early
stamp. An honest executor claims only a task it sees, so its claim is stamped after every
precommit and result it saw: it never waits here for longer than gossip takes.
"""

from __future__ import annotations

from typing import Any, Iterable, Mapping, Protocol

from .consensus import LEAF, Tally
from .events import REJECT, Event
from .slots import parse_task, review_slot, task_key

__all__ = ["Fold", "claim_wait", "decided_before", "done_before"]


class Fold(Protocol):
    """What these rules read of the fold (``agent.core.plan.Plan``), which asks them."""

    by_node: Mapping[str, Any]
    proposals: Mapping[str, Event]

    def tally(self, node: str) -> Tally: ...
    def count_votes(self, votes: Iterable[Event], quorum: int) -> Tally: ...
    def node_ref(self, node: str) -> Any: ...
    def decided(self, node: str) -> str | None: ...
    def children(self, node: str) -> list[str]: ...
    def attempt(self, node: str) -> int: ...
    def leases(self, node: str) -> Any: ...
    def params(self, ref: Any) -> Any: ...
    def after(self, node: str) -> tuple[str, ...]: ...


def decided_before(plan: Fold, node: str, stamp: tuple[int, int]) -> bool:
    """The votes stamped before ``stamp`` already decide ``node`` as all of them do (a quorum
    of precommits in one round, by the fold's own rule)."""
    t = plan.tally(node)
    if t.decided is None:
        return False
    ne = plan.by_node.get(node)
    early = [v for v in (ne.votes if ne else ()) if (v.hlc.wall, v.hlc.logical) < stamp]
    return plan.count_votes(early, t.quorum).decided == t.decided


def claim_wait(plan: Fold, ev: Event) -> str | None:
    """None if claim ``ev`` (on a node that is a task) is provably stamped after the node
    became one; else the pending key of the evidence still missing."""
    node, attempt = parse_task(ev.body.node)  # a later attempt's key is <node>#<k>
    stamp = (ev.hlc.wall, ev.hlc.logical)
    if attempt > 1 and not decided_before(plan, review_slot(node, attempt - 1), stamp):
        return "task:" + review_slot(node, attempt - 1)  # the attempt before was sent back
    ref = plan.node_ref(node)
    while ref is not None and ref.proposal is not None:  # each decision on the path down
        parent = plan.proposals[ref.proposal].body.node
        if not decided_before(plan, parent, stamp):
            return "task:" + parent
        ref = plan.node_ref(parent)
    if plan.decided(node) == LEAF and not decided_before(plan, node, stamp):
        return "task:" + node  # a leaf by vote (a leaf by depth needs only its path)
    for dep in (*plan.after(node), *plan.children(node)):  # the steps it follows; a synthesis's children
        if not done_before(plan, dep, stamp):
            return "done:" + dep
    return None


def done_before(plan: Fold, node: str, stamp: tuple[int, int]) -> bool:
    """``node`` was done before ``stamp``, by the evidence that makes it done in the fold
    (``Plan.accepted``): an attempt that is reviewed is done by its review's decision, stamped
    before; the last attempt by its counted result, stamped before. A result alone is no
    evidence for a reviewed attempt: a store still missing the renewals that made it valid
    reads it as invalid, while the decided review already makes the node done there."""
    k = plan.attempt(node)
    ref = plan.node_ref(node)
    if ref is not None and k < plan.params(ref).attempts:
        slot = review_slot(node, k)
        return plan.decided(slot) not in (None, REJECT) and decided_before(plan, slot, stamp)
    counted = plan.leases(task_key(node, k)).counted
    return counted is not None and (counted.hlc.wall, counted.hlc.logical) < stamp
