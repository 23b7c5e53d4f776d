"""The benchmark's metrics on fixed plans: the reviewer's verbatim bad plan scores worse than
a good plan written by hand, on every metric meant to catch what it got wrong."""

from __future__ import annotations

import pytest

from agent.eval.goals import GOALS, goal_by_id
from agent.eval.metrics import aggregate, aspect_coverage, plan_metrics


def node(title, children=(), result=None, answer=None, proposals=1):
    return {"title": title, "description": "", "children": list(children), "result": result,
            "answer": answer, "proposals": [{"subgoals": []}] * proposals if children else []}


# Built from the verbatim examples of issue 10 (SmolLM2-135M plans).
BAD = node("Plan a two-week trip to Japan", [
    node("plan a two-week trip to Japan", [
        node("go to Tokyo, Japan", result="I will be visiting Tokyo from 12th January to 30th February"),
        node("visit Tokyo, Japan", result="1234567890 1234567890 12345678901234567890"),
        node("stay in Tokyo, Japan", result="Zrobię rezerwację hotelu w Krakowie i pojadę do Warszawy jutro rano, "
                                            "potem śniadanie w hotelu i zwiedzanie miasta z przewodnikiem"),
    ]),
    node("buy tickets", [
        node("Day 1: arrival", result="Arrive at the airport and take"),
        node("Launch a local bakery in the city of [city]", result="Open the bakery in {city} soon."),
    ]),
    node("deluxe dining,", [
        node("Day 1: arrival", result="Day 1: arrival and the"),
        node("Design a 50-year-old furniture", result="Escape the Black Forest"),
    ]),
    node("food,", result="food food food"),
])

GOOD = node("Plan a two-week trip to Japan", [
    node("Book return flights and a rail pass", [
        node("Compare flights to Tokyo for April", result=(
            "I compared three airlines from Frankfurt to Tokyo Haneda for 2 to 16 April. "
            "Lufthansa direct costs 980 euros each and lands at 9:00. I booked it for two adults.")),
        node("Decide on a 14-day Japan Rail Pass", result=(
            "The route Tokyo, Kyoto, Hiroshima and back costs about 90000 yen in single tickets. "
            "A 14-day pass costs 80000 yen, so we buy it online before leaving.")),
    ], answer="Flights are booked for 2 to 16 April and a 14-day rail pass covers the trains."),
    node("Choose cities and hotels", [
        node("Split the nights between Tokyo, Kyoto and Hiroshima", result=(
            "We spend five nights in Tokyo, five in Kyoto and three in Hiroshima. "
            "Kyoto gets most time because of its temples.")),
        node("Reserve hotels near the main stations", result=(
            "I reserved hotels within ten minutes of each station, with free cancellation. "
            "The total for thirteen nights is 1900 euros, and one night is at a ryokan.")),
    ], answer="Five nights in Tokyo, five in Kyoto and three in Hiroshima, in hotels near the stations."),
    node("Prepare money, documents and insurance", result=(
        "Our passports are valid, and no visa is needed for a tourist stay. "
        "We take travel insurance and plan a budget of 60 euros a day each for food.")),
], answer=("A two-week trip in April: flights and a rail pass are booked, thirteen nights are "
           "split between Tokyo, Kyoto and Hiroshima, and documents and insurance are ready."))

JAPAN = goal_by_id("japan-trip").aspects


def test_the_bad_plan_scores_worse_than_the_good_one_overall():
    bad, good = plan_metrics(BAD, JAPAN, 2), plan_metrics(GOOD, JAPAN, 2)
    assert good["quality"] > 80
    assert bad["quality"] < good["quality"] - 25


@pytest.mark.parametrize("metric", [
    "repeats_ancestor", "duplicate_siblings", "overlap_across", "placeholders", "wrong_language",
    "cut_results", "bad_results", "overlap_within",
])
def test_each_penalty_catches_the_bad_plan(metric):
    bad, good = plan_metrics(BAD, JAPAN, 2), plan_metrics(GOOD, JAPAN, 2)
    assert bad[metric] > 0, metric
    assert good[metric] < bad[metric], metric


def test_coverage_is_about_the_goals_aspects_not_a_count():
    bad, good = plan_metrics(BAD, JAPAN, 2), plan_metrics(GOOD, JAPAN, 2)
    assert good["coverage"] == 1.0 and bad["coverage"] <= 0.5
    assert "documents" in bad["missed_aspects"]
    # many subgoals that miss the aspects do not cover more
    many = node("Plan a two-week trip to Japan", [node(f"Relax on day {i}", result="We relax.") for i in range(8)])
    assert plan_metrics(many, JAPAN, 2)["coverage"] < good["coverage"]


def test_depth_summary_and_proposals_are_reported():
    good = plan_metrics(GOOD, JAPAN, 2)
    assert good["depth"] == 2 and good["depth_ratio"] == 1.0
    assert good["summary"] is True and good["proposals_per_split"] == 1.0
    flat = node("Plan a two-week trip to Japan", [node("Tokyo", result="We see Tokyo."),
                                                  node("Kyoto", result="We see Kyoto.")])
    m = plan_metrics(flat, JAPAN, 2)
    assert m["depth"] == 1 and m["depth_ratio"] == 0.5 and m["summary"] is False


def test_missing_results_and_an_empty_plan():
    unfinished = node("Plan a two-week trip to Japan", [node("Tokyo"), node("Kyoto", result="We go.")])
    assert plan_metrics(unfinished, JAPAN, 2)["missing_results"] == 0.5
    assert plan_metrics(node("Plan a two-week trip to Japan"), JAPAN, 2)["quality"] == 0.0


def test_the_swarms_tree_json_shape_is_accepted():
    # results as {"output": ...} as in NodeView.to_json()
    tree_like = node("Plan a two-week trip to Japan", [
        {**node("Book flights to Tokyo"), "result": {"author": "x", "claim": "c", "output": "Booked the flight."}},
        {**node("Book a hotel in Kyoto"), "result": {"author": "x", "claim": "c", "output": "Booked a hotel."}},
    ])
    m = plan_metrics(tree_like, JAPAN, 1)
    assert m["missing_results"] == 0 and m["cut_results"] == 0


def test_aspect_phrases_and_prefixes():
    cov, missed = aspect_coverage(["We fertilised the soil", "race day is Sunday"],
                                  {"soil": ("fertil",), "race": ("race day",), "other": ("harvest",)})
    assert missed == ["other"] and round(cov, 2) == 0.67


def test_every_goal_has_aspects_and_a_distinct_domain_mix():
    assert len(GOALS) >= 12 and len({g.id for g in GOALS}) == len(GOALS)
    assert len({g.domain for g in GOALS}) >= 8
    assert all(len(g.aspects) >= 4 for g in GOALS)


def test_aggregate_means():
    a = aggregate([plan_metrics(BAD, JAPAN, 2), plan_metrics(GOOD, JAPAN, 2)])
    assert 0 < a["quality"] < 100 and a["summary"] == 0.5
