"""EventStore: durable append-only JSON-lines log with torn-tail repair and an epoch."""

from __future__ import annotations

import errno
import os
import subprocess
import uuid

import orjson
import pytest

from agent.core.events import decode_event
from agent.store import disk as store_mod
from agent.store import EventStore, StoreError
from agent.core.events import Goal
from builders import ev, goal, hello, ident, params


def _events(n: int, who: str = "s") -> list[bytes]:
    return [hello(ident(f"{who}{i % 5}"), "scorer", wall=i).raw for i in range(n)]


def test_append_load_round_trip(tmp_path):
    path = tmp_path / "deep" / "dir" / "events.jsonl"  # parent dirs are created
    raws = [goal(ident("g")).raw, *_events(20)]
    st = EventStore(path)
    assert len(st) == 0 and st.load() == []
    for i, raw in enumerate(raws, 1):
        assert st.append(raw) == i
    assert len(st) == len(raws)
    assert st.load() == raws
    st.close()

    again = EventStore(path)
    assert again.load() == raws
    assert again.torn == 0 and again.corrupt == 0
    assert [decode_event(r).raw for r in again.load()] == raws  # stored bytes are canonical
    # one event per line, newline-terminated
    assert path.read_bytes() == b"".join(r + b"\n" for r in raws)
    with pytest.raises(ValueError):
        again.append(b'{"a":\n1}')
    again.close()
    with pytest.raises(StoreError, match="closed"):
        again.append(raws[0])


