"""How far this agent's clock is from its peers', estimated from what it receives.

Every fresh event a peer sends carries that peer's clock (its stamp); the time we receive it
on our own clock, minus the stamp, is the delay plus how far we are ahead of that peer. The
smallest such lag over a peer's recent events is the best estimate of our offset to it (a
delay is never negative). The offset to the swarm is the median over the peers heard from
recently, with ourselves counted as 0: one liar, or one other fast clock, cannot move it, and
with a single peer nobody knows whose clock is wrong, so nothing moves.

Pure: the caller passes every time (our uncorrected clock), the runtime decides what to do
with the estimate (agent.runtime: stamps corrected by it, publishing held back while our
clock's last stamp is still ahead of what peers accept).
"""

from __future__ import annotations

from collections import OrderedDict, deque


class SkewEstimator:
    def __init__(self, window_ms: int = 60_000, per_peer: int = 64, max_peers: int = 256,
                 max_abs_ms: int = 3_600_000) -> None:
        self.window_ms = window_ms
        self.per_peer = per_peer
        self.max_peers = max_peers
        self.max_abs_ms = max_abs_ms  # lags beyond this are not clocks but replays of old events
        self._lags: OrderedDict[str, deque[tuple[int, int]]] = OrderedDict()  # peer -> (at, lag)

    def sample(self, peer: str, stamp_ms: int, local_ms: int) -> None:
        """A fresh event of ``peer`` stamped ``stamp_ms`` arrived at ``local_ms`` (our clock
        without any correction)."""
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

    def per_peer_ms(self, local_ms: int) -> dict[str, int]:
        """Our offset to each peer heard from within the window (positive: we are ahead)."""
        out = {}
        for peer, q in list(self._lags.items()):
            recent = [lag for at, lag in q if local_ms - at <= self.window_ms]
            if recent:
                out[peer] = min(recent)
            elif q and local_ms - q[-1][0] > self.window_ms:
                del self._lags[peer]
        return out

    def ahead_ms(self, local_ms: int) -> int:
        """How far our clock is ahead of the swarm's (negative: behind): the median of our
        offsets to the peers heard from recently, ourselves counted as 0; of the two middle
        values, the one nearer 0."""
        values = sorted([0, *self.per_peer_ms(local_ms).values()])
        n = len(values)
        if n % 2:
            return values[n // 2]
        a, b = values[n // 2 - 1], values[n // 2]
        return a if abs(a) <= abs(b) else b
