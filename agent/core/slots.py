"""Names of what votes decide and what claims hold (pure string forms, one owner).

A node has one *split slot* (its own id: how it is split, or LEAF); a goal has a *brief slot*
(``<goal>#b``: its working assumptions); a task has an attempt per *task key* (``<node>`` for
the first, ``<node>#<k>`` for the k-th) and, for every attempt but the last, a *review slot*
(``<node>#v<k>``: its result accepted, or REJECTed and the task sent back).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

SlotKind = Literal["split", "brief", "review"]


@dataclass(frozen=True)
class Slot:
    node: str  # the node it belongs to
    kind: SlotKind
    attempt: int = 0  # review slots: the attempt whose result is judged


def brief_slot(goal: str) -> str:
    return f"{goal}#b"


def review_slot(node: str, attempt: int) -> str:
    return f"{node}#v{attempt}"


def task_key(node: str, attempt: int) -> str:
    return node if attempt <= 1 else f"{node}#{attempt}"


def parse_slot(slot: str) -> Slot:
    node, sep, rest = slot.partition("#")
    if not sep:
        return Slot(node, "split")
    if rest == "b":
        return Slot(node, "brief")
    return Slot(node, "review", int(rest[1:]))


def parse_task(key: str) -> tuple[str, int]:
    """(node, attempt) of a task key."""
    node, sep, rest = key.partition("#")
    return (node, int(rest)) if sep else (node, 1)


def base_node(key: str) -> str:
    """The node a slot or task key belongs to."""
    return key.partition("#")[0]
