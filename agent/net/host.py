"""One agent's network: a thin facade over parts that each own their state.

    Network ─ builds the py-libp2p host (agent.net.wire) and runs the parts:
      GossipChannel  (gossip.py)       the events topic: validate, deliver, publish
      SyncClient     (sync_client.py)  pull peers' logs: cursors, anti-entropy, reports
      SyncServer     (sync_server.py)  serve our log to peers, with per-peer limits
      PeerKeeper     (peers.py)        known peers, reconnects, mDNS, failed connections
      DhtRendezvous  (rendezvous.py)   with SWARM_DHT: find members beyond the LAN
      IngestDoor     (door.py)         the one door into the runtime's ``ingest``

The parts know nothing of each other or of this module: the facade injects callbacks
(a connected peer -> sync it; a foreign peer -> not counted; gossip overflow -> resync), so
the imports go one way (host -> parts -> wire/sync/store/stats).

Data flow: gossip/sync -> (validator: size, schema, signature) -> IngestDoor -> runtime ingest
(fold, store); runtime -> ``publish``. The runtime owns the store's writes; the Network only
reads the store to answer sync requests.

Shutdown: cancelling ``host.run`` skips the library's teardown (the TCP listener is a system
task; sockets and zeroconf stay alive), so ``run`` closes listeners, host and mDNS itself,
shielded. A failed listen (port in use: it binds with SO_REUSEPORT) is only logged by the
library: ``run`` raises ListenError. With 0.0.0.0, identify and mDNS would advertise 0.0.0.0
(peers then dial themselves): concrete interface addresses are advertised instead.
"""

from __future__ import annotations

import time
from typing import Any, Callable

import structlog
import trio
from libp2p.crypto.ed25519 import create_new_key_pair
from multiaddr import Multiaddr

from agent.core.identity import Identity
from agent.errlog import RepeatedErrorLog

from .config import NetConfig
from .discovery import concrete_ips
from .gossip import GossipChannel, gossip_topic, make_gossipsub
from .door import IngestDoor, IngestFn
from .liblog import route_library_logs
from .peers import DialFailure, PeerKeeper
from .rendezvous import DhtRendezvous
from .stats import NetworkStats
from agent.store import EventStore
from .swarmkey import key_id
from .sync import PeerCursor, SyncClock, sync_protocol_id
from .sync_client import PeerSync, SyncClient, SyncReport
from .sync_server import SyncServer
from .wire import InboundGuard, build_host

__all__ = ["IngestFn", "ListenError", "NetConfig", "Network", "PeerSync", "SyncReport",
           "gossip_topic", "make_gossipsub"]

SHUTDOWN_TIMEOUT = 10.0


class ListenError(OSError):
    """The host could not listen on the configured address."""


