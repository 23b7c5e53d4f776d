"""What a simulated run looks like: the swarm, the plan, and the faults to inject."""

from __future__ import annotations

from dataclasses import dataclass, field, replace

from agent.behaviour.timing import Timing

START_MS = 1_767_225_600_000  # 2026-01-01: virtual time's origin
FAULT_KINDS = ("delay", "loss", "dup", "partition", "crash", "pause", "skew", "llm", "byzantine")


@dataclass(frozen=True)
class Faults:
    # network
    loss: float = 0.0  # chance a gossip delivery is lost
    dup: float = 0.0  # chance a gossip delivery arrives twice
    slow: float = 0.0  # chance of a slow delivery (0.5-5 s)
    very_slow: float = 0.0  # chance of a delivery slower than the round timeout (30-60 s)
    partitions: int = 0  # partitions (each heals) during the fault phase
    # processes
    crashes: int = 0  # crash + restart from the stored log (maybe with a torn last write)
    torn: float = 0.5  # chance a crash tears the last write
    pauses: int = 0  # pauses longer than a lease
    skew_ms: int = 0  # clock skew drawn per agent in [-skew, +skew]
    fast_clock_ms: int = 0  # one agent's clock runs this far ahead
    # LLM
    llm_errors: float = 0.0  # chance an LLM call fails (unavailable)
    llm_garbage: float = 0.0  # chance an LLM answer is unusable
    # Byzantine electors, kept within the documented bound (fewer than 2q - n)
    byzantine: int = 0
    strangers: int = 0  # members outside the electorate that vote anyway (refused at intake)
    squatter: bool = False  # an executor that claims with the longest lease and never works
    insider: bool = False  # a credentialed executor with extra keys that tries everything (byzantine.py)

    @classmethod
    def none(cls) -> "Faults":
        return cls()

    @classmethod
    def all(cls) -> "Faults":
        return cls(loss=0.03, dup=0.03, slow=0.05, very_slow=0.01, partitions=2, crashes=2,
                   pauses=1, skew_ms=1_500, fast_clock_ms=30_000, llm_errors=0.05,
                   llm_garbage=0.05, byzantine=1, strangers=1, insider=True)

    @classmethod
    def parse(cls, text: str) -> "Faults":
        """'all', 'none', or a comma list of FAULT_KINDS (e.g. 'delay,partition,crash')."""
        text = text.strip().lower()
        if text in ("all", ""):
            return cls.all() if text == "all" else cls.none()
        if text == "none":
            return cls.none()
        full = cls.all()
        kinds = {k.strip() for k in text.split(",") if k.strip()}
        unknown = kinds - set(FAULT_KINDS)
        if unknown:
            raise ValueError(f"unknown fault kinds {sorted(unknown)}; known: {', '.join(FAULT_KINDS)}")
        f = cls()
        if "delay" in kinds:
            f = replace(f, slow=full.slow, very_slow=full.very_slow)
        if "loss" in kinds:
            f = replace(f, loss=full.loss)
        if "dup" in kinds:
            f = replace(f, dup=full.dup)
        if "partition" in kinds:
            f = replace(f, partitions=full.partitions)
        if "crash" in kinds:
            f = replace(f, crashes=full.crashes)
        if "pause" in kinds:
            f = replace(f, pauses=full.pauses)
        if "skew" in kinds:
            f = replace(f, skew_ms=full.skew_ms, fast_clock_ms=full.fast_clock_ms)
        if "llm" in kinds:
            f = replace(f, llm_errors=full.llm_errors, llm_garbage=full.llm_garbage)
        if "byzantine" in kinds:
            f = replace(f, byzantine=full.byzantine, strangers=full.strangers, squatter=full.squatter,
                        insider=full.insider)
        return f


def sim_timing() -> Timing:
    return Timing(
        proposal_window_min_ms=1_500, proposal_window_max_ms=60_000, open_timeout_ms=600_000,
        prevote_timeout_ms=1_000, precommit_timeout_ms=1_000, round_timeout_ms=30_000,
        settle_ms=1_000, lease_ms=20_000, lease_margin_ms=2_000, attempts=3, set_aside_ms=15_000,
        startup_sync_ms=5_000,
    )


@dataclass(frozen=True)
class SimConfig:
    seed: int = 0
    goal: str = "Plan a two-week trip to Japan"
    decomposers: int = 3
    scorers: int = 3
    executors: int = 2
    quorum: int | None = None  # default: a strict majority, raised to tolerate Byzantine electors
    committee: int = 7  # more scorers than this: the goal's electorate is a committee drawn from them
    max_depth: int = 2
    max_children: int = 3
    max_rounds: int = 2
    max_lease_ms: int = 120_000
    brief: bool = True  # the goal settles a brief first
    max_attempts: int = 2  # results before the last attempt are reviewed
    token_budget: int = 0  # the goal's token budget (0: none); the checker holds it to its bound
    faults: Faults = field(default_factory=Faults)
    timing: Timing = field(default_factory=sim_timing)
    # LLM latency (ms), per call: realistic for small local models on a CPU
    llm_ms: dict[str, tuple[int, int]] = field(default_factory=lambda: {
        "brief": (3_000, 15_000), "decompose": (5_000, 40_000), "rank": (3_000, 20_000),
        "atomic": (1_000, 5_000), "execute": (5_000, 30_000), "review": (2_000, 10_000),
        "synthesize": (5_000, 30_000)})
    fault_phase_ms: int = 240_000  # faults are injected in [0, this); then the swarm heals
    limit_ms: int = 2 * 60 * 60 * 1000  # give up (a liveness failure) after this much virtual time
    sync_interval_ms: int = 10_000  # anti-entropy pull from a random reachable peer
    check_every: int = 1  # run the invariant checker every N steps (1: after every step)
    trace: bool = False  # keep the behaviours' log lines
    behaviour_seed: int | None = None  # every behaviour's seed (to compare with real processes)
    membership: bool = True  # a swarm with an authority: every agent holds a credential for its role
    # scripted faults on top of the random ones: (at ms, action, args) with actions
    # partition [[names], [names]] | heal | crash name | restart name | pause name ms |
    # join role count (new members that announce themselves mid-plan)
    script: tuple[tuple[int, str, object], ...] = ()
