"""Counting LLM calls from agents' log records (agent.drivers.real.driver writes ``llm.call``
with the node, then ``llm.answer`` or ``llm.cancelled`` by ticket). No import of ``agent``:
scripts/skew_figures.py loads this file by its path to count the calls of a swarm that runs
another checkout's code."""

from __future__ import annotations

from typing import Any


TASK_KINDS = ("execute", "synthesize")  # the calls an executor makes for a task it holds


def executions(records_by: dict[str, list[dict]], kind: str | tuple[str, ...] = "execute",
               ) -> tuple[dict[str, set[str]], dict[str, set[str]]]:
    """Per node: the agents that spent an LLM call of this kind (or kinds: ``TASK_KINDS``) on it,
    and, apart, those whose call was cancelled before it answered (a lost claim race: the loser
    learnt of the earlier claim after its settle window and dropped the call, no answer, no
    result). A call still in flight counts as spent: watched during a run, two executors at work
    on one task show."""
    kinds = (kind,) if isinstance(kind, str) else kind
    spent: dict[str, set[str]] = {}
    cancelled: dict[str, set[str]] = {}
    for name, records in records_by.items():
        calls: dict[Any, str] = {}
        for r in records:
            ev = r.get("event")
            if ev == "llm.call" and r.get("kind") in kinds:
                calls[r.get("ticket")] = r["node_id"]
            elif ev == "llm.answer" and r.get("ticket") in calls:
                spent.setdefault(calls.pop(r.get("ticket")), set()).add(name)
            elif ev == "llm.cancelled" and r.get("ticket") in calls:
                cancelled.setdefault(calls.pop(r.get("ticket")), set()).add(name)
        for node in calls.values():
            spent.setdefault(node, set()).add(name)
    return spent, cancelled


def in_flight(records: list[dict], kind: str) -> list[dict]:
    """LLM calls of this kind logged (``llm.call``) without an answer or cancel yet."""
    open_: dict[Any, dict] = {}
    for r in records:
        ev = r.get("event")
        if ev == "llm.call" and r.get("kind") == kind:
            open_[r.get("ticket")] = r
        elif ev in ("llm.answer", "llm.cancelled"):
            open_.pop(r.get("ticket"), None)
    return list(open_.values())
