"""The simulated network between the agents: gossip with long-tailed delays, loss and
duplication while faults are on, partitions that heal, and sync pulls over per-peer cursors.

It owns the partition and the decoded-event cache. It schedules deliveries on the
simulation's virtual clock (``at``, ``now``) and draws from the simulation's one seeded
generator: the order of draws is the run, so one seed still gives one run.
"""

from __future__ import annotations

from typing import Any, Callable

from agent.core.events import Event, decode_event
from agent.core.reasons import Rejected
from agent.net.sync import RESCAN_EVERY

from .config import START_MS, SimConfig


class SimNetwork:
    def __init__(self, cfg: SimConfig, rng: Any, stats: Any, agents: list[Any],
                 now: Callable[[], int], at: Callable[[int, str, int, Any], None]) -> None:
        self.cfg = cfg
        self.rng = rng
        self.stats = stats
        self.agents = agents  # the simulation's list (agents join into it)
        self._now = now
        self._at = at
        self.partition: dict[int, int] | None = None  # agent -> group while partitioned
        self.decoded: dict[bytes, Event] = {}

    def _in_faults(self) -> bool:
        return self._now() < START_MS + self.cfg.fault_phase_ms

    def delay(self) -> int:
        f, r = self.cfg.faults, self.rng.random()
        if r < f.very_slow and self._in_faults():
            return self.rng.randint(30_000, 60_000)
        if r < f.very_slow + f.slow:
            return self.rng.randint(500, 5_000)
        return self.rng.randint(3, 60)

    def reachable(self, i: int, j: int) -> bool:
        return self.partition is None or self.partition[i] == self.partition[j]

    def decode(self, raw: bytes) -> Event | None:
        """The event in ``raw`` (decoded and verified once for the whole simulation), or None."""
        ev = self.decoded.get(raw)
        if ev is None:
            try:
                ev = decode_event(raw)
            except Rejected:
                return None
            self.decoded[raw] = ev
        return ev

    def gossip(self, a: Any, raw: bytes) -> None:
        """``a`` sends ``raw`` to every other agent (reachable or not: a partition drops it
        on delivery)."""
        f = self.cfg.faults
        in_faults = self._in_faults()
        now = self._now()
        for b in self.agents:
            if b is a:
                continue
            if in_faults and self.rng.random() < f.loss:
                self.stats.lost += 1
                continue
            self._at(now + self.delay(), "deliver", b.idx, (raw, a.idx))
            if in_faults and self.rng.random() < f.dup:
                self.stats.duplicated += 1
                self._at(now + self.delay(), "deliver", b.idx, (raw, a.idx))

    def peers_of(self, a: Any) -> list[Any]:
        """Who ``a`` can pull from now: up and on its side of a partition."""
        return [b for b in self.agents if b is not a and b.up and self.reachable(a.idx, b.idx)]

    def antientropy(self, a: Any) -> None:
        peers = self.peers_of(a)
        if not peers:
            return
        b = self.rng.choice(peers)
        self.request_sync(a, [b], None)

    def request_sync(self, a: Any, peers: list[Any], ticket: int | None, confirm: str | None = None) -> None:
        """``a`` pulls what ``peers`` stored that it lacks; the answer comes as "sync_done"."""
        # (who stored the event asked about: as each peer's store holds it now)
        holders = None if confirm is None else sum(1 for b in peers if confirm in b.intake.plan.events)
        raws = []
        seen = set()
        # each peer's answer carries its clock (the one it stamps by): a round trip for a's
        # estimate of its offset (agent.core.skew), sent and received on a's uncorrected clock
        now = self._now()
        trips = [(b.me, now + a.skew, now + b.skew - b.clock.correction_ms) for b in peers]
        for b in peers:
            # a per-peer cursor, as the real sync keeps (reset when that log got shorter)
            start = a.cursors.get(b.idx, 0)
            a.pulls[b.idx] = a.pulls.get(b.idx, 0) + 1
            if start > len(b.log.records) or a.pulls[b.idx] % RESCAN_EVERY == 0:
                start = 0  # (every RESCAN_EVERY-th: what our intake refused for now, again)
            a.cursors[b.idx] = len(b.log.records)
            for raw in b.log.records[start:]:
                ev = self.decode(raw)
                if ev is not None and ev.id not in seen and not a.intake.knows(ev.id):
                    seen.add(ev.id)
                    raws.append((raw, b.idx))
        self._at(now + self.rng.randint(5, 120), "sync_done", a.idx,
                 (a.epoch, ticket, raws, len(peers), holders, trips))
