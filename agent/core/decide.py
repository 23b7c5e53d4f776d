"""What each role would do now, as pure functions of (tree, identity, now).

The network roles and the simulator call exactly these, so the protocol tested in simulation
is the one that runs.
"""

from __future__ import annotations

from dataclasses import dataclass
from .scoring import Verdict
from .tree import CLAIMED, DONE, LEAF_TARGET, OPEN, READY, VOTING, NodeView, RoundView, Tree


@dataclass(frozen=True)
class Timing:
    collection_window_ms: int = 1500
    round_timeout_ms: int = 30_000
    settle_ms: int = 500
    lease_ms: int = 30_000


# ----------------------------------------------------------------- rounds
@dataclass(frozen=True)
class RoundState:
    number: int  # the open round
    opens_at: int  # wall ms from which scorers vote in it
    leaf_round: bool  # past max_rounds: vote to execute the node as it is


def _closed_at(n: NodeView, rv: RoundView, timing: Timing, now_ms: int) -> int | None:
    p = n.params
    # A scorer's votes on a round's splits arrive as separate events: wait a collection window
    # after the last one before trusting "everyone voted" or "quorum impossible".
    settled = now_ms - rv.last_wall >= timing.collection_window_ms
    if settled and (len(rv.voters) >= p.scorers or rv.best() + (p.scorers - len(rv.voters)) < p.quorum):
        return rv.last_wall
    if now_ms - rv.first_wall >= timing.round_timeout_ms:
        return rv.first_wall + timing.round_timeout_ms
    return None


def round_state(n: NodeView, timing: Timing, now_ms: int) -> RoundState | None:
    """The round scorers should vote in now, or None if the node is not being voted on."""
    if n.leaf or n.accepted is not None or not n.proposals:
        return None
    opens_at = min(p.wall for p in n.proposals) + timing.collection_window_ms
    r = 1
    while True:
        rv = n.rounds.get(r)
        if rv is None:
            break
        closed = _closed_at(n, rv, timing, now_ms)
        if closed is None:
            break
        r += 1
        if r > n.params.max_rounds:
            opens_at = closed
        else:
            fresh = [p.wall for p in n.proposals if p.wall >= closed]
            opens_at = (max(fresh) + timing.collection_window_ms) if fresh else closed + timing.round_timeout_ms
    return RoundState(r, opens_at, r > n.params.max_rounds)


def last_closed_round(n: NodeView, timing: Timing, now_ms: int) -> tuple[int, int] | None:
    """(number, closing wall) of the latest closed round without an acceptance."""
    st = round_state(n, timing, now_ms)
    if st is None or st.number == 1:
        return None
    rv = n.rounds[st.number - 1]
    closed = _closed_at(n, rv, timing, now_ms)
    assert closed is not None
    return st.number - 1, closed


# ----------------------------------------------------------------- decomposer
@dataclass(frozen=True)
class ProposeTask:
    node: NodeView


@dataclass(frozen=True)
class RefineTask:
    node: NodeView
    previous: str  # proposal id being refined
    feedback: tuple[str, ...]


def decomposer_tasks(tree: Tree, me: str, timing: Timing, now_ms: int) -> list[ProposeTask | RefineTask]:
    out: list[ProposeTask | RefineTask] = []
    for n in tree.walk():
        if n.leaf or n.accepted is not None or n.state not in (OPEN, VOTING):
            continue
        mine = [p for p in n.proposals if p.author == me]
        if not mine:
            st = round_state(n, timing, now_ms)
            if st is None or not st.leaf_round:
                out.append(ProposeTask(n))
            continue
        closed = last_closed_round(n, timing, now_ms)
        if closed is None:
            continue
        rnd, closed_wall = closed
        if rnd >= n.params.max_rounds:
            continue  # the next round is the leaf round: nothing left to refine for
        newest = max(mine, key=lambda p: (p.wall, p.id))
        if newest.wall >= closed_wall:
            continue  # already refined since that round closed
        feedback = tuple(newest.feedback.get(rnd, ()))
        out.append(RefineTask(n, newest.id, feedback))
    return out


# ----------------------------------------------------------------- scorer
@dataclass(frozen=True)
class ScoreTask:
    node: NodeView
    round: int
    leaf_round: bool
    proposals: tuple[str, ...]  # proposal ids to score (empty in the leaf round)


