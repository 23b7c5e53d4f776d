"""One agent's runtime: key, log, fold and network, wired so data flows one way:
network -> validate -> store -> fold -> (role decides) -> sign -> publish."""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Any

import structlog
import trio

from agent import metrics
from agent.core.events import Event, decode_event, sign_event
from agent.core.hlc import ClockDrift, HybridClock
from agent.core.identity import Identity
from agent.core.plan import Plan
from agent.core.reasons import Reason, Rejected
from agent.core.tree import Tree
from agent.settings import Settings

PENDING_TTL = 120.0  # seconds an event may wait for what it refers to before it is dropped


def load_identity(data_dir: Path) -> Identity:
    """A persistent ed25519 key, so a restarted agent keeps its peer id."""
    path = data_dir / "key.ed25519"
    data_dir.mkdir(parents=True, exist_ok=True)
    if path.exists():
        seed = path.read_bytes()
        if len(seed) != 32:
            raise RuntimeError(f"{path} is not a 32-byte ed25519 seed; move it away to make a new identity")
        return Identity(seed)
    seed = os.urandom(32)
    tmp = path.with_suffix(".tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "wb") as fh:
        fh.write(seed)
        fh.flush()
        os.fsync(fh.fileno())
    os.replace(tmp, path)
    return Identity(seed)


def wall_ms() -> int:
    return time.time_ns() // 1_000_000


class Runtime:
    def __init__(self, settings: Settings, role: str, *, data_dir: Path | None = None) -> None:
        from agent.net.config import NetConfig
        from agent.net.errlog import RepeatedErrorLog
        from agent.net.host import Network
        from agent.net.store import EventStore

        self.settings = settings
        self.role = role
        self.data_dir = data_dir or settings.data_dir
        self.identity = load_identity(self.data_dir)
        self.me = self.identity.peer_id
        self.log = structlog.get_logger().bind(role=role, peer=self.me[-8:])
        self.clock = HybridClock(settings.max_drift_ms)
        self.plan = Plan()
        self.store = EventStore(self.data_dir / "events.jsonl")
        self._unsaved: list[bytes] = []
        # a full disk fails every append: one line, then a summary a minute, then "recovered"
        self._persist_errors = RepeatedErrorLog(self.log, "cannot persist event; will retry")
        self._changed = trio.Event()
        self._pending_since: dict[str, float] = {}
        self._last_sync: dict[str, float] = {}
        self._seen_done: set[str] = set()
        self._seen_accepted: set[str] = set()
        self._first_seen: dict[str, float] = {}
        self._collisions_seen = 0
        self._tree: Tree | None = None
        self._tree_key: tuple[int, int] | None = None
        self._dirty = trio.Event()
        self._nursery: trio.Nursery | None = None
        self.net = Network(
            identity=self.identity, store=self.store, ingest=self.ingest,
            config=NetConfig.from_settings(settings), log=self.log,
            knows=lambda event_id: event_id in self.plan,
            on_peers_changed=lambda n: metrics.PEERS_CONNECTED.set(n),
            # the validator logs the refusal itself; count it with every other rejection
            on_reject=lambda reason, peer: metrics.EVENTS_REJECTED.labels(reason=reason).inc(),
        )
        self._load()

    # ------------------------------------------------------------------ startup
    def _load(self) -> None:
        raws = self.store.load()
        bad = 0
        for raw in raws:
            try:
                ev = decode_event(raw)
                for e in self.plan.apply(ev).accepted:
                    # our own past events may be ahead of a clock that went back: never refuse them
                    self.clock.receive(e.hlc, max(wall_ms(), e.hlc.wall))
            except Rejected as exc:
                bad += 1
                self.log.warning("stored event refused on reload", reason=exc.reason.value, detail=exc.detail)
        metrics.EVENTS_STORED.set(len(self.plan))
        self._observe_progress(record=False)  # what was already decided is not a new observation
        self.log.info("log reloaded", events=len(self.plan), refused=bad, torn=getattr(self.store, "torn", 0),
                      path=str(self.data_dir))

    async def run(self, *, task_status: Any = trio.TASK_STATUS_IGNORED) -> None:
        async with trio.open_nursery() as nursery:
            self._nursery = nursery
            await nursery.start(self.net.run)
            nursery.start_soon(self._housekeeping)
            nursery.start_soon(self._progress_loop)
            task_status.started()

    def now_ms(self) -> int:
        return wall_ms()

    def tree(self) -> Tree:
        now = self.now_ms()
        key = (self.plan.version, now // 100)  # lease states only change with time
        if self._tree_key != key:
            self._tree, self._tree_key = self.plan.tree(now), key
        return self._tree

    # ------------------------------------------------------------------ intake
    def _reject(self, reason: str, detail: str, source: str, event_id: str | None = None) -> None:
        metrics.EVENTS_REJECTED.labels(reason=reason).inc()
        level = self.log.debug if reason == Reason.DUPLICATE.value else self.log.warning
        level("event rejected", reason=reason, detail=detail[:200], source=source, event_id=event_id)

    async def ingest(self, raw: bytes, source: str) -> bool:
        """Validate, fold and store one event from anywhere. Never raises for bad input."""
        try:
            ev = decode_event(raw)
        except Rejected as exc:
            self._reject(exc.reason.value, exc.detail, source)
            return False
        if ev.id in self.plan or self.plan.is_pending(ev.id):
            # the common case of gossip and sync overlapping: counted, logged at debug only
            self._reject(Reason.DUPLICATE.value, "already known", source, ev.id)
            return False
        try:
            self.clock.check(ev.hlc, self.now_ms())
        except ClockDrift as exc:
            self._reject(Reason.CLOCK_DRIFT.value, str(exc), source, ev.id)
            return False
        return self._apply(ev, source)

    def _apply(self, ev: Event, source: str) -> bool:
        try:
            applied = self.plan.apply(ev)
        except Rejected as exc:
            self._reject(exc.reason.value, exc.detail, source, ev.id)
            return False
        if applied.pending:
            self._pending_since[ev.id] = trio.current_time()
            self.log.debug("event waits for a dependency", event_id=ev.id, waiting_for=applied.waiting_for,
                           source=source)
            peer = source.removeprefix("sync:")
            if peer and peer != self.me and self._nursery is not None:
                self._nursery.start_soon(self._sync_soon, peer)
            return False
        for e in applied.accepted:
            self._pending_since.pop(e.id, None)
            self._persist(e.raw)
            if e.author != self.me:
                self.clock.receive(e.hlc, self.now_ms())
            metrics.EVENTS.labels(type=e.type).inc()
            self.log.debug("event accepted", event_id=e.id, type=e.type, author=e.author[-8:],
                           node=getattr(e.body, "node", None), source=source)
        metrics.EVENTS_STORED.set(len(self.plan))
        self._dirty.set()
        self._changed.set()
        self._changed = trio.Event()
        return True

    def _persist(self, raw: bytes | None) -> None:
        from agent.net.store import StoreError

        if raw is not None:
            self._unsaved.append(raw)
        try:
            while self._unsaved:
                self.store.append(self._unsaved[0])
                self._unsaved.pop(0)
        except StoreError as exc:
            # Kept in memory and retried on the next append: nothing accepted is dropped.
            self._persist_errors.failed(str(exc), key="append", unsaved=len(self._unsaved))
        else:
            if self._persist_errors.failing:
                self._persist_errors.succeeded(saved=len(self.store))

    async def _sync_soon(self, peer: str) -> None:
        now = trio.current_time()
        if now - self._last_sync.get(peer, -1e9) < 2.0:
            return
        self._last_sync[peer] = now
        await self.net.sync_from(peer)

    async def _housekeeping(self) -> None:
        while True:
            await trio.sleep(1.0)
            now = trio.current_time()
            for ev, key in self.plan.pending_events():
                since = self._pending_since.setdefault(ev.id, now)
                if now - since > PENDING_TTL:
                    self.plan.drop_pending(ev.id)
                    self._pending_since.pop(ev.id, None)
                    reason = Reason.NOT_SCORER if key.startswith("scorer:") else Reason.UNKNOWN_DEPENDENCY
                    self._reject(reason.value, f"waited {PENDING_TTL:.0f}s for {key}", "pending", ev.id)
            if self._unsaved:
                self._persist(None)
            self._dirty.set()  # lease expiry changes states with time alone

    async def _progress_loop(self) -> None:
        # Deriving the tree is O(events): do it at most a few times a second, not per event.
        while True:
            await self._dirty.wait()
            self._dirty = trio.Event()
            self._observe_progress()
            await trio.sleep(0.2)

    def _observe_progress(self, record: bool = True) -> None:
        """Metrics derived from the fold: vote latency, plan duration, collisions, tasks."""
        tree = self.tree()
        now = time.time()
        collisions = 0
        for n in tree.walk():
            collisions += n.collisions
            if n.proposals and n.id not in self._first_seen:
                self._first_seen[n.id] = now
            if n.accepted is not None and n.id not in self._seen_accepted:
                self._seen_accepted.add(n.id)
                if record and n.id in self._first_seen and n.accepted != "":
                    metrics.VOTE_LATENCY.observe(max(0.0, now - self._first_seen[n.id]))
                    metrics.SPLITS_ACCEPTED.inc()
        for r in tree.roots:
            if r.state == "done" and r.id not in self._seen_done:
                self._seen_done.add(r.id)
                goal = self.plan.goals.get(r.id)
                if record and goal is not None:
                    metrics.PLAN_DURATION.observe(max(0.0, now - goal.hlc.wall / 1000))
        if record and collisions > self._collisions_seen:
            metrics.CLAIM_COLLISIONS.inc(collisions - self._collisions_seen)
        self._collisions_seen = max(collisions, self._collisions_seen)
        metrics.set_task_counts(tree.counts())

    # ------------------------------------------------------------------ output
    async def publish(self, body: Any) -> Event:
        ev = sign_event(self.identity, self.clock.send(self.now_ms()), body)
        if not self._apply(ev, "self"):
            raise Rejected(Reason.MALFORMED, f"own {ev.type} event was not accepted locally")
        metrics.EVENTS_PUBLISHED.labels(type=ev.type).inc()
        self.log.info("published", event_id=ev.id, type=ev.type, node=getattr(body, "node", None))
        await self.net.publish(ev.raw)
        return ev

    async def wait_change(self, timeout: float) -> None:
        with trio.move_on_after(timeout):
            await self._changed.wait()
