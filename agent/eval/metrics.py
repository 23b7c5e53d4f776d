"""Deterministic quality metrics of one plan (a tree of JSON nodes), documented in
docs/quality.md. Every rate is in [0, 1]; for penalties lower is better.

A node is a dict with ``title``, ``description``, ``children``, and optionally ``result``
(text, or ``{"output": text}`` as in the swarm's tree JSON), ``answer`` (a synthesis),
``proposals`` (each with ``subgoals``: titles) and ``leaf_reason``. The swarm's
``Tree.to_json()`` nodes and the benchmark's own nodes both fit.
"""

from __future__ import annotations

import itertools
from typing import Any, Iterator, Mapping, Sequence

from agent.core import text as tx

# the penalties multiplied into the single `quality` figure (see docs/quality.md)
PENALTIES = ("repeats_ancestor", "duplicate_siblings", "overlap_across", "placeholders",
             "nonwords", "wrong_language", "cut_results", "bad_results")


def result_text(node: Mapping[str, Any]) -> str:
    r = node.get("result")
    if isinstance(r, Mapping):
        r = r.get("output")
    return str(r or "").strip()


def walk(node: Mapping[str, Any], ancestors: tuple[Mapping[str, Any], ...] = ()
         ) -> Iterator[tuple[Mapping[str, Any], tuple[Mapping[str, Any], ...]]]:
    yield node, ancestors
    for c in node.get("children") or ():
        yield from walk(c, ancestors + (node,))


def _rate(hits: int, total: int) -> float:
    return round(hits / total, 4) if total else 0.0


def aspect_coverage(texts: Sequence[str], aspects: Mapping[str, Sequence[str]]) -> tuple[float, list[str]]:
    """Share of the goal's aspects whose words (stemmed; phrases must appear whole) occur in the
    plan's text, and the aspects missed."""
    if not aspects:
        return 1.0, []
    stems: set[str] = set()
    joined = " ".join(" ".join(tx.tokens(t)) for t in texts)
    stemmed_text = " " + " ".join(tx.stem(w) for w in joined.split()) + " "
    for t in texts:
        stems |= {tx.stem(w) for w in tx.tokens(t)}
    missed = []
    for name, words in aspects.items():
        hit = False
        for w in words:
            parts = [tx.stem(p) for p in tx.tokens(w)]
            if len(parts) == 1:
                # prefixes like "fertil" or "advertis" match any inflection
                hit = parts[0] in stems or any(s.startswith(parts[0]) for s in stems if len(parts[0]) >= 5)
            else:
                hit = f" {' '.join(parts)} " in stemmed_text
            if hit:
                break
        if not hit:
            missed.append(name)
    return round(1 - len(missed) / len(aspects), 4), missed


