"""What a new goal is made of: its plan parameters, its fixed electorate (the scorers the
submitter knows), validated; shared by `submit` and the observer's web form."""

from __future__ import annotations

import re
import unicodedata

import trio

from agent.core import committee
from agent.core.events import Goal, PlanParams
from agent.drivers.real.runtime import Runtime
from agent.settings import Settings


class SubmitError(RuntimeError):
    pass


TITLE_MAX = Goal.model_fields["title"].metadata[-1].max_length
DESCRIPTION_MAX = Goal.model_fields["description"].metadata[-1].max_length


class GoalTextError(ValueError):
    """A goal's title or description cannot be published; ``field`` names which, the message
    says why in one line (the CLI and the web form show it as it is)."""

    def __init__(self, field: str, message: str) -> None:
        super().__init__(message)
        self.field = field


_ANSI = re.compile(r"\x1b(?:\[[0-?]*[ -/]*[@-~]|\][^\x07\x1b]*(?:\x07|\x1b\\)?|[@-Z\\-_])")


def _visible(text: str, keep: str = "") -> str:
    """``text`` without terminal escape sequences and invisible characters (control and format
    characters such as a zero-width space), which would reach every peer's log and page."""
    text = _ANSI.sub("", text)
    return "".join(ch for ch in text if ch in keep or unicodedata.category(ch) not in ("Cc", "Cf"))


def check_goal_text(title: object, description: object = "") -> tuple[str, str]:
    """The goal's title (whitespace runs folded to one space) and description (stripped), both
    without terminal escapes and invisible characters, or GoalTextError: empty, blank or no
    word at all, too long, not text. Checked before anything joins the swarm, so a refused
    goal costs nothing and publishes nothing."""
    if isinstance(title, str):
        title = " ".join(_visible(title, keep=" \t\n\u200c\u200d").split())
    if not isinstance(title, str) or not title:
        raise GoalTextError("title", "the goal is empty: write what to plan, e.g. "
                                     "'Plan a two-week trip to Japan'")
    if not any(unicodedata.category(ch)[0] in "LN" for ch in title):
        raise GoalTextError("title", f"the goal {title!r} has no word in it: write what to plan, e.g. "
                                     "'Plan a two-week trip to Japan'")
    if len(title) > TITLE_MAX:
        raise GoalTextError("title", f"the goal is {len(title):,} characters; at most {TITLE_MAX} "
                                     "(put the details in the description)")
    if description is None:
        description = ""
    if not isinstance(description, str):
        raise GoalTextError("description", "the description must be text")
    description = _visible(description, keep="\t\n\u200c\u200d").strip()
    if len(description) > DESCRIPTION_MAX:
        raise GoalTextError("description", f"the description is {len(description):,} characters; "
                                           f"at most {DESCRIPTION_MAX:,}")
    return title, description


def plan_params(settings: Settings, electorate: list[str], seed: str | None = None,
                author: str | None = None) -> PlanParams:
    """The goal's parameters; with more scorers than ``settings.committee`` and the goal's
    committee ``seed``, the electorate is the committee drawn from them (agent.core.committee),
    plus the ``author`` if it is in ``electorate``."""
    return PlanParams.of(electorate, settings.quorum, max_depth=settings.max_depth,
                         max_children=settings.max_children, max_rounds=settings.max_rounds,
                         max_lease_ms=int(settings.max_lease_seconds * 1000), brief=settings.brief,
                         max_attempts=settings.max_attempts, token_budget=settings.token_budget,
                         committee=settings.committee, seed=seed, author=author)


def make_goal(settings: Settings, title: str, description: str, electorate: list[str],
              author: str | None = None) -> Goal:
    """The goal event's body, validated (pydantic raises ValidationError on bad input): what
    `submit` and the observer's web form publish. ``electorate``: the live scorers; with an
    ``author`` (the submitter's peer id) more of them than a committee are drawn from."""
    seed = None if author is None else committee.seed(author, title, description)
    return Goal(title=title, description=description, params=plan_params(settings, electorate, seed, author))


def electorate_size(settings: Settings, scorers: int, with_author: bool = False) -> int:
    """How many electors a goal gets from ``scorers`` live scorers (see make_goal)."""
    k = settings.committee
    return (k if k and scorers > k else scorers) + int(with_author)


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