class Network:
    """One agent's network layer. Construct, then ``await nursery.start(net.run)``: it
    returns once the host listens and is subscribed; cancel the nursery to stop.

    - ``ingest(raw, source)``: called one event at a time; source is the origin peer id
      for gossip, "sync:<peer>" for sync. Our own messages coming back on the subscription
      are not passed to it (the runtime ingested them before publishing).
    - ``knows(event_id)``: events sync need not fetch (stored, pending or held). Peers' "has"
      requests (how `submit` confirms a goal, an executor its claim) are answered from the
      store: a held or pending event is known, not stored.
    - ``on_peers_changed(n)``: the number of connected peers of this swarm changed.
    - ``on_reject(reason, forwarder)``: gossip our validator refused (never forwarded).
    """

    def __init__(
        self,
        *,
        identity: Identity,
        store: EventStore,
        ingest: IngestFn,
        config: NetConfig = NetConfig(),
        knows: Callable[[str], bool] | None = None,
        on_peers_changed: Callable[[int], None] | None = None,
        on_reject: Callable[[str, str], None] | None = None,
        on_refused: Callable[[str], None] | None = None,
        clock: SyncClock | None = None,
        log: Any = None,
    ) -> None:
        self.config = config
        self.topic = gossip_topic(config.swarm)
        self.sync_protocol = sync_protocol_id(config.swarm)
        self._identity = identity
        self._peer_id = identity.peer_id
        self._log = log if log is not None else structlog.get_logger("agent.net")
        self._intake = IngestDoor(ingest, self._log)
        self._peers = PeerKeeper(
            peer_id=self._peer_id, static_peers=config.peers,
            reconnect_interval=config.reconnect_interval, mdns=config.mdns, log=self._log,
            on_connected=lambda peer: self._sync.peer_connected(peer),
            on_count=on_peers_changed)
        self._sync = SyncClient(
            protocol=self.sync_protocol, intake=self._intake,
            connected=lambda: self._peers.connected, on_foreign=self._peers.mark_foreign,
            page=config.sync_page, timeout=config.sync_timeout,
            interval=config.sync_interval, log=self._log, knows=knows, ids=config.sync_ids,
            id_page=config.sync_id_page, get_batch=config.sync_get_batch,
            fanout=config.sync_fanout, clock=clock)
        self._server = SyncServer(protocol=self.sync_protocol, store=store,
                                  limits=config.sync_limits, log=self._log, clock=clock)
        self._gossip = GossipChannel(peer_id=self._peer_id, topic=self.topic,
                                     intake=self._intake, log=self._log, on_reject=on_reject,
                                     on_overflow=self._sync.request_resync)
        self._rendezvous = DhtRendezvous(
            peer_id=self._peer_id, swarm=config.swarm,
            key_id=key_id(config.swarm_key) if config.swarm_key is not None else None,
            on_found=self._peers.found, connected=lambda: self._peers.connected,
            interval=config.dht_interval, log=self._log) if config.dht else None
        # inbound connections before their handshake: bounded, and each refused one counted
        # (on_refused(reason)) and logged once per address, then summarised
        self._on_refused = on_refused
        self._refusals = RepeatedErrorLog(self._log, "net.inbound_refused", level="warning", field="reason")
        self._guard = InboundGuard(config.inbound_limits, self._refused)
        self._host: Any = None
        self._running = False

    # ------------------------------------------------------------------ the runtime's API
    @property
    def peer_id(self) -> str:
        return self._peer_id

    @property
    def running(self) -> bool:
        return self._running

    @property
    def connected(self) -> list[str]:
        """Connected peers of this swarm (peers that do not serve its sync are left out)."""
        return self._peers.connected

    def dial_failures(self) -> list[DialFailure]:
        """Known peers we could not connect to: the last dial error, failures in a row."""
        return self._peers.dial_failures()

    @property
    def listen_addrs(self) -> list[str]:
        if self._host is None:
            return []
        out: list[str] = []
        for ma in self._host.get_transport_addrs():
            for concrete in _expand(ma):
                text = f"{concrete}/p2p/{self._peer_id}"
                if text not in out:
                    out.append(text)
        return out

    @property
    def stats(self) -> NetworkStats:
        return NetworkStats(gossip=self._gossip.statistics(), sync=self._sync.statistics(),
                            serve=self._server.statistics(), peers=self._peers.statistics(),
                            connections=self._peers.connection_statistics(),
                            intake=self._intake.statistics())

    @property
    def cursors(self) -> dict[str, PeerCursor]:
        """How far we have pulled each peer's log (in memory)."""
        return self._sync.cursors

    async def publish(self, raw: bytes) -> None:
        """Gossip one event the runtime has already ingested (see GossipChannel.publish)."""
        await self._gossip.publish(raw)

    async def sync_all(self) -> SyncReport:
        """Pull from every connected peer; the report says how many answered."""
        return await self._sync.sync_all()

    async def sync_from(self, peer_id: str) -> PeerSync:
        return await self._sync.sync_from(peer_id)

    async def peer_has(self, peer_id: str, event_id: str) -> bool:
        return await self._sync.peer_has(peer_id, event_id)

    def _refused(self, reason: str, remote: str) -> None:
        if self._on_refused is not None:
            self._on_refused(reason)
        self._refusals.failed(reason, key=f"{reason}:{remote}", remote=remote, detail={
            "handshake": "closed before its security handshake finished (no or another swarm key?)",
            "timeout": f"no handshake within {self.config.inbound_limits.handshake_timeout:g} s",
            "pending_limit": "too many unfinished handshakes from this address or in all",
        }.get(reason, reason))

    @property
    def inbound(self) -> InboundGuard:
        return self._guard

    # ------------------------------------------------------------------ diagnostics
    @property
    def mesh_peers(self) -> list[str]:
        """Peers in our gossipsub mesh for the events topic."""
        return self._gossip.mesh_peers

    @property
    def topic_peers(self) -> list[str]:
        return self._gossip.topic_peers

    # ------------------------------------------------------------------ run
    async def run(self, *, task_status: Any = trio.TASK_STATUS_IGNORED) -> None:
        if self._host is not None:
            raise RuntimeError("Network.run() is already running")
        cfg = self.config
        proto = "ip6" if ":" in cfg.listen_host else "ip4"
        listen = Multiaddr(f"/{proto}/{cfg.listen_host}/tcp/{cfg.listen_port}")
        route_library_logs()
        host = build_host(key_pair=create_new_key_pair(self._identity.seed), listen=listen,
                          report=self._peers.connection_failed, muxer=cfg.muxer, guard=self._guard,
                          psk=cfg.swarm_key, mdns=cfg.mdns, addrs_factory=_addrs_factory)
        if host.get_id().to_base58() != self._peer_id:  # pragma: no cover - an invariant
            raise RuntimeError("libp2p peer id differs from the identity's peer id")
        self._server.attach(host)
        self._peers.prepare(host, lambda: _advertised(host))
        self._host = host
        self._announce_membership()
        t0 = time.monotonic()
        try:
            async with self._gossip.services(host), host.run(listen_addrs=[listen]):
                try:
                    if not host.get_transport_addrs():  # the library only logs this
                        raise ListenError(f"cannot listen on {listen} (port in use or address "
                                          "not available on this machine)")
                    async with trio.open_nursery() as nursery:
                        await nursery.start(self._gossip.run)
                        await nursery.start(self._peers.run, host)
                        await nursery.start(self._sync.run, host)
                        if self._rendezvous is not None:
                            await nursery.start(self._rendezvous.run, host)
                        self._running = True
                        self._log.info("net.started", peer_id=self._peer_id,
                                       addrs=self.listen_addrs, topic=self.topic,
                                       static_peers=len(self._peers.book.peers), mdns=cfg.mdns,
                                       dht=cfg.dht, muxer=cfg.muxer,
                                       startup_s=round(time.monotonic() - t0, 3))
                        task_status.started()
                        await trio.sleep_forever()
                finally:
                    self._running = False
                    await self._close(host)
        except BaseExceptionGroup as group:  # the library's nurseries wrap a listen failure
            listen_error = group.subgroup(lambda e: isinstance(e, ListenError))
            if listen_error is None:
                raise
            while isinstance(listen_error, BaseExceptionGroup):
                listen_error = listen_error.exceptions[0]
            raise listen_error from None
        finally:
            self._running = False
            with trio.CancelScope(shield=True):  # if host.run() itself failed
                await self._peers.stop_mdns(host)
            self._host = None
            self._log.info("net.stopped", peer_id=self._peer_id)

    def _announce_membership(self) -> None:
        key = self.config.swarm_key
        if key is None:
            self._log.warning(
                "net.open_swarm", swarm=self.config.swarm,
                detail="no swarm key: anyone who can reach this agent's port can join, read, "
                       "sync and publish. Set SWARM_KEY or SWARM_KEY_FILE (make one with "
                       "`python -m agent keygen`) for a private swarm")
        else:
            self._log.info("net.private_swarm", swarm=self.config.swarm, key_id=key_id(key))

    async def _close(self, host: Any) -> None:
        # Under cancellation the library's own teardown (service managers' finally blocks) is
        # skipped, leaving the TCP listener (a system task) and sockets open: close here.
        with trio.CancelScope(shield=True) as scope:
            scope.deadline = trio.current_time() + SHUTDOWN_TIMEOUT
            await self._peers.stop_mdns(host)
            # listeners first: peers redialing us meanwhile are refused instead of racing
            # the swarm's shutdown
            for listener in list(host.get_network().listeners.values()):
                await listener.close()
            await host.close()
        if scope.cancelled_caught:
            self._log.warning("net.shutdown_timeout", seconds=SHUTDOWN_TIMEOUT)


# ---------------------------------------------------------------------- addresses
def _expand(ma: Multiaddr) -> list[str]:
    """0.0.0.0 -> this machine's concrete IPv4 addresses."""
    text = str(ma)
    parts = text.split("/")
    if len(parts) > 2 and parts[1] == "ip4" and parts[2] == "0.0.0.0":
        return ["/".join(parts[:2] + [ip] + parts[3:]) for ip in concrete_ips("0.0.0.0")]
    return [text]


def _addrs_factory(candidates: list[Multiaddr]) -> list[Multiaddr]:
    """What identify / peer records advertise: 0.0.0.0 replaced by concrete addresses."""
    out: list[str] = []
    for ma in candidates:
        for text in _expand(ma):
            if text not in out:
                out.append(text)
    return [Multiaddr(a) for a in out]


def _advertised(host: Any) -> list[Multiaddr]:
    """What mDNS announces: concrete addresses, loopback only if there is nothing else."""
    addrs = [a for ma in host.get_transport_addrs() for a in _expand(ma)]
    external = [a for a in addrs if not a.startswith("/ip4/127.")]
    return [Multiaddr(a) for a in (external or addrs)]