def plan_metrics(root: Mapping[str, Any], aspects: Mapping[str, Sequence[str]] | None = None,
                 max_depth: int | None = None) -> dict[str, Any]:
    nodes = list(walk(root))
    goal = str(root.get("title", ""))
    english = tx.english_goal(goal)
    subgoals = [(n, anc) for n, anc in nodes if anc]  # every node but the root
    leaves = [n for n, _ in nodes if not n.get("children")]
    internal = [n for n, _ in nodes if n.get("children")]

    repeats = sum(any(tx.repeats(n["title"], a["title"]) for a in anc) for n, anc in subgoals)

    dup_siblings = 0
    within: list[float] = []
    for parent in internal:
        titles = [c["title"] for c in parent["children"]]
        dup_siblings += sum(any(tx.near_duplicate(t, e) for e in titles[:i])
                            for i, t in enumerate(titles))
        within += [tx.similarity(a, b) for a, b in itertools.combinations(titles, 2)]

    # across branches: a node repeating a node that is neither its ancestor, descendant nor sibling
    across = 0
    paths = {id(n): anc for n, anc in nodes}
    for n, anc in subgoals:
        mine = {id(a) for a in anc}
        for m, manc in subgoals:
            if m is n or id(m) in mine or id(n) in {id(a) for a in manc}:
                continue
            if manc and anc and manc[-1] is anc[-1]:
                continue  # siblings are counted above
            if tx.near_duplicate(n["title"], m["title"]):
                across += 1
                break
    del paths

    titles = [n["title"] for n, _ in nodes]
    results = [result_text(n) for n in leaves if result_text(n)]
    answers = [str(n.get("answer") or "").strip() for n, _ in nodes if n.get("answer")]
    prose = results + answers
    placeholder_hits = sum(bool(tx.placeholders(t)) for t in titles + prose)
    nonword_titles = sum(tx.mostly_nonwords(t) for t in titles[1:])
    wrong_lang = sum(not tx.looks_english(t) for t in titles[1:] + prose) if english else 0
    cut = sum(not tx.ends_at_sentence(t) for t in prose)
    bad = sum(tx.long_digit_run(t) or tx.digit_share(t) > 0.3 or tx.mostly_nonwords(t)
              for t in prose)

    depth = max(len(anc) for _, anc in nodes)
    proposals = [len(n.get("proposals") or ()) for n in internal]
    cover_texts = titles + [str(n.get("description") or "") for n, _ in nodes[1:]] + prose
    coverage, missed = aspect_coverage(cover_texts, aspects or {})

    m: dict[str, Any] = {
        "nodes": len(nodes),
        "leaves": len(leaves),
        "depth": depth,
        "depth_ratio": round(depth / max_depth, 4) if max_depth else None,
        "proposals_per_split": round(sum(proposals) / len(proposals), 3) if proposals else 0.0,
        "repeats_ancestor": _rate(repeats, len(subgoals)),
        "duplicate_siblings": _rate(dup_siblings, len(subgoals)),
        "overlap_within": round(sum(within) / len(within), 4) if within else 0.0,
        "overlap_across": _rate(across, len(subgoals)),
        "placeholders": _rate(placeholder_hits, len(titles) + len(prose)),
        "nonwords": _rate(nonword_titles, len(titles) - 1),
        "wrong_language": _rate(wrong_lang, len(titles) - 1 + len(prose)),
        "cut_results": _rate(cut, len(prose)),
        "bad_results": _rate(bad, len(prose)),
        "missing_results": _rate(sum(not result_text(n) for n in leaves), len(leaves)),
        "result_words": round(sum(len(tx.tokens(r)) for r in results) / len(results), 1) if results else 0.0,
        "summary": bool(str(root.get("answer") or "").strip()),
        "coverage": coverage,
        "missed_aspects": missed,
    }
    m["quality"] = quality(m)
    return m


def quality(m: Mapping[str, Any]) -> float:
    """One figure in [0, 100]: the product of (1 - each penalty), so any one kind of failure
    pulls it down hard, times (0.5 + 0.5 coverage), times (0.5 + 0.5 depth reached) when a
    depth limit is known, times the share of leaves with a result. A plan without subgoals
    scores 0."""
    if m["nodes"] <= 1:
        return 0.0
    q = 1.0
    for k in PENALTIES:
        q *= 1 - min(1.0, float(m[k]))
    q *= 0.5 + 0.5 * float(m["coverage"])
    if m.get("depth_ratio") is not None:
        q *= 0.5 + 0.5 * min(1.0, float(m["depth_ratio"]))
    return round(100 * q * (1 - float(m["missing_results"])), 1)


def aggregate(per_goal: Sequence[Mapping[str, Any]]) -> dict[str, float]:
    """Mean of each numeric metric over goals."""
    keys = [k for k, v in per_goal[0].items() if isinstance(v, (int, float)) and not isinstance(v, bool)] if per_goal else []
    out = {k: round(sum(float(g[k] or 0) for g in per_goal) / len(per_goal), 4) for k in keys}
    out["summary"] = round(sum(bool(g.get("summary")) for g in per_goal) / len(per_goal), 4) if per_goal else 0.0
    return out
