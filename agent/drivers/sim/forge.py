"""What Byzantine members sign (part of the fault plan): an event signed without its author's
own checks, stamped back-dated or at a chosen instant; and an insider's extra keys (no
credential) signing hellos, claims and goals that name themselves as the electorate. The
world sends, files and counts what is signed here like any event (``world.Simulation``); the
checker knows the extra keys' events by ``sybil_ids`` and ``sybil_authors``."""

from __future__ import annotations

from agent.core.events import Credential, Event, Goal, Hello, PlanParams, quorum_for, sign_event
from agent.core.hlc import HybridClock, Timestamp
from agent.core.identity import Identity

from .byzantine import ForgedPublish, PackedGoal, SybilPublish
from .cast import sim_identity


class Forger:
    def __init__(self, seed: int, params: PlanParams) -> None:
        self.seed = seed
        self.params = params  # the simulated goal's: a packed goal copies them
        self.sybil_ids: set[str] = set()  # events signed by an insider's extra keys
        self.sybil_authors: set[str] = set()  # an insider's extra keys

    def forged(self, who: Identity, clock: HybridClock, eff: ForgedPublish, now: int) -> Event:
        """``eff.body`` signed by ``who`` with a back-dated stamp if it likes, or at exactly
        ``eff.wall``, passing none of its own checks."""
        hlc = clock.send(now)
        if eff.backdate_ms:
            hlc = Timestamp(max(0, hlc.wall - eff.backdate_ms), 0)
        if eff.wall:
            hlc = Timestamp(eff.wall, 0)
        return sign_event(who, hlc, eff.body)

    def sybil(self, insider: str, credential: Credential | None, eff: SybilPublish, now: int) -> Event:
        """``eff.body`` signed by the insider's extra key ``eff.key``, stamped ``eff.ahead_ms``
        from its clock; a packed goal names the extra keys as its electorate."""
        key = self._key(insider, eff.key)
        body = eff.body
        if isinstance(body, PackedGoal):
            electorate = sorted({self._key(insider, k).peer_id for k in body.keys})
            body = Goal(title="a goal decided by its submitter's own keys",
                        params=self.params.model_copy(update={"electorate": tuple(electorate),
                                                              "quorum": quorum_for(len(electorate)),
                                                              "pool": (), "committee": 0}))
        if eff.stolen and isinstance(body, Hello) and credential is not None:
            body = body.model_copy(update={"credential": credential})
        ev = sign_event(key, Timestamp(max(0, now + eff.ahead_ms), 0), body)
        self.sybil_ids.add(ev.id)
        self.sybil_authors.add(key.peer_id)
        return ev

    def _key(self, insider: str, k: int) -> Identity:
        return sim_identity(self.seed, f"{insider}/extra-{k}")
