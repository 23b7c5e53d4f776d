"""One agent's runtime: its key, its event log, the sans-I/O intake and the network, wired so
data flows one way: network -> validate -> store -> fold -> (the role decides) -> sign ->
store -> publish.

Durability: our own events are stored with an fsync before they are published, and that
fsync makes every event received before them durable too. Events received from peers are
written at once but fsynced in batches (``RECEIVED_FSYNC_DELAY`` after the first unflushed
one, or earlier by the next event of ours, a sync request served or a "has" answered, and at
shutdown): one fsync per batch instead of one per event (4.5 ms each on this machine, so a
10,000-event join spent 45 s in fsync). A crash can lose only received events nothing here
depends on yet: nothing of ours published after them, not served to a peer, not confirmed
to a submitter; the restarted agent pulls them again.

The network and the event log are injected (``open_runtime`` builds the real ones: the libp2p
``Network`` and the fsync'd ``EventStore``), so tests can pass in-memory ones. Everything that
decides anything is in ``agent.core.intake``; this module only does the I/O around it.
"""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Any, Callable, Protocol

import structlog
import trio

from agent import metrics
from agent.core.events import Credential, Event, Hello
from agent.core.identity import Identity
from agent.core.skew import counts_for_clock, counts_peer_for_clock
from agent.net.sync import SyncClock
from agent.core.intake import Intake, IntakeConfig, Offer, Status
from agent.core.membership import ROLES_FOR, Membership
from agent.core.plan import Plan
from agent.core.reasons import Reason, Rejected
from agent.core.tree import NodeState, Tree
from agent.store import EventLog, StoreError
from agent.errlog import RepeatedErrorLog
from agent.settings import Settings
from agent.shell import AgentShell

RECEIVED_FSYNC_DELAY = 0.05  # s: how long a received event may wait for its batch's fsync


class NotMember(RuntimeError):
    """In a swarm with an authority, this agent holds no credential it may publish with now
    (none, expired, for another key, or revoked): it may listen, not publish."""


