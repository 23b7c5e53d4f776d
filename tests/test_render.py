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


def test_markup_in_titles_stays_text():
    """A title is text, whoever wrote it: rendered by a CommonMark renderer, no tag, link,
    emphasis or heading marker of its own survives; the words do."""
    from markdown_it import MarkdownIt

    from agent.render import md_escape

    evil = "# <img src=x onerror=alert(1)> *bold* [link](javascript:alert(1)) `code` a_b_c &amp; #"
    doc = markdown_from_json({
        "title": evil, "description": "<script>alert(2)</script> _x_",
        "children": [{"title": "<b>Day 1</b> ![i](x)", "result": "ok"}],
    })
    html = MarkdownIt("commonmark").render(doc)
    for tag in ("<img", "<script", "<b>", "<a ", "<strong>", "<code>"):
        assert tag not in html, (tag, html)
    assert html.count("<em>") == 1, html  # the description's own emphasis, nothing inside it
    assert "&lt;img src=x onerror=alert(1)&gt;" in html and "&lt;b&gt;Day 1&lt;/b&gt;" in html
    assert html.startswith("<h1># &lt;img")  # the title's own leading # is text, not a level
    assert "&amp;amp;" in html  # an entity in a title is shown as typed
    assert md_escape("plain words, a-b 3.5") == "plain words, a-b 3.5"  # plain text untouched
    assert md_escape("two\nlines") == "two lines"  # a title never breaks out of its heading
