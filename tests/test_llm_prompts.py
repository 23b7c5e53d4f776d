"""Request builders, schemas and answer parsers of agent.llm.prompts, and the validator."""

from __future__ import annotations

import pytest

from agent.llm import prompts
from agent.llm.base import LLMBadOutput, LLMRequest, parse_json_answer, schema_errors, validate
from agent.llm.prompts import (
    decompose_request,
    execute_request,
    parse_decomposition,
    parse_execution,
    parse_score,
    score_request,
    token_budget,
)

GOAL = "Plan a two-week trip to Japan"


def walk_bounded(schema: dict, where: str = "$") -> list[str]:
    """Every place in ``schema`` that is not bounded for constrained decoding."""
    problems = []
    typ = schema.get("type")
    if typ == "object":
        props = schema.get("properties", {})
        if not props:
            problems.append(f"{where}: object without properties")
        if schema.get("additionalProperties") is not False:
            problems.append(f"{where}: additionalProperties is not false")
        if set(schema.get("required", [])) != set(props):
            problems.append(f"{where}: not every property is required")
        for k, v in props.items():
            problems += walk_bounded(v, f"{where}.{k}")
    elif typ == "array":
        if "minItems" not in schema or "maxItems" not in schema:
            problems.append(f"{where}: array without minItems/maxItems")
        problems += walk_bounded(schema.get("items", {}), f"{where}[]")
    elif typ == "string":
        if "maxLength" not in schema:
            problems.append(f"{where}: string without maxLength")
    elif typ in ("integer", "number"):
        if "minimum" not in schema or "maximum" not in schema:
            problems.append(f"{where}: number without minimum/maximum")
    elif typ != "boolean":
        problems.append(f"{where}: unexpected type {typ!r}")
    return problems


def all_requests(max_children: int = 5) -> list[LLMRequest]:
    subs = [{"title": "Tokyo", "description": "See Tokyo", "atomic": True},
            {"title": "Kyoto", "description": "", "atomic": False}]
    return [
        decompose_request(goal=GOAL, path=[GOAL], title=GOAL, description="", strategy="by place",
                          max_children=max_children, seed=3),
        decompose_request(goal=GOAL, path=[GOAL], title=GOAL, description="two weeks",
                          strategy="by day", max_children=max_children, previous=subs,
                          feedback=["too vague"]),
        score_request(goal=GOAL, title=GOAL, description="", strategy="by place", subgoals=subs,
                      scorer="peer-a"),
        execute_request(goal=GOAL, path=[GOAL, "Tokyo"], title="Tokyo", description="See it"),
    ]


@pytest.mark.parametrize("max_children", [2, 5, 12])
def test_every_schema_is_bounded(max_children):
    for req in all_requests(max_children):
        assert walk_bounded(req.schema) == [], req.kind


def test_walk_bounded_catches_unbounded_schemas():
    assert walk_bounded({"type": "array", "items": {"type": "string"}}) != []
    assert walk_bounded({"type": "string"}) != []
    with pytest.raises(ValueError):
        token_budget({"type": "array", "items": {"type": "boolean"}})
    with pytest.raises(ValueError):
        token_budget({"type": "string"})


def max_string_chars(schema: dict) -> int:
    """Characters in the longest possible strings of an answer."""
    typ = schema.get("type")
    if typ == "string":
        return schema["maxLength"]
    if typ == "array":
        return schema["maxItems"] * max_string_chars(schema["items"])
    if typ == "object":
        return sum(max_string_chars(v) for v in schema["properties"].values())
    return 0


def test_max_tokens_cover_the_worst_case_answer():
    for req in all_requests():
        assert req.max_tokens == token_budget(req.schema)
        # at least one token per character of every string at its maximum length
        assert req.max_tokens > max_string_chars(req.schema)


