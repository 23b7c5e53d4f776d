"""Late join: a fresh observer joins peers whose logs hold N events; how long until its tree's
digest equals theirs, and how many bytes it pulled.

The peers are real agent processes (`python -m agent run`, role observer, the demo's
machinery) whose logs are written before they start: a synthetic, protocol-shaped event set
(agent.bench.core.build), the same events in every peer's log. The joiner runs in this
process (a real Runtime with the real libp2p Network, a fresh data directory), so its clock
starts when its network starts (not at Python's import time) and its counters can be read:
bytes of sync responses and requests, events pulled, new, duplicates, and gossip.

``mode="ids"`` is the sync that sends ids before bodies (the default); ``mode="pages"`` the
old whole-page sync (what an agent of an earlier version does), measured in the same run.
Bytes are counted at the joiner's sync codec (encoded responses in, requests out), by wrapping
``OrjsonCodec`` in this process, so the same count works on a checkout of an earlier version
(run this file from that checkout: ``mode="pages"`` then falls back to its only sync).
"""

from __future__ import annotations

import os
import shutil
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

import trio

from agent.bench.swarm import write_key
from agent.core.plan import fold
from agent.core.tree import derive


def _peers_logs(n: int, events: list, root: Path) -> list[Any]:
    """Children (demo machinery) of n observers whose logs hold ``events``."""
    from agent.demo import DemoConfig, plan_children
    from agent.store import EventStore

    cfg = DemoConfig(decomposers=0, scorers=0, executors=0, observers=n, llm="scripted", web=False,
                     extra_env={"SWARM_LOG_LEVEL": "info", "SWARM_SCORERS": "3"})  # no scorer runs
    for i in range(n):
        write_key(root / f"observer-{i + 1}", f"observer-{i + 1}", "latejoin")
        store = EventStore(root / f"observer-{i + 1}" / "events.jsonl", fsync=False)
        for ev in events:
            store.append(ev.raw)
        os.fsync(store._require_fd())
        store.close()
    return cfg, plan_children(cfg, root)


def _wait_up(children: list[Any], log_dir: Path, timeout: float = 120.0) -> None:
    deadline = time.monotonic() + timeout
    for c in children:
        path = log_dir / f"{c.name}.log"
        while True:
            if c.proc is not None and c.proc.poll() is not None:
                raise RuntimeError(f"{c.name} exited: {path.read_text(errors='replace')[-2000:]}")
            try:
                if b'"agent up"' in path.read_bytes():
                    break
            except OSError:
                pass
            if time.monotonic() > deadline:
                raise RuntimeError(f"{c.name} not up within {timeout:.0f} s")
            time.sleep(0.1)


_BYTES = {"in": 0, "out": 0}


def _count_bytes() -> None:
    """Count sync bytes at the codec (every version has OrjsonCodec); once per process."""
    from agent.net import sync

    codec = sync.OrjsonCodec
    if getattr(codec, "_bench_counted", False):
        return
    dec, enc = codec.decode_response, codec.encode_request

    def decode_response(self: Any, payload: bytes) -> Any:
        _BYTES["in"] += len(payload)
        return dec(self, payload)

    def encode_request(self: Any, request: Any) -> bytes:
        data = enc(self, request)
        _BYTES["out"] += len(data)
        return data

    codec.decode_response, codec.encode_request = decode_response, encode_request
    codec._bench_counted = True


def raw_event_id(raw: bytes) -> str | None:
    """An event line's id (sha256 of its canonical bytes without "sig"); here, not imported
    from agent.store, so this file also runs on a checkout of an earlier version."""
    import hashlib

    import orjson

    try:
        obj = orjson.loads(raw)
    except orjson.JSONDecodeError:
        return None
    if not isinstance(obj, dict) or "sig" not in obj:
        return None
    del obj["sig"]
    return hashlib.sha256(orjson.dumps(obj, option=orjson.OPT_SORT_KEYS)).hexdigest()


def _logged_ids(children: list[Any]) -> set[str]:
    """The ids of every event in the peers' logs (read from their files)."""
    ids: set[str] = set()
    for c in children:
        with open(c.data_dir / "events.jsonl", "rb") as fh:
            ids.update(i for i in (raw_event_id(line) for line in fh if line.endswith(b"\n")) if i)
    return ids


def _peers_digest(children: list[Any], now: int) -> str:
    """The tree digest of the union of the peers' logs, derived at ``now``."""
    from agent.core.events import decode_event

    raws: dict[bytes, None] = {}
    for c in children:
        with open(c.data_dir / "events.jsonl", "rb") as fh:
            raws.update((line.rstrip(b"\n"), None) for line in fh if line.endswith(b"\n"))
    return derive(fold([decode_event(r) for r in raws]), now).digest


