"""Who is in a simulated swarm, and what each member is: the roles in index order, the keys,
the authority and the credentials it issues, which members are Byzantine and the behaviour
each runs (honest from agent.behaviour, or one of byzantine.py's), and the plan parameters
whose electorate the scorers form. The world (world.py) owns the agents' lives and their
scheduling; this owns only their make-up, so a restart or a join asks here again."""

from __future__ import annotations

import hashlib
import random
from typing import Iterable, Protocol

from agent.behaviour import make as make_behaviour
from agent.behaviour.base import Behaviour
from agent.core import committee
from agent.core.events import Credential, PlanParams
from agent.core.identity import Identity
from agent.core.membership import Membership, issue_credential

from .byzantine import EquivocatingScorer, InsiderExecutor, SquatterExecutor, StrangerVoter
from .config import START_MS, SimConfig


def sim_identity(seed: int, name: str) -> Identity:
    """The key a simulated agent gets (tests give real processes the same keys)."""
    return Identity(hashlib.sha256(f"{seed}:{name}".encode()).digest())


class Member(Protocol):
    """What the cast reads of an agent (world.SimAgent), without importing the world."""
    name: str
    role: str
    byzantine: bool
    strategy: str

    @property
    def me(self) -> str: ...


class Cast:
    def __init__(self, cfg: SimConfig, rng: random.Random) -> None:
        self.cfg = cfg
        self.rng = rng  # the run's one generator: each behaviour's seed is drawn from it
        self.authority = sim_identity(cfg.seed, "authority")
        self.membership = Membership(self.authority.peer_id, "sim") if cfg.membership else None

    def roles(self) -> list[str]:
        """Every agent's role, in index order: the submitter first, the observer last."""
        cfg, f = self.cfg, self.cfg.faults
        scorers = cfg.scorers
        if f.byzantine:
            scorers = max(scorers, 3 * f.byzantine + 1)
        return (["submitter"] + ["decomposer"] * cfg.decomposers + ["scorer"] * scorers
                + ["executor"] * cfg.executors + (["executor"] if f.squatter else [])
                + (["executor"] if f.insider else [])
                + ["stranger"] * f.strangers + ["observer"])

    def identity(self, name: str) -> Identity:
        return sim_identity(self.cfg.seed, name)

    def mark_byzantine(self, agents: list[Member]) -> None:
        """The first scorers, the squatter, the insider and every stranger; the executors'
        names say which they are."""
        f = self.cfg.faults
        for a in [a for a in agents if a.role == "scorer"][:f.byzantine]:
            a.byzantine = True
        executors = [a for a in agents if a.role == "executor"]
        if f.squatter:
            executors[-1 - int(f.insider)].byzantine = True
            executors[-1 - int(f.insider)].name += "-squatter"
        if f.insider:
            executors[-1].byzantine = True
            executors[-1].name += "-insider"
        for a in agents:
            if a.role == "stranger":
                a.byzantine = True

    def credential(self, a: Member) -> Credential | None:
        """What the swarm's authority issued to ``a`` (a stranger gets nothing)."""
        if self.membership is None or a.role == "stranger":
            return None
        return issue_credential(self.authority, a.me, [a.role], "sim", START_MS - 3_600_000,
                                START_MS + self.cfg.limit_ms + 86_400_000)

    def behaviour(self, a: Member) -> Behaviour | None:
        # drawn even when behaviour_seed overrides it: the generator's later draws stay the same
        seed = self.rng.randrange(2**31)
        if self.cfg.behaviour_seed is not None:
            seed = self.cfg.behaviour_seed
        t = self.cfg.timing
        if a.role == "scorer" and a.byzantine:
            return EquivocatingScorer(a.me, t, seed)
        if a.role == "executor" and a.name.endswith("-insider"):
            return InsiderExecutor(a.me, t, seed, active_until=START_MS + self.cfg.fault_phase_ms)
        if a.role == "executor" and a.byzantine:
            return SquatterExecutor(a.me, t, seed)
        if a.role == "stranger":
            return StrangerVoter(a.me, t, seed)
        if a.role in ("decomposer", "scorer", "executor"):
            return make_behaviour(a.role, a.me, t, seed, strategy=a.strategy)
        return None

    def params(self, electorate: Iterable[str], author: str) -> PlanParams:
        """The goal's plan parameters (more scorers than ``cfg.committee``: a committee drawn
        from them for the goal ``author`` posts), refused if the Byzantine electors exceed the
        bound."""
        cfg, f = self.cfg, self.cfg.faults
        params = PlanParams.of(electorate, cfg.quorum, liars=f.byzantine, max_depth=cfg.max_depth,
                               max_children=cfg.max_children, max_rounds=cfg.max_rounds,
                               max_lease_ms=cfg.max_lease_ms, brief=cfg.brief,
                               max_attempts=cfg.max_attempts, token_budget=cfg.token_budget,
                               committee=cfg.committee, seed=committee.seed(author, cfg.goal, ""))
        n, quorum = len(params.electorate), params.quorum
        if f.byzantine and not f.byzantine < 2 * quorum - n:
            raise ValueError(f"{f.byzantine} Byzantine electors exceed the bound for quorum {quorum} of {n}")
        return params
