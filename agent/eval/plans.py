"""One shape for a plan, whoever wrote it: the swarm's tree or one direct call's text.

``PlanDoc`` holds what a reader gets: the goal, the working assumptions (if any), the summary
(the plan's answer) and the steps in order, each with its text. The metrics
(agent.eval.metrics) and the blind side-by-side reading work on this shape only, so both
plans are measured and shown the same way.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Mapping

from agent.llm.outline import parse_plan_text


@dataclass
class Step:
    title: str
    text: str
    depth: int = 1  # 1: a top-level section
    section: str = ""  # the top-level section it belongs to


@dataclass
class PlanDoc:
    goal: str
    steps: list[Step]
    summary: str = ""
    brief: dict[str, str] = field(default_factory=dict)
    sections: list[Step] = field(default_factory=list)  # the top-level parts, in order
    costs: list[str] = field(default_factory=list)  # the plan's costs added up (the swarm's, by code)

    def text(self) -> str:
        parts = [self.summary, *(f"{s.title}\n{s.text}" for s in self.steps)]
        parts += [s.text for s in self.sections if s.text and all(s.text != t.text for t in self.steps)]
        return "\n".join(p for p in parts if p)


def _result(node: Mapping[str, Any]) -> str:
    r = node.get("result")
    if isinstance(r, Mapping):
        r = r.get("output")
    return str(r or node.get("answer") or "").strip()


def from_tree_json(root: Mapping[str, Any]) -> PlanDoc:
    """The swarm's plan: the root's answer as the summary, its leaves in order as the steps
    (a split section's own answer kept as the section's text)."""
    steps: list[Step] = []
    sections: list[Step] = []

    def walk(n: Mapping[str, Any], depth: int, section: str) -> None:
        kids = n.get("children") or ()
        if not kids:
            steps.append(Step(str(n.get("title", "")), _result(n), depth, section))
            return
        for c in kids:
            walk(c, depth + 1, section)

    for c in root.get("children") or ():
        sections.append(Step(str(c.get("title", "")), _result(c), 1, str(c.get("title", ""))))
        walk(c, 1, str(c.get("title", "")))
    summary = _result(root) if root.get("children") else ""
    if not root.get("children"):  # the root done as one task (no split was decided): its result is the plan
        steps.append(Step(str(root.get("title", "")), _result(root), 1, ""))
    from agent.render import plan_costs

    return PlanDoc(str(root.get("title", "")), steps, summary, dict(root.get("brief") or {}), sections,
                   plan_costs(root))


def from_text(goal: str, text: str) -> PlanDoc:
    """A plan written as free text (one direct call), read by ``agent.llm.outline``: its
    sections, their steps (a section without steps is one step), the lead-in as the summary."""
    tp = parse_plan_text(text)
    steps = [Step(i.title, i.text, 1, "") for i in tp.loose]
    sections = []
    for sec in tp.sections:
        sections.append(Step(sec.title, sec.text, 1, sec.title))
        if sec.items:
            steps += [Step(i.title, i.text, 2, sec.title) for i in sec.items]
        else:
            steps.append(Step(sec.title, sec.text, 1, sec.title))
    return PlanDoc(goal, steps, tp.summary, {}, sections)


def markdown(doc: PlanDoc, *, with_brief: bool = True) -> str:
    """The plan in the one shape both planners are read in: title, overview (assumptions and
    summary), then the sections and their steps in order."""
    out = [f"# {doc.goal}", ""]
    if with_brief and doc.brief:
        out += ["## Assumptions", ""]
        out += [f"- {k}: {v}" for k, v in doc.brief.items() if v] + [""]
    if doc.summary:
        out += ["## Overview", "", doc.summary, ""]
    if doc.costs:
        out += ["## Costs", "", *doc.costs, ""]
    by_section: dict[str, list[Step]] = {}
    for s in doc.steps:
        by_section.setdefault(s.section, []).append(s)
    n = 0
    for sec in (doc.sections or [Step("", "")]):
        items = by_section.get(sec.title, []) if doc.sections else doc.steps
        if sec.title:
            n += 1
            out += [f"## {n}. {sec.title}", ""]
            if sec.text and not (len(items) == 1 and items[0].text == sec.text):
                out += [sec.text, ""]
        for i, st in enumerate(items, 1):
            if len(items) == 1 and st.title == sec.title:
                out += [st.text, ""]
                continue
            out += [f"### {n}.{i} {st.title}" if sec.title else f"### {i}. {st.title}", "", st.text, ""]
    return "\n".join(out).rstrip() + "\n"
