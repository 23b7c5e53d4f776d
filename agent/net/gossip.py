"""The gossip channel: one gossipsub topic per swarm, carrying signed events.

Owns the Pubsub/GossipSub services, the topic validator, the reader that drains the
subscription, the queue to the runtime, and publish backpressure. Hands what it receives to
the IngestDoor; tells its owner (callbacks) about refused messages and inbox overflow.

py-libp2p 0.8.1 pitfalls handled here (see shared/notes/libp2p.md):
- gossipsub defaults drop messages silently: heartbeat 1 s (default 120 s), adaptive gossip
  off (it stretches the heartbeat to 30 s), spam protection off (10 msg/s/topic cap that also
  counts our own publishes);
- the Pubsub and GossipSub services start *before* ``host.run`` (crash otherwise):
  ``services(host)`` is entered first, ``run()`` after the host listens;
- the subscription channel holds 32 messages and drops the rest with a warning line each
  (no counter): a flood of messages validated in parallel fills it faster than any reader
  task drains it (seen in the chaos suite: ~160 drops per agent). ``CountingPubsub`` hands
  our topic's messages straight to the channel's large inbox instead (``on_message``);
- a per-peer outbound queue holds 32 RPCs and drops the rest silently: ``publish`` waits
  while a live peer's queue is over half full;
- pubsub seqnos start at time() in *seconds*: a peer restarted with the same key after
  publishing faster than 1 msg/s reuses seqnos its peers saw, and they drop its new messages
  as already seen. We start the counter at time_ns();
- drops the library makes without a log line or a counter are counted here
  (``CountingPubsub``): unsigned or badly signed messages, oversize RPCs; and an exception in
  its per-message task (which would stop Pubsub) is contained to that message;
- Pubsub's seen-cache sweeper thread is never stopped by the library: we stop it;
- every pubsub RPC carries the sender's signed peer record, and the library verifies it
  (an ed25519 check) on every RPC, duplicates included: two thirds of an agent's signature
  checks in a swarm (py-spy). The same record from the same peer is verified once and
  trusted for ``RECORD_TTL`` (``_consume_record_once``); a message already seen is dropped
  before its signature is checked;
- to attach that record, the library asks the host for its addresses on every RPC it sends
  (our address factory, multiaddr parsing: the largest cost left in a swarm agent after the
  above); the record is reused for ``ENVELOPE_TTL`` (1 s) per host instead;
- gossipsub v1.2 sends an IDONTWANT control RPC to every mesh peer before each message it
  forwards (a bandwidth saving for large messages; ours are small): as many RPCs again as
  the messages themselves. We speak v1.1 (v1.2 adds IDONTWANT only);
- mesh churn in an idle swarm of more than ``degree_high`` peers: a peer the heartbeat
  prunes records a back-off against the pruner, the pruner none against it, and the GRAFT
  "flood" check refuses a GRAFT from a peer that pruned us within min(10 s, back-off), which
  is the back-off itself. So a pruner short of peers grafts the peer it pruned, is refused
  (a PRUNE, which starts its own flood window a little later than the other side's back-off),
  and the pair refuse each other every back-off period for ever: 20 idle nodes (one process)
  each received 1.6 GRAFT + 1.6 PRUNE per second, and some ran with a mesh of 1-2 peers.
  Under heavy CPU load (PRUNEs queued for seconds) flood refusals still happen.
  ``SwarmGossipSub`` records a back-off against a peer it prunes or refuses (as go-libp2p does) and
  keeps the flood window shorter than the back-off, so an honest re-graft after the back-off
  is never called a flood.
"""

from __future__ import annotations

import time
import weakref
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from typing import Any

import structlog
import trio
from google.protobuf.message import DecodeError
from libp2p.crypto.exceptions import CryptographyError
from libp2p.peer.id import ID
from libp2p.pubsub import gossipsub as _gossipsub_module
from libp2p.pubsub import pubsub as _pubsub_module
from libp2p.pubsub.gossipsub import PROTOCOL_ID, PROTOCOL_ID_V11, GossipSub
from libp2p.pubsub.pubsub import Pubsub
from libp2p.pubsub.validators import signature_validator
from libp2p.tools.anyio_service import background_trio_service

