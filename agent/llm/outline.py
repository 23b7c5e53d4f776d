"""Reading a plan a model wrote as free text: its sections, and the steps under each.

One direct call of a small model writes a plan as text with headings ("Section 1: ...",
"## ...", "**...**") and numbered or bulleted steps. The "outline" decomposer asks for exactly
that (what such a model writes best) and turns the sections into a split; the quality benchmark
reads the direct call's plan the same way.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

# "II. Pre-Trip Phase:": a model's Roman-numbered sections (read as text, they were glued to the
# step above them: "Book accommodations: ... II. Pre-Trip Phase:", measured)
_ROMAN = r"(?-i:[IVX]{1,4})\."
_NUMBERED = re.compile(r"^(\s*)(?:(\d+[.)])|[-*•])\s+(.*)$")
_SECTION_LINE = re.compile(
    r"^\s*(?:#{1,6}\s+.+|\*\*[^*]+\*\*:?|(?:section|part|phase|stage|step|week|day)\s*\d+[^a-z]*[:.)-].*"
    r"|[A-Z][^.!?]{2,60}:|" + _ROMAN + r"\s+\**(?-i:[A-Z])[^.!?]{2,60})\s*$", re.IGNORECASE)
_HEADING = re.compile(
    r"^\s*(?:#{1,6}\s+|\*\*)?\s*(?:" + _ROMAN + r"\s+)?(?:(?:section|part|phase|stage|week|day)s?\s*[\w-]*\s*[:.)-]\s*)?"
    r"(.+?)\**\s*:?\s*$",
    re.IGNORECASE)


@dataclass
class Item:
    title: str
    text: str


@dataclass
class Section:
    title: str
    text: str = ""
    items: list[Item] = field(default_factory=list)
    level: int = 1  # "#" marks, or the depth of its number ("1.2." is 2)
    nested: bool = False  # its steps are the deeper headings under it (see _nested)


@dataclass
class TextPlan:
    summary: str
    sections: list[Section]
    loose: list[Item]  # steps before any section


_NUMBERING = re.compile(r"^\s*(?:\d+[.)])+(?:\d+)?\s*")


def _title_of(heading: str) -> str:
    m = _HEADING.match(heading)
    title = (m.group(1) if m else heading).strip(" *#:")
    title = _NUMBERING.sub("", title).replace("**", "").strip(" *#:")
    return " ".join(title.split())


def _level(heading: str) -> int:
    ln = heading.strip()
    hashes = len(ln) - len(ln.lstrip("#"))
    if hashes:
        return hashes
    m = re.match(r"^\**\s*((?:\d+\.)+\d*)", ln)
    return len([x for x in m.group(1).split(".") if x]) if m else 1


def _nested(sections: list[Section]) -> list[Section]:
    """Two-level outlines ("### 1. Preparation" with "#### 1.1. Gather guests" under it): each
    empty heading takes the deeper headings after it as its steps, a deeper heading's lines
    becoming that step's text."""
    out: list[Section] = []
    i = 0
    while i < len(sections):
        sec = sections[i]
        j = i + 1
        if not sec.text and not sec.items:
            while j < len(sections) and sections[j].level > sec.level:
                sub = sections[j]
                body = "; ".join(it.text for it in sub.items) or sub.text
                sec.items.append(Item(sub.title, f"{sub.title}: {body}" if body else sub.title))
                sec.nested = True
                j += 1
        out.append(sec)
        i = j
    return out


def _depth(item: re.Match) -> tuple[int, int]:
    """How deep a step's line sits: its indentation, then a bullet under a number at the same
    indentation. A small model writes "1. **Event Day**" with "   - **Check-in**: ..." under
    it; read flat, the bullets were the plan's sections (measured: a beach clean-up's outline
    gave "Planning; Define the Clean-up Area; Schedule; ...", six parts before the event day,
    which was cut off and missing from the plan)."""
    return len(item.group(1)), 0 if item.group(2) else 1


# the labels a model puts inside a section: over its steps, and before what it is for
_LABEL_HEADING = re.compile(r"^(?:(?:key |main |sub-?)?(?:steps|actions|action items|tasks|to-?dos?|details|activities)"
                            r"(?: to take)?)$", re.IGNORECASE)
_ABOUT = re.compile(r"^(?:objectives?|goals?|purpose|aim|description|overview)$", re.IGNORECASE)


