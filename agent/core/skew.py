"""How far this agent's clock is from its peers', estimated from what it receives.

Every fresh event a peer sends carries that peer's clock (its stamp); the time we receive it
on our own clock, minus the stamp, is the delay plus how far we are ahead of that peer. A
delay is never negative, so the smallest such lag over a peer's recent events bounds our lead
from above: below 0, we are behind that peer by at least that much. It cannot tell a lead from
a delay, so it never says we are ahead: under load every delivery took seconds, each agent
read its delays as a lead and stamped earlier, which its peers read as a larger lag still,
and 100 agents corrected their clocks by 384 s (docs/performance.md). A lead is known only
from a round trip: a sync request sent at our t0, answered with the peer's clock s and
received at our t3, bounds our lead to [t0 - s, t3 - s] whatever the delays, so t0 - s > 0
says we are ahead by at least that. Per peer the estimate is the part of the offset that is
certain (behind by at least the one-way bound, or ahead by at least the round trip's; else
0), never a delay. The offset to the swarm is the median over the peers heard from recently,
with ourselves counted as 0: one liar, or one other fast clock, cannot move it, and with a
single peer nobody knows whose clock is wrong, so nothing moves.

Pure: the caller passes every time (our uncorrected clock), the runtime decides what to do
with the estimate (agent.drivers.real.runtime: stamps corrected by it, publishing held back
while our clock's last stamp is still ahead of what peers accept).
"""

from __future__ import annotations

from collections import OrderedDict, deque
from typing import Any