async def _join(root: Path, cfg: Any, children: list[Any], target: set[str], mode: str,
                timeout: float) -> dict[str, Any]:
    """Join; done when the joiner holds every event the peers' logs held when it started."""
    import agent.net.host  # noqa: F401  (libp2p's import, ~1-3 s, is not the join's)
    from agent.drivers.real.runtime import open_runtime
    from agent.settings import load_settings

    settings = load_settings(swarm="demo", data_dir=root / f"joiner-{mode}", listen_host="127.0.0.1",
                             listen_port=0, peers=[c.addr for c in children], mdns=False,
                             log_level="warning", key=cfg.swarm_key, key_file=None)
    _count_bytes()
    _BYTES["in"] = _BYTES["out"] = 0
    t0 = time.perf_counter()
    cpu0 = time.process_time()
    try:
        rt = open_runtime(settings, "observer", sync_ids=(mode == "ids"))
    except TypeError:  # an earlier version: whole pages only
        if mode == "ids":
            raise
        rt = open_runtime(settings, "observer")
    first_event = None
    async with trio.open_nursery() as nursery:
        await nursery.start(rt.run)
        t_net = time.perf_counter() - t0
        with trio.move_on_after(timeout) as late:
            while True:
                if first_event is None and len(rt.plan):
                    first_event = time.perf_counter() - t0
                if len(rt.plan) >= len(target) and all(i in rt.plan for i in target):
                    break
                await trio.sleep(0.01)
        if late.cancelled_caught:
            st = rt.net.stats
            raise RuntimeError(f"not all events within {timeout:.0f} s: {len(rt.plan)} of {len(target)} "
                               f"events, {rt.plan.pending_count} "
                               f"pending; sync {st.sync}; intake {rt.intake.stats}")
        elapsed = time.perf_counter() - t0
        cpu = time.process_time() - cpu0  # the joiner's CPU (this process; the peers are others)
        at_digest = dict(_BYTES)
        await trio.sleep(0.5)  # what was still in flight is counted too
        st = rt.net.stats
        nursery.cancel_scope.cancel()
    rt.store.close()
    # the check: the joiner's tree digest equals the one of the peers' logs (same `now`)
    now = rt.plan.latest_wall() + 1
    mine = derive(rt.plan, now).digest
    theirs = _peers_digest(children, now)
    return {"mode": mode, "seconds": round(elapsed, 3), "cpu_s": round(cpu, 3),
            "network_start_s": round(t_net, 3),
            "first_event_s": round(first_event, 3) if first_event is not None else None,
            "bytes_in": _BYTES["in"], "bytes_out": _BYTES["out"],
            "bytes_in_at_digest": at_digest["in"],
            "requests": st.sync.requests, "pulled": st.sync.pulled, "new": st.sync.new,
            "ids": getattr(st.sync, "ids", None), "skipped": getattr(st.sync, "skipped", None),
            "gossip_received": st.gossip.received, "peers_synced": len(rt.net.cursors),
            "digest_equal": mine == theirs}


def run(n: int = 10_000, peers: int = 3, repeats: int = 3, modes: tuple[str, ...] = ("ids", "pages"),
        log: Any = print, keep: Path | None = None, timeout: float = 60.0) -> dict[str, Any]:
    from agent.bench.core import build
    from agent.bench.overhead import load
    from agent.demo import start, stop

    events = build(n)[:n]
    store_bytes = sum(len(e.raw) + 1 for e in events)
    root = Path(tempfile.mkdtemp(prefix="bench-latejoin-", dir=keep))
    out: dict[str, Any] = {"events": len(events), "peers": peers, "store_bytes": store_bytes, "runs": []}
    try:
        cfg, children = _peers_logs(peers, events, root)
        (root / "logs").mkdir(exist_ok=True)
        start(cfg, children, root / "logs")
        try:
            _wait_up(children, root / "logs")
            time.sleep(2.0)  # their hellos cross
            for i in range(repeats):
                for mode in modes:
                    shutil.rmtree(root / f"joiner-{mode}", ignore_errors=True)
                    write_key(root / f"joiner-{mode}", f"joiner-{mode}-{i}", "latejoin")
                    target = _logged_ids(children)
                    t_load = load()
                    try:
                        r = trio.run(_join, root, cfg, children, target, mode, timeout)
                    except Exception as exc:  # reported, not raised
                        import traceback

                        r = {"mode": mode, "error": f"{type(exc).__name__}: {exc}",
                             "traceback": traceback.format_exc()[-3000:]}
                    r["load"] = t_load
                    out["runs"].append(r)
                    log(f"  late join {len(events)} events from {peers} peers ({mode}): "
                        + (f"{r['seconds']} s, {r['bytes_in'] / 1e6:.2f} MB in, {r['pulled']} pulled, "
                           f"digest equal {r['digest_equal']}, "
                           f"{r['requests']} requests (load {t_load[0]})" if "error" not in r else r["error"]))
        finally:
            stop(children)
    finally:
        if keep is None:
            shutil.rmtree(root, ignore_errors=True)
    for mode in modes:
        ok = [r for r in out["runs"] if r["mode"] == mode and "error" not in r]
        if ok:
            out[mode] = {"seconds": round(statistics.median(r["seconds"] for r in ok), 3),
                         "bytes_in": int(statistics.median(r["bytes_in"] for r in ok)),
                         "pulled": int(statistics.median(r["pulled"] for r in ok)),
                         "cpu_s": round(statistics.median(r["cpu_s"] for r in ok), 3),
                         "requests": int(statistics.median(r["requests"] for r in ok)),
                         "copies": round(statistics.median(r["bytes_in"] for r in ok) / store_bytes, 2),
                         "ok": len(ok), "failed": sum(1 for r in out["runs"] if r["mode"] == mode) - len(ok)}
    return out


__all__ = ["run"]


if __name__ == "__main__":  # python -m agent.bench.latejoin [events] [peers] [repeats] [modes]
    import json
    import sys

    from agent.logging import configure_logging

    configure_logging("json", "error")
    a = sys.argv[1:]
    res = run(int(a[0]) if a else 10_000, int(a[1]) if len(a) > 1 else 3,
              int(a[2]) if len(a) > 2 else 3,
              tuple(a[3].split(",")) if len(a) > 3 else ("ids", "pages"),
              log=lambda m: print(m, file=sys.stderr, flush=True))
    for r in res["runs"]:
        r.pop("traceback", None)
    print(json.dumps(res, indent=1))