from agent import metrics
from agent.core.events import MAX_EVENT_BYTES, Event, decode_event
from agent.core.reasons import Rejected

from agent.errlog import RepeatedErrorLog
from .door import IngestDoor
from .stats import GossipStats, bump

__all__ = ["CountingPubsub", "GossipChannel", "envelope_problem", "gossip_topic",
           "make_gossipsub"]

INBOX_SIZE = 10_000
VERIFIED_KEEP = 1_024  # validated messages whose Event waits for delivery (moments, normally)
OUTBOUND_HIGH = 16  # of the library's 32-RPC per-peer outbound queue
PUBLISH_WAIT_MAX = 0.25
READY_TIMEOUT = 30.0

# swarm_gossip_dropped{reason}
OVERSIZE, UNSIGNED, BAD_SIGNATURE, INBOX_FULL, ERROR = (
    "oversize", "unsigned", "bad_signature", "inbox_full", "error")


RECORD_TTL = 600.0  # s a verified signed peer record is trusted before it is checked again
_RECORDS_MAX = 4096
_library_consume = _pubsub_module.maybe_consume_signed_record
_verified_records: dict[tuple[bytes, bytes], float] = {}  # (peer, record) -> verified at


def _consume_record_once(msg: Any, host: Any, peer_id: ID) -> bool:
    """The library's check of an RPC's signed peer record, done once per (peer, record) and
    ``RECORD_TTL``: the record is the same bytes in every RPC of a connection, and a record
    that verified once verifies again (module doc)."""
    if not msg.HasField("senderRecord"):
        return True
    key = (peer_id.to_bytes(), msg.senderRecord)
    now = time.monotonic()
    at = _verified_records.get(key)
    if at is not None and now - at < RECORD_TTL:
        return True
    ok = _library_consume(msg, host, peer_id)
    if ok:
        if len(_verified_records) >= _RECORDS_MAX:
            _verified_records.clear()
        _verified_records[key] = now
    return ok


ENVELOPE_TTL = 1.0  # s our own signed peer record is reused before the host is asked again
_library_envelope = _pubsub_module.env_to_send_in_RPC
_envelopes: "weakref.WeakKeyDictionary[Any, tuple[float, bytes]]" = weakref.WeakKeyDictionary()


def _envelope_for_rpc(host: Any) -> tuple[bytes, bool]:
    """The library's signed peer record for an outgoing RPC, asked of the host at most once
    per ``ENVELOPE_TTL`` (module doc): an address change reaches peers within that."""
    now = time.monotonic()
    hit = _envelopes.get(host)
    if hit is not None and now - hit[0] < ENVELOPE_TTL:
        return hit[1], False
    envelope, fresh = _library_envelope(host)
    _envelopes[host] = (now, envelope)
    return envelope, fresh


for _module in (_pubsub_module, _gossipsub_module):
    _module.maybe_consume_signed_record = _consume_record_once  # type: ignore[attr-defined]
    _module.env_to_send_in_RPC = _envelope_for_rpc  # type: ignore[attr-defined]


def gossip_topic(swarm: str) -> str:
    return f"/swarm/{swarm}/events/1"