def scorer_tasks(tree: Tree, me: str, timing: Timing, now_ms: int) -> list[ScoreTask]:
    out = []
    for n in tree.walk():
        st = round_state(n, timing, now_ms)
        if st is None or now_ms < st.opens_at:
            continue
        rv = n.rounds.get(st.number)
        if rv is not None and me in rv.voters:
            continue
        ids = () if st.leaf_round else tuple(p.id for p in n.proposals)
        out.append(ScoreTask(n, st.number, st.leaf_round, ids))
    return out


@dataclass(frozen=True)
class VoteDraft:
    proposal: str | None
    approve: bool
    specificity: float
    non_overlap: float
    coverage: float
    feedback: str


def public_leader(node: NodeView, before_round: int) -> str | None:
    """The split the previous round favoured, computed from votes every peer can see: most
    approvals, then highest mean score, then lowest id. If its author refined it since, the
    newest refinement stands in for it (it answers the feedback)."""
    rv = node.rounds.get(before_round - 1)
    if rv is None:
        return None
    def mean(pid: str) -> float:
        pv = next((p for p in node.proposals if p.id == pid), None)
        sc = pv.scores.get(before_round - 1, []) if pv else []
        return sum(sc) / len(sc) if sc else 0.0
    scored = [p.id for p in node.proposals if p.scores.get(before_round - 1)]
    if not scored:
        return None
    leader = min(scored, key=lambda pid: (-len(rv.approvals.get(pid, ())), -mean(pid), pid))
    author = next(p.author for p in node.proposals if p.id == leader)
    refinements = [p for p in node.proposals if p.refines == leader and p.author == author]
    if refinements:
        leader = max(refinements, key=lambda p: (p.wall, p.id)).id
    return leader


def choose_votes(task: ScoreTask, verdicts: dict[str, Verdict]) -> list[VoteDraft]:
    """At most one approval per node per round. Round 1: the best acceptable split by this
    scorer's own verdicts (ties within 0.02 go to the lower id). Later rounds converge: approve
    the previous round's public leader (or its refinement) if this scorer finds it acceptable,
    else its own best."""
    if task.leaf_round:
        return [VoteDraft(None, True, 0.5, 0.5, 0.5,
                          f"no split reached quorum in {task.round - 1} rounds; execute as it is")]
    ok = [pid for pid in task.proposals if pid in verdicts and verdicts[pid].acceptable]
    winner = None
    leader = public_leader(task.node, task.round) if task.round > 1 else None
    if leader is not None and leader in ok:
        winner = leader
    elif ok:
        top = max(verdicts[p].overall for p in ok)
        winner = min((p for p in ok if verdicts[p].overall >= top - 0.02),
                     key=lambda p: (-verdicts[p].overall, p))
    return [
        VoteDraft(pid, pid == winner, v.specificity, v.non_overlap, v.coverage, v.feedback)
        for pid in task.proposals
        if (v := verdicts.get(pid)) is not None
    ]


# ----------------------------------------------------------------- executor
def ready_leaves(tree: Tree) -> list[NodeView]:
    return [n for n in tree.walk() if n.leaf and n.state == READY]


def holds_claim(tree: Tree, node_id: str, claim_id: str) -> bool:
    n = tree.node(node_id)
    return n is not None and n.claim is not None and n.claim.claim == claim_id and n.state == CLAIMED


def renewal_due(tree: Tree, node_id: str, claim_id: str, timing: Timing, now_ms: int) -> bool:
    n = tree.node(node_id)
    if n is None or n.claim is None or n.claim.claim != claim_id:
        return False
    return n.claim.expires - now_ms <= timing.lease_ms // 2


def path_titles(tree: Tree, node: NodeView) -> list[str]:
    out = []
    cur: NodeView | None = node
    while cur is not None:
        out.append(cur.title)
        cur = tree.node(cur.parent) if cur.parent else None
    return out[::-1]


def is_done(tree: Tree, goal_id: str | None = None) -> bool:
    roots = tree.roots if goal_id is None else [r for r in tree.roots if r.id == goal_id]
    return bool(roots) and all(r.state == DONE for r in roots)


__all__ = [
    "LEAF_TARGET", "Timing", "RoundState", "round_state", "ProposeTask", "RefineTask",
    "decomposer_tasks", "ScoreTask", "scorer_tasks", "VoteDraft", "choose_votes", "public_leader",
    "ready_leaves", "holds_claim", "renewal_due", "path_titles", "is_done",
]
