"""Competition in an event log: for every voted node, how many splits were on the table (had
been proposed, and scored by someone) when the electors cast their first-round prevotes, and
whether any split that arrived before a prevote went unscored by that scorer.

    python bench/competition.py out/demo-*/events.jsonl
"""

from __future__ import annotations

import sys
from pathlib import Path

from agent.core.plan import fold
from agent.logfile import read_log


def competition(path: Path) -> dict:
    events, _bad = read_log(path)
    plan = fold(events)
    voted = scored_two = unscored = 0
    tables = []
    for node, ne in plan.by_node.items():
        firsts = [v for v in ne.votes if v.body.round == 1 and v.body.phase == "prevote"]
        if not firsts or not ne.proposals:
            continue
        voted += 1
        first = min(v.hlc for v in firsts)
        on_table = [p for p in ne.proposals if p.hlc < first]
        scored = {s.body.proposal for s in ne.scores if s.hlc <= first}
        judged = [p for p in on_table if p.id in scored]
        tables.append(len(judged))
        scored_two += len(judged) >= 2
        for v in firsts:  # a scorer prevotes only after judging every split that had reached it
            mine = {s.body.proposal for s in ne.scores if s.author == v.author and s.hlc < v.hlc}
            unscored += sum(1 for p in ne.proposals if p.hlc < v.hlc and p.id not in mine
                            and p.author not in ())
    return {"voted_nodes": voted, "with_2_scored": scored_two,
            "share": round(scored_two / voted, 2) if voted else None, "tables": tables,
            "prevotes_with_unscored_earlier_splits": unscored}


if __name__ == "__main__":
    for arg in sys.argv[1:]:
        print(arg, competition(Path(arg)))
