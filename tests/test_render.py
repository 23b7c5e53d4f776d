"""The final Markdown reads as one plan: the goal, its executive summary, then numbered
sections that use each node's synthesised answer where there is one."""

from __future__ import annotations

from agent.render import markdown_from_json, markdown_plan


def test_answers_are_used_and_the_summary_leads():
    plan = {"title": "Launch a small online bakery", "description": "Home-based",
            "answer": "Open in May with bread and cakes, orders online, local delivery.",
            "children": [
                {"title": "Set up the online shop", "answer": "A simple shop with six products.",
                 "children": [
                     {"title": "Choose a shop platform", "result": {"output": "We use Shopify Basic."},
                      "children": []},
                     {"title": "Photograph the products", "result": "Twelve photos taken.", "children": []},
                 ]},
                {"title": "Register the business", "result": None, "children": []},
            ]}
    md = markdown_from_json(plan)
    lines = md.splitlines()
    assert lines[0] == "# Launch a small online bakery"
    assert md.index("## Summary") < md.index("Open in May") < md.index("## The plan")
    assert "### 1. Set up the online shop\n\nA simple shop with six products." in md
    assert "#### 1.1. Choose a shop platform\n\nWe use Shopify Basic." in md
    assert "#### 1.2. Photograph the products" in md
    assert "### 2. Register the business\n\n_(not done yet)_" in md
    assert md.endswith("\n") and "\n\n\n" not in md


def test_without_answers_leaf_results_still_make_a_numbered_plan():
    plan = {"title": "Goal", "children": [{"title": "A", "result": {"output": "a done."}, "children": []}]}
    md = markdown_from_json(plan)
    assert "## Summary" not in md and "## 1. A\n\na done." in md


def test_markdown_plan_renders_the_folded_tree():
    from agent.core.plan import fold
    from agent.core.tree import derive
    from builders import T0, goal, ident

    g = goal(ident("u"))
    md = markdown_plan(derive(fold([g]), T0 + 10), g.id)
    assert md.startswith("# Plan a two-week trip to Japan")