class SkewEstimator:
    def __init__(self, window_ms: int = 60_000, per_peer: int = 64, max_peers: int = 256,
                 max_abs_ms: int = 3_600_000, known_ms: int | None = None,
                 trip_window_ms: int = 900_000) -> None:
        self.window_ms = window_ms
        # round trips are few (anti-entropy pulls 3 peers per period: in a swarm of 100, each
        # peer once in 5 minutes) and clocks drift slowly: each counts this long
        self.trip_window_ms = trip_window_ms
        self._trips: OrderedDict[str, deque[tuple[int, int, int]]] = OrderedDict()  # peer -> (at, lo, hi)
        self.per_peer = per_peer
        self.max_peers = max_peers
        self.max_abs_ms = max_abs_ms  # lags beyond this are not clocks but replays of old events
        self._lags: OrderedDict[str, deque[tuple[int, int]]] = OrderedDict()  # peer -> (at, lag)
        # every peer heard from lately, with or without a usable stamp: each one without a
        # recent lag counts as in step (0), so an estimate needs most of the peers we know to
        # agree; a few (one fast clock, one liar, and the agents they misled) cannot start a
        # cascade in which every corrected clock misleads the next (found by the simulator)
        self.known_ms = window_ms if known_ms is None else known_ms
        self._heard: OrderedDict[str, int] = OrderedDict()  # peer -> last heard (our clock)

    def heard(self, peer: str, local_ms: int) -> None:
        """``peer`` sent a fresh event, usable stamp or not."""
        self._heard[peer] = local_ms
        self._heard.move_to_end(peer)
        while len(self._heard) > self.max_peers:
            self._heard.popitem(last=False)

    def sample(self, peer: str, stamp_ms: int, local_ms: int) -> None:
        """A fresh event of ``peer`` stamped ``stamp_ms`` arrived at ``local_ms`` (our clock
        without any correction)."""
        self.heard(peer, local_ms)
        lag = local_ms - stamp_ms
        if abs(lag) > self.max_abs_ms:
            return
        q = self._lags.get(peer)
        if q is None:
            q = self._lags[peer] = deque(maxlen=self.per_peer)
            while len(self._lags) > self.max_peers:
                self._lags.popitem(last=False)
        else:
            self._lags.move_to_end(peer)
        q.append((local_ms, lag))

    def round_trip(self, peer: str, sent_ms: int, peer_ms: int, received_ms: int) -> None:
        """A request to ``peer`` left at ``sent_ms`` and its answer, carrying the peer's clock
        ``peer_ms``, came back at ``received_ms`` (our clock without any correction)."""
        if received_ms < sent_ms or abs(sent_ms - peer_ms) > self.max_abs_ms:
            return
        self.heard(peer, received_ms)
        q = self._trips.get(peer)
        if q is None:
            q = self._trips[peer] = deque(maxlen=self.per_peer)
            while len(self._trips) > self.max_peers:
                self._trips.popitem(last=False)
        else:
            self._trips.move_to_end(peer)
        q.append((received_ms, sent_ms - peer_ms, received_ms - peer_ms))

    def per_peer_ms(self, local_ms: int) -> dict[str, int]:
        """Our offset to each peer heard from within the window (positive: we are ahead): the
        part of it that is certain (module doc), 0 when delays could explain what we saw."""
        upper: dict[str, int] = {}  # our lead is at most this
        lower: dict[str, int] = {}  # ...and at least this
        for peer, q in list(self._lags.items()):
            recent = [lag for at, lag in q if local_ms - at <= self.window_ms]
            if recent:
                upper[peer] = min(recent)
            elif q and local_ms - q[-1][0] > self.window_ms:
                del self._lags[peer]
        for peer, t in list(self._trips.items()):
            recent_t = [(lo, hi) for at, lo, hi in t if local_ms - at <= self.trip_window_ms]
            if recent_t:
                lower[peer] = max(lo for lo, _hi in recent_t)
                upper[peer] = min(upper.get(peer, 2**62), min(hi for _lo, hi in recent_t))
            elif t and local_ms - t[-1][0] > self.trip_window_ms:
                del self._trips[peer]
        out = {}
        for peer in upper.keys() | lower.keys():
            hi, lo = upper.get(peer), lower.get(peer)
            if hi is not None and hi < 0:
                out[peer] = hi  # behind it by at least this (a recent lag: it wins a stale trip)
            elif lo is not None and lo > 0:
                out[peer] = lo if hi is None else min(lo, hi)  # ahead by at least this, at most hi
            else:
                out[peer] = 0  # in step, as far as delays let us tell
        return out

    def ahead_ms(self, local_ms: int) -> int:
        """How far our clock is ahead of the swarm's (negative: behind): the median of our
        offsets to the peers heard from recently, ourselves counted as 0; of the two middle
        values, the one nearer 0. A peer heard from lately without a recent usable stamp
        counts as 0."""
        lags = self.per_peer_ms(local_ms)
        for peer, at in list(self._heard.items()):
            if local_ms - at > self.known_ms and peer not in self._trips:
                del self._heard[peer]
        values = sorted([0, *(lags.get(p, 0) for p in self._heard)])
        n = len(values)
        if n % 2:
            return values[n // 2]
        a, b = values[n // 2 - 1], values[n // 2]
        return a if abs(a) <= abs(b) else b


class ClockCorrection:
    """What an agent subtracts from its clock to stamp in step with its peers (one rule for
    every driver: agent.drivers.real.runtime, agent.drivers.sim). Corrected only beyond
    ``bound_ms``, what peers accept anyway: within it, a gossip delay of a second while the
    mesh forms (measured) would pass for an offset."""

    def __init__(self, bound_ms: int, estimator: SkewEstimator | None = None) -> None:
        self.bound_ms = bound_ms
        self.estimator = estimator or SkewEstimator()
        self.correction_ms = 0
        self.ahead_ms = 0

    def observe(self, peer: str, wall: int, logical: int, local_ms: int) -> None:
        """A fresh event of ``peer`` stamped (``wall``, ``logical``), received at ``local_ms``
        (our uncorrected clock), once its stamp passed the intake's clock check. Only a stamp
        with logical 0 is its author's own clock: a hybrid clock that merged a later stamp
        carries that stamp's wall with a logical above 0, and counting those let one fast
        clock ratchet every estimate forward, a bound's worth per hop (the simulator: the
        whole swarm 100 s ahead)."""
        if logical == 0:
            self.estimator.sample(peer, wall, local_ms)
        else:
            self.estimator.heard(peer, local_ms)

    def round_trip(self, peer: str, sent_ms: int, peer_ms: int, received_ms: int) -> None:
        """A sync request to ``peer`` sent at ``sent_ms``, answered with its clock ``peer_ms``
        (the one it stamps by), received at ``received_ms`` (our uncorrected clock)."""
        self.estimator.round_trip(peer, sent_ms, peer_ms, received_ms)

    def update(self, local_ms: int) -> bool:
        """Re-estimate at ``local_ms`` (our uncorrected clock); True when the correction moved
        by more than half the bound, or started or stopped (worth one log line)."""
        self.ahead_ms = ahead = self.estimator.ahead_ms(local_ms)
        new = ahead if abs(ahead) > self.bound_ms else 0
        notable = abs(new - self.correction_ms) > self.bound_ms // 2 or (new == 0) != (self.correction_ms == 0)
        self.correction_ms = new
        return notable


def hold_back_until(last_stamp_ms: int, now_ms: int, bound_ms: int) -> int | None:
    """While our last stamp (the hybrid clock's wall) is further ahead of our corrected clock
    than peers accept, whatever we sign is held by every peer: the clock time (ours,
    corrected) to wait for, when the lead is down to half the bound; None: publish now."""
    if last_stamp_ms - now_ms <= bound_ms:
        return None
    return last_stamp_ms - bound_ms // 2


def counts_for_clock(members: Any, ev: Any) -> bool:
    """Whose stamps the estimate hears (``ev`` held or accepted by the intake): in a swarm with
    an authority, only credentialed members' (a member minting keys could otherwise outvote
    the honest peers with its own stamps, and every clock it moved would mislead the next);
    in an open swarm, everyone's. A hello counts by itself: the intake checked its credential
    before holding it, and a peer whose clock is far off holds every hello at first."""
    if not members.closed or ev.body.type == "hello":
        return True
    return bool(members.roles_of(ev.author, ev.hlc.wall))


def counts_peer_for_clock(members: Any, peer: str, wall: int) -> bool:
    """Whose round trips the estimate takes: as counts_for_clock, a credentialed member's (at
    the clock it reported), or anyone's in an open swarm."""
    return not members.closed or bool(members.roles_of(peer, wall))
