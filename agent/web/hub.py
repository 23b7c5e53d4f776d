"""The page's update stream: the observer's log grows -> (throttled) the view is rebuilt -> only
the nodes that changed are pushed to every connected page.

- ``Runtime.on_change`` marks the view dirty; the hub rebuilds at most once per ``throttle``
  seconds (the first change after a quiet spell goes out at once).
- Each update has a sequence number. A page that connects (or reconnects) first gets a
  snapshot of every node, then patches. A page that falls behind (its queue fills) gets a fresh
  snapshot instead of the patches it missed.
- Peers connecting or leaving do not grow the log; the hub looks at them every ``meta_every``
  seconds.
- Every update says when the change reached the observer (``changed_at``) and the stamp of the
  newest event in the log (``latest_wall``), so the page can measure its own delay.
"""

from __future__ import annotations

import secrets
import time
from collections import deque
from typing import Any, Callable

import orjson
import trio

from agent.core.tree import Tree
from agent.drivers.real.runtime import Runtime

from .view import Names, clock_offsets, members_view, nodes_view

QUEUE_LIMIT = 64


def _ms() -> int:
    return time.time_ns() // 1_000_000


class Subscriber:
    def __init__(self) -> None:
        self.queue: deque[tuple[int, bytes]] = deque()  # (seq, patch)
        self.resync = False
        self.closed = False
        self._ready = trio.Event()

    def push(self, item: tuple[int, bytes]) -> None:
        if len(self.queue) >= QUEUE_LIMIT:
            self.queue.clear()
            self.resync = True  # too far behind: send a snapshot instead
        else:
            self.queue.append(item)
        self._ready.set()

    def close(self) -> None:
        self.closed = True
        self._ready.set()

    def skip_to(self, seq: int) -> None:
        """Drop queued patches that a snapshot at ``seq`` already contains."""
        while self.queue and self.queue[0][0] <= seq:
            self.queue.popleft()

    async def next(self) -> tuple[int, bytes] | None:
        """The next (seq, patch), or None when a snapshot is due; EndOfChannel once closed."""
        while not self.queue and not self.resync and not self.closed:
            await self._ready.wait()
            self._ready = trio.Event()
        if self.closed:
            raise trio.EndOfChannel
        if self.resync:
            self.resync = False
            self.queue.clear()
            return None
        return self.queue.popleft()


class Hub:
    def __init__(self, rt: Runtime, *, throttle: float = 0.25, meta_every: float = 2.0,
                 static_meta: dict[str, Any] | None = None,
                 connected: Callable[[], list[str]] | None = None) -> None:
        self.rt = rt
        self.throttle = throttle
        self.meta_every = meta_every
        self.static_meta = static_meta or {}
        self.instance = secrets.token_hex(6)  # a page that sees another instance starts afresh
        self.seq = 0
        self.nodes: dict[str, bytes] = {}  # id -> the node's JSON as last sent
        self.meta: dict[str, Any] = {}
        self.subscribers: set[Subscriber] = set()
        self.names = Names()
        self.updates = 0
        self._connected = connected or (lambda: list(rt.net.connected) if rt.net is not None else [])
        self._dirty = trio.Event()
        self._changed_at: int | None = None
        self._latest_wall = 0
        self._built = False
        rt.on_change(self._on_change)

    # ------------------------------------------------------------------ change -> rebuild
    def _on_change(self) -> None:
        if self._changed_at is None:
            self._changed_at = _ms()
        self._dirty.set()

    async def run(self, *, task_status: Any = trio.TASK_STATUS_IGNORED) -> None:
        self._refresh_logged()
        task_status.started()
        while True:
            with trio.move_on_after(self.meta_every):
                await self._dirty.wait()
            self._dirty = trio.Event()
            self._refresh_logged()
            await trio.sleep(self.throttle)

    def _refresh_logged(self) -> None:
        """A bug in building the view must not take the observer down: log it, try next time."""
        try:
            self.refresh()
        except Exception as exc:
            self.rt.log.exception("web: building the page's view failed", error=repr(exc)[:300])

    def _meta(self, tree: Tree) -> dict[str, Any]:
        plan = self.rt.plan
        return {
            "me": self.rt.me,
            "digest": tree.digest,
            "counts": tree.counts(),
            "goals": [r.id for r in tree.roots],
            "members": members_view(tree, self.names.update(plan), self._connected(), self.rt.me,
                                    self._clocks()),
            "events": len(plan),
            **self.static_meta,
        }

    def _clocks(self) -> dict[str, int]:
        skew = getattr(self.rt, "skew", None)
        if skew is None:
            return {}
        local = self.rt.local_ms()
        ahead = skew.ahead_ms(local)
        # to half a second: finer changes are delay noise, and each change re-sends the list
        return {p: 500 * round(v / 500) for p, v in {**clock_offsets(skew.per_peer_ms(local), ahead),
                                                      self.rt.me: ahead}.items()}

    def refresh(self) -> bool:
        """Rebuild the view; push what changed. Returns whether anything did."""
        changed_at, self._changed_at = self._changed_at, None
        tree = self.rt.tree()
        plan = self.rt.plan
        if plan.events:
            self._latest_wall = max(self._latest_wall, next(reversed(plan.events.values())).hlc.wall)
        fresh = {nid: orjson.dumps(v) for nid, v in nodes_view(tree, plan).items()}
        changed = {nid: raw for nid, raw in fresh.items() if self.nodes.get(nid) != raw}
        removed = [nid for nid in self.nodes if nid not in fresh]
        meta = self._meta(tree)
        meta_changed = meta != self.meta
        if self._built and not changed and not removed and not meta_changed:
            return False
        self._built = True
        self.nodes = fresh
        self.meta = meta
        self.seq += 1
        self.updates += 1
        patch = orjson.dumps({
            "seq": self.seq, "instance": self.instance, "meta": meta if meta_changed else None,
            "nodes": {nid: orjson.Fragment(raw) for nid, raw in changed.items()}, "removed": removed,
            "timing": self._timing(changed_at, tree),
        })
        for sub in list(self.subscribers):
            sub.push((self.seq, patch))
        return True

    def _timing(self, changed_at: int | None, tree: Tree) -> dict[str, Any]:
        return {"changed_at": changed_at, "latest_wall": self._latest_wall, "sent_at": _ms(), "now": self.rt.now_ms()}

    # ------------------------------------------------------------------ pages
    def snapshot(self) -> bytes:
        return orjson.dumps({
            "seq": self.seq, "instance": self.instance, "meta": self.meta,
            "nodes": {nid: orjson.Fragment(raw) for nid, raw in self.nodes.items()},
            "timing": {"changed_at": None, "latest_wall": self._latest_wall, "sent_at": _ms(),
                       "now": self.rt.now_ms()},
        })

    def subscribe(self) -> Subscriber:
        sub = Subscriber()
        self.subscribers.add(sub)
        return sub

    def unsubscribe(self, sub: Subscriber) -> None:
        self.subscribers.discard(sub)
        sub.close()

    def close_all(self) -> None:
        for sub in list(self.subscribers):
            self.unsubscribe(sub)


__all__ = ["Hub", "Subscriber"]
