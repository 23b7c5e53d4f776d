"""WorFBench's WikiHow tasks (Qiao et al. 2024): loading them, and reading their gold workflows
the way the benchmark itself does.

The data is evaluation data only (WikiHow text is CC BY-NC-SA 3.0): it is read at evaluation
time from ``shared/eval/worfbench/`` beside the repository and never copied into it.

A record's user turn is ``Task: How to ...`` followed by the action list (candidate steps, the
gold ones among them). A :class:`WorfTask` keeps the title and the gold and drops the action
list, so nothing built from a task can hand it to a planner.

Two readings of the gold, because the benchmark's own parser has slips that a faithful score
must keep and a fair one must not:

- ``upstream``: node_eval.py's ``workflow_to_graph_list`` and graph_evaluator.py's
  ``all_topological_sorts``, kept as they are: every ``N: text`` or ``N. text`` anywhere in the
  answer is a node (in a few golds the commentary after the node list numbers the steps again,
  so they count twice); edges ``(a,b)`` with START = 0 and END = the last node; up to 20
  topological orders of that graph, except that a graph of 10 or more nodes (START and END
  included) gives its node list as the only order, START and END still in it as steps.
- ``clean``: the ``Node:`` block only, the same edges where both ends exist, and the same orders
  without START and END.
"""

from __future__ import annotations

import hashlib
import itertools
import json
import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Iterable

DEV_FILE = "wikihow_dev.json"
ENV_DIR = "SWARM_WORFBENCH_DIR"  # a folder holding wikihow_dev.json, or the file itself
# sha256 of shared/eval/worfbench/wikihow_dev.json as handed to the project (200 records)
DEV_SHA256 = "85cf581a4944542c8e5cf9d5a263c6c6d5e0ef25dc9a3a5258909d5de960c109"

MAX_ORDERS = 20  # graph_evaluator.all_topological_sorts keeps the first 20
LIST_ORDER_FROM = 10  # ... and from this many nodes (START and END included) only the list

# node_eval.workflow_to_graph_list's patterns, verbatim
_UP_NODE = re.compile(r"\d+[:.] (.+)")
_UP_EDGE = re.compile(r"\(\s*(\d+|START)\s*,\s*(\d+|END)\s*\)")
_CLEAN_NODE = re.compile(r"(\d+)\s*[:.]\s*(.*\S)\s*$")
_TITLE = re.compile(r"Task:\s*(.+?)\s*(?:\n|$)")


class WorfbenchMissing(FileNotFoundError):
    """The benchmark's data is not where it was looked for (it is never part of the repository)."""


class WorfbenchFormatError(ValueError):
    """A record does not have the benchmark's shape."""


@dataclass(frozen=True)
class Graph:
    """A workflow as the benchmark holds it: ``nodes[0]`` is START, ``nodes[-1]`` is END,
    ``edges`` index into ``nodes``."""

    nodes: tuple[str, ...]
    edges: tuple[tuple[int, int], ...]

    @property
    def steps(self) -> tuple[str, ...]:
        return self.nodes[1:-1]


@dataclass(frozen=True)
class WorfTask:
    """One task: what a planner may see (``title``) and the gold it is scored against."""

    id: str
    category: str
    title: str  # "How to ...", nothing else: the action list never reaches a planner
    gold: Graph  # clean reading
    gold_upstream: Graph  # the benchmark's own reading

    @property
    def steps(self) -> tuple[str, ...]:
        """The gold steps in their listed order."""
        return self.gold.steps

    @property
    def edges(self) -> tuple[tuple[int, int], ...]:
        """Gold dependencies: 0 is START, ``len(steps) + 1`` is END, step ``i`` is ``i``."""
        return self.gold.edges


# ------------------------------------------------------------------------------ parsing


def parse_upstream(text: str) -> Graph | None:
    """``workflow_to_graph_list`` of the benchmark: None where it gives ``[]`` (no "Node" in
    the text, or no edge), which the benchmark scores 0."""
    if "Node" not in text:
        return None
    nodes = ["START", *(m.strip() for m in _UP_NODE.findall(text)), "END"]
    found = _UP_EDGE.findall(text)
    if not found:
        return None
    end = len(nodes) - 1
    edges = tuple((0 if a == "START" else int(a), end if b == "END" else int(b)) for a, b in found)
    return Graph(tuple(nodes), edges)


def parse_clean(text: str) -> Graph:
    """The ``Node:`` block's numbered steps (1, 2, ... in sequence) and the edges between them."""
    head, sep, tail = text.partition("Node:")
    if not sep:
        raise WorfbenchFormatError("the gold answer has no 'Node:' block")
    steps: list[str] = []
    rest = tail.lstrip("\n").split("\n")
    consumed = 0
    for line in rest:
        m = _CLEAN_NODE.match(line.strip())
        if not m or int(m.group(1)) != len(steps) + 1:
            break
        steps.append(m.group(2).strip())
        consumed += 1
    if not steps:
        raise WorfbenchFormatError("the gold answer's 'Node:' block lists no step")
    end = len(steps) + 1
    edges: list[tuple[int, int]] = []
    for a, b in _UP_EDGE.findall("\n".join(rest[consumed:])):
        edge = (0 if a == "START" else int(a), end if b == "END" else int(b))
        if all(0 <= x <= end for x in edge) and edge not in edges:
            edges.append(edge)
    return Graph(("START", *steps, "END"), tuple(edges))


