import pytest
from hypothesis import given, strategies as st

from agent.core.hlc import ClockDrift, HybridClock, Timestamp


def test_send_is_monotonic_even_if_physical_time_goes_back():
    c = HybridClock()
    a = c.send(1000)
    b = c.send(900)
    d = c.send(1000)
    e = c.send(1001)
    assert a < b < d < e
    assert b == Timestamp(1000, 1) and e == Timestamp(1001, 0)


def test_receive_takes_max_and_bumps_logical():
    c = HybridClock()
    c.send(1000)
    assert c.receive(Timestamp(1500, 3), 1200) == Timestamp(1500, 4)
    assert c.receive(Timestamp(1400, 9), 1300) == Timestamp(1500, 5)
    assert c.receive(Timestamp(1000, 0), 2000) == Timestamp(2000, 0)
    assert c.receive(Timestamp(2000, 7), 1000) == Timestamp(2000, 8)


def test_drift_rejected_and_clock_unchanged():
    c = HybridClock(max_drift_ms=100)
    c.send(1000)
    with pytest.raises(ClockDrift):
        c.receive(Timestamp(1201, 0), 1100)
    assert c.last == Timestamp(1000, 0)
    assert c.receive(Timestamp(1200, 0), 1100) == Timestamp(1200, 1)


def test_event_order_ties_broken_by_author():
    from builders import claim, ident

    a, b = sorted((ident("a"), ident("b")), key=lambda i: i.peer_id)
    node = "0" * 64
    assert claim(a, node, 5, logical=1).order < claim(b, node, 5, logical=1).order
    assert claim(b, node, 5, logical=0).order < claim(a, node, 5, logical=1).order


@given(st.lists(st.tuples(st.booleans(), st.integers(0, 10_000), st.integers(0, 10_000), st.integers(0, 5)), max_size=60))
def test_hlc_never_goes_backwards_and_dominates_received(ops):
    c = HybridClock(max_drift_ms=10**9)
    last = c.last
    for is_send, phys, rwall, rlog in ops:
        ts = c.send(phys) if is_send else c.receive(Timestamp(rwall, rlog), phys)
        assert ts > last
        assert ts.wall >= phys
        if not is_send:
            assert ts > Timestamp(rwall, rlog)
        last = ts
