"""Small helpers to build signed events by hand in tests."""

from __future__ import annotations

import hashlib

from agent.core.events import (
    Brief, Claim, Event, Goal, Hello, PlanParams, Proposal, Release, Renew, Result, Review, Score,
    Subgoal, Vote, sign_event,
)
from agent.core.hlc import Timestamp
from agent.core.identity import Identity

T0 = 1_767_225_600_000
SCORERS = [f"s{i}" for i in range(7)]


def ident(name: str) -> Identity:
    return Identity(hashlib.sha256(name.encode()).digest())


def ev(who: Identity, body, wall: int, logical: int = 0) -> Event:
    return sign_event(who, Timestamp(T0 + wall, logical), body)


def params(scorers=3, quorum=None, max_depth=2, max_children=5, max_rounds=2, max_lease_ms=300_000,
           electorate=None, brief=False, max_attempts=0, token_budget=0) -> PlanParams:
    electorate = electorate if electorate is not None else [ident(s).peer_id for s in SCORERS[:scorers]]
    electorate = sorted(electorate)
    quorum = quorum if quorum is not None else len(electorate) // 2 + 1
    return PlanParams(electorate=tuple(electorate), quorum=quorum, max_depth=max_depth,
                      max_children=max_children, max_rounds=max_rounds, max_lease_ms=max_lease_ms,
                      brief=brief, max_attempts=max_attempts, token_budget=token_budget)


def goal(who, wall=0, title="Plan a two-week trip to Japan", **kw) -> Event:
    return ev(who, Goal(title=title, params=params(**kw)), wall)


def hello(who, role, wall=0) -> Event:
    return ev(who, Hello(role=role, name=role), wall)


def proposal(who, node, titles, wall=10, strategy="by place", refines=None, atomic=(), after=None) -> Event:
    """``titles``: each a title, or (title, description); ``after``: {subgoal position
    (1-based): positions of the earlier ones it follows}."""
    after = after or {}
    pairs = [t if isinstance(t, tuple) else (t, f"about {t}") for t in titles]
    subs = tuple(Subgoal(title=t, description=d, atomic=i in atomic, after=tuple(after.get(i + 1, ())))
                 for i, (t, d) in enumerate(pairs))
    return ev(who, Proposal(node=node, strategy=strategy, subgoals=subs, refines=refines), wall)


BRIEF = {"duration": "14 days", "dates": "1-14 April 2027", "budget": "4000 EUR", "currency": "EUR",
         "place": "Tokyo and Kyoto", "people": "2 adults", "done": "back home"}


def brief(who, goal_id, wall=5, **facts) -> Event:
    return ev(who, Brief(node=goal_id, **{**BRIEF, **facts}), wall)


def review(who, node, result_id, accept=True, wall=70, problems=()) -> Event:
    return ev(who, Review(node=node, result=result_id, accept=accept, problems=tuple(problems)), wall)


def score(who, node, prop, wall=15, acceptable=True, x=0.7, feedback="") -> Event:
    return ev(who, Score(node=node, proposal=prop, specificity=x, non_overlap=x, coverage=x,
                         acceptable=acceptable, feedback=feedback), wall)


def vote(who, node, value, rnd=1, phase="prevote", wall=20, logical=0) -> Event:
    return ev(who, Vote(node=node, round=rnd, phase=phase, value=value), wall, logical)


def prevote(who, node, value, rnd=1, wall=20) -> Event:
    return vote(who, node, value, rnd, "prevote", wall)


def precommit(who, node, value, rnd=1, wall=30) -> Event:
    return vote(who, node, value, rnd, "precommit", wall)


def claim(who, node, wall, lease_ms=1000, logical=0) -> Event:
    return ev(who, Claim(node=node, lease_ms=lease_ms), wall, logical)


def renew(who, node, claim_id, wall, lease_ms=1000) -> Event:
    return ev(who, Renew(node=node, claim=claim_id, lease_ms=lease_ms), wall)


def release(who, node, claim_id, wall) -> Event:
    return ev(who, Release(node=node, claim=claim_id, reason="giving up"), wall)


def result(who, node, claim_id, wall, output="done it", tokens=(0, 0)) -> Event:
    return ev(who, Result(node=node, claim=claim_id, output=output, prompt_tokens=tokens[0],
                          completion_tokens=tokens[1]), wall)


# ------------------------------------------------------------------ membership
AUTHORITY = ident("authority")
SWARM = "test"


def membership(swarm: str = SWARM):
    from agent.core.membership import Membership

    return Membership(AUTHORITY.peer_id, swarm)


def credential(who, roles, issued=0, expires=10**9, swarm=SWARM, authority=None):
    from agent.core.membership import issue_credential

    return issue_credential(authority or AUTHORITY, who.peer_id, roles, swarm, T0 + issued, T0 + expires)


def member_hello(who, roles, wall=0, role=None, issued=0, expires=10**9, cred=None) -> Event:
    """A hello carrying a credential for ``roles`` (valid [T0 + issued, T0 + expires))."""
    roles = [roles] if isinstance(roles, str) else list(roles)
    cred = cred or credential(who, roles, issued, expires)
    return ev(who, Hello(role=role or roles[0], name=roles[0], credential=cred), wall)


def revoke(peer_id: str, wall: int, by=None) -> Event:
    from agent.core.events import Revoke

    return ev(by or AUTHORITY, Revoke(peer=peer_id, reason="test"), wall)
