"""How long behaviours wait: windows and timeouts. They decide liveness and speed only: no
safety rule depends on any of them."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Timing:
    # Competition: a node's first round waits for splits from every known decomposer, or for a
    # window scaled to how long the first split took to arrive, whichever comes first.
    proposal_window_min_ms: int = 1_500
    proposal_window_max_ms: int = 120_000
    proposal_window_ratio: float = 2.0
    # A node nobody proposes for (no decomposer alive) is voted on anyway after this, or after
    # open_timeout_ratio times the longest wait for a slot's first entry seen so far (a brief,
    # a split), whichever is later, up to open_timeout_max_ms: on a loaded machine a decomposer's
    # whole-plan draft (about 900 tokens) queued behind others took longer than the fixed 600 s,
    # and the root was done as one task while three decomposers were still writing. A brief is
    # about a tenth of a draft's tokens, hence the ratio; a dead decomposer still costs at most
    # the cap (twice the fixed timeout, so a goal whose decomposers all died still ends well
    # inside the simulator's two-hour liveness bound).
    open_timeout_ms: int = 600_000
    open_timeout_ratio: float = 8.0
    open_timeout_max_ms: int = 1_200_000
    # Electors wait this long for the rapporteur's reading of a result (its LLM call) before
    # they vote on their own checks alone.
    review_window_ms: int = 90_000
    # Tendermint-style round timeouts, started once a quorum of votes of a phase is in.
    prevote_timeout_ms: int = 1_000
    precommit_timeout_ms: int = 1_000
    # A round with no quorum of votes at all gives up after this (e.g. a scorer is down).
    round_timeout_ms: int = 30_000
    # A node's home decomposers (rendezvous hashing over the announced ones, agent.core.
    # rendezvous) propose for it; the others stay out, so a node gets a few competing splits
    # and its scorers judge those, however many decomposers the swarm has. If none of its home
    # decomposers has proposed this long after I first saw the node open (they died), I do.
    # 0: every decomposer proposes for every node.
    decomposers_per_node: int = 3
    foreign_split_after_ms: int = 60_000
    # Executors: wait after claiming before spending an LLM call, so a lost race costs none:
    # long enough for my claim to reach the others and theirs to reach me, i.e. twice the
    # measured gossip delay plus a margin, within [settle_min_ms, settle_ms]; settle_ms while
    # the delay is unknown.
    settle_ms: int = 1_000
    settle_min_ms: int = 100
    settle_delay_factor: float = 1.0
    settle_margin_ms: int = 50
    # Every task has a home executor (rendezvous hashing): others take it over only once it
    # has been ready for steal_after_ms, so its home claims it without settling while my claim
    # still reaches them first: while it has been ready (to me) for at most
    # steal_after - 2 x the gossip delay - prompt_margin_ms (the ready news reaching the others
    # up to one delay before me, then my claim reaching them within another).
    prompt_margin_ms: int = 500
    steal_after_ms: int = 3_000
    # ...and only its next few executors (rendezvous again) take it over then; the rest only
    # after foreign_claim_after_ms, so a ready task draws a few claims, not one per idle
    # executor (41 executors under load: 300 claims and 230 releases for 5 results, measured)
    executors_per_task: int = 4
    foreign_claim_after_ms: int = 30_000
    lease_ms: int = 30_000
    lease_margin_ms: int = 2_000  # publish a result only with this much lease left
    # LLM failures: fresh seeds per task, then set it aside for a while.
    attempts: int = 3
    set_aside_ms: int = 15_000
    backoff_first_ms: int = 1_000
    backoff_cap_ms: int = 60_000
    # wait for peers' logs after start before voting or claiming (a restarted agent must not
    # act on a stale view); proceeds without if nobody answers in time
    startup_sync_ms: int = 10_000

    def may_retry(self, tried: int) -> bool:
        """After ``tried`` failed tries at one thing (an LLM answer that was unusable, a pull
        before work that nobody answered or that found our claim unstored), may it be tried
        once more? The one owner of the retry count: ``attempts`` tries in all."""
        return tried < self.attempts


STARTUP_GRACE_MS = 3_000  # after the startup sync, late history from peers is not a gossip miss


@dataclass(frozen=True)
class NetView:
    """What the driver measured of the network, handed to a behaviour with every call (data,
    not I/O). The defaults mean "nothing known": fixed windows, a pull before every task."""

    delay_ms: int | None = None  # gossip delay (stamp -> accepted) that nearly all events beat
    gossip_healthy: bool = False  # nothing gossip should have brought came by sync lately


class NetMeter:
    """A driver's measure of its gossip (pure: the caller passes the times). Every event from
    a peer that we accept is a sample: by gossip, ``now - stamp`` is its delay; by sync, an
    event stamped more than ``miss_after_ms`` before it came is one gossip missed (lost, or
    far too late). ``view`` gives the delay nearly all recent events beat (the 99th
    percentile of the last ``window``) and whether gossip missed nothing for
    ``miss_window_ms``; samples and misses before ``ignore_before`` (the mesh forming, history
    pulled at start) are not held against it."""

    RECOMPUTE_EVERY = 8

    def __init__(self, window: int = 256, miss_after_ms: int = 2_000, miss_window_ms: int = 20_000,
                 min_samples: int = 8) -> None:
        from collections import deque

        self.delays: deque[tuple[int, int]] = deque(maxlen=window)  # (when, delay)
        self.miss_after_ms = miss_after_ms
        self.miss_window_ms = miss_window_ms
        self.min_samples = min_samples
        self.last_miss: int | None = None
        self.count = 0
        self._cached: tuple[tuple[int, int] | None, int | None] = (None, None)
        self.misses = 0

    def delivered(self, via_sync: bool, lag_ms: int, now: int) -> None:
        if via_sync:
            if lag_ms > self.miss_after_ms:
                self.last_miss = now
                self.misses += 1
            return
        self.delays.append((now, max(0, lag_ms)))
        self.count += 1

    def view(self, now: int, ignore_before: int | None = None) -> NetView:
        start = ignore_before if ignore_before is not None else -(2**62)
        # the 99th percentile moves slowly: recomputed every RECOMPUTE_EVERY samples, not on each
        key = (start, self.count // self.RECOMPUTE_EVERY if self.count >= 2 * self.min_samples else self.count)
        if key != self._cached[0]:
            delay = None
            recent = sorted(d for at, d in self.delays if at >= start)
            if len(recent) >= self.min_samples:
                delay = recent[min(len(recent) - 1, int(0.99 * len(recent)))]
            self._cached = (key, delay)
        delay = self._cached[1]
        miss = self.last_miss
        if miss is not None and ignore_before is not None and miss < ignore_before:
            miss = None
        healthy = ignore_before is not None and now >= ignore_before and (
            miss is None or now - miss >= self.miss_window_ms)
        return NetView(delay, healthy)
