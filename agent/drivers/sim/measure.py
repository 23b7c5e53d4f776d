"""Figures read off an event log (the simulator's, or a real swarm's)."""

from __future__ import annotations

from dataclasses import dataclass

from agent.core.consensus import LEAF
from agent.core.plan import Plan


@dataclass(frozen=True)
class Competition:
    voted: int  # nodes with a first-round prevote for a split (a choice among splits)
    judged_two: int  # of which had at least two splits proposed and scored before that prevote
    # splits stamped before a scorer's own first-round choice that it had not judged (splits still
    # in flight to it count too: the log does not show when a split reached a scorer)
    unscored: int

    @property
    def share(self) -> float | None:
        return self.judged_two / self.voted if self.voted else None


def competition(plan: Plan) -> Competition:
    voted = judged_two = unscored = 0
    for node, ne in plan.by_node.items():
        # a LEAF prevote is an elector's own judgment that the node needs no split: what the
        # splits would score does not enter it (the scorer does not judge them first)
        firsts = [v for v in ne.votes if v.body.round == 1 and v.body.phase == "prevote"
                  and v.body.value != LEAF]
        if not firsts or not ne.proposals:
            continue
        voted += 1
        ref = plan.node_ref(node)
        quorum = plan.params(ref).quorum if ref is not None else 1
        first = min(v.hlc for v in firsts)
        scored = {s.body.proposal for s in ne.scores if s.hlc <= first}
        judged_two += sum(1 for p in ne.proposals if p.hlc < first and p.id in scored) >= 2
        for v in firsts:
            # a prevote that follows a quorum's earlier prevotes for the same value is the
            # voting rule (join the polka), not a choice made with the table unjudged
            same = sum(1 for w in firsts if w.hlc < v.hlc and w.body.value == v.body.value)
            if same >= quorum:
                continue
            mine = {s.body.proposal for s in ne.scores if s.author == v.author and s.hlc < v.hlc}
            unscored += sum(1 for p in ne.proposals if p.hlc < v.hlc and p.id not in mine)
    return Competition(voted, judged_two, unscored)
