"""Show a plan tree on a terminal (rich) and as a Markdown plan."""

from __future__ import annotations

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


def markdown_plan(tree: Tree, goal_id: str | None = None) -> str:
    lines: list[str] = []

    def add(n: NodeView) -> None:
        hashes = "#" * min(6, n.depth + 1)
        lines.append(f"{hashes} {n.title}")
        if n.description:
            lines.append(f"_{n.description}_")
        lines.append("")
        if n.result:
            lines.append(n.result["output"].strip())
            lines.append("")
        for c in n.children:
            add(c)

    for r in tree.roots:
        if goal_id is None or r.id == goal_id:
            add(r)
    return "\n".join(lines).rstrip() + "\n"