def test_decompose_request_carries_prompt_and_context():
    req = decompose_request(goal=GOAL, path=[GOAL], title="Kyoto", description="temples",
                            strategy="by component", max_children=4, seed=9)
    assert req.kind == "decompose" and req.seed == 9
    assert req.schema["properties"]["subgoals"]["maxItems"] == 4
    assert req.schema["properties"]["subgoals"]["minItems"] == 3  # a restated task is dropped
    assert prompts.decomposition_schema(2)["properties"]["subgoals"]["minItems"] == 2
    assert "Kyoto" in req.prompt and "temples" in req.prompt
    assert prompts.STRATEGY_HINTS["by component"] in req.prompt
    assert "3 to 4 subgoals" in req.prompt
    assert req.context["title"] == "Kyoto" and req.context["strategy"] == "by component"
    assert req.context["max_children"] == 4 and req.context["previous"] is None
    assert req.context["feedback"] == []
    unknown = decompose_request(goal=GOAL, path=[], title=GOAL, description="",
                                strategy="by budget", max_children=3)
    assert "by budget" in unknown.prompt


def test_decompose_request_for_a_refinement_shows_previous_split_and_feedback():
    previous = [{"title": "Tokyo sights", "description": "", "atomic": False},
                {"title": "Osaka food", "description": "", "atomic": True}]
    req = decompose_request(goal=GOAL, path=[GOAL], title=GOAL, description="",
                            strategy="by place", max_children=5, previous=previous,
                            feedback=("Osaka food is vague",))
    assert "Tokyo sights" in req.prompt and "Osaka food is vague" in req.prompt
    assert "better split" in req.prompt
    assert req.context["previous"] == previous
    assert req.context["feedback"] == ["Osaka food is vague"]


def test_decompose_request_rejects_max_children_below_two():
    with pytest.raises(ValueError):
        decompose_request(goal=GOAL, path=[], title=GOAL, description="", strategy="x",
                          max_children=1)


def test_parse_decomposition_accepts_a_good_answer():
    answer = {"subgoals": [
        {"title": "Tokyo", "description": "Three days in Tokyo"},
        {"title": "Kyoto", "description": "Temples"},
    ]}
    # atomic is never taken from the proposer
    assert parse_decomposition(answer, max_children=5) == [
        {**s, "atomic": False} for s in answer["subgoals"]]


def test_parse_decomposition_cleans():
    answer = {"subgoals": [
        {"title": "  Tokyo   city ", "description": "  a  b ", "atomic": False},
        {"title": "TOKYO CITY", "description": "duplicate", "atomic": True},
        {"title": "   ", "description": "empty title", "atomic": True},
        {"title": "K" * 300, "description": "d" * 900, "atomic": "yes"},
        "not an object",
        {"title": "Osaka", "description": None, "atomic": True},
        {"title": "Nara", "description": "over the limit of children", "atomic": True},
    ]}
    out = parse_decomposition(answer, max_children=3)
    assert [s["title"] for s in out] == ["Tokyo city", "K" * 120, "Osaka"]
    assert out[0]["description"] == "a b"
    assert len(out[1]["description"]) == 600 and out[1]["atomic"] is False
    assert out[2]["description"] == ""


@pytest.mark.parametrize("answer", [
    {"subgoals": [{"title": "Only one", "description": "", "atomic": True}]},
    {"subgoals": [{"title": "Same", "description": "", "atomic": True},
                  {"title": " same ", "description": "", "atomic": True}]},
    {"subgoals": [{"title": "", "description": "x", "atomic": True},
                  {"title": "Real", "description": "", "atomic": True}]},
    {"subgoals": "Tokyo, Kyoto"},
    {"steps": []},
    ["not", "an", "object"],
])
def test_parse_decomposition_rejects_too_few_usable_subgoals(answer):
    with pytest.raises(LLMBadOutput):
        parse_decomposition(answer, max_children=5)


def test_score_request_lists_the_subgoals():
    subs = [{"title": "Tokyo sights", "description": "temples", "atomic": True},
            {"title": "Osaka food", "description": "", "atomic": True}]
    req = score_request(goal=GOAL, title=GOAL, description="", strategy="by place",
                        subgoals=subs, scorer="peer-b", seed=1)
    assert req.kind == "score"
    assert "1. Tokyo sights: temples" in req.prompt and "2. Osaka food" in req.prompt
    assert req.context["scorer"] == "peer-b" and req.context["subgoals"] == subs
    assert set(req.schema["required"]) == {"specificity", "non_overlap", "coverage", "feedback"}


