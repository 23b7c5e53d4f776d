"""Competition in an event log: for every voted node, were at least two splits proposed and
scored before the electors' first-round prevotes?

    python bench/competition.py out/demo-*/events.jsonl
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, ".")
from agent.core.plan import fold  # noqa: E402
from agent.logfile import read_log  # noqa: E402
from agent.drivers.sim.measure import competition  # noqa: E402

if __name__ == "__main__":
    for arg in sys.argv[1:]:
        events, _bad = read_log(Path(arg))
        c = competition(fold(events))
        print(f"{arg}: {c.judged_two}/{c.voted} voted nodes had >= 2 splits judged side by side "
              f"({c.share:.0%}); first-round prevotes cast with an earlier split unscored: {c.unscored}")
