"""What a role's behaviour asks its driver to do, and the answers it gets back: plain data.

A behaviour never does I/O. It returns effects from ``poll`` and ``answered``; a driver (the
trio runtime, the simulator, the central benchmark loop) executes them and feeds answers back
with the effect's ticket:

    Publish(body, ticket?)  sign, store and publish an event   -> the Event, or PublishFailed
    Ask(ticket, request)    one LLM request                    -> LLMReply, or an LLMError
    Cancel(ticket)          the answer to an Ask is no longer wanted (no answer follows; the
                            driver counts it, so no metric effect goes with it)
    SyncPeers(ticket)       pull what every peer has            -> SyncDone
    WakeAt(at_ms)           poll me again at this time at the latest
    Count / Observe         a metric
    Log                     a structured log line
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any, Mapping, Union

from agent.llm.base import LLMRequest


class Metric(StrEnum):
    CLAIMS_WON = "claims_won"
    CLAIMS_LOST = "claims_lost"
    WORK_DROPPED = "work_dropped"  # the lease was lost while working: the answer is thrown away
    TASK_SECONDS = "task_seconds"
    TASK_RELEASED = "task_released"
    LLM_BAD_OUTPUT = "llm_bad_output"  # an answer the behaviour could not use: tried again
    SET_ASIDE = "set_aside"  # every attempt failed: the node waits a while
    LEAF_BY_FALLBACK = "leaf_by_fallback"  # a vote for LEAF because rounds ran out
    CLAIM_UNSTORED = "claim_unstored"  # a pull before work found our claim in no peer's store
    PULL_UNANSWERED = "pull_unanswered"  # an executor's pull before work that no peer answered
    PROPOSALS_SCORED = "proposals_scored"  # per first-round prevote: proposals on the table


@dataclass(frozen=True)
class Publish:
    body: Any
    ticket: int | None = None


@dataclass(frozen=True)
class Ask:
    ticket: int
    request: LLMRequest
    node: str | None = None  # the node the work is for (drivers log and count it)


@dataclass(frozen=True)
class Cancel:
    ticket: int


@dataclass(frozen=True)
class SyncPeers:
    ticket: int
    confirm: str | None = None  # also ask each peer that answers whether it stored this event


@dataclass(frozen=True)
class WakeAt:
    at_ms: int


@dataclass(frozen=True)
class Count:
    metric: Metric
    value: float = 1.0


@dataclass(frozen=True)
class Observe:
    metric: Metric
    value: float


@dataclass(frozen=True)
class Log:
    level: str  # debug | info | warning | error
    event: str
    fields: Mapping[str, Any] = field(default_factory=dict)


Effect = Union[Publish, Ask, Cancel, SyncPeers, WakeAt, Count, Observe, Log]


@dataclass(frozen=True)
class LLMReply:
    value: dict
    prompt_tokens: int = 0
    completion_tokens: int = 0


@dataclass(frozen=True)
class PublishFailed:
    error: str


@dataclass(frozen=True)
class SyncDone:
    new: int
    peers: int  # how many peers answered
    holders: int | None = None  # of those, how many stored the event asked about (None: not asked)


def log(level: str, event: str, **fields: Any) -> Log:
    return Log(level, event, fields)