def test_parse_score_scales_and_clamps():
    out = parse_score({"specificity": 7, "non_overlap": 15, "coverage": -2, "feedback": " ok "})
    assert out == {"specificity": 0.7, "non_overlap": 1.0, "coverage": 0.0, "feedback": "ok"}
    long = parse_score({"specificity": 1, "non_overlap": 1, "coverage": 1, "feedback": "x" * 999})
    assert len(long["feedback"]) == 400
    assert parse_score({"specificity": 1, "non_overlap": 1, "coverage": 1})["feedback"] == ""


@pytest.mark.parametrize("answer", [
    {"specificity": 5, "non_overlap": 5, "feedback": "missing coverage"},
    {"specificity": "high", "non_overlap": 5, "coverage": 5, "feedback": ""},
    {"specificity": True, "non_overlap": 5, "coverage": 5, "feedback": ""},
    {"specificity": float("nan"), "non_overlap": 5, "coverage": 5, "feedback": ""},
    "8/10",
])
def test_parse_score_rejects_bad_answers(answer):
    with pytest.raises(LLMBadOutput):
        parse_score(answer)


def test_execute_request_and_parse_execution():
    req = execute_request(goal=GOAL, path=[GOAL, "Tokyo"], title="Book a hotel in Tokyo",
                          description="near a station", seed=2)
    assert req.kind == "execute" and "Book a hotel in Tokyo" in req.prompt
    assert "Tokyo" in req.prompt.splitlines()[1]
    assert parse_execution({"result": "  Booked   Hotel A.\n\n - 3 nights. "}) == \
        "Booked Hotel A.\n- 3 nights."
    # cut at the grammar's bound mid-sentence: ends at the last whole sentence
    assert parse_execution({"result": "Booked Hotel A. Then we take the"}) == "Booked Hotel A."
    assert parse_execution({"result": "}I booked it."}) == "I booked it."  # debris seen
    assert len(parse_execution({"result": "Word. " * 1000})) <= 4000


@pytest.mark.parametrize("answer", [{"result": ""}, {"result": " \n "}, {"result": 3}, {}, [1]])
def test_parse_execution_rejects_empty_results(answer):
    with pytest.raises(LLMBadOutput):
        parse_execution(answer)


def test_validator():
    schema = prompts.decomposition_schema(3)
    good = {"subgoals": [{"title": "abc", "description": ""}] * 3}
    assert validate(good, schema) is good
    assert schema_errors({"subgoals": [{"title": "abc", "description": 1}] * 3}, schema)
    assert schema_errors({"subgoals": [{"title": "abc", "description": "", "atomic": True}] * 3},
                         schema)
    assert schema_errors({"subgoals": [{"title": "ab", "description": ""}] * 3}, schema)
    assert schema_errors({"subgoals": good["subgoals"][:2]}, schema)  # 2 < minItems 3
    assert schema_errors({"subgoals": good["subgoals"] * 2}, schema)  # 6 > maxItems 3
    assert schema_errors({"subgoals": good["subgoals"], "extra": 1}, schema)
    assert schema_errors({}, schema)
    score = prompts.score_schema()
    assert schema_errors({"specificity": 11, "non_overlap": 1, "coverage": 1, "feedback": ""},
                         score)
    assert schema_errors({"specificity": True, "non_overlap": 1, "coverage": 1, "feedback": ""},
                         score)
    assert not schema_errors({"specificity": 1.0, "non_overlap": 1, "coverage": 0,
                              "feedback": ""}, score)
    with pytest.raises(LLMBadOutput, match="not a JSON object"):
        validate([1], schema)
    with pytest.raises(LLMBadOutput, match="not JSON"):
        parse_json_answer('{"subgoals": [', schema)
    with pytest.raises(LLMBadOutput, match="empty"):
        parse_json_answer("", schema)
    with pytest.raises(LLMBadOutput, match="schema"):
        parse_json_answer('{"subgoals": []}', schema)
