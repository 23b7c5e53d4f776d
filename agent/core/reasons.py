"""Every reason an event can be refused, named so callers can log and count it."""

from __future__ import annotations

from enum import Enum


class Reason(str, Enum):
    # stateless: the bytes themselves
    OVERSIZE = "oversize"
    MALFORMED = "malformed"
    BAD_SIGNATURE = "bad_signature"
    CLOCK_DRIFT = "clock_drift"
    # stateful: against what the plan already holds
    DUPLICATE = "duplicate"
    UNKNOWN_DEPENDENCY = "unknown_dependency"  # parent node, proposal or claim not (yet) known
    NOT_SCORER = "not_scorer"
    TOO_DEEP = "too_deep"
    TOO_MANY_CHILDREN = "too_many_children"
    BAD_ROUND = "bad_round"
    WRONG_NODE = "wrong_node"
    NOT_CLAIMANT = "not_claimant"
    BAD_PARAMS = "bad_params"
    PENDING_OVERFLOW = "pending_overflow"

    def __str__(self) -> str:
        return self.value


class Rejected(Exception):
    def __init__(self, reason: Reason, detail: str = "") -> None:
        super().__init__(f"{reason.value}: {detail}" if detail else reason.value)
        self.reason = reason
        self.detail = detail
