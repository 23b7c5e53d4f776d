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
    # A node nobody proposes for (no decomposer alive) is voted on anyway after this.
    open_timeout_ms: int = 600_000
    # Tendermint-style round timeouts, started once a quorum of votes of a phase is in.
    prevote_timeout_ms: int = 1_000
    precommit_timeout_ms: int = 1_000
    # A round with no quorum of votes at all gives up after this (e.g. a scorer is down).
    round_timeout_ms: int = 30_000
    # Executors: wait after claiming before spending an LLM call, so a lost race costs none.
    settle_ms: int = 1_000
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
