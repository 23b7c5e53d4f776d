"""The observer's display: it never publishes; it rebuilds the tree from what it hears and
shows it (a live rich tree on a terminal, a log line per change otherwise) and prints each
goal's final plan as Markdown once its root is done."""

from __future__ import annotations

import sys

import trio
from rich.console import Console
from rich.live import Live

from agent.core.tree import NodeState
from agent.render import markdown_plan, rich_tree
from agent.drivers.real.runtime import Runtime


async def show(rt: Runtime, *, console: Console | None = None) -> None:
    console = console or Console()
    printed: set[str] = set()
    live_ok = console.is_terminal and sys.stdout.isatty()
    rt.log.info("observer ready")

    def finished() -> None:
        tree = rt.tree()
        for r in tree.roots:
            if r.state is NodeState.DONE and r.id not in printed:
                printed.add(r.id)
                console.print(markdown_plan(tree, r.id), markup=False, highlight=False)

    if live_ok:
        with Live(rich_tree(rt.tree()), console=console, refresh_per_second=4, transient=False) as live:
            while True:
                await rt.wait_change(1.0)
                live.update(rich_tree(rt.tree()))
                finished()
    last = None
    while True:
        await rt.wait_change(5.0)
        tree = rt.tree()
        summary = (tree.digest, tuple(sorted(tree.counts().items())))
        if summary != last:
            last = summary
            rt.log.info("plan", digest=tree.digest[:16], goals=len(tree.roots),
                        **{k: v for k, v in tree.counts().items() if v})
        finished()
        await trio.sleep(0)
