"""Membership, judged by the fold: who may author what (pure: no clock, no I/O).

A swarm with an *authority* (an ed25519 key kept by whoever runs the swarm; its public id,
in peer-id form, is every agent's ``SWARM_AUTHORITY``) admits an event only from a member
whose credential grants the event's kind:

- a **credential** (``events.Credential``) names a peer id, its roles, the swarm, and the
  stamps it is valid for (``issued`` <= wall < ``expires``), signed by the authority. A member
  carries it in its ``hello``; a hello without a valid one is refused (``not_member``,
  ``bad_credential``, ``credential_expired``, ``role_not_allowed``);
- every other event needs a credential of its author that grants a role allowed for its type
  (``ROLES_FOR``) and covers the event's own stamp. Until one is filed the event waits under
  ``member:<author>`` (a hello arriving late, a renewed credential); it is refused when that
  wait ends (``agent.core.intake``): credentials only ever add what is allowed, so the outcome
  for a whole set of events never depends on the order they came in;
- a goal's electorate must be credentialed scorers at the goal's stamp (it waits likewise,
  then ``bad_electorate``), none of them revoked at or before it (``bad_electorate`` at once);
- a **revocation** (``events.Revoke``, signed by the authority) refuses every event its peer
  stamped at or after the revocation's own stamp. One may arrive after such events were
  filed: the plan then folds its events again from scratch (``Plan.refold``), so the result
  is the fold of the set, whatever the order.

Without an authority (an open swarm, or ``SWARM_KEY`` alone) nothing here applies: every key
may author every kind, as before.

What a credential cannot stop: a member can stamp its events in the past. Expiry and
revocation bind what it stamps after them, not what it back-dates; the log's other rules
(nothing before what it depends on, claims only after their node became a task: see
``agent.core.tasks``) bound how far back that can reach.
"""

from __future__ import annotations

import base64
from dataclasses import dataclass
from typing import Iterable

from .events import Credential, Event, Goal, Hello, canonical
from .identity import Identity, verify
from .reasons import Reason, Rejected

__all__ = ["CREDENTIAL_DOMAIN", "MEMBER_KEY", "Membership", "Members", "ROLES", "ROLES_FOR",
           "credential_problem", "issue_credential"]

ROLES = ("decomposer", "scorer", "executor", "observer", "submitter")
_EXECUTOR = frozenset({"executor"})
# Event type -> the roles whose members may author it. A kind missing here is refused in a
# swarm with an authority: a new event type needs its line. (hello: any member, for a role
# its own credential grants; revoke: the authority alone.)
ROLES_FOR: dict[str, frozenset[str]] = {
    "goal": frozenset({"submitter"}),
    "proposal": frozenset({"decomposer"}),
    # a goal's working assumptions: drafted by decomposers, amended by the goal's author (from
    # the command line or the observer's page); only its own author's latest brief binds it
    "brief": frozenset({"decomposer", "submitter", "observer"}),
    # a check of a result, voted on in the result's review slot (a vote, above: scorers)
    "review": frozenset({"scorer"}),
    # a judgment with feedback, not a vote: scorers, and the observer's page for a person
    "score": frozenset({"scorer", "observer"}),
    "vote": frozenset({"scorer"}),
    "claim": _EXECUTOR, "renew": _EXECUTOR, "release": _EXECUTOR, "result": _EXECUTOR,
}
CREDENTIAL_DOMAIN = b"swarm-planner/credential/v1\n"  # the authority signs nothing else this way
MEMBER_KEY = "member:"  # the pending key of an event waiting for its author's credential


@dataclass(frozen=True)
class Membership:
    """A swarm's authority (its public key as a peer id) and the swarm's name."""

    authority: str
    swarm: str


def _payload(c: Credential | dict) -> bytes:
    body = c.model_dump(mode="json") if isinstance(c, Credential) else dict(c)
    body.pop("sig", None)
    return CREDENTIAL_DOMAIN + canonical(body)


def issue_credential(authority: Identity, peer: str, roles: Iterable[str], swarm: str,
                     issued: int, expires: int) -> Credential:
    """The authority's signed credential for ``peer`` (stamps in wall ms)."""
    body = {"peer": peer, "roles": sorted(set(roles)), "swarm": swarm, "issued": issued,
            "expires": expires, "authority": authority.peer_id}
    unknown = set(body["roles"]) - set(ROLES)
    if unknown or not body["roles"]:
        raise ValueError(f"roles must be some of {', '.join(ROLES)} (got {sorted(roles)})")
    if expires <= issued:
        raise ValueError("a credential must expire after it was issued")
    sig = base64.b64encode(authority.sign(_payload(body))).decode()
    return Credential(**body, sig=sig)


def credential_problem(cred: Credential, config: Membership) -> str | None:
    """Why ``cred`` is not a credential of this swarm's authority (None if it is)."""
    if cred.authority != config.authority:
        return f"issued by {cred.authority[-8:]}, not this swarm's authority {config.authority[-8:]}"
    if cred.swarm != config.swarm:
        return f"for swarm {cred.swarm!r}, not {config.swarm!r}"
    if list(cred.roles) != sorted(set(cred.roles)):
        return "roles not sorted and unique"
    try:
        sig = base64.b64decode(cred.sig, validate=True)
    except ValueError:
        return "signature is not base64"
    if not verify(cred.authority, _payload(cred), sig):
        return "the authority's signature does not match"
    return None


def _stamp(ev: Event) -> tuple[int, int]:
    return (ev.hlc.wall, ev.hlc.logical)


