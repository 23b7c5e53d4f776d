"""Deterministic checks of a proposed split, combined with an LLM's judgment into a vote.

The checks catch what a small model gets wrong most often: subgoals that repeat each other,
subgoals that just repeat the parent, and empty or vague items.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Sequence

STOPWORDS = frozenset(
    "a an and are as at be by for from in into is it its of on or the to with your you this that "
    "plan part step task make do get all any each".split()
)
VAGUE = frozenset("misc miscellaneous other others stuff things etc various general tbd todo more".split())
NEAR_DUP = 0.6
REPEAT = 0.75
APPROVE_THRESHOLD = 0.5


def words(text: str) -> frozenset[str]:
    return frozenset(w for w in re.findall(r"[a-z0-9]+", text.lower()) if len(w) > 1 and w not in STOPWORDS)


def jaccard(a: frozenset[str], b: frozenset[str]) -> float:
    if not a and not b:
        return 1.0
    return len(a & b) / len(a | b)


@dataclass(frozen=True)
class Checks:
    n: int
    duplicates: int  # subgoals that duplicate or nearly duplicate an earlier one
    repeats_parent: int
    vague: int
    notes: tuple[str, ...] = field(default_factory=tuple)

    @property
    def hard_fail(self) -> bool:
        return self.n < 2 or 2 * max(self.duplicates, self.repeats_parent, self.vague) >= self.n

    @property
    def clean(self) -> bool:
        return not (self.duplicates or self.repeats_parent or self.vague)


def check_split(parent_title: str, subgoal_titles: Sequence[str]) -> Checks:
    parent = words(parent_title)
    seen: list[frozenset[str]] = []
    dup = rep = vague = 0
    notes = []
    for title in subgoal_titles:
        w = words(title)
        if not w or w <= VAGUE or len(title.strip()) < 3 or not re.search(r"[A-Za-z]{3}", title):
            vague += 1
            notes.append(f"'{title[:40]}' is vague")
        if w and (w <= parent or jaccard(w, parent) >= REPEAT):
            rep += 1
            notes.append(f"'{title[:40]}' only repeats the parent")
        if any(jaccard(w, s) >= NEAR_DUP for s in seen):
            dup += 1
            notes.append(f"'{title[:40]}' overlaps another subgoal")
        seen.append(w)
    return Checks(len(subgoal_titles), dup, rep, vague, tuple(notes))


@dataclass(frozen=True)
class Verdict:
    specificity: float
    non_overlap: float
    coverage: float
    feedback: str
    hard_fail: bool

    @property
    def overall(self) -> float:
        return (self.specificity + self.non_overlap + self.coverage) / 3

    @property
    def acceptable(self) -> bool:
        return not self.hard_fail and self.overall >= APPROVE_THRESHOLD


LLM_WEIGHT = 0.5  # a small local model's judgment is noisy: the checks carry half the score


def combine(llm: dict[str, float | str], checks: Checks, llm_weight: float = LLM_WEIGHT) -> Verdict:
    """Blend the LLM's scores with what the checks measured; feedback lists the checks'
    findings first. A hard failure of the checks can never be approved."""
    n = max(checks.n, 1)
    own_spec = max(0.0, 1 - checks.vague / n - 0.5 * checks.repeats_parent / n)
    own_non_overlap = max(0.0, 1 - checks.duplicates / n)
    own_coverage = min(1.0, checks.n / 3) * (1 - 0.5 * checks.repeats_parent / n)
    w = llm_weight
    spec = w * float(llm["specificity"]) + (1 - w) * own_spec
    non_overlap = min(w * float(llm["non_overlap"]) + (1 - w) * own_non_overlap, own_non_overlap)
    coverage = w * float(llm["coverage"]) + (1 - w) * own_coverage
    parts = list(checks.notes[:3])
    if llm.get("feedback"):
        parts.append(str(llm["feedback"]))
    feedback = "; ".join(parts)[:400]
    r = lambda x: round(min(1.0, max(0.0, x)), 3)  # noqa: E731
    return Verdict(r(spec), r(non_overlap), r(coverage), feedback, checks.hard_fail)


def result_problem(output: str) -> str | None:
    """Why a task result is unusable (a small model sometimes emits digits or template junk),
    or None if it reads like prose."""
    text = output.strip()
    prose = re.findall(r"[A-Za-z]{2,}", text)
    if len(prose) < 4:
        return "the result has fewer than four words"
    if "{{" in text or "}}" in text:
        return "the result contains template placeholders"
    return None
