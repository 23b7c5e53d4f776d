"""The libp2p side of an agent: host, gossipsub topic, sync protocol, reconnects, mDNS.

Data flow: gossip/sync -> validator (stateless: size, schema, signature) -> ``ingest`` (the
runtime: fold, store) ; runtime -> ``publish``. The runtime owns the store's writes; the
Network only reads the store to answer sync requests.

py-libp2p 0.8.1 pitfalls handled here (see shared/notes/libp2p.md):
- gossipsub defaults drop messages silently: heartbeat 1 s (default 120 s), adaptive gossip
  off (it stretches the heartbeat to 30 s), spam protection off (10 msg/s/topic cap that also
  counts our own publishes);
- Pubsub and GossipSub services start *before* ``host.run`` (crash otherwise);
- the subscription channel holds 32 messages: a reader task drains it into a large inbox;
- a per-peer outbound queue holds 32 RPCs and drops the rest silently: ``publish`` waits
  while a live peer's queue is over half full (a burst of publishes lost 8 of 40 without);
- the library's bootstrap gives up after 3 failures: our own reconnect loop, with backoff,
  which also lifts the swarm's 60 s dial negative-cache before each attempt;
- pubsub seqnos start at time() in *seconds*: a peer restarted with the same key after
  publishing faster than 1 msg/s reuses seqnos its peers saw, and they drop its new messages
  as already seen (reproduced in tests). We start the counter at time_ns();
- cancelling ``host.run`` skips the library's teardown: the TCP listener (a system task),
  sockets and zeroconf stay alive. We close listeners, host and mDNS ourselves, shielded;
  zeroconf is stopped in a worker thread (it joins its threads) and Pubsub's seen-cache
  thread is stopped;
- a failed listen (port in use: it binds with SO_REUSEPORT) is only logged by the library:
  we raise ListenError;
- with 0.0.0.0, identify and mDNS advertise 0.0.0.0 (peers then dial themselves): we
  advertise concrete interface addresses (``addrs_factory`` and the mDNS broadcaster).
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable, Sequence
from typing import Any, Literal

import structlog
import trio
from multiaddr import Multiaddr

from agent.core.events import MAX_EVENT_BYTES, decode_event
from agent.core.identity import Identity
from agent.core.reasons import Rejected

from .discovery import DiscoveryBridge, PeerBook, concrete_ips, parse_peer_addr, usable_addrs
from .store import EventStore
from .wire import ConnErrorKind, build_host
from .sync import (
    DEFAULT_PAGE, OrjsonCodec, PeerCursor, SyncProtocolError, build_page, check_has_response,
    check_response, parse_has_request, sync_protocol_id,
)

__all__ = ["IngestFn", "ListenError", "Network", "gossip_topic", "make_gossipsub"]

IngestFn = Callable[[bytes, str], Awaitable[bool]]

INBOX_SIZE = 10_000
DIAL_TIMEOUT = 10.0
SYNC_REQUEST_TIMEOUT = 20.0
SHUTDOWN_TIMEOUT = 10.0
OUTBOUND_HIGH = 16  # of the library's 32-RPC per-peer outbound queue
PUBLISH_WAIT_MAX = 0.25


class ListenError(OSError):
    """The host could not listen on the configured address."""


def gossip_topic(swarm: str) -> str:
    return f"/swarm/{swarm}/events/1"


def make_gossipsub(**overrides: Any) -> Any:
    """GossipSub configured so nothing is dropped silently at tens of msgs/s, 5-20 peers."""
    from libp2p.pubsub.gossipsub import PROTOCOL_ID, PROTOCOL_ID_V11, PROTOCOL_ID_V12, GossipSub

    params: dict[str, Any] = dict(
        protocols=[PROTOCOL_ID_V12, PROTOCOL_ID_V11, PROTOCOL_ID],
        degree=6, degree_low=4, degree_high=12,  # 5-20 peers: mesh = everyone up to 7, then 6
        heartbeat_interval=1,                    # library default 120 s
        heartbeat_initial_delay=0.1,
        gossip_window=3, gossip_history=5,       # IHAVE covers ~3 s of history
        adaptive_gossip_enabled=False,           # would stretch the heartbeat to 30 s
        spam_protection_enabled=False,           # 10 msg/s cap, counts our own publishes
        prune_back_off=10,                       # a restarted peer is re-grafted soon
    )
    params.update(overrides)
    return GossipSub(**params)


class _ConnNotifee:
    """Forwards swarm connect/disconnect notifications to a trio channel, never blocking."""

    def __init__(self, send: trio.MemorySendChannel) -> None:
        self._send = send

    def _push(self, kind: str, conn: Any) -> None:
        try:
            self._send.send_nowait((kind, conn.muxed_conn.peer_id.to_base58()))
        except (trio.WouldBlock, trio.ClosedResourceError, trio.BrokenResourceError):
            pass
        except Exception:
            pass

    async def opened_stream(self, network: Any, stream: Any) -> None:
        await trio.lowlevel.checkpoint()

    async def closed_stream(self, network: Any, stream: Any) -> None:
        await trio.lowlevel.checkpoint()

    async def connected(self, network: Any, conn: Any) -> None:
        self._push("up", conn)
        await trio.lowlevel.checkpoint()

    async def disconnected(self, network: Any, conn: Any) -> None:
        self._push("down", conn)
        await trio.lowlevel.checkpoint()

    async def listen(self, network: Any, multiaddr: Any) -> None:
        await trio.lowlevel.checkpoint()

    async def listen_close(self, network: Any, multiaddr: Any) -> None:
        await trio.lowlevel.checkpoint()


class _AdvertisedAddrs:
    """Stands in for the host in mDNS's broadcaster: concrete addresses instead of 0.0.0.0."""

    def __init__(self, net: "Network") -> None:
        self._net = net

    def get_transport_addrs(self) -> list[Multiaddr]:
        return self._net._advertised_transport_addrs()


