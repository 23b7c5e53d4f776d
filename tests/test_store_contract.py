"""The EventLog contract (agent.store.log), run against both logs: the disk's and memory's."""

from __future__ import annotations

import inspect

import pytest
import trio

from agent.store import EventLog, EventStore, MemoryLog, StoreError
from agent.store import disk
from builders import hello, ident


@pytest.fixture(params=["disk", "memory"])
def log(request, tmp_path):
    if request.param == "disk":
        store = EventStore(tmp_path / "events.jsonl")
        yield store
        store.close()
    else:
        yield MemoryLog()


def _raws(n: int) -> list[bytes]:
    return [hello(ident(f"c{i}"), "scorer", wall=i + 1).raw for i in range(n)]


def test_it_has_every_method_of_the_interface(log):
    wanted = {name for name, _ in inspect.getmembers(EventLog, inspect.isfunction)} - {"__init__"}
    missing = {name for name in wanted if not callable(getattr(log, name, None))}
    assert not missing


def test_append_returns_the_new_length_and_keeps_the_order(log):
    raws = _raws(5)
    assert [log.append(r, event_id=None) for r in raws] == [1, 2, 3, 4, 5]
    assert len(log) == 5
    assert log.load() == raws
    assert log.read_from(0, 5) == raws


def test_read_from_is_a_window_clipped_to_the_log(log):
    raws = _raws(6)
    for r in raws:
        log.append(r)
    assert log.read_from(2, 3) == raws[2:5]
    assert log.read_from(4, 100) == raws[4:]
    assert log.read_from(6, 10) == []
    assert log.read_from(0, 0) == []


def test_an_append_left_to_a_later_flush_is_readable_at_once(log):
    raws = _raws(3)
    log.append(raws[0])
    log.append(raws[1], durable=False)
    assert log.read_from(0, 10) == raws[:2]
    log.flush()
    log.append(raws[2], durable=False)
    trio.run(log.flush_off_loop)
    assert log.load() == raws and len(log) == 3


def test_the_disk_log_raises_the_interfaces_error():
    # a runtime catches agent.store.StoreError whatever log it was handed: the disk's errors
    # must be that class, not one of its own
    assert disk.StoreError is StoreError
    with pytest.raises(StoreError, match="cannot open"):
        EventStore("/proc/no-such-dir/events.jsonl")
