"""Every reason an event can be refused, named so callers can log and count it."""

from __future__ import annotations

from enum import Enum


class Reason(str, Enum):
    # stateless: the bytes themselves
    OVERSIZE = "oversize"
    MALFORMED = "malformed"
    BAD_SIGNATURE = "bad_signature"
    CLOCK_DRIFT = "clock_drift"  # stamped further ahead of our clock than we ever hold for
    # stateful: against what the plan already holds
    DUPLICATE = "duplicate"
    UNKNOWN_DEPENDENCY = "unknown_dependency"  # parent node, proposal or claim never arrived
    NOT_ELECTOR = "not_elector"  # a vote from outside the goal's electorate
    NOT_CLAIMABLE = "not_claimable"  # a claim on a node that never became a task
    BACKDATED = "backdated"  # stamped before something it depends on
    AFTER_RESULT = "after_result"  # a renewal or release after its own claim's result
    LEASE_TOO_LONG = "lease_too_long"  # beyond the goal's max_lease_ms
    TOO_DEEP = "too_deep"
    TOO_MANY_CHILDREN = "too_many_children"
    WRONG_NODE = "wrong_node"
    NOT_CLAIMANT = "not_claimant"
    BAD_PARAMS = "bad_params"
    PENDING_OVERFLOW = "pending_overflow"
    # membership (agent.core.membership): who may author what
    NOT_MEMBER = "not_member"  # no credential from the swarm's authority
    BAD_CREDENTIAL = "bad_credential"  # a hello's credential is forged, for another peer or swarm
    CREDENTIAL_EXPIRED = "credential_expired"  # stamped outside the credential's validity
    ROLE_NOT_ALLOWED = "role_not_allowed"  # the author's credential does not grant this kind
    REVOKED = "revoked"  # stamped at or after the authority revoked its author
    NOT_AUTHORITY = "not_authority"  # a revocation not signed by the swarm's authority
    BAD_ELECTORATE = "bad_electorate"  # a goal naming electors that are not credentialed scorers
    # what any member can make a peer hold (agent.core.intake)
    HELD_OVERFLOW = "held_overflow"  # too many events stamped ahead, from this author or in all
    RATE_LIMITED = "rate_limited"  # the author sent more than its rate allows

    def __str__(self) -> str:
        return self.value


class Rejected(Exception):
    def __init__(self, reason: Reason, detail: str = "") -> None:
        super().__init__(f"{reason.value}: {detail}" if detail else reason.value)
        self.reason = reason
        self.detail = detail