class Members:
    """The membership state a plan folds: credentials from filed hellos, revocations."""

    def __init__(self, config: Membership | None) -> None:
        self.config = config
        self.credentials: dict[str, list[Credential]] = {}  # peer -> from its filed hellos
        self.revoked: dict[str, tuple[int, int]] = {}  # peer -> its earliest revocation's stamp
        self.revocations: dict[str, Event] = {}  # id -> revoke event

    @property
    def closed(self) -> bool:
        """True in a swarm with an authority (membership is checked)."""
        return self.config is not None

    # ------------------------------------------------------------------ queries
    def covering(self, peer: str, roles: frozenset[str] | set[str], wall: int) -> Credential | None:
        """A filed credential of ``peer`` granting one of ``roles`` for a stamp at ``wall``."""
        for c in self.credentials.get(peer, ()):
            if c.issued <= wall < c.expires and roles.intersection(c.roles):
                return c
        return None

    def revoked_at(self, peer: str, stamp: tuple[int, int]) -> bool:
        cut = self.revoked.get(peer)
        return cut is not None and stamp >= cut

    def roles_of(self, peer: str, wall: int) -> frozenset[str]:
        """What ``peer``'s credentials grant for a stamp at ``wall`` (revocations aside)."""
        out: set[str] = set()
        for c in self.credentials.get(peer, ()):
            if c.issued <= wall < c.expires:
                out.update(c.roles)
        return frozenset(out)

    # ------------------------------------------------------------------ intake
    def gate(self, ev: Event) -> str | None:
        """Raise Rejected if ``ev`` can never be admitted; return the pending key it must wait
        under (its author's, or an elector's, credential) or None if membership admits it."""
        if self.config is None:
            return None
        if self.revoked_at(ev.author, _stamp(ev)):
            raise Rejected(Reason.REVOKED, f"{ev.author[-8:]} was revoked before this was stamped")
        b = ev.body
        if isinstance(b, Hello):
            self._check_hello(ev)
            return None
        roles = ROLES_FOR.get(b.type)
        if roles is None:
            raise Rejected(Reason.ROLE_NOT_ALLOWED, f"no role may author a {b.type} in this swarm")
        if self.covering(ev.author, roles, ev.hlc.wall) is None:
            return MEMBER_KEY + ev.author
        if isinstance(b, Goal):
            for elector in b.params.electorate:
                if self.revoked_at(elector, _stamp(ev)):
                    raise Rejected(Reason.BAD_ELECTORATE, f"elector {elector[-8:]} was revoked before the "
                                                          "goal was stamped")
                if self.covering(elector, {"scorer"}, ev.hlc.wall) is None:
                    return MEMBER_KEY + elector
        return None

    def _check_hello(self, ev: Event) -> None:
        assert self.config is not None
        cred = ev.body.credential
        if cred is None:
            raise Rejected(Reason.NOT_MEMBER, "a hello without a credential, in a swarm with an authority")
        why = credential_problem(cred, self.config)
        if why is not None:
            raise Rejected(Reason.BAD_CREDENTIAL, why)
        if cred.peer != ev.author:
            raise Rejected(Reason.BAD_CREDENTIAL, f"the credential is {cred.peer[-8:]}'s, not its author's")
        if ev.body.role not in cred.roles:
            raise Rejected(Reason.ROLE_NOT_ALLOWED, f"announces {ev.body.role}; the credential grants "
                                                    f"{', '.join(cred.roles)}")
        if not cred.issued <= ev.hlc.wall < cred.expires:
            raise Rejected(Reason.CREDENTIAL_EXPIRED, f"stamped {ev.hlc.wall}, the credential is valid "
                                                      f"[{cred.issued}, {cred.expires})")

    def wait_refusal(self, ev: Event, key: str) -> tuple[Reason, str]:
        """Why ``ev``, waiting under ``key`` (a MEMBER_KEY) until it gave up, is refused."""
        peer = key[len(MEMBER_KEY):]
        if peer != ev.author:
            return Reason.BAD_ELECTORATE, f"elector {peer[-8:]} holds no scorer credential for the goal's stamp"
        creds = self.credentials.get(peer, ())
        if not creds:
            return Reason.NOT_MEMBER, f"{peer[-8:]} never showed a credential"
        roles = ROLES_FOR.get(ev.type, frozenset())
        if not any(roles.intersection(c.roles) for c in creds):
            granted = sorted({r for c in creds for r in c.roles})
            return Reason.ROLE_NOT_ALLOWED, (f"a {ev.type} needs {' or '.join(sorted(roles))}; "
                                             f"{peer[-8:]} is {', '.join(granted)}")
        return Reason.CREDENTIAL_EXPIRED, f"no credential of {peer[-8:]} covers its stamp {ev.hlc.wall}"

    def file(self, ev: Event) -> None:
        """A filed hello: its credential now admits its author's events."""
        cred = getattr(ev.body, "credential", None)
        if cred is not None and self.config is not None:
            have = self.credentials.setdefault(ev.author, [])
            if cred not in have:
                have.append(cred)

    def revocation(self, ev: Event) -> bool:
        """Check and record a revoke event; True if it moved its peer's cut-off earlier (events
        already filed may now be refused)."""
        if self.config is None:
            raise Rejected(Reason.NOT_AUTHORITY, "this swarm has no authority: nothing can be revoked")
        if ev.author != self.config.authority:
            raise Rejected(Reason.NOT_AUTHORITY, f"signed by {ev.author[-8:]}, not the swarm's authority")
        self.revocations[ev.id] = ev
        peer, stamp = ev.body.peer, _stamp(ev)
        cut = self.revoked.get(peer)
        if cut is not None and cut <= stamp:
            return False
        self.revoked[peer] = stamp
        return True
