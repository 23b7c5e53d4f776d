"""WorFBench's node F1: how many of the gold steps a plan names, in an order the gold allows.

As the benchmark computes it (zjunlp/WorFBench, evaluator/graph_evaluator.py ``t_eval_nodes``,
``t_eval_plan`` and ``match_node``, read in public copies of the repository):

1. embed every predicted and every gold step (all-mpnet-base-v2, mean pooling, normalised);
   similarity = cosine, negatives clipped to 0;
2. an edge for every pair above 0.6, weighted by its similarity; networkx's
   ``max_weight_matching`` on that bipartite graph (pred nodes ``i``, gold nodes ``str(j)``,
   added in row order, as upstream does, so that ties break the same way): one-to-one;
3. k = the longest run of predicted steps, in predicted order, whose matched gold indices
   increase. Upstream's dynamic programme starts every position at 1, matched or not, so a
   prediction that matches nothing still has k = 1: the ``upstream`` variant keeps that, the
   ``strict`` one starts at 0;
4. P = k / predicted steps, R = k / gold steps, F1 = 2PR / (P + R); the gold is a DAG, so this
   is done for each of its orders (``worfbench.gold_orders``) and the order of highest F1 counts.

An empty prediction scores 0 (upstream skips an unparseable prediction and still divides by
every task, which is the same). ``upstream`` also reads the gold with the benchmark's parser
(``WorfTask.gold_upstream``); ``strict`` reads the clean ``Node:`` block.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING, Mapping, Sequence

from agent.eval.embedding import Embedder
from agent.eval.worfbench import Graph, WorfTask, gold_orders, parse_upstream

if TYPE_CHECKING:
    import numpy as np

THRESHOLD = 0.6
VARIANTS = ("upstream", "strict")


@dataclass(frozen=True)
class PRF:
    precision: float
    recall: float
    f1: float
    k: int  # matched steps in a gold-consistent order
    predicted: int
    gold: int

    def to_json(self) -> dict:
        return asdict(self)


ZERO = PRF(0.0, 0.0, 0.0, 0, 0, 0)


def similarity(pred: "np.ndarray", gold: "np.ndarray", embedder: Embedder | None = None) -> "np.ndarray":
    """Cosines (the embedder's own ``similarity`` where it has one, else the dot product of the
    normalised rows), clipped at 0, as float64: upstream copies its float32 cosines into a
    float64 matrix before thresholding."""
    import numpy as np

    cos = getattr(embedder, "similarity", None)
    raw = cos(pred, gold) if cos is not None else pred @ gold.T
    return np.maximum(raw, 0).astype(np.float64)


def match(sim: "np.ndarray", threshold: float = THRESHOLD) -> dict[int, int]:
    """Maximum-weight one-to-one matching of predicted to gold steps over pairs above
    ``threshold``: {pred index: gold index}, unmatched predicted steps absent."""
    import networkx as nx

    g = nx.Graph()
    rows, cols = sim.shape
    for i in range(rows):
        for j in range(cols):
            if sim[i][j] > threshold:
                g.add_edge(i, str(j), weight=sim[i][j])
    out: dict[int, int] = {}
    for a, b in nx.max_weight_matching(g):
        if isinstance(a, int):
            out[a] = int(b)
        else:
            out[b] = int(a)
    return out


def ordered_count(mapping: Mapping[int, int], predicted: int, *, start_at_one: bool) -> int:
    """The longest subsequence of predicted positions whose gold indices increase.

    ``start_at_one`` is upstream's ``dp = np.ones(len_pred)``: an unmatched position counts 1
    too, so k >= 1 whenever anything was predicted."""
    dp = [1 if (start_at_one or i in mapping) else 0 for i in range(predicted)]
    for i in range(predicted):
        for j in range(i):
            if i in mapping and j in mapping and mapping[i] > mapping[j]:
                dp[i] = max(dp[i], dp[j] + 1)
    return max(dp, default=0)


def prf(k: int, predicted: int, gold: int) -> PRF:
    if predicted == 0 or gold == 0 or k == 0:
        return PRF(0.0, 0.0, 0.0, 0, predicted, gold)
    p, r = k / predicted, k / gold
    return PRF(p, r, 2 * p * r / (p + r), k, predicted, gold)


def score_orders(pred: Sequence[str], orders: Sequence[Sequence[str]], embedder: Embedder, *,
                 start_at_one: bool, threshold: float = THRESHOLD) -> PRF:
    """The best PRF of ``pred`` over the gold ``orders`` (the first of equal F1s, as upstream)."""
    import numpy as np

    if not pred or not orders or not any(orders):
        return prf(0, len(pred), len(orders[0]) if orders else 0)
    distinct = list(dict.fromkeys(s for o in orders for s in o))
    vecs = embedder.embed([*pred, *distinct])
    pv, gv = vecs[: len(pred)], vecs[len(pred):]
    where = {s: i for i, s in enumerate(distinct)}
    best = prf(0, len(pred), len(orders[0]))
    for order in orders:
        # the matrix of this order, computed afresh as upstream does: a permuted copy could differ
        # in the last bit, and a tie between equal-weight matchings turns on that bit
        sim = similarity(pv, gv[np.array([where[s] for s in order], dtype=int)], embedder)
        k = ordered_count(match(sim, threshold), len(pred), start_at_one=start_at_one)
        result = prf(k, len(pred), len(order))
        if result.f1 > best.f1:
            best = result
    return best


def _pred_steps(steps: Sequence[str], upstream: bool) -> list[str]:
    if upstream:  # verbatim, less nodes that are literally START or END (its parser adds them)
        return [s for s in steps if s not in ("START", "END")]
    return [s.strip() for s in steps if s and s.strip()]


def score_graph(pred: Sequence[str], gold: Graph, embedder: Embedder, *, variant: str,
                threshold: float = THRESHOLD) -> PRF:
    if variant not in VARIANTS:
        raise ValueError(f"unknown node-F1 variant {variant!r}; known: {', '.join(VARIANTS)}")
    upstream = variant == "upstream"
    return score_orders(_pred_steps(pred, upstream), gold_orders(gold, upstream=upstream), embedder,
                        start_at_one=upstream, threshold=threshold)


def node_f1(pred: Sequence[str], task: WorfTask, embedder: Embedder,
            threshold: float = THRESHOLD) -> dict[str, PRF]:
    """Both variants of one prediction (an ordered list of step texts) against ``task``."""
    return {
        "upstream": score_graph(pred, task.gold_upstream, embedder, variant="upstream", threshold=threshold),
        "strict": score_graph(pred, task.gold, embedder, variant="strict", threshold=threshold),
    }


def upstream_text_f1(answer: str, task: WorfTask, embedder: Embedder,
                     threshold: float = THRESHOLD) -> PRF:
    """The benchmark's score of a model's raw answer text (``Node: ... Edge: ...``), parsed by
    its own parser: 0 where that parser finds no workflow. For checking this implementation
    against published predictions."""
    graph = parse_upstream(answer)
    if graph is None:
        return ZERO
    return score_graph(list(graph.nodes), task.gold_upstream, embedder, variant="upstream",
                       threshold=threshold)


def mean(scores: Sequence[PRF]) -> dict[str, float]:
    """Precision, recall and F1 averaged over tasks (F1 per task, then averaged, as upstream)."""
    n = len(scores)
    if not n:
        return {"precision": 0.0, "recall": 0.0, "f1": 0.0, "tasks": 0}
    return {"precision": sum(s.precision for s in scores) / n, "recall": sum(s.recall for s in scores) / n,
            "f1": sum(s.f1 for s in scores) / n, "tasks": n}