class SwarmGossipSub(GossipSub):
    """GossipSub without the idle GRAFT/PRUNE ping-pong (module doc)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        # a GRAFT sooner than this after the sender pruned us is a flood; the sender's own
        # back-off against us is prune_back_off, so an honest one never comes this soon
        self.graft_flood_threshold = max(1.0, float(self.prune_back_off) / 2)

    async def emit_prune(self, topic: Any, to_peer: Any, *args: Any, **kwargs: Any) -> None:
        # a GRAFT we refuse: no GRAFT of ours to that peer within the back-off either (the
        # library grafted it at its next heartbeat, 1 s later, and was refused as a flood)
        self._add_back_off(to_peer, topic, False)
        await super().emit_prune(topic, to_peer, *args, **kwargs)

    def mesh_heartbeat(self) -> Any:
        to_graft, to_prune = super().mesh_heartbeat()
        for peer, topics in to_prune.items():
            for topic in topics:
                self._add_back_off(peer, topic, False)  # no re-graft of it within the back-off
        return to_graft, to_prune


def make_gossipsub(**overrides: Any) -> GossipSub:
    """GossipSub configured so nothing is dropped silently at tens of msgs/s, 5-20 peers."""
    params: dict[str, Any] = dict(
        protocols=[PROTOCOL_ID_V11, PROTOCOL_ID],  # not v1.2: its IDONTWANT doubles the RPCs
        degree=6, degree_low=4, degree_high=12,  # 5-20 peers: mesh = everyone up to 7, then 6
        heartbeat_interval=1,                    # library default 120 s
        heartbeat_initial_delay=0.1,
        gossip_window=3, gossip_history=5,       # IHAVE covers ~3 s of history
        adaptive_gossip_enabled=False,           # would stretch the heartbeat to 30 s
        spam_protection_enabled=False,           # 10 msg/s cap, counts our own publishes
        prune_back_off=10,                       # a restarted peer is re-grafted soon
    )
    params.update(overrides)
    return SwarmGossipSub(**params)


def envelope_problem(msg: Any) -> str | None:
    """Why the library would drop a pubsub message before any validator (StrictSign), or None.
    The library drops these with no log line and no counter."""
    if not msg.signature:
        return UNSIGNED
    try:
        ok = signature_validator(msg)
    except (DecodeError, CryptographyError, ValueError, TypeError):
        # what deserializing a peer-supplied public key raises (the library re-raises it)
        ok = False
    return None if ok else BAD_SIGNATURE


class _FrameWatch:
    """Wraps an inbound pubsub stream and watches its varint length prefixes go by, to count
    the RPCs the library refuses as oversize (it only logs them)."""

    def __init__(self, stream: Any, limit: int, on_oversize: Callable[[int], None]) -> None:
        self._stream = stream
        self._limit = limit
        self._on_oversize = on_oversize
        self._value = self._shift = self._body = 0

    async def read(self, n: int | None = None) -> bytes:
        data = await self._stream.read(n)
        self._watch(data)
        return data

    def _watch(self, data: bytes) -> None:
        i = 0
        while i < len(data):
            if self._body:
                take = min(self._body, len(data) - i)
                self._body -= take
                i += take
                continue
            byte = data[i]
            i += 1
            self._value |= (byte & 0x7F) << self._shift
            self._shift += 7
            if byte & 0x80 and self._shift < 70:
                continue
            length, self._value, self._shift = self._value, 0, 0
            if length > self._limit:
                self._on_oversize(length)  # the library refuses it and resets the stream
            else:
                self._body = length

    def __getattr__(self, name: str) -> Any:  # muxed_conn, reset(), metric_send_channel...
        return getattr(self._stream, name)


class CountingPubsub(Pubsub):
    """Pubsub that counts what the library drops silently (module doc)."""

    def __init__(self, host: Any, router: Any, *,
                 on_drop: Callable[[str, str, dict[str, Any]], None], log: Any,
                 topic: str | None = None, on_message: Callable[[Any], None] | None = None) -> None:
        super().__init__(host, router)  # strict_signing=True: we sign, peers must too
        self._on_drop = on_drop
        self._log = log
        self._topic = topic
        self._on_message = on_message

    def notify_subscriptions(self, publish_message: Any) -> None:
        """Our topic's messages go to ``on_message`` (never blocks, never drops silently), not
        to the library's 32-slot subscription channel (module doc)."""
        if (self._on_message is not None and self._topic in self.topic_ids
                and self._topic in publish_message.topicIDs):
            self._on_message(publish_message)
            return
        super().notify_subscriptions(publish_message)

    async def stream_handler(self, stream: Any) -> None:
        peer = stream.muxed_conn.peer_id.to_base58()
        watch = _FrameWatch(stream, self.max_inbound_rpc_size,
                            lambda size: self._on_drop(OVERSIZE, peer, {"size": size}))
        await super().stream_handler(watch)

    async def push_msg(self, msg_forwarder: Any, msg: Any) -> None:
        if msg_forwarder == self.my_id:  # our own publish: errors go to the publisher
            await super().push_msg(msg_forwarder, msg)
            return
        if self._is_msg_seen(msg):
            return  # a duplicate from another mesh peer: the first copy was checked
        forwarder = msg_forwarder.to_base58()
        problem = envelope_problem(msg)
        if problem is not None:
            self._on_drop(problem, forwarder, {"size": len(msg.data)})
            return
        try:
            await super().push_msg(msg_forwarder, msg)
        except Exception as exc:
            # Broad on purpose: this runs as a task of the library's service manager, and any
            # exception there stops Pubsub (all gossip) for every peer. One message is
            # dropped instead; the traceback is logged, so a bug still surfaces.
            self._log.error("net.gossip_message_failed", forwarder=forwarder,
                            error=f"{type(exc).__name__}: {exc}"[:300], exc_info=exc)
            self._on_drop(ERROR, forwarder, {"size": len(msg.data)})