def parse_plan_text(text: str) -> TextPlan:
    """Headings and "Section N:" lines are sections, numbered or bulleted lines under them
    their steps (text that follows a step belongs to it, and so do the lines indented or
    bulleted under it: ``_depth``); text before the first section and step is the summary; a
    lead-in line with nothing under it is summary too."""
    summary: list[str] = []
    sections: list[Section] = []
    loose: list[Item] = []
    section: Section | None = None
    current: Item | None = None
    depth: dict[int, tuple[int, int]] = {}  # id(a list of steps) -> its steps' depth (_depth)
    for raw in str(text).splitlines():
        ln = raw.rstrip().replace("\t", "    ")
        if not ln.strip():
            continue
        item = _NUMBERED.match(ln)
        is_heading = _SECTION_LINE.match(ln) and not (item and section is not None
                                                      and not ln.lstrip().startswith(("#", "**")))
        if is_heading and section is not None and not ln.lstrip().startswith("#") \
                and not _NUMBERED.match(ln) and _LABEL_HEADING.match(_title_of(ln)):
            # "**Steps:**" under "### 1. **Pre-Conference Planning**" (a bold or colon label,
            # not a heading of its own: "## Activities" is a section): the section's steps
            # follow; read as a section, every other section was "Steps" (Warsaw, one direct
            # call, 2026-12-07)
            current = None
            continue
        if is_heading:
            section = Section(_title_of(ln), level=_level(ln))
            sections.append(section)
            current = None
            continue
        if item:
            body = item.group(3).strip().replace("**", "")
            steps = section.items if section is not None else loose
            d = _depth(item)
            if steps and d > depth[id(steps)]:  # a sub-step: part of the step above it
                current = steps[-1]
                current.text += "; " + body
                continue
            head, sep, rest = body.partition(":")
            if section is not None and sep and _ABOUT.match(head.strip(" *")):
                # "- **Objective:** Ensure that the venue is ...": what the section is for
                section.text = (section.text + " " + rest.strip()).strip()
                current = None
                continue
            depth[id(steps)] = d
            current = Item(head.strip(" *") if sep and len(head) <= 80 else body[:80], body)
            steps.append(current)
            continue
        if current is not None:
            current.text += " " + ln.strip()
        elif section is not None:
            section.text = (section.text + " " + ln.strip()).strip()
        else:
            summary.append(ln.strip())
    sections = _nested(sections)
    lead = [s for s in sections if not s.text and not s.items]
    sections = [s for s in sections if s.text or s.items]
    return TextPlan(" ".join([s.title for s in lead] + summary), sections, loose)


# Headings that frame a plan rather than name a part of its work: the model's title over the
# whole plan ("Plan for ..."), its lead-in and its closing words, and the prompt's own words
# said back as a heading ("Concrete Content"). As subgoals they cost an executor's call each and
# gave plans like "Concrete Content; Execution" (the whole work under the first, measured) or
# "...; Post-Launch Evaluation; Conclusion".
_FRAME = re.compile(
    r"^(?:an? |the )?(?:(?:project |event |plan |programme |program )?overview|introduction|intro|summary|conclusions?|final (?:thoughts|notes|words)|"
    r"notes?|tips|additional (?:tips|notes|considerations)|key (?:considerations|points|takeaways)|"
    r"considerations|resources|(?:concrete |detailed )?content|concrete (?:plan|steps)|sections? and steps|"
    r"(?:complete |detailed |concrete )*plan(?: overview| outline| summary)?|outline|"
    r"goals?|objectives?|purpose|"
    # a view across the plan, not a part of its work: "Timeline; Budget Breakdown" came as the
    # last two parts of a home office's split (measured), each then executed as a step
    r"(?:(?:project |overall |detailed )?(?:timeline|schedule|milestones|budget|costs?)"
    r"(?: (?:and|&) (?:timeline|schedule|budget|costs?))?(?: breakdown| overview| summary| estimates?| allocation)?)|"
    r"estimated costs|key milestones)$",
    re.IGNORECASE)
# a title over the whole plan ("Plan for a charity 5K run in Leeds"): a frame only when the
# plan's sections are under it ("Plan for race day" with steps of its own is work)
_TITLE = re.compile(r"^(?:(?:a |the |your )?(?:complete |detailed |concrete )*(?:plan|outline|roadmap|guide)"
                    r" (?:for|to|of|on) .+)$", re.IGNORECASE)


def is_frame(title: str, *, over_sections: bool = False) -> bool:
    """Whether a section heading frames the plan (see _FRAME) instead of naming its work;
    ``over_sections``: the heading has the plan's sub-headings under it."""
    t = " ".join(str(title).split()).strip(" .:")
    return bool(_FRAME.match(t) or (over_sections and _TITLE.match(t)))
