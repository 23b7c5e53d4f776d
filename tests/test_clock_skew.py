"""Clock offset against the peers: the pure estimator (robust to one liar and to a single
peer), and the runtime that stamps by it and holds back while its last stamp is still further
ahead than peers accept. The chaos suite's skew scenarios run it in real processes."""

from __future__ import annotations

from pathlib import Path

import structlog
import trio
import trio.testing
from hypothesis import given, settings, strategies as st
from structlog.testing import capture_logs

from agent import metrics
from agent.core.events import Hello, sign_event
from agent.core.hlc import Timestamp
from agent.core.skew import SkewEstimator
from agent.drivers.real.runtime import Runtime, load_identity
from agent.store import MemoryLog
from agent.settings import load_settings

T = 1_800_000_000_000


def feed(est: SkewEstimator, peer: str, ahead_ms: int, n: int = 5, delay_ms: int = 20) -> None:
    """``n`` events of ``peer`` reaching us while our clock is ``ahead_ms`` ahead of its."""
    for k in range(n):
        at = T + k * 100
        est.sample(peer, at - ahead_ms - delay_ms - 7 * k, at)  # jittered delays, least 20 ms


def test_a_lag_is_no_lead_but_a_round_trip_is():
    """Every peer's events arriving 30 s after their stamps: a 30 s lead, or 30 s of delay
    (under load, measured: read as a lead, 100 agents corrected their clocks by 384 s). Only a
    round trip (a sync page carries the peer's clock) says we are ahead."""
    est = SkewEstimator()
    for p in "abc":
        feed(est, p, 30_000)
    assert est.ahead_ms(T + 500) == 0
    for p in "abc":  # asked at T + 500, the peer's clock read T - 29,485, answered at T + 540
        est.round_trip(p, T + 500, T - 29_485, T + 540)
    assert 29_985 <= est.ahead_ms(T + 540) <= 30_020


def test_seconds_of_delay_both_ways_move_nothing():
    """The overload that made the runaway: every delivery and every round trip 2-8 s late."""
    import random

    rnd = random.Random(7)
    est = SkewEstimator()
    for k in range(200):
        p = f"p{k % 30}"
        at = T + k * 300
        est.sample(p, at - rnd.randint(2_000, 8_000), at)
        there, back = rnd.randint(2_000, 8_000), rnd.randint(2_000, 8_000)
        est.round_trip(p, at - there - back, at - back, at)  # answered "there" ms after it left
        assert est.ahead_ms(at) == 0


def test_one_peer_alone_moves_nothing_nor_does_one_liar_or_one_fast_peer():
    est = SkewEstimator()
    feed(est, "a", 30_000)
    assert est.ahead_ms(T + 500) == 0  # whose clock is wrong? nobody knows
    for p in "bc":
        feed(est, p, 0)
    assert abs(est.ahead_ms(T + 500)) <= 20  # a fast (or lying) peer among honest ones
    feed(est, "liar", -50_000)
    assert abs(est.ahead_ms(T + 500)) <= 20


def test_peers_not_heard_from_lately_are_forgotten():
    est = SkewEstimator(window_ms=10_000)
    for p in "abc":
        feed(est, p, 30_000)
    assert est.ahead_ms(T + 20_000) == 0
    assert est.per_peer_ms(T + 20_000) == {}


@settings(max_examples=200, deadline=None)
@given(st.integers(-60_000, 60_000), st.integers(3, 9), st.data())
def test_a_minority_of_liars_cannot_move_the_estimate_far(true_ahead, honest, data):
    """Honest peers see our true offset plus a delay of at most 200 ms; fewer liars than
    honest peers, saying anything, move the estimate at most to the honest values' range
    (or to 0, ourselves)."""
    est = SkewEstimator()
    for i in range(honest):
        d = data.draw(st.integers(0, 200))
        est.sample(f"h{i}", T - true_ahead - d, T)
    liars = data.draw(st.integers(0, honest - 1))
    for i in range(liars):
        est.sample(f"l{i}", T - data.draw(st.integers(-3_000_000, 3_000_000)), T)
    got = est.ahead_ms(T)
    lo, hi = min(0, true_ahead), max(0, true_ahead + 200)
    assert lo <= got <= hi


def peer_hello(who, wall: int) -> bytes:
    return sign_event(who, Timestamp(wall, 0), Hello(role="scorer", name="peer")).raw


def runtime(tmp_path: Path, clock, **kw) -> Runtime:
    s = load_settings(data_dir=tmp_path, mdns=False, listen_host="127.0.0.1", **kw)
    return Runtime(s, "executor", identity=load_identity(tmp_path), log=MemoryLog(), clock=clock)