def task_title(user_turn: str) -> str:
    """The "How to ..." line of a user turn, without the action list that follows it."""
    m = _TITLE.search(user_turn)
    if not m:
        raise WorfbenchFormatError("the user turn has no 'Task: ...' line")
    title = m.group(1)
    if "action list" in title.lower() or "[" in title:
        raise WorfbenchFormatError(f"the title {title[:60]!r} carries more than the task")
    return title


def gold_orders(graph: Graph, *, upstream: bool) -> list[tuple[str, ...]]:
    """The gold step orders a prediction is compared with (the best one counts).

    ``upstream``: ``all_topological_sorts`` as the benchmark has it (START and END kept as steps
    in the list-order case). Otherwise the same orders without START and END. A graph that has
    no topological order (a cycle, or an edge to a node that does not exist, which the
    benchmark would crash on) gives its list order."""
    import networkx as nx

    n = len(graph.nodes)
    if n >= LIST_ORDER_FROM:
        return [graph.nodes if upstream else graph.steps]
    if any(not (0 <= x < n) for e in graph.edges for x in e):
        return [graph.steps]
    g = nx.DiGraph()
    g.add_nodes_from(range(n))
    g.add_edges_from(graph.edges)
    try:
        sorts = list(itertools.islice(nx.all_topological_sorts(g), MAX_ORDERS))
    except nx.NetworkXUnfeasible:
        return [graph.steps]
    return [tuple(graph.nodes[i] for i in s if graph.nodes[i] not in ("START", "END")) for s in sorts]


# ------------------------------------------------------------------------------ loading


def default_path() -> Path | None:
    """``$SWARM_WORFBENCH_DIR``, else the first ``shared/eval/worfbench/wikihow_dev.json`` in a
    folder above the repository (``../shared`` beside a clone, or above a worktree)."""
    configured = os.environ.get(ENV_DIR)
    if configured:
        p = Path(configured).expanduser()
        return p / DEV_FILE if p.is_dir() else p
    root = Path(__file__).resolve().parents[2]
    for base in root.parents:
        candidate = base / "shared" / "eval" / "worfbench" / DEV_FILE
        if candidate.is_file():
            return candidate
    return None


def sha256_of(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def task_from_record(rec: dict) -> WorfTask:
    try:
        rid, conv = str(rec["id"]), rec["conversations"]
        roles = {c["role"]: c["content"] for c in conv}
        user, answer = roles["user"], roles["assistant"]
    except (KeyError, TypeError) as exc:
        raise WorfbenchFormatError(f"record {rec.get('id', '?') if isinstance(rec, dict) else '?'}: "
                                   f"missing {exc}") from None
    try:
        upstream = parse_upstream(answer)
        if upstream is None:
            raise WorfbenchFormatError("the benchmark's parser finds no workflow in the gold answer")
        return WorfTask(id=rid, category=str(rec.get("category", "")), title=task_title(user),
                        gold=parse_clean(answer), gold_upstream=upstream)
    except WorfbenchFormatError as exc:
        raise WorfbenchFormatError(f"record {rid}: {exc}") from None


def load_tasks(path: str | Path | None = None, *, limit: int | None = None,
               ids: Iterable[str] | None = None) -> list[WorfTask]:
    """The tasks of a WorFBench WikiHow file in file order (``ids`` picks some, ``limit``
    keeps the first ones)."""
    p = Path(path).expanduser() if path is not None else default_path()
    if p is not None and p.is_dir():
        p = p / DEV_FILE
    if p is None or not p.is_file():
        raise WorfbenchMissing(
            f"WorFBench WikiHow data not found ({p or 'no shared/eval/worfbench/ above the repository'}); "
            f"set {ENV_DIR} to the folder holding {DEV_FILE} (it is never part of the repository)")
    try:
        records = json.loads(p.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise WorfbenchFormatError(f"{p}: not readable as JSON: {exc}") from None
    if not isinstance(records, list):
        raise WorfbenchFormatError(f"{p}: expected a JSON list of records")
    tasks = [task_from_record(r) for r in records]
    if ids is not None:
        wanted = list(ids)
        by_id = {t.id: t for t in tasks}
        missing = [i for i in wanted if i not in by_id]
        if missing:
            raise WorfbenchFormatError(f"{p}: no task {', '.join(missing[:5])}")
        tasks = [by_id[i] for i in wanted]
    return tasks[:limit] if limit is not None else tasks
