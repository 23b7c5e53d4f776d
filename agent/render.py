"""Show a plan tree on a terminal (rich) and as one Markdown document."""

from __future__ import annotations

import re
from typing import Any, Mapping

from rich.text import Text
from rich.tree import Tree as RichTree

from agent.core.tree import NodeView, Tree

STYLE = {"open": "white", "voting": "yellow", "split": "cyan", "ready": "magenta",
         "claimed": "blue", "done": "green"}


def _label(n: NodeView) -> Text:
    t = Text()
    t.append(f"[{n.state.value}] ", style=STYLE.get(n.state.value, ""))
    t.append(n.title, style="bold" if n.depth == 0 else "")
    extra = []
    if n.proposals and not n.leaf:
        extra.append(f"{len(n.proposals)} proposals")
    if n.tally is not None and n.tally.rounds:
        extra.append(f"round {n.tally.top_round}")
    if n.leaf and n.leaf_reason:
        extra.append(f"leaf: {n.leaf_reason}")
    if n.collisions:
        extra.append(f"{n.collisions} collisions")
    if n.takeovers:
        extra.append(f"{n.takeovers} takeovers")
    if extra:
        t.append("  (" + ", ".join(extra) + ")", style="dim")
    return t


def rich_tree(tree: Tree) -> RichTree:
    top = RichTree(Text(f"plan {tree.digest[:12]}  ", style="bold") + Text(
        "  ".join(f"{k}={v}" for k, v in tree.counts().items() if v), style="dim"))

    def add(parent: RichTree, n: NodeView) -> None:
        branch = parent.add(_label(n))
        for c in n.children:
            add(branch, c)

    for r in tree.roots:
        add(top, r)
    return top


_MD_SPECIAL = re.compile(r"([\\`*_\[\]<>&#|~!])")


def md_escape(text: str) -> str:
    """Plain text (a title a person or an LLM wrote) as Markdown that shows exactly that text:
    every character Markdown or HTML would read as markup is backslash-escaped (CommonMark
    allows it before any ASCII punctuation), line breaks become spaces. So a title such as
    `<img src=x onerror=...>` stays text in any renderer, never a tag."""
    return _MD_SPECIAL.sub(r"\\\1", " ".join(str(text).split()))


_LIST_MARK = re.compile(r"^((?:[-+]|\d{1,3}[.)])\s+)?(.*)$")
_LINE_START = re.compile(r"^([-+=])|^(\d+)([.)])")  # a rule, setext underline or list marker of its own


def md_block(text: str) -> str:
    """Text an LLM wrote (a result, an answer) as Markdown that keeps its lines and its list
    items ("- ...", "1. ..."), everything else escaped as ``md_escape`` does: no tag, link,
    image or emphasis of its own survives, and no line becomes a heading, rule or code block."""
    out = []
    for line in str(text).splitlines():
        lead, rest = _LIST_MARK.match(line.strip()).groups()
        rest = _LINE_START.sub(lambda m: "\\" + m[1] if m[1] else m[2] + "\\" + m[3],
                               _MD_SPECIAL.sub(r"\\\1", rest.strip()))
        out.append((lead or "") + rest)
    return "\n".join(out).strip()


def _text(value: Any) -> str:
    if isinstance(value, Mapping):
        value = value.get("output") or value.get("text")
    return md_block(str(value or "").strip())


BRIEF_LABELS = {"duration": "Duration", "dates": "Dates", "budget": "Budget", "currency": "Currency",
                "place": "Place", "people": "People", "constraints": "Constraints", "done": "Done when"}


def _brief_lines(brief: Mapping[str, Any] | None, settled: bool) -> list[str]:
    if not brief:
        return ["## Working assumptions", "", "_(being settled)_" if not settled else "_(none settled)_", ""]
    lines = ["## Working assumptions", ""]
    for key, label in BRIEF_LABELS.items():
        value = str(brief.get(key) or "").strip()
        if value:
            lines.append(f"- **{label}**: {md_escape(value)}")
    return lines + [""]


def markdown_from_json(root: Mapping[str, Any]) -> str:
    """One Markdown document for a plan given as JSON (a ``NodeView.to_json()`` goal): the
    goal, its working assumptions (the brief), the plan's answer (the root's synthesis: a
    summary and the ordered steps with their key content), then every step in detail, in
    order. A split step shows its own answer before its parts."""
    lines: list[str] = [f"# {md_escape(root.get('title', '').strip())}", ""]
    if str(root.get("description") or "").strip():
        lines += [f"_{md_escape(root['description'].strip())}_", ""]
    if "brief" in root or "brief_settled" in root:
        lines += _brief_lines(root.get("brief"), bool(root.get("brief_settled", True)))
    children = root.get("children") or ()
    answer = _text(root.get("answer")) or (_text(root.get("result")) if children else "")
    if answer:
        lines += ["## The plan", "", answer, ""]
    elif not children and _text(root.get("result")):
        lines += [_text(root.get("result")), ""]
    elif children:
        lines += ["## The plan", "", "_(the answer is written once every step is done)_", ""]
    costs = plan_costs(root)
    if costs:
        lines += ["## Costs", "", md_block("\n".join(costs)), ""]

    def add(n: Mapping[str, Any], number: str, depth: int) -> None:
        hashes = "#" * min(6, depth + 1)
        lines.append(f"{hashes} {number} {md_escape(str(n.get('title', '')).strip())}")
        lines.append("")
        body = _text(n.get("answer")) or _text(n.get("result"))
        if body:
            lines.extend([body, ""])
        elif not n.get("children"):
            lines.extend(["_(not done yet)_", ""])
        for i, c in enumerate(n.get("children") or (), 1):
            add(c, f"{number}{i}.", depth + 1)

    if children:
        lines += ["## The steps in detail", ""]
    for i, c in enumerate(children, 1):
        add(c, f"{i}.", 2)
    return "\n".join(lines).rstrip() + "\n"


def leaf_results(root: Mapping[str, Any]) -> list[tuple[str, str]]:
    """(title, result) of a plan's leaves, in order."""
    out: list[tuple[str, str]] = []

    def walk(n: Mapping[str, Any]) -> None:
        kids = n.get("children") or ()
        if not kids:
            r = n.get("result")
            out.append((str(n.get("title", "")), str((r.get("output") if isinstance(r, Mapping) else r) or "")))
        for c in kids:
            walk(c)

    for c in root.get("children") or ():
        walk(c)
    return out


def plan_costs(root: Mapping[str, Any]) -> list[str]:
    """The plan's costs added up from its done steps, against the brief's budget
    (agent.core.facts.cost_lines); empty while no step is priced."""
    from agent.core import facts as fx

    brief = root.get("brief") or {}
    facts = fx.brief_facts(brief, f"{root.get('title', '')} {root.get('description', '')}")
    return fx.cost_lines(leaf_results(root), facts)


def markdown_plan(tree: Tree, goal_id: str | None = None) -> str:
    """The final plan(s) of ``tree`` as Markdown (see ``markdown_from_json``)."""
    docs = [markdown_from_json(r.to_json()) for r in tree.roots
            if goal_id is None or r.id == goal_id]
    return "\n".join(docs)
