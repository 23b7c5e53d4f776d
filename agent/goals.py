"""What a new goal is made of: its plan parameters, its fixed electorate (the scorers the
submitter knows), validated; shared by `submit` and the observer's web form."""

from __future__ import annotations

import trio

from agent.core.events import Goal, PlanParams
from agent.runtime import Runtime
from agent.settings import Settings


class SubmitError(RuntimeError):
    pass


def plan_params(settings: Settings, electorate: list[str]) -> PlanParams:
    electorate = sorted(set(electorate))
    return PlanParams(electorate=tuple(electorate), quorum=settings.quorum_for(len(electorate)),
                      max_depth=settings.max_depth, max_children=settings.max_children,
                      max_rounds=settings.max_rounds,
                      max_lease_ms=int(settings.max_lease_seconds * 1000))


def make_goal(settings: Settings, title: str, description: str, electorate: list[str]) -> Goal:
    """The goal event's body, validated (pydantic raises ValidationError on bad input): what
    `submit` and the observer's web form publish."""
    return Goal(title=title, description=description, params=plan_params(settings, electorate))


def known_scorers(rt: Runtime, expected: int = 0) -> list[str]:
    """The electorate a new goal names: the scorers this peer holds a connection to now that
    announced themselves (signed hello), and, in a swarm with an authority, hold a scorer
    credential for now and are not revoked. Never a scorer known only from an old hello: one
    that left (or a key that announced itself once) would be an elector that never votes.
    (``expected`` is kept for callers; the answer no longer depends on it.)"""
    live = set(rt.net.connected) if rt.net is not None else set()
    members = rt.plan.members
    now = rt.now_ms()
    out = []
    for peer, roles in rt.plan.roles.items():
        if "scorer" not in roles or peer not in live:
            continue
        if members.closed and ("scorer" not in members.roles_of(peer, now) or peer in members.revoked):
            continue
        out.append(peer)
    return sorted(out)


async def wait_for_peers(rt: Runtime, count: int, timeout: float) -> None:
    with trio.fail_after(timeout):
        while len(rt.net.connected) < count:
            await trio.sleep(0.1)


async def choose_electorate(settings: Settings, rt: Runtime, timeout: float) -> list[str]:
    """Wait (up to ``timeout``) until ``settings.scorers`` live scorers are connected (see
    known_scorers); name those."""
    with trio.move_on_after(timeout):
        while len(known_scorers(rt, settings.scorers)) < settings.scorers:
            await rt.net.sync_all()
            await trio.sleep(0.3)
    scorers = known_scorers(rt, settings.scorers)
    if not scorers:
        raise SubmitError(f"no connected scorer within {timeout:.0f}s (announced, credentialed where the "
                          "swarm has an authority): nobody could vote on the goal")
    if len(scorers) < settings.scorers:
        rt.log.warning("fewer scorers than expected; naming those known", expected=settings.scorers,
                       known=len(scorers))
    return scorers