class NetworkLike(Protocol):
    async def run(self, *, task_status: Any = ...) -> None: ...
    async def publish(self, raw: bytes) -> None: ...
    async def sync_all(self) -> Any: ...
    async def sync_from(self, peer_id: str) -> Any: ...

    @property
    def connected(self) -> list[str]: ...


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
    def __init__(self, settings: Settings, role: str, *, identity: Identity, log: EventLog,
                 net: NetworkLike | None = None, clock: Callable[[], int] = wall_ms,
                 membership: Membership | None = None, credential: Credential | None = None) -> None:
        self.settings = settings
        self.role = role
        self.identity = identity
        self.me = identity.peer_id
        self.store = log
        self.net: Any = net
        self._clock = clock
        self.log = structlog.get_logger().bind(role=role, peer_id=self.me)
        self.membership = membership
        self.credential = credential
        self._announced: Credential | None = None  # the credential our last hello carried
        self.member_files: Any = None  # where the key and credential came from (open_runtime)
        # the intake, log, tree and net view every driver keeps; this module adds the I/O
        self.shell = AgentShell(Intake(IntakeConfig(max_ahead_ms=settings.max_ahead_ms,
                                                    max_drift_ms=settings.max_drift_ms,
                                                    author_rate=settings.author_rate,
                                                    author_burst=settings.author_burst),
                                       Plan(membership)), log)
        self.intake = self.shell.intake
        self.plan = self.intake.plan
        self._unsaved: list[tuple[bytes, str]] = []  # received (raw, id) not yet written: retried
        self._unflushed = trio.Event()  # received events written but not yet fsynced
        self._outbox: list[Event] = []  # our own events waiting to be stored, then published
        self._persist_errors = RepeatedErrorLog(self.log, "cannot persist events; will retry")
        self._outbox_errors = RepeatedErrorLog(self.log, "cannot store our own event; it waits")
        self._flush_errors = RepeatedErrorLog(self.log, "cannot flush received events; will retry")
        # a peer may send thousands of bad events: one line per (reason, source), then a
        # periodic summary with the count (every one is counted in swarm_events_rejected)
        self._rejects = RepeatedErrorLog(self.log, "event rejected", level="warning", field="reason")
        # held events: one line, then a summary with the count (a flood of them is one line)
        self._held_log = RepeatedErrorLog(self.log, "events held: stamped ahead of our clock",
                                          level="info", field="what")
        self._expired = RepeatedErrorLog(self.log, "waiting event refused", level="warning", field="reason")
        self._listeners: list[Callable[[], None]] = []
        self._changed = trio.Event()
        self._progress = _Progress()
        from agent.core.skew import ClockCorrection

        # our clock against our peers', from their stamps; subtracted from our clock
        self.clock_fix = ClockCorrection(self.settings.max_ahead_ms)
        self.skew = self.clock_fix.estimator
        self._holding = False
        self._decided: set[str] = set()
        self._load()

    # ------------------------------------------------------------------ startup
    def _load(self) -> None:
        from agent.core.events import decode_event

        events, bad = [], 0
        for raw in self.store.read_from(0, len(self.store)):
            try:
                events.append(decode_event(raw))
            except Rejected as exc:
                bad += 1
                self.log.warning("stored event unreadable on reload", reason=exc.reason.value, detail=exc.detail)
        refused = self.intake.restore(events, self.now_ms())
        for ev, exc in refused:
            if exc.reason is not Reason.DUPLICATE:
                bad += 1
                self.log.warning("stored event refused on reload", event_id=ev.id, reason=exc.reason.value)
        metrics.EVENTS_STORED.set(len(self.plan))
        self._progress.observe(self.tree(), self.plan.goals, record=False)  # what was decided before is not news
        where = getattr(self.store, "path", None)  # the data dir, when the log is a file in it
        self.log.info("log reloaded", events=len(self.plan), refused=bad,
                      torn=getattr(self.store, "torn", 0), path=str(where.parent) if where else None)

    async def run(self, *, task_status: Any = trio.TASK_STATUS_IGNORED) -> None:
        async with trio.open_nursery() as nursery:
            try:
                if self.net is not None:
                    await nursery.start(self.net.run)
                nursery.start_soon(self._housekeeping)
                nursery.start_soon(self._flush_received)
                task_status.started()
                await trio.sleep_forever()
            finally:
                self._flush_store()  # a clean stop loses nothing received

    def local_ms(self) -> int:
        """This host's clock (with the fault-injection offset of the tests), uncorrected."""
        return self._clock() + self.settings.clock_offset_ms

    def now_ms(self) -> int:
        """The time we stamp, hold and expire by: our clock, corrected to our peers'."""
        return self.local_ms() - self.clock_fix.correction_ms

    @property
    def correction_ms(self) -> int:
        return self.clock_fix.correction_ms

    def round_trip(self, peer: str, sent_ms: int, peer_ms: int, received_ms: int) -> None:
        """A sync page's clock: a round trip to ``peer`` for the clock estimate (our clock
        uncorrected around it), from a credentialed member only."""
        if counts_peer_for_clock(self.plan.members, peer, peer_ms):
            self.clock_fix.round_trip(peer, sent_ms, peer_ms, received_ms)

    def _correct_clock(self) -> None:
        """Stamp in step with the peers: a clock that runs ahead gets its events held by every
        peer (its claims do not count while it works on them) and one that runs behind holds
        theirs; both waste work. The estimate is robust to a minority of liars (SkewEstimator);
        the rule is agent.core.skew.ClockCorrection's."""
        fix = self.clock_fix
        if fix.update(self.local_ms()):
            new = fix.correction_ms
            getattr(self.log, "warning" if new else "info")(
                "clock corrected to the peers'" if new else "clock in step with the peers",
                ahead_ms=fix.ahead_ms, correction_ms=new, peers=len(self.skew.per_peer_ms(self.local_ms())))
        metrics.CLOCK_AHEAD.set(fix.ahead_ms / 1000)
        metrics.CLOCK_CORRECTION.set(fix.correction_ms / 1000)

    def tree(self) -> Tree:
        return self.shell.tree(self.now_ms())

    def on_change(self, callback: Callable[[], None]) -> None:
        """Call ``callback`` (synchronously, cheaply) whenever the log grows."""
        self._listeners.append(callback)

    async def wait_change(self, timeout: float) -> None:
        with trio.move_on_after(timeout):
            await self._changed.wait()

    # ------------------------------------------------------------------ intake
    async def ingest(self, raw: bytes | Event, source: str) -> bool:
        """Validate, fold and store one event from anywhere (an Event: decoded, its signature
        checked, by the gossip validator). Never raises for bad input."""
        now = self.now_ms()
        if isinstance(raw, Event):
            return self._took(self.intake.offer(raw, source, now), source)
        return self._took(self.intake.offer_raw(raw, source, now), source)

    def _took(self, offer: Offer, source: str) -> bool:
        ev = offer.event
        # sampled once its stamp passed the intake's clock check (held or accepted): a pending
        # event's is unchecked, and a member minting keys could stamp those as it likes
        if ev is not None and offer.status in (Status.ACCEPTED, Status.HELD) and ev.author != self.me \
                and source not in ("self", "due") and not source.startswith("sync:") \
                and counts_for_clock(self.plan.members, ev):
            self.clock_fix.observe(ev.author, ev.hlc.wall, ev.hlc.logical, self.local_ms())
        if offer.status is Status.REJECTED:
            assert offer.reason is not None
            metrics.EVENTS_REJECTED.labels(reason=offer.reason.value).inc()
            if offer.reason is Reason.DUPLICATE:
                self.log.debug("event rejected", reason=offer.reason.value, detail=offer.detail[:200],
                               source=source, event_id=ev.id if ev else None)
            else:
                self._rejects.failed(offer.reason.value, key=f"{offer.reason.value}:{source}",
                                     detail=offer.detail[:200], source=source,
                                     event_id=ev.id if ev else None)
            return False
        if offer.status is Status.HELD:
            metrics.EVENTS_HELD.inc()
            self._held_log.failed("held", detail=offer.detail, event_id=ev.id if ev else None,
                                  source=source, held_now=self.intake.held_count)
            return False
        if offer.status is Status.PENDING:
            self.log.debug("event waits for a dependency", event_id=ev.id if ev else None,
                           waiting_for=offer.waiting_for, source=source)
            return False
        if ev is not None and source not in ("self", "due") and ev in offer.accepted:
            self.shell.delivered(ev, source, self.now_ms())
        for e, exc in offer.dropped:
            metrics.EVENTS_REJECTED.labels(reason=exc.reason.value).inc()
            self._expired.failed(exc.reason.value, key=f"{exc.reason.value}:{e.author}",
                                 detail=exc.detail[:200], event_id=e.id)
        for e in offer.accepted:
            self._unsaved.append((e.raw, e.id))
            metrics.EVENTS.labels(type=e.type).inc()
            if e.type == "vote" and e.body.phase == "precommit":
                self._note_decision(e.body.node)
            self.log.debug("event accepted", event_id=e.id, type=e.type, author=e.author,
                           node_id=getattr(e.body, "node", None), source=source)
        self._flush_unsaved()
        self._changed_now()
        return True

    def _note_decision(self, node: str) -> None:
        """One log line when this peer first holds a node's decision (vote latency is measured
        from these lines: `python -m agent bench`)."""
        if node in self._decided:
            return
        value = self.plan.decided(node)
        if value is not None:
            self._decided.add(node)
            self.log.info("decided", node_id=node, value=value)

    def _flush_unsaved(self) -> None:
        """Write received events (their fsync comes in a batch: ``_flush_received``)."""
        try:
            while self._unsaved:
                raw, eid = self._unsaved[0]
                self.store.append(raw, durable=False, event_id=eid)
                self._unsaved.pop(0)
                self._unflushed.set()
        except StoreError as exc:
            # Kept in memory and retried: nothing accepted is dropped.
            self._persist_errors.failed(str(exc), unsaved=len(self._unsaved))
        else:
            if self._persist_errors.failing:
                self._persist_errors.succeeded()
        metrics.EVENTS_STORED.set(len(self.plan))

    def _flush_store(self) -> bool:
        """fsync what was written; False (logged, retried later) if the disk refuses."""
        try:
            self.store.flush()
        except StoreError as exc:
            self._flush_errors.failed(str(exc))
            return False
        if self._flush_errors.failing:
            self._flush_errors.succeeded()
        return True

    async def _flush_received(self) -> None:
        """One fsync per batch of received events, at most RECEIVED_FSYNC_DELAY after the first,
        in a worker thread: the loop goes on receiving meanwhile."""
        while True:
            await self._unflushed.wait()
            await trio.sleep(RECEIVED_FSYNC_DELAY)
            self._unflushed = trio.Event()
            try:
                await self.store.flush_off_loop()
            except StoreError as exc:
                self._flush_errors.failed(str(exc))
                self._unflushed.set()
                await trio.sleep(0.5)
            else:
                if self._flush_errors.failing:
                    self._flush_errors.succeeded()

    def _changed_now(self) -> None:
        self._changed.set()
        self._changed = trio.Event()
        for cb in self._listeners:
            cb()

    async def _housekeeping(self) -> None:
        while True:
            await trio.sleep(0.5)
            self._correct_clock()
            for offer in self.intake.due(self.now_ms()):
                self._took(offer, "due")
            if self._unsaved:
                self._flush_unsaved()
            if self._outbox:
                await self._flush_outbox()
            tree = self.tree()
            self._progress.observe(tree, self.plan.goals)
            if tree.now_ms >= tree.valid_until - 500:
                self._changed_now()  # a lease lapsed: time alone changed the tree

    # ------------------------------------------------------------------ output
    # ------------------------------------------------------------------ membership
    def member_problem(self) -> str | None:
        """Why this agent may not publish now in a swarm with an authority (None: it may)."""
        if self.membership is None:
            return None
        c = self.credential
        if c is None:
            return "no credential"
        if c.peer != self.me:
            return f"the credential is for {c.peer}, this agent is {self.me}"
        from agent.core.membership import credential_problem

        # its signature, authority and swarm (a credential for another swarm is refused at
        # every peer's intake, our own included: not acting beats a hello we cannot publish)
        why = credential_problem(c, self.membership)
        if why is not None:
            return f"the credential is not valid here: {why}"
        now = self.now_ms()
        if now >= c.expires:
            return f"the credential expired {(now - c.expires) // 1000} s ago"
        if self.me in self.plan.members.revoked:
            return "the authority revoked this agent"
        return None

    def hello_role(self) -> str:
        """The role our hello announces: ours if the credential grants it, else its first."""
        roles = self.credential.roles if self.credential is not None else ()
        return self.role if self.role in roles or not roles else roles[0]

    def set_credential(self, credential: Credential) -> None:
        """A renewed credential: the next event we publish is a hello carrying it."""
        self.credential = credential

    async def publish(self, body: Any) -> Event:
        """Sign an event of ours and file it; it is stored, then published. If the disk refuses
        it, it waits (in order) and goes out once stored: nothing unstored is ever published,
        so a crash can never leave a vote others saw that we forgot.

        In a swarm with an authority a hello carries our credential, and our first event after
        a new credential is preceded by a hello carrying it. Raises NotMember if we hold none
        we may use."""
        if self.membership is not None:
            why = self.member_problem()
            if why is not None:
                raise NotMember(f"cannot publish a {body.type}: {why}")
            allowed = ROLES_FOR.get(body.type)
            if allowed is not None and not allowed.intersection(self.credential.roles):
                raise NotMember(f"cannot publish a {body.type}: that needs {' or '.join(sorted(allowed))}; "
                                f"this agent's credential grants {', '.join(self.credential.roles)}")
            if isinstance(body, Hello):
                body = body.model_copy(update={"credential": self.credential})
            elif self._announced != self.credential:
                await self.publish(Hello(role=self.hello_role(), name=self.settings.name or ""))
        ev = await self._publish(body)
        if isinstance(body, Hello):
            self._announced = body.credential
        return ev

    async def _hold_back(self) -> None:
        """While our clock's last stamp is further ahead than peers accept (stamped before the
        correction, or restored from a store written by a fast clock), whatever we sign would
        be held by every peer: wait until it is within half that bound, and say so once."""
        from agent.core.skew import hold_back_until

        limit = self.settings.max_ahead_ms
        if hold_back_until(self.intake.clock.wall, self.now_ms(), limit) is None:
            return
        lead = self.intake.clock.wall - self.now_ms()
        metrics.CLOCK_HOLDS.inc()
        if not self._holding:
            self._holding = True
            self.log.warning("holding back: our last stamp is ahead of what peers accept",
                             lead_ms=lead, max_ahead_ms=limit, correction_ms=self.correction_ms)
        with trio.move_on_after(self.settings.max_drift_ms / 1000):
            while self.intake.clock.wall - self.now_ms() > limit // 2:
                await trio.sleep(max(0.05, min(1.0, (self.intake.clock.wall - self.now_ms() - limit // 2) / 1000)))
        if self._holding:
            self._holding = False
            self.log.info("publishing again: our stamps are within what peers accept",
                          lead_ms=self.intake.clock.wall - self.now_ms())

    async def _publish(self, body: Any) -> Event:
        await self._hold_back()
        ev, *released = self.shell.sign(self.identity, body, self.now_ms())
        metrics.EVENTS.labels(type=ev.type).inc()
        self._outbox.append(ev)
        self._changed_now()
        await self._flush_outbox()
        for e in released:  # stored like any accepted event, after ours (AgentShell.sign)
            self._unsaved.append((e.raw, e.id))
            metrics.EVENTS.labels(type=e.type).inc()
            self.log.debug("event accepted", event_id=e.id, type=e.type, author=e.author,
                           node_id=getattr(e.body, "node", None), source="released")
        if released:
            self._flush_unsaved()
        return ev

    async def _flush_outbox(self) -> None:
        while self._outbox:
            ev = self._outbox[0]
            if self._unsaved:
                self._flush_unsaved()
                if self._unsaved:
                    return
            try:
                self.store.append(ev.raw, event_id=ev.id)  # fsync'd, and all received before it
            except StoreError as exc:
                self._outbox_errors.failed(str(exc), outbox=len(self._outbox))
                return
            if self._outbox_errors.failing:
                self._outbox_errors.succeeded()
            self._outbox.pop(0)
            metrics.EVENTS_STORED.set(len(self.plan))
            metrics.EVENTS_PUBLISHED.labels(type=ev.type).inc()
            self.log.info("published", event_id=ev.id, type=ev.type, node_id=getattr(ev.body, "node", None))
            if self.net is not None:
                await self.net.publish(ev.raw)

    @property
    def outbox(self) -> int:
        return len(self._outbox)


class _Progress:
    """Metrics derived from the fold: vote latency, plan duration, collisions, tasks."""

    def __init__(self) -> None:
        self.first_proposal: dict[str, float] = {}
        self.decided: set[str] = set()
        self.done: set[str] = set()
        self.collisions = 0
        self.twice = 0
        self._last_version: tuple[int, int] | None = None

    def observe(self, tree: Tree, goals: dict[str, Event], record: bool = True) -> None:
        now = time.time()
        collisions = twice = 0
        for n in tree.walk():
            collisions += n.collisions
            twice += n.executed_twice
            if n.proposals and n.id not in self.first_proposal:
                self.first_proposal[n.id] = now
            if n.decided is not None and n.id not in self.decided:
                self.decided.add(n.id)
                if record:
                    metrics.DECISIONS.labels(kind="leaf" if n.leaf else "split").inc()
                    if n.id in self.first_proposal:
                        metrics.VOTE_LATENCY.observe(max(0.0, now - self.first_proposal[n.id]))
        for r in tree.roots:
            if r.state is NodeState.DONE and r.id not in self.done:
                self.done.add(r.id)
                goal = goals.get(r.id)
                if record and goal is not None:
                    metrics.PLAN_DURATION.observe(max(0.0, now - goal.hlc.wall / 1000))
        if record:
            if collisions > self.collisions:
                metrics.CLAIM_COLLISIONS.inc(collisions - self.collisions)
            if twice > self.twice:
                metrics.TASKS_EXECUTED_TWICE.inc(twice - self.twice)
        self.collisions = max(collisions, self.collisions)
        self.twice = max(twice, self.twice)
        metrics.set_task_counts(tree.counts())
        metrics.set_goal_spending({r.id: (r.params.token_budget, r.spent) for r in tree.roots})


def open_runtime(settings: Settings, role: str, *, data_dir: Path | None = None,
                 **net_overrides: Any) -> Runtime:
    """The real thing: the key and the fsync'd log under ``data_dir``, the libp2p network
    (``net_overrides``: NetConfig fields beyond the settings', e.g. for the bench)."""
    from agent.net.config import NetConfig
    from agent.net.host import Network
    from agent.store import EventStore

    from agent.credentials import check_own, load_credential, load_seed, member_files, membership_of

    data_dir = data_dir or settings.data_dir
    files = member_files(settings, data_dir)
    if files.key is not None and files.key.exists():
        identity = load_seed(files.key)
    else:  # (a credentials directory without this slot: one that only listens, e.g. `observe`)
        identity = load_identity(data_dir)
    membership = membership_of(settings)
    credential = None
    if membership is not None and files.credential is not None and files.credential.exists():
        credential = load_credential(files.credential)
        why = check_own(credential, identity, membership, wall_ms())
        if why is not None:
            structlog.get_logger().bind(role=role, peer_id=identity.peer_id).warning(
                "credential not usable", path=str(files.credential), why=why)
    store = EventStore(data_dir / "events.jsonl")
    holder: dict[str, Runtime] = {}

    async def ingest(raw: bytes | Event, source: str) -> bool:
        return await holder["rt"].ingest(raw, source)

    log = structlog.get_logger().bind(role=role, peer_id=identity.peer_id)
    net = Network(
        identity=identity, store=store, ingest=ingest,
        config=NetConfig.from_settings(settings, **net_overrides), log=log,
        on_peers_changed=lambda n: metrics.PEERS_CONNECTED.set(n),
        on_reject=lambda reason, peer: metrics.EVENTS_REJECTED.labels(reason=reason).inc(),
        on_refused=lambda reason: metrics.CONNECTIONS_REFUSED.labels(reason=reason).inc(),
        knows=lambda event_id: holder["rt"].intake.knows(event_id),
        clock=SyncClock(serve=lambda: holder["rt"].now_ms(), local=lambda: holder["rt"].local_ms(),
                        round_trip=lambda *trip: holder["rt"].round_trip(*trip)),
    )
    rt = holder["rt"] = Runtime(settings, role, identity=identity, log=store, net=net,
                                membership=membership, credential=credential)
    rt.member_files = files
    return rt
