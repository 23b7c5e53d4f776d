"""How the electors judged, read off a plan's tree JSON: how often judging rejects (splits scored
not acceptable, results sent back) and how often electors agree (the first round's prevotes on
a node all for the same value)."""

from __future__ import annotations

from typing import Any, Iterator, Mapping


def _walk(n: Mapping[str, Any]) -> Iterator[Mapping[str, Any]]:
    yield n
    for c in n.get("children") or ():
        yield from _walk(c)


def judging_stats(root: Mapping[str, Any]) -> dict[str, Any]:
    scores = rejected = 0
    voted = unanimous = 0
    reviews = review_rejects = sent_back = 0
    for n in _walk(root):
        for p in n.get("proposals") or ():
            for s in p.get("scores") or ():
                scores += 1
                rejected += not s.get("acceptable", True)
        rounds = n.get("rounds") or ()
        first = next((r for r in rounds if r.get("round") == 1), None)
        if first and first.get("prevotes"):
            voted += 1
            unanimous += len(first["prevotes"]) == 1
        for past in n.get("history") or ():
            sent_back += 1
            for r in past.get("reviews") or ():
                reviews += 1
                review_rejects += not r.get("accept", True)
        for r in n.get("reviews") or ():
            reviews += 1
            review_rejects += not r.get("accept", True)
    return {
        "split_judgments": scores,
        "split_rejection_rate": round(rejected / scores, 3) if scores else None,
        "voted_nodes": voted,
        "first_round_agreement": round(unanimous / voted, 3) if voted else None,
        "result_reviews": reviews,
        "review_rejection_rate": round(review_rejects / reviews, 3) if reviews else None,
        "results_sent_back": sent_back,
    }
