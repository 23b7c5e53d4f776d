"""Fold benchmark (kept for its old command line): see agent/bench/core.py and `make bench`.

    .venv/bin/python bench/fold_bench.py [N ...]
"""

import sys

sys.path.insert(0, ".")
from agent.bench.core import run  # noqa: E402

if __name__ == "__main__":
    run([int(a) for a in sys.argv[1:]] or [10_000])