def test_torn_last_line_is_dropped_and_truncated(tmp_path):
    path = tmp_path / "events.jsonl"
    raws = _events(10)
    with EventStore(path) as st:
        for raw in raws:
            st.append(raw)
    good_size = path.stat().st_size
    extra = _events(11)[10]
    with open(path, "ab") as fh:  # a crash half-way through the 11th append
        fh.write(extra[: len(extra) // 2])

    st = EventStore(path)
    assert st.torn == 1
    assert st.load() == raws
    assert path.stat().st_size == good_size  # the torn tail is gone from disk
    assert st.append(extra) == 11
    st.close()
    reopened = EventStore(path)
    assert reopened.torn == 0
    assert reopened.load() == raws + [extra]
    reopened.close()


def test_unparseable_tail_with_newline_and_corrupt_middle_line(tmp_path):
    path = tmp_path / "events.jsonl"
    raws = _events(4)
    path.write_bytes(raws[0] + b"\n" + b"\x00\x00garbage\n" + raws[1] + b"\n"
                     + raws[2] + b"\n" + b'{"half": \n' + b"\x00" * 50)
    st = EventStore(path)
    assert st.corrupt == 1  # the garbage line between good ones: skipped, kept
    assert st.torn == 1  # unparseable lines after the last good one: truncated
    assert st.load() == raws[:3]
    assert st.read_from(1, 5) == raws[1:3]
    st.append(raws[3])
    st.close()
    assert EventStore(path).load() == raws


def test_read_from_pages(tmp_path):
    raws = _events(45)
    st = EventStore(tmp_path / "e.jsonl")
    for raw in raws:
        st.append(raw)
    pages, pos = [], 0
    while True:
        page = st.read_from(pos, 10)
        if not page:
            break
        pages.append(page)
        pos += len(page)
    assert [len(p) for p in pages] == [10, 10, 10, 10, 5]
    assert sum(pages, []) == raws
    assert st.read_from(44, 10) == raws[44:]
    assert st.read_from(45, 10) == [] and st.read_from(100, 1) == []
    assert st.read_from(3, 0) == []
    assert st.read_from(-5, 2) == raws[:2]


def test_epoch_persists_and_changes_on_recreate(tmp_path):
    path = tmp_path / "events.jsonl"
    st = EventStore(path)
    epoch = st.epoch
    assert len(epoch) == 16
    st.append(_events(1)[0])
    st.close()
    assert EventStore(path).epoch == epoch  # reopen: same log, same epoch

    path.unlink()  # wiped
    fresh = EventStore(path)
    assert fresh.epoch != epoch and len(fresh) == 0
    fresh.close()

    (tmp_path / "events.jsonl.epoch").unlink()  # sidecar lost: treated as a new log identity
    assert EventStore(path).epoch not in (epoch, fresh.epoch)


def test_disk_full_simulated_raises_and_keeps_log_loadable(tmp_path, monkeypatch):
    path = tmp_path / "events.jsonl"
    raws = _events(6)
    st = EventStore(path)
    for raw in raws[:4]:
        st.append(raw)
    real_pwrite = os.pwrite
    calls = {"n": 0}

    def full_disk(fd, data, offset):
        calls["n"] += 1
        if calls["n"] == 1:  # the kernel accepts part of the line, then the disk is full
            return real_pwrite(fd, data[: len(data) // 2], offset)
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(store_mod.os, "pwrite", full_disk)
    with pytest.raises(StoreError) as info:
        st.append(raws[4])
    assert str(path) in str(info.value) and "ENOSPC" in str(info.value)
    monkeypatch.setattr(store_mod.os, "pwrite", real_pwrite)

    assert len(st) == 4
    assert EventStore(path).load() == raws[:4]  # what was there is intact, no junk
    assert st.append(raws[5]) == 5  # space again: appends work
    st.close()
    reopened = EventStore(path)
    assert reopened.load() == raws[:4] + [raws[5]] and reopened.torn == 0


@pytest.mark.skipif(os.geteuid() != 0, reason="mounting a tiny tmpfs needs root")
def test_disk_full_real_tmpfs(tmp_path):
    mnt = tmp_path / f"tiny-{uuid.uuid4().hex[:6]}"
    mnt.mkdir()
    proc = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=64k", "tmpfs", str(mnt)],
                          capture_output=True, text=True)
    if proc.returncode != 0:
        pytest.skip(f"cannot mount tmpfs: {proc.stderr.strip()}")
    try:
        path = mnt / "events.jsonl"
        st = EventStore(path)
        big = [ev(ident(f"g{i}"), Goal(title="t", description="x" * 1900, params=params()), i).raw
               for i in range(100)]
        written = []
        with pytest.raises(StoreError) as info:
            for raw in big:
                st.append(raw)
                written.append(raw)
        assert str(path) in str(info.value)
        assert 5 < len(written) < len(big)
        assert len(st) == len(written)
        st.close()
        again = EventStore(path)
        assert again.load() == written and again.torn == 0
        assert all(orjson.loads(r) for r in again.load())
        again.close()
    finally:
        subprocess.run(["umount", "-l", str(mnt)], check=False)


def test_batched_fsync_and_the_id_index(tmp_path, monkeypatch):
    raws = _events(6)
    ids = [decode_event(r).id for r in raws]
    fsyncs = []
    real = os.fsync
    monkeypatch.setattr(store_mod.os, "fsync", lambda fd: (fsyncs.append(fd), real(fd)))
    st = EventStore(tmp_path / "e.jsonl")
    fsyncs.clear()  # opening fsyncs the directory and the epoch file
    st.append(raws[0])
    assert st.durable == 1 and len(fsyncs) == 1 and not st.dirty
    for r in raws[1:4]:  # received events: written, fsynced in one batch
        st.append(r, durable=False)
    assert len(fsyncs) == 1 and st.dirty and st.durable == 1 and len(st) == 4
    st.flush()
    assert len(fsyncs) == 2 and st.durable == 4 and not st.dirty
    st.flush()  # nothing new: no fsync
    assert len(fsyncs) == 2
    assert st.ids_from(1, 2) == ids[1:3] and st.position(ids[3]) == 3
    st.append(raws[4], durable=False, event_id=ids[4])
    st.append(raws[5])  # a durable append covers the earlier ones
    assert st.durable == 6 and len(fsyncs) == 3
    assert st.get([ids[5], "00" * 32, ids[0]]) == [raws[5], None, raws[0]]
    st.close()
    st2 = EventStore(tmp_path / "e.jsonl")  # index rebuilt from disk
    assert st2.ids_from(0, 100) == ids and st2.durable == 6


async def test_the_batch_fsync_runs_off_the_event_loop(tmp_path, monkeypatch):
    """The runtime's batch fsync runs in a worker thread: the loop goes on meanwhile, and only
    what was written when it started counts as durable after it."""
    import threading

    import trio

    raws = _events(4)
    st = EventStore(tmp_path / "e.jsonl")
    loop_thread = threading.get_ident()
    started, release, seen = threading.Event(), threading.Event(), []
    real = os.fsync

    def slow_fsync(fd):
        seen.append(threading.get_ident())
        started.set()
        release.wait(5)
        real(fd)

    for r in raws[:2]:
        st.append(r, durable=False)
    monkeypatch.setattr(store_mod.os, "fsync", slow_fsync)
    async with trio.open_nursery() as nursery:
        nursery.start_soon(st.flush_off_loop)
        await trio.to_thread.run_sync(started.wait, 5)
        st.append(raws[2], durable=False)  # the loop runs while the disk works
        release.set()
    assert seen and loop_thread not in seen
    assert st.durable == 2 and st.dirty and len(st) == 3
    monkeypatch.setattr(store_mod.os, "fsync", real)
    await st.flush_off_loop()
    assert st.durable == 3 and not st.dirty
    st.close()
