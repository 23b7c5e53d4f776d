"""Test doubles for the WorFBench metric: an embedder whose cosines the test sets, and tasks
written here (never the benchmark's own data, which is not part of the repository)."""

from __future__ import annotations

import math

import numpy as np

from agent.eval.worfbench import WorfTask, task_from_record


class FakeEmbedder:
    """Each new text gets a fresh orthogonal direction; ``like(base, text, cos)`` makes
    ``text``'s vector have cosine ``cos`` with ``base``'s, and ``mix`` combines several bases.
    Texts it was not told about are unrelated to everything (cosine 0)."""

    def __init__(self, dim: int = 256) -> None:
        self.dim = dim
        self.vecs: dict[str, np.ndarray] = {}
        self._next = 0
        self.calls: list[list[str]] = []

    def _fresh(self) -> np.ndarray:
        if self._next >= self.dim:
            raise AssertionError("FakeEmbedder ran out of directions; give it a larger dim")
        v = np.zeros(self.dim)
        v[self._next] = 1.0
        self._next += 1
        return v

    def vec(self, text: str) -> np.ndarray:
        if text not in self.vecs:
            self.vecs[text] = self._fresh()
        return self.vecs[text]

    def mix(self, text: str, parts: dict[str, float]) -> None:
        """``text`` = sum of coeff * vec(base) (bases made fresh, so orthogonal) + the rest."""
        v = sum(c * self.vec(b) for b, c in parts.items())
        rest = 1.0 - sum(c * c for c in parts.values())
        assert rest >= -1e-12, "coefficients too large"
        self.vecs[text] = v + math.sqrt(max(rest, 0.0)) * self._fresh()

    def like(self, base: str, text: str, cos: float) -> None:
        self.mix(text, {base: cos})

    def embed(self, texts):
        self.calls.append(list(texts))
        return np.stack([self.vec(t) for t in texts]).astype(np.float32) if texts else np.zeros((0, self.dim), np.float32)


def answer_text(steps, edges=None, commentary: str = "") -> str:
    """A gold answer in the benchmark's shape. ``edges`` use 0 = START, len+1 = END; default a chain."""
    n = len(steps)
    if edges is None:
        edges = [(i, i + 1) for i in range(n + 1)]
    name = lambda x: "START" if x == 0 else "END" if x == n + 1 else str(x)  # noqa: E731
    return ("Node:\n" + "".join(f"{i}: {s}\n" for i, s in enumerate(steps, 1)) + commentary
            + "Edge: " + " ".join(f"({name(a)},{name(b)})" for a, b in edges))


def record(steps, edges=None, *, id="t1", title="How to Test a Metric", commentary="",
           actions=("Do a thing.", "Do another thing.")) -> dict:
    return {
        "id": id, "category": "eval", "source": "wikihow", "target": "graph",
        "conversations": [
            {"role": "system", "content": "You are a helpful task planner."},
            {"role": "user", "content": f"Task: {title}\nThe action list you can take: {list(actions)!r}"},
            {"role": "assistant", "content": answer_text(steps, edges, commentary)},
        ],
    }


def make_task(steps, edges=None, **kw) -> WorfTask:
    return task_from_record(record(steps, edges, **kw))
