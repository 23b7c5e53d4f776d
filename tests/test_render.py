"""The final Markdown reads as one plan: the goal, its working assumptions, the plan's answer
(the root's synthesis: a summary and the ordered steps) first, then every step in detail."""

from __future__ import annotations

from agent.render import markdown_from_json, markdown_plan, md_escape

ANSWER = "Open in May with bread and cakes, orders online, local delivery.\n\n1. Set up the online shop: six products."


def test_the_answer_and_the_brief_lead_and_every_step_follows_in_order():
    plan = {"title": "Launch a small online bakery", "description": "Home-based",
            "brief": {"budget": "3000 EUR", "dates": "May 2027"}, "brief_settled": True,
            "result": {"output": ANSWER},
            "children": [
                {"title": "Set up the online shop", "result": {"output": "A simple shop with six products."},
                 "children": [
                     {"title": "Choose a shop platform", "result": {"output": "- Use Shopify Basic."},
                      "children": []},
                     {"title": "Photograph the products", "result": "- Take twelve photos.", "children": []},
                 ]},
                {"title": "Register the business", "result": None, "children": []},
            ]}
    md = markdown_from_json(plan)
    lines = md.splitlines()
    assert lines[0] == "# Launch a small online bakery"
    assert md.index("## Working assumptions") < md.index("- **Budget**: 3000 EUR") < md.index("## The plan")
    assert md.index("## The plan") < md.index("Open in May") < md.index("## The steps in detail")
    assert "### 1. Set up the online shop\n\nA simple shop with six products." in md
    assert "#### 1.1. Choose a shop platform\n\n- Use Shopify Basic." in md
    assert "#### 1.2. Photograph the products" in md
    assert "### 2. Register the business\n\n_(not done yet)_" in md
    assert md.endswith("\n") and "\n\n\n" not in md


def test_a_plan_whose_answer_is_not_written_yet_says_so():
    plan = {"title": "Goal", "children": [{"title": "A", "result": {"output": "a done."}, "children": []}]}
    md = markdown_from_json(plan)
    assert "## The plan\n\n_(the answer is written once every step is done)_" in md
    assert "### 1. A\n\na done." in md


def test_markup_in_titles_and_the_brief_stays_text():
    plan = {"title": "<img src=x onerror=alert(1)> # *x*", "brief": {"place": "<script>"},
            "children": [{"title": "[a](javascript:b)", "children": []}]}
    md = markdown_from_json(plan)
    import re

    assert not re.search(r"(?<!\\)[<>\[\]]", md)  # every bracket escaped
    assert md.startswith("# \\<img src=x onerror=alert(1)\\> \\# \\*x\\*")
    assert md_escape("a_b|c") == "a\\_b\\|c"


def test_markdown_plan_renders_the_folded_tree():
    from agent.core.plan import fold
    from agent.core.tree import derive
    from builders import T0, brief, goal, ident

    u = ident("u")
    g = goal(u, brief=True)
    md = markdown_plan(derive(fold([g]), T0 + 10), g.id)
    assert md.startswith("# Plan a two-week trip to Japan") and "_(being settled)_" in md
    md = markdown_plan(derive(fold([g, brief(u, g.id)]), T0 + 10), g.id)
    assert "- **Dates**: 1-14 April 2027" in md


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
    # the description's own emphasis, with nothing inside it (the plan's note is one more)
    assert "<p><em>&lt;script&gt;alert(2)&lt;/script&gt; _x_</em></p>" in html, html
    assert "&lt;img src=x onerror=alert(1)&gt;" in html and "&lt;b&gt;Day 1&lt;/b&gt;" in html
    assert html.startswith("<h1># &lt;img")  # the title's own leading # is text, not a level
    assert "&amp;amp;" in html  # an entity in a title is shown as typed
    assert md_escape("plain words, a-b 3.5") == "plain words, a-b 3.5"  # plain text untouched
    assert md_escape("two\nlines") == "two lines"  # a title never breaks out of its heading


def test_markup_in_results_and_answers_stays_text_and_their_lists_stay_lists():
    """A result is an LLM's text (or a member's): its bullets and numbered steps render as
    lists, but no tag, link, image, emphasis, heading or rule of its own."""
    from markdown_it import MarkdownIt

    evil = ("- Book <img src=x onerror=alert(1)> at [the inn](javascript:alert(1)) (120 EUR; 2027-02-01)\n"
            "- **Pay** the _deposit_ `now`\n# Not a heading\n---\n    not code\n2027. the year, no list\n"
            "<script>alert(3)</script>")
    doc = markdown_from_json({"title": "Goal", "result": {"output": "1. First <b>step</b>\n2. Second"},
                              "children": [{"title": "A", "result": {"output": evil}, "children": []}]})
    html = MarkdownIt("commonmark").render(doc)
    for tag in ("<img", "<script", "<b>", "<a ", "<strong>", "<em>", "<code>", "<hr", "<pre"):
        assert tag not in html, (tag, html)
    assert html.count("<h1>") == 1 and html.count("<h3>") == 1  # the goal and step 1 only
    assert "<ol>\n<li>First &lt;b&gt;step&lt;/b&gt;</li>\n<li>Second</li>\n</ol>" in html
    assert "<li>Book &lt;img src=x onerror=alert(1)&gt; at [the inn](javascript:alert(1)) (120 EUR; 2027-02-01)</li>" in html
    assert "2027. the year, no list" in html and "# Not a heading" in html