class GossipChannel:
    def __init__(self, *, peer_id: str, topic: str, intake: IngestDoor, log: Any = None,
                 on_reject: Callable[[str, str], None] | None = None,
                 on_overflow: Callable[[], None] | None = None) -> None:
        self.topic = topic
        self._peer_id = peer_id
        self._intake = intake
        self._log = log if log is not None else structlog.get_logger("agent.net.gossip")
        self._on_reject = on_reject
        self._on_overflow = on_overflow
        self._stats = GossipStats()
        # a hostile peer may send thousands: one line per (reason, peer), then a summary
        self._rejects = RepeatedErrorLog(self._log, "net.gossip_rejected", level="warning",
                                         field="reason")
        self._drops = RepeatedErrorLog(self._log, "net.gossip_dropped", level="warning",
                                       field="reason")
        self._pubsub: CountingPubsub | None = None
        self._gossipsub: GossipSub | None = None
        self._running = False
        self._publish_lock = trio.Lock()
        self._stuck: set[Any] = set()  # peers whose outbound queue does not drain
        self._inbox: trio.MemorySendChannel[tuple[bytes | Event, str]] | None = None
        # what the validator decoded, by the message's bytes: delivered as the Event, so its
        # signature (the costly part of a check) is verified once here, not again at intake
        self._verified: dict[bytes, Event] = {}

    def statistics(self) -> GossipStats:
        return self._stats.snapshot()

    @property
    def mesh_peers(self) -> list[str]:
        if self._gossipsub is None:
            return []
        return sorted(p.to_base58() for p in self._gossipsub.mesh.get(self.topic, ()))

    @property
    def topic_peers(self) -> list[str]:
        if self._pubsub is None:
            return []
        return sorted(p.to_base58() for p in self._pubsub.peer_topics.get(self.topic, ()))

    # ------------------------------------------------------------------ lifecycle
    @asynccontextmanager
    async def services(self, host: Any) -> AsyncIterator[None]:
        """Create and run Pubsub + GossipSub for ``host``; enter before ``host.run()``."""
        gossipsub = make_gossipsub()
        pubsub = CountingPubsub(host, gossipsub, on_drop=self._dropped, log=self._log,
                                topic=self.topic, on_message=self._take)
        pubsub.counter = time.time_ns()  # seqno = counter+1; the library seeds it in seconds
        pubsub.set_topic_validator(self.topic, self._validate, False)
        self._pubsub, self._gossipsub = pubsub, gossipsub
        try:
            async with background_trio_service(pubsub), background_trio_service(gossipsub):
                yield
        finally:
            self._running = False
            pubsub.seen_messages.stop()  # a thread the library never stops
            self._pubsub = self._gossipsub = None

    async def run(self, *, task_status: Any = trio.TASK_STATUS_IGNORED) -> None:
        """Subscribe and deliver messages to the IngestDoor; call once the host listens."""
        pubsub = self._pubsub
        if pubsub is None:
            raise RuntimeError("GossipChannel.run() outside services()")
        with trio.fail_after(READY_TIMEOUT):
            await pubsub.wait_until_ready()
        inbox_send, inbox_recv = trio.open_memory_channel[tuple[bytes | Event, str]](INBOX_SIZE)
        self._inbox = inbox_send  # before subscribing: messages arrive through _take
        await pubsub.subscribe(self.topic)
        async with trio.open_nursery() as nursery:
            nursery.start_soon(self._deliver, inbox_recv)
            self._running = True
            task_status.started()

    # ------------------------------------------------------------------ out
    async def publish(self, raw: bytes) -> None:
        """Gossip one event the runtime has already ingested. Waits briefly while a peer's
        outbound queue is over half full (the library would drop silently). If not running
        it only counts: the event is in the store and peers sync it.
        Raises ValueError for an event over MAX_EVENT_BYTES."""
        if len(raw) > MAX_EVENT_BYTES:
            raise ValueError(f"event of {len(raw)} bytes exceeds {MAX_EVENT_BYTES}")
        pubsub = self._pubsub
        if not self._running or pubsub is None:
            self._stats.publish_offline += 1
            self._log.info("net.publish_while_stopped", size=len(raw))
            return
        async with self._publish_lock:
            await self._wait_outbound_room(pubsub)
            await pubsub.publish(self.topic, bytes(raw))
            self._stats.published += 1
            await trio.lowlevel.checkpoint()  # let the sender and subscription tasks run

    async def _wait_outbound_room(self, pubsub: Any) -> None:
        """Wait while a live peer's outbound queue is over half full; a peer whose queue
        does not drain within PUBLISH_WAIT_MAX (frozen) is skipped until it drains, so one
        stuck peer cannot stall publishing."""
        queues = pubsub.peer_queues
        deadline = trio.current_time() + PUBLISH_WAIT_MAX
        while True:
            busy = set()
            for pid, q in list(queues.items()):
                if len(q) >= OUTBOUND_HIGH:
                    if pid not in self._stuck:
                        busy.add(pid)
                else:
                    self._stuck.discard(pid)
            if not busy:
                return
            if trio.current_time() >= deadline:
                self._stuck |= busy
                self._stats.publish_stalls += 1
                self._log.warning("net.peer_outbound_stuck",
                                  peers=sorted(p.to_base58() for p in busy),
                                  detail="its queue does not drain; messages to it may be "
                                         "dropped, sync will repair")
                return
            await trio.sleep(0.002)

    # ------------------------------------------------------------------ in
    def _validate(self, forwarder: Any, msg: Any) -> bool:
        """Topic validator: reject what can never be valid, so it is not forwarded. Runs on
        every hop, the publisher included."""
        try:
            ev = decode_event(msg.data)
        except Rejected as exc:
            reason, detail = exc.reason.value, exc.detail
        else:
            if len(self._verified) >= VERIFIED_KEEP:  # never taken (a library path): the oldest goes
                del self._verified[next(iter(self._verified))]
            self._verified[bytes(msg.data)] = ev
            return True
        self._stats.rejected += 1
        fwd = forwarder.to_base58()
        self._rejects.failed(reason, key=f"{reason}:{fwd}", detail=detail[:200], forwarder=fwd,
                             origin=_origin(msg), size=len(msg.data))
        if self._on_reject is not None:
            self._on_reject(reason, fwd)
        return False

    def _dropped(self, reason: str, peer: str, fields: dict[str, Any]) -> None:
        bump(self._stats.dropped, reason)
        metrics.GOSSIP_DROPPED.labels(reason=reason).inc()
        self._drops.failed(reason, key=f"{reason}:{peer}", peer=peer, **fields)

    def _take(self, msg: Any) -> None:
        """A validated message of our topic (from CountingPubsub): into our inbox."""
        origin = _origin(msg)
        raw = bytes(msg.data)
        ev = self._verified.pop(raw, None)
        if origin == self._peer_id:
            self._stats.own += 1  # the runtime ingested it when it published
            return
        self._stats.received += 1
        metrics.GOSSIP_RECEIVED.inc()
        inbox = self._inbox
        try:
            if inbox is None:
                raise trio.WouldBlock
            inbox.send_nowait((raw if ev is None else ev, origin))
        except (trio.WouldBlock, trio.ClosedResourceError, trio.BrokenResourceError):
            self._stats.inbox_overflow += 1
            self._dropped(INBOX_FULL, origin, {"detail": "the runtime is behind; "
                                                         "anti-entropy sync recovers it"})
            if self._on_overflow is not None:
                self._on_overflow()

    async def _deliver(self, inbox: trio.MemoryReceiveChannel[tuple[bytes | Event, str]]) -> None:
        async for item, origin in inbox:
            if await self._intake(item, origin):
                self._stats.new += 1


def _origin(msg: Any) -> str:
    return ID(msg.from_id).to_base58()