async def test_a_fast_runtime_stamps_in_step_once_it_hears_its_peers_and_holds_back_meanwhile(tmp_path):
    from builders import ident

    now = [T]
    rt = runtime(tmp_path, lambda: now[0], clock_offset_ms=30_000)  # this host runs 30 s fast
    first = await rt.publish(Hello(role="executor", name="x"))
    assert first.hlc.wall == T + 30_000  # nothing heard yet: its own clock
    for i in range(3):  # three peers on the true clock: their events look 30 s old to it
        await rt.ingest(peer_hello(ident(f"peer{i}"), T - 15), f"gossip:{i}")
    rt._correct_clock()
    assert rt.correction_ms == 0  # a lag alone may be delay
    for i in range(3):  # its pulls: each page says the peer's clock
        rt.round_trip(ident(f"peer{i}").peer_id, rt.local_ms() - 40, T - 20, rt.local_ms())
    rt._correct_clock()
    assert 29_000 <= rt.correction_ms <= 30_100
    assert abs(rt.now_ms() - T) <= 1_000
    # its hello went out stamped 30 s ahead: what it signs now would be held by every peer, so
    # it waits until that stamp is within half the bound peers accept
    published: list[int] = []

    async def publish_one():
        e = await rt.publish(Hello(role="executor", name="x"))
        published.append(e.hlc.wall)

    holds = metrics.REGISTRY.get_sample_value("swarm_clock_holds_total") or 0
    async with trio.open_nursery() as n:
        n.start_soon(publish_one)
        await trio.testing.wait_all_tasks_blocked()  # the publish is waiting, or it went out
        assert not published, "published while its last stamp was 30 s ahead"
        assert metrics.REGISTRY.get_sample_value("swarm_clock_holds_total") == holds + 1
        now[0] += 29_500  # time passes
        with trio.fail_after(5):
            while not published:
                await trio.sleep(0.05)
    assert published[0] - rt.now_ms() <= rt.settings.max_ahead_ms


async def test_a_slow_runtime_moves_forward_and_releases_what_it_held(tmp_path):
    from builders import ident

    now = [T]
    rt = runtime(tmp_path, lambda: now[0], clock_offset_ms=-30_000)  # 30 s slow
    for i in range(3):
        await rt.ingest(peer_hello(ident(f"peer{i}"), T - 15), f"gossip:{i}")
    assert rt.intake.held_count == 3  # 30 s in its future
    rt._correct_clock()
    assert -30_100 <= rt.correction_ms <= -29_000
    for offer in rt.intake.due(rt.now_ms()):
        rt._took(offer, "due")
    assert rt.intake.held_count == 0
    e = await rt.publish(Hello(role="executor", name="x"))
    assert abs(e.hlc.wall - T) <= 1_000  # stamped in step, not 30 s early


async def test_the_offset_is_exposed_and_a_correction_said_once(tmp_path):
    """What the agent knows of its clock is on /metrics (its offset to the swarm, what it
    subtracts) and in one warning line when it starts correcting, not one per re-estimate;
    one line again when it no longer needs to."""
    from builders import ident

    now = [T]
    with capture_logs() as logs:
        rt = runtime(tmp_path, lambda: now[0], clock_offset_ms=30_000)
        for i in range(3):
            await rt.ingest(peer_hello(ident(f"peer{i}"), T - 15), f"gossip:{i}")
            rt.round_trip(ident(f"peer{i}").peer_id, rt.local_ms() - 40, T - 20, rt.local_ms())
        for _ in range(5):  # housekeeping re-estimates every half second
            rt._correct_clock()
    assert 29 <= metrics.REGISTRY.get_sample_value("swarm_clock_ahead_seconds") <= 30.1
    assert 29 <= metrics.REGISTRY.get_sample_value("swarm_clock_correction_seconds") <= 30.1
    said = [r for r in logs if r["event"] == "clock corrected to the peers'"]
    assert len(said) == 1 and said[0]["log_level"] == "warning" and said[0]["peers"] == 3, logs
    # this host's clock is set right (30 s back): its peers' next stamps show it in step, said once
    now[0] -= 30_000
    assert rt.local_ms() == T
    with capture_logs() as logs:
        rt.log = structlog.get_logger()  # (bound before: to the first capture)
        for i in range(3):
            await rt.ingest(peer_hello(ident(f"peer{i}"), T - 20), f"gossip:{i}")
        for _ in range(3):
            rt._correct_clock()
    assert [r["event"] for r in logs if r["event"].startswith("clock ")] == ["clock in step with the peers"]
    assert metrics.REGISTRY.get_sample_value("swarm_clock_correction_seconds") == 0


def test_only_a_stamp_of_its_authors_own_clock_counts():
    """A stamp with logical > 0 carries a clock its author merged (another peer's, maybe a fast
    one): counting it let one fast clock move every estimate a bound further per hop (the
    simulator's cascade). Its author is heard, and counts as in step."""
    from agent.core.skew import ClockCorrection

    fix = ClockCorrection(bound_ms=2_000)
    for p in "abc":  # three peers whose stamps merged a clock 30 s ahead of ours
        fix.observe(p, T + 30_000, 3, T)
    fix.update(T)
    assert (fix.ahead_ms, fix.correction_ms) == (0, 0)
    for p in "abc":  # their own clocks, 30 s ahead of ours: we are the one behind
        fix.observe(p, T + 30_000, 0, T + 10)
    fix.update(T + 10)
    assert -30_000 <= fix.ahead_ms <= -29_980 and fix.correction_ms == fix.ahead_ms


def test_in_a_swarm_with_an_authority_only_members_are_heard():
    """Keys an insider minted (no credential) cannot outvote the honest clocks; a hello is heard
    (the intake judged its credential before holding it); in an open swarm everyone is."""
    from types import SimpleNamespace

    from agent.core.skew import counts_for_clock

    class Members:
        closed = True

        def roles_of(self, peer, wall):
            return {"executor"} if peer == "member" else set()

    def event(author, kind="claim"):
        return SimpleNamespace(author=author, hlc=Timestamp(T, 0), body=SimpleNamespace(type=kind))

    assert counts_for_clock(Members(), event("member"))
    assert not counts_for_clock(Members(), event("minted"))
    assert counts_for_clock(Members(), event("minted", "hello"))
    open_swarm = Members()
    open_swarm.closed = False
    assert counts_for_clock(open_swarm, event("minted"))