class Network:
    """One agent's network layer. Construct, then ``await nursery.start(net.run)``: it
    returns once the host listens and is subscribed; cancel the nursery to stop.

    - ``ingest(raw, source)``: source is the origin peer id for gossip, "sync:<peer>" for
      sync. Calls are serialized. Our own messages coming back on the subscription are not
      passed to ingest (the runtime ingested them before publishing). If ingest raises, it
      is logged and counted (``stats["ingest_errors"]``), and the Network carries on.
    - Extra keywords beyond the contract: ``on_reject(reason, forwarder)`` for gossip the
      validator rejected, ``muxer`` ("MPLEX": lower latency measured here; "YAMUX"),
      ``sync_page`` (events per sync request).
    - ``stats`` (counters), ``cursors`` (per-peer sync state), ``mesh_peers`` and
      ``topic_peers`` are there for metrics and tests.
    """

    def __init__(
        self,
        *,
        identity: Identity,
        swarm: str,
        store: EventStore,
        ingest: IngestFn,
        listen_host: str = "0.0.0.0",
        listen_port: int = 0,
        peers: Sequence[str] = (),
        mdns: bool = False,
        reconnect_interval: float = 5.0,
        sync_interval: float = 10.0,
        on_peers_changed: Callable[[int], None] | None = None,
        log: Any = None,
        on_reject: Callable[[str, str], None] | None = None,
        muxer: Literal["YAMUX", "MPLEX"] = "MPLEX",
        sync_page: int = DEFAULT_PAGE,
        knows: Callable[[str], bool] | None = None,
    ) -> None:
        self._identity = identity
        self.swarm = swarm
        self.topic = gossip_topic(swarm)
        self.sync_protocol = sync_protocol_id(swarm)
        self._store = store
        self._ingest_fn = ingest
        self._listen_host = listen_host
        self._listen_port = listen_port
        self._mdns = mdns
        self._reconnect_interval = reconnect_interval
        self._sync_interval = sync_interval
        self._on_peers_changed = on_peers_changed
        self._on_reject = on_reject
        self._muxer = muxer
        self._page = max(1, int(sync_page))
        self._knows = knows
        self._log = log if log is not None else structlog.get_logger("agent.net")
        self._peer_id = identity.peer_id

        self._book = PeerBook(interval=reconnect_interval)
        for text in peers:
            pid, addr = parse_peer_addr(text)  # ValueError names the bad entry
            if pid != self._peer_id:
                self._book.add(pid, [addr], static=True)

        self.stats: dict[str, int] = dict(
            published=0, gossip_received=0, gossip_new=0, gossip_own=0, gossip_rejected=0,
            inbox_overflow=0, sync_requests_served=0, sync_pulled=0, sync_new=0, sync_errors=0,
            publish_stalls=0, publish_offline=0, dials=0, dial_failures=0, connects=0,
            disconnects=0, discovered=0, ingest_errors=0, connection_errors=0,
        )
        self.cursors: dict[str, PeerCursor] = {}
        self._sync_locks: dict[str, trio.Lock] = {}
        self._foreign: set[str] = set()  # connected peers that do not serve our swarm's sync
        self._up: set[str] = set()
        self._stuck: set[Any] = set()  # peers whose outbound queue does not drain
        self._publish_lock = trio.Lock()
        self._ingest_lock = trio.Lock()
        self._running = False
        self._host: Any = None
        self._pubsub: Any = None
        self._gossipsub: Any = None
        self._rr: Any = None
        self._nursery: trio.Nursery | None = None
        self._wake = trio.Event()
        self._resync = trio.Event()
        self._bridge: DiscoveryBridge | None = None
        self._found_send: trio.MemorySendChannel | None = None

    # ------------------------------------------------------------------ properties
    @property
    def peer_id(self) -> str:
        return self._peer_id

    @property
    def running(self) -> bool:
        return self._running

    @property
    def listen_addrs(self) -> list[str]:
        if self._host is None:
            return []
        out: list[str] = []
        for ma in self._host.get_transport_addrs():
            for concrete in self._expand(ma):
                text = f"{concrete}/p2p/{self._peer_id}"
                if text not in out:
                    out.append(text)
        return out

    @property
    def connected(self) -> list[str]:
        if self._host is None:
            return []
        conns = self._host.get_network().connections
        return sorted(p.to_base58() for p, cs in list(conns.items())
                      if cs and p.to_base58() not in self._foreign)

    @property
    def mesh_peers(self) -> list[str]:
        """Peers in our gossipsub mesh for the events topic (diagnostics, tests)."""
        if self._gossipsub is None:
            return []
        return sorted(p.to_base58() for p in self._gossipsub.mesh.get(self.topic, ()))

    @property
    def topic_peers(self) -> list[str]:
        """Peers known to subscribe to the events topic."""
        if self._pubsub is None:
            return []
        return sorted(p.to_base58() for p in self._pubsub.peer_topics.get(self.topic, ()))

    def _expand(self, ma: Multiaddr) -> list[str]:
        text = str(ma)
        parts = text.split("/")
        if len(parts) > 2 and parts[1] == "ip4" and parts[2] == "0.0.0.0":
            return ["/".join(parts[:2] + [ip] + parts[3:]) for ip in concrete_ips("0.0.0.0")]
        return [text]

    def _addrs_factory(self, candidates: list[Multiaddr]) -> list[Multiaddr]:
        """What identify / peer records advertise: 0.0.0.0 replaced by concrete addresses
        (peers would otherwise store 0.0.0.0 and dial themselves)."""
        out: list[str] = []
        for ma in candidates:
            for text in self._expand(ma):
                if text not in out:
                    out.append(text)
        return [Multiaddr(a) for a in out]

    def _advertised_transport_addrs(self) -> list[Multiaddr]:
        addrs: list[str] = []
        for ma in self._host.get_transport_addrs():
            addrs.extend(self._expand(ma))
        external = [a for a in addrs if not a.startswith("/ip4/127.")]
        return [Multiaddr(a) for a in (external or addrs)]

    # ------------------------------------------------------------------ run
    async def run(self, *, task_status: Any = trio.TASK_STATUS_IGNORED) -> None:
        from libp2p.crypto.ed25519 import create_new_key_pair
        from libp2p.pubsub.pubsub import Pubsub
        from libp2p.request_response import RequestResponse, RequestResponseConfig

        if self._running:
            raise RuntimeError("Network.run() is already running")
        proto = "ip6" if ":" in self._listen_host else "ip4"
        listen = Multiaddr(f"/{proto}/{self._listen_host}/tcp/{self._listen_port}")
        key_pair = create_new_key_pair(self._identity.seed)
        _quiet_library_loggers()
        host = build_host(key_pair=key_pair, listen=listen, report=self._connection_failed,
                          muxer=self._muxer, mdns=self._mdns, addrs_factory=self._addrs_factory)
        if host.get_id().to_base58() != self._peer_id:  # pragma: no cover - identity invariant
            raise RuntimeError("libp2p peer id differs from the identity's peer id")
        gossipsub = make_gossipsub()
        pubsub = Pubsub(host, gossipsub)
        # seqno = counter+1; the library seeds it with time() in seconds (see module doc)
        pubsub.counter = time.time_ns()
        pubsub.set_topic_validator(self.topic, self._validate, False)
        rr = RequestResponse(host)
        rr.set_handler(self.sync_protocol, self._serve_sync, OrjsonCodec(),
                       RequestResponseConfig(timeout=SYNC_REQUEST_TIMEOUT,
                                             max_concurrent_inbound=32))
        conn_send, conn_recv = trio.open_memory_channel[tuple[str, str]](4096)
        host.get_network().register_notifee(_ConnNotifee(conn_send))
        found_send, found_recv = trio.open_memory_channel[Any](1024)
        inbox_send, inbox_recv = trio.open_memory_channel[tuple[bytes, str]](INBOX_SIZE)
        self._found_send = found_send
        if self._mdns:
            self._bridge = DiscoveryBridge(self._peer_id, self._found_from_thread)
            self._bridge.register()  # before host.run: discoveries fire while it starts
            mdns = getattr(host, "mDNS", None)
            if mdns is not None:
                mdns.broadcaster.host = _AdvertisedAddrs(self)
        self._host, self._pubsub, self._gossipsub, self._rr = host, pubsub, gossipsub, rr
        t0 = time.monotonic()
        try:
            await self._run(host, pubsub, gossipsub, listen, conn_recv, found_recv, inbox_send,
                            inbox_recv, t0, task_status)
        except BaseExceptionGroup as group:  # the library's nurseries wrap a listen failure
            listen_error = group.subgroup(lambda e: isinstance(e, ListenError))
            if listen_error is not None:
                while isinstance(listen_error, BaseExceptionGroup):
                    listen_error = listen_error.exceptions[0]
                raise listen_error from None
            raise
        finally:
            self._running = False
            self._nursery = None
            self._found_send = None
            with trio.CancelScope(shield=True):  # if host.run() itself failed (port in use)
                await self._stop_mdns(host)
            if self._bridge is not None:
                self._bridge.unregister()
                self._bridge = None
            try:  # Pubsub's seen-cache sweeper thread is never stopped by the library
                pubsub.seen_messages.stop()
            except Exception:
                pass
            self._host = self._pubsub = self._gossipsub = self._rr = None
            self._up.clear()
            self._log.info("net.stopped", peer_id=self._peer_id)

    async def _run(self, host: Any, pubsub: Any, gossipsub: Any, listen: Multiaddr,
                   conn_recv: Any, found_recv: Any, inbox_send: Any, inbox_recv: Any,
                   t0: float, task_status: Any) -> None:
        from libp2p.tools.anyio_service import background_trio_service

        async with background_trio_service(pubsub), background_trio_service(gossipsub):
            async with host.run(listen_addrs=[listen]):
                try:
                    if not host.get_transport_addrs():  # the library only logs this
                        raise ListenError(
                            f"cannot listen on {listen} (port in use or address not "
                            f"available on this machine)")
                    with trio.fail_after(30):
                        await pubsub.wait_until_ready()
                    sub = await pubsub.subscribe(self.topic)
                    async with trio.open_nursery() as nursery:
                        self._nursery = nursery
                        nursery.start_soon(self._read_gossip, sub, inbox_send)
                        nursery.start_soon(self._ingest_worker, inbox_recv)
                        nursery.start_soon(self._connection_events, conn_recv)
                        nursery.start_soon(self._discoveries, found_recv)
                        nursery.start_soon(self._reconnect_loop)
                        nursery.start_soon(self._anti_entropy_loop)
                        self._running = True
                        self._log.info("net.started", peer_id=self._peer_id,
                                       addrs=self.listen_addrs, topic=self.topic,
                                       static_peers=len(self._book.peers), mdns=self._mdns,
                                       muxer=self._muxer,
                                       startup_s=round(time.monotonic() - t0, 3))
                        task_status.started()
                        await trio.sleep_forever()
                finally:
                    self._running = False
                    self._nursery = None
                    # Under cancellation the library's own teardown (service managers'
                    # finally blocks) is skipped, leaving the TCP listener (a system
                    # task) and sockets open: close everything here, shielded.
                    with trio.CancelScope(shield=True) as scope:
                        scope.deadline = trio.current_time() + SHUTDOWN_TIMEOUT
                        await self._stop_mdns(host)
                        try:
                            # listeners first: peers redialing us meanwhile get refused
                            # instead of racing the swarm's shutdown
                            for listener in list(host.get_network().listeners.values()):
                                await listener.close()
                            await host.close()
                        except Exception as exc:
                            self._log.warning("net.host_close_failed", error=repr(exc))
                    if scope.cancelled_caught:
                        self._log.warning("net.shutdown_timeout", seconds=SHUTDOWN_TIMEOUT)

    async def _stop_mdns(self, host: Any) -> None:
        if self._bridge is not None:
            self._bridge.unregister()
        mdns = getattr(host, "mDNS", None)
        if mdns is None:
            return
        host.mDNS = None  # host.run's own shutdown must not close zeroconf twice
        scope = getattr(mdns, "_cleanup_cancel_scope", None)
        if scope is not None:
            scope.cancel()  # a trio object: cancel it here, not from the worker thread
        with trio.move_on_after(SHUTDOWN_TIMEOUT / 2):
            try:
                # stop() joins zeroconf's threads (browser may sit in a 5 s lookup)
                await trio.to_thread.run_sync(mdns.stop, abandon_on_cancel=True)
            except Exception as exc:
                self._log.warning("net.mdns_stop_failed", error=repr(exc))

    # ------------------------------------------------------------------ gossip
    async def publish(self, raw: bytes) -> None:
        """Gossip one event the local runtime has already ingested. Waits briefly while a
        peer's outbound queue is over half full (the library would drop silently). If the
        Network is not running it only logs: the event is in the store and peers sync it.
        Raises ValueError for an event over MAX_EVENT_BYTES."""
        if not self._running or self._pubsub is None:
            # not an error for the caller: the event is in its store, peers will sync it
            self.stats["publish_offline"] += 1
            self._log.info("net.publish_while_stopped", size=len(raw))
            return
        if len(raw) > MAX_EVENT_BYTES:
            raise ValueError(f"event of {len(raw)} bytes exceeds {MAX_EVENT_BYTES}")
        async with self._publish_lock:
            await self._wait_outbound_room()
            await self._pubsub.publish(self.topic, bytes(raw))
            self.stats["published"] += 1
            await trio.lowlevel.checkpoint()  # let the sender and subscription tasks run

    async def _wait_outbound_room(self) -> None:
        """Backpressure for a burst of publishes: the library drops (silently) what does
        not fit in a peer's 32-RPC outbound queue. Wait while a live peer's queue is over
        half full; a peer whose queue does not drain within PUBLISH_WAIT_MAX (frozen) is
        skipped until it drains, so one stuck peer cannot stall publishing."""
        ps = self._pubsub
        queues = getattr(ps, "peer_queues", None)
        if not queues:
            return
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
                self.stats["publish_stalls"] += 1
                self._log.warning("net.peer_outbound_stuck", peers=sorted(_b58(p) for p in busy),
                                  detail="its queue does not drain; messages to it may be "
                                         "dropped, sync will repair")
                return
            await trio.sleep(0.002)

    def _validate(self, forwarder: Any, msg: Any) -> bool:
        """Topic validator: reject what can never be valid, so it is not forwarded.
        Runs on every hop, the publisher included."""
        try:
            decode_event(msg.data)
            return True
        except Rejected as exc:
            reason, detail = exc.reason.value, exc.detail
        except Exception as exc:  # never let a validator bug drop the connection
            reason, detail = "malformed", repr(exc)
        self.stats["gossip_rejected"] += 1
        fwd = _b58(forwarder)
        self._log.warning("net.gossip_rejected", reason=reason, detail=detail[:200],
                          forwarder=fwd, origin=_b58_bytes(msg.from_id), size=len(msg.data))
        if self._on_reject is not None:
            try:
                self._on_reject(reason, fwd)
            except Exception:
                self._log.exception("net.on_reject_failed")
        return False

    async def _read_gossip(self, sub: Any, inbox: trio.MemorySendChannel) -> None:
        """Drain the library's 32-slot subscription channel promptly into our inbox."""
        own = self._peer_id
        while True:
            msg = await sub.get()
            origin = _b58_bytes(msg.from_id)
            if origin == own:
                self.stats["gossip_own"] += 1  # the runtime ingested it when it published
                continue
            self.stats["gossip_received"] += 1
            try:
                inbox.send_nowait((bytes(msg.data), origin))
            except trio.WouldBlock:
                self.stats["inbox_overflow"] += 1
                self._log.warning("net.inbox_overflow", size=INBOX_SIZE,
                                  detail="event dropped from gossip; anti-entropy sync recovers it")
                self._resync.set()

    async def _ingest_worker(self, inbox: trio.MemoryReceiveChannel) -> None:
        async for raw, origin in inbox:
            if await self._ingest(raw, origin):
                self.stats["gossip_new"] += 1

    async def _ingest(self, raw: bytes, source: str) -> bool | None:
        """True/False from the runtime; None if it raised (logged; the Network keeps going).
        Calls are serialized: gossip and concurrent syncs never interleave inside ingest."""
        try:
            async with self._ingest_lock:
                return bool(await self._ingest_fn(raw, source))
        except Exception:
            self.stats["ingest_errors"] += 1
            self._log.exception("net.ingest_failed", source=source)
            return None

    # ------------------------------------------------------------------ sync
    async def _serve_sync(self, request: Any, context: Any) -> dict[str, Any]:
        if isinstance(request, dict) and "has" in request:
            try:
                ids = parse_has_request(request)
            except SyncProtocolError as exc:
                self._log.info("net.sync_bad_request", peer=_b58(context.peer_id), error=str(exc))
                raise
            knows = self._knows or (lambda _id: False)
            return {"has": [bool(knows(i)) for i in ids]}
        try:
            page = build_page(self._store, request)
        except SyncProtocolError as exc:
            self._log.info("net.sync_bad_request", peer=_b58(context.peer_id), error=str(exc))
            raise
        self.stats["sync_requests_served"] += 1
        return page

    async def peer_has(self, peer_id: str, event_id: str) -> bool:
        """Ask a peer whether it has stored an event (how `submit` confirms its goal landed).
        False for a dead, foreign or slow peer; never raises."""
        from libp2p.peer.id import ID
        from libp2p.request_response import RequestResponseConfig

        rr = self._rr
        if not self._running or rr is None:
            return False
        try:
            resp = await rr.send_request(ID.from_base58(peer_id), [self.sync_protocol],
                                         {"has": [event_id]}, OrjsonCodec(),
                                         RequestResponseConfig(timeout=SYNC_REQUEST_TIMEOUT))
            return check_has_response(resp, 1)[0]
        except Exception as exc:
            self._log.debug("net.peer_has_failed", peer=peer_id, error=f"{type(exc).__name__}: {exc}")
            return False

    async def sync_from(self, peer_id: str) -> int:
        """Pull what this peer's store has that we lack, in pages, feeding each event to
        ingest; returns how many were new. Never raises for a dead/unsupported peer."""
        new, _ok = await self._sync(peer_id)
        return new

    async def sync_all(self) -> int:
        """sync_from every connected peer (concurrently); returns how many events were new."""
        total = 0

        async def one(pid: str) -> None:
            nonlocal total
            total += await self.sync_from(pid)

        async with trio.open_nursery() as nursery:
            for pid in self.connected:
                nursery.start_soon(one, pid)
        return total

    async def _sync(self, peer_id: str) -> tuple[int, bool]:
        if not self._running or self._rr is None:
            return 0, False
        lock = self._sync_locks.setdefault(peer_id, trio.Lock())
        async with lock:
            return await self._pull(peer_id)

    async def _pull(self, peer_id: str) -> tuple[int, bool]:
        from libp2p.peer.id import ID
        from libp2p.request_response import (
            ProtocolNotSupportedError, RequestResponseConfig, RequestResponseError,
        )

        try:
            pid = ID.from_base58(peer_id)
        except Exception:
            self._log.warning("net.sync_bad_peer_id", peer=peer_id)
            return 0, False
        cur = self.cursors.setdefault(peer_id, PeerCursor())
        cfg = RequestResponseConfig(timeout=SYNC_REQUEST_TIMEOUT)
        codec = OrjsonCodec()
        new = pulled = pages = 0
        t0 = time.monotonic()
        while True:
            rr = self._rr
            if rr is None:
                return new, False
            req = {"epoch": cur.epoch, "cursor": cur.cursor, "limit": self._page}
            try:
                resp = await rr.send_request(pid, [self.sync_protocol], req, codec, cfg)
                epoch, events, nxt, total = check_response(resp)
            except ProtocolNotSupportedError:
                self._log.info("net.sync_unsupported", peer=peer_id,
                               detail=f"peer does not serve {self.sync_protocol}")
                if peer_id not in self._foreign:
                    self._foreign.add(peer_id)
                    self._peers_changed()
                return new, False
            except (RequestResponseError, SyncProtocolError, OSError, Exception) as exc:
                self.stats["sync_errors"] += 1
                self._log.debug("net.sync_failed", peer=peer_id, error=f"{type(exc).__name__}: {exc}")
                return new, False
            pages += 1
            cur.pages += 1
            start = nxt - len(events)
            same_log = epoch == cur.epoch and cur.cursor <= total
            expected = cur.cursor if same_log else 0
            if not same_log and cur.epoch is not None:
                cur.resets += 1
                self._log.info("net.sync_log_reset", peer=peer_id, old_epoch=cur.epoch,
                               epoch=epoch, cursor=cur.cursor, total=total)
            if start != expected:  # served from our stale cursor: start again from 0
                cur.epoch, cur.cursor = epoch, 0
                if pages > 3:
                    return new, False
                continue
            cur.epoch = epoch
            for text in events:
                is_new = await self._ingest(text.encode("utf-8"), f"sync:{peer_id}")
                if is_new is None:  # the runtime failed (e.g. disk full): retry this page later
                    cur.cursor = start
                    return new, False
                pulled += 1
                cur.pulled += 1
                self.stats["sync_pulled"] += 1
                if is_new:
                    new += 1
                    cur.new += 1
                    self.stats["sync_new"] += 1
            cur.cursor, cur.total = nxt, total
            if not events or nxt >= total:
                break
        if pulled:
            self._log.info("net.synced", peer=peer_id, pulled=pulled, new=new, pages=pages,
                           cursor=cur.cursor, total=cur.total,
                           seconds=round(time.monotonic() - t0, 3))
        return new, True

    async def _sync_new_peer(self, peer_id: str) -> None:
        for attempt in range(4):
            _new, ok = await self._sync(peer_id)
            if ok or peer_id in self._foreign or peer_id not in self._up:
                return
            await trio.sleep(0.5 * (attempt + 1))

    async def _anti_entropy_loop(self) -> None:
        while True:
            with trio.move_on_after(self._sync_interval):
                await self._resync.wait()
            self._resync = trio.Event()
            try:
                await self.sync_all()
            except Exception:  # pragma: no cover - sync_from never raises for peers
                self._log.exception("net.anti_entropy_failed")

    # ------------------------------------------------------------------ peers
    def _connection_failed(self, kind: ConnErrorKind, peer: str, exc: BaseException | None) -> None:
        """One connection failed and was closed (agent.net.wire); the reconnect loop redials."""
        from agent import metrics

        self.stats["connection_errors"] += 1
        metrics.CONNECTION_ERRORS.labels(kind=kind.value).inc()
        error = f"{type(exc).__name__}: {exc}"[:300] if exc is not None else ""
        if kind is ConnErrorKind.UNEXPECTED:  # a bug here or in the library: keep the traceback
            self._log.error("net.connection_failed", peer=peer, kind=kind.value, error=error,
                            exc_info=exc)
        else:
            self._log.warning("net.connection_failed", peer=peer, kind=kind.value, error=error,
                              detail="closed this connection only; reconnecting")
        self._wake.set()

    def _connected_set(self) -> set[str]:
        if self._host is None:
            return set()
        return {p.to_base58() for p, cs in list(self._host.get_network().connections.items())
                if cs}

    def _peers_changed(self) -> None:
        if self._on_peers_changed is not None:
            try:
                self._on_peers_changed(len(self.connected))
            except Exception:
                self._log.exception("net.on_peers_changed_failed")

    async def _connection_events(self, events: trio.MemoryReceiveChannel) -> None:
        async for kind, peer in events:
            now_connected = peer in self._connected_set()
            if kind == "up" and now_connected and peer not in self._up:
                self._up.add(peer)
                self.stats["connects"] += 1
                known = self._book.peers.get(peer)
                if known is not None:
                    known.backoff.reset()
                self._log.info("net.peer_connected", peer=peer, connected=len(self._up))
                if self._nursery is not None:
                    self._nursery.start_soon(self._sync_new_peer, peer)
                self._peers_changed()
            elif kind == "down" and not now_connected and peer in self._up:
                self._up.discard(peer)
                self._foreign.discard(peer)
                self.stats["disconnects"] += 1
                self._log.info("net.peer_disconnected", peer=peer, connected=len(self._up))
                self._wake.set()
                self._peers_changed()

    def _found_from_thread(self, peer_info: Any) -> None:
        """Trio thread (via run_sync_soon): queue an mDNS discovery."""
        send = self._found_send
        if send is None:
            return
        try:
            send.send_nowait(peer_info)
        except (trio.WouldBlock, trio.ClosedResourceError, trio.BrokenResourceError):
            pass

    async def _discoveries(self, found: trio.MemoryReceiveChannel) -> None:
        async for info in found:
            pid = info.peer_id.to_base58()
            if pid == self._peer_id:
                continue
            addrs = usable_addrs(list(info.addrs))
            if not addrs:
                self._log.debug("net.discovered_unusable", peer=pid,
                                addrs=[str(a) for a in info.addrs])
                continue
            self.stats["discovered"] += 1
            if self._book.add(pid, addrs, static=False):
                self._log.info("net.discovered", peer=pid, addrs=[str(a) for a in addrs])
            self._wake.set()

    async def _reconnect_loop(self) -> None:
        while True:
            connected = self._connected_set()
            for peer in self._book.due(connected):
                peer.dialing = True
                assert self._nursery is not None
                self._nursery.start_soon(self._dial, peer)
            with trio.move_on_after(self._reconnect_interval):
                await self._wake.wait()
            self._wake = trio.Event()

    async def _dial(self, peer: Any) -> None:
        from libp2p.peer.id import ID
        from libp2p.peer.peerinfo import PeerInfo

        self.stats["dials"] += 1
        try:
            host = self._host
            if host is None:
                return
            pid = ID.from_base58(peer.peer_id)
            try:
                host.get_network().unblock_peer(pid)  # our backoff governs, not the 60 s cache
                if not peer.static:
                    # the dialer tries one TCP address per peer: drop stale ones (old port of
                    # a restarted peer); mDNS gave us the current set
                    host.get_peerstore().clear_addrs(pid)
            except Exception:
                pass
            with trio.fail_after(DIAL_TIMEOUT):
                await host.connect(PeerInfo(pid, peer.addrs))
            peer.backoff.reset()
            peer.last_error = ""
        except (Exception, trio.TooSlowError) as exc:
            self.stats["dial_failures"] += 1
            delay = peer.backoff.failed(time.monotonic())
            peer.last_error = f"{type(exc).__name__}: {exc}"[:300]
            self._log.debug("net.dial_failed", peer=peer.peer_id,
                            addrs=[str(a) for a in peer.addrs], error=peer.last_error,
                            failures=peer.backoff.failures, retry_in=round(delay, 1))
        finally:
            peer.dialing = False


def _quiet_library_loggers() -> None:
    """py-libp2p logs every failed dial at ERROR (3 per attempt) and its auto-connector state
    at INFO every 10 s; we log dial failures ourselves (debug, with backoff). Only loggers the
    application has not configured are touched."""
    import logging

    for name, level in (("libp2p.transport.tcp.tcp", logging.CRITICAL),
                        ("libp2p.network.auto_connector", logging.WARNING)):
        lg = logging.getLogger(name)
        if lg.level == logging.NOTSET:
            lg.setLevel(level)


def _b58(peer: Any) -> str:
    try:
        return peer.to_base58()
    except Exception:
        return str(peer)


def _b58_bytes(raw: bytes) -> str:
    from libp2p.peer.id import ID

    try:
        return ID(raw).to_base58()
    except Exception:
        return raw.hex()

