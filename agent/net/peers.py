"""The peer keeper: which peers we know, which we are connected to, and getting back to them.

Owns the PeerBook (static peers from configuration, mDNS sightings), the swarm's connection
notifications, the reconnect loop with per-peer backoff, the mDNS bridge, and the record of
connections closed because they failed (agent.net.wire reports them here). It tells its
owner through callbacks when a peer connects (to sync it) and when the count changes.

py-libp2p 0.8.1 pitfalls handled here:
- the library's bootstrap gives up after 3 failures: our own reconnect loop, with backoff,
  which also lifts the swarm's 60 s dial negative-cache before each attempt;
- mDNS discoveries arrive on zeroconf's threads and never connect by themselves: a
  DiscoveryBridge (registered before ``host.run``) hands them to trio and we dial;
- with 0.0.0.0, mDNS advertises 0.0.0.0 (peers then dial themselves): its broadcaster gets
  our concrete addresses instead;
- cancelling ``host.run`` skips the library's teardown of zeroconf: ``stop_mdns`` does it,
  in a worker thread (it joins its threads).
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from collections.abc import Callable, Sequence
from typing import Any

import structlog
import trio
from libp2p.network.exceptions import SwarmException
from libp2p.peer.id import ID
from libp2p.peer.peerinfo import PeerInfo
from multiaddr import Multiaddr

from agent import metrics

from .discovery import DiscoveryBridge, KnownPeer, PeerBook, parse_peer_addr, usable_addrs
from agent.errlog import RepeatedErrorLog
from .stats import ConnectionStats, PeerStats, bump
from .wire import ConnErrorKind

__all__ = ["PeerKeeper"]

DIAL_TIMEOUT = 10.0
MDNS_STOP_TIMEOUT = 5.0


class _ConnNotifee:
    """Forwards swarm connect/disconnect notifications to a trio channel, never blocking."""

    def __init__(self, send: trio.MemorySendChannel[tuple[str, str]]) -> None:
        self._send = send

    def _push(self, kind: str, conn: Any) -> None:
        try:
            self._send.send_nowait((kind, conn.muxed_conn.peer_id.to_base58()))
        except (trio.WouldBlock, trio.ClosedResourceError, trio.BrokenResourceError):
            pass  # 4096 pending or shutting down: the reconnect loop re-reads the swarm anyway

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

    def __init__(self, addrs: Callable[[], list[Multiaddr]]) -> None:
        self._addrs = addrs

    def get_transport_addrs(self) -> list[Multiaddr]:
        return self._addrs()


@dataclass(frozen=True)
class DialFailure:
    peer: str
    addrs: list[Multiaddr]
    error: str  # the last one, "TooSlowError: " when the dial timed out
    failures: int  # in a row


class PeerKeeper:
    def __init__(self, *, peer_id: str, static_peers: Sequence[str] = (),
                 reconnect_interval: float = 5.0, mdns: bool = False, log: Any = None,
                 on_connected: Callable[[str], None] | None = None,
                 on_count: Callable[[int], None] | None = None) -> None:
        self._peer_id = peer_id
        self._interval = reconnect_interval
        self._mdns = mdns
        self._log = log if log is not None else structlog.get_logger("agent.net.peers")
        self._on_connected = on_connected
        self._on_count = on_count
        self.book = PeerBook(interval=reconnect_interval)
        for text in static_peers:
            pid, addr = parse_peer_addr(text)  # ValueError names the bad entry
            if pid != peer_id:
                self.book.add(pid, [addr], static=True)
        self._stats = PeerStats()
        self._conn_stats = ConnectionStats()
        self._conn_errors = RepeatedErrorLog(self._log, "net.connection_failed",
                                             level="warning", field="kind")
        self._host: Any = None
        self._up: set[str] = set()
        self._foreign: set[str] = set()  # connected peers that do not serve our swarm's sync
        self._wake = trio.Event()
        self._events_send, self._events = trio.open_memory_channel[tuple[str, str]](4096)
        self._found_send, self._found = trio.open_memory_channel[Any](1024)
        self._bridge: DiscoveryBridge | None = None

    # ------------------------------------------------------------------ views
    def statistics(self) -> PeerStats:
        return self._stats.snapshot()

    def connection_statistics(self) -> ConnectionStats:
        return self._conn_stats.snapshot()

    @property
    def connected(self) -> list[str]:
        """Peers with a live connection that belong to our swarm."""
        return sorted(self._connected_set() - self._foreign)

    def dial_failures(self) -> list[DialFailure]:
        """Known peers we are not connected to whose last dial failed: what a short-lived
        command says when it found nobody to talk to."""
        up = self._connected_set()
        return [DialFailure(p.peer_id, list(p.addrs), p.last_error, p.backoff.failures)
                for p in self.book.peers.values() if p.last_error and p.peer_id not in up]

    def _connected_set(self) -> set[str]:
        if self._host is None:
            return set()
        conns = self._host.get_network().connections
        return {p.to_base58() for p, cs in list(conns.items()) if cs}

    # ------------------------------------------------------------------ lifecycle
    def prepare(self, host: Any, advertised: Callable[[], list[Multiaddr]]) -> None:
        """Before ``host.run()``: connection notifications, and mDNS discoveries (they fire
        while ``run()`` starts)."""
        host.get_network().register_notifee(_ConnNotifee(self._events_send))
        if self._mdns:
            self._bridge = DiscoveryBridge(self._peer_id, self._found_from_thread)
            self._bridge.register()
            mdns = getattr(host, "mDNS", None)  # present when new_host(enable_mDNS=True)
            if mdns is not None:
                mdns.broadcaster.host = _AdvertisedAddrs(advertised)

    async def run(self, host: Any, *, task_status: Any = trio.TASK_STATUS_IGNORED) -> None:
        self._host = host
        try:
            async with trio.open_nursery() as nursery:
                nursery.start_soon(self._connection_events)
                nursery.start_soon(self._discoveries)
                nursery.start_soon(self._reconnect_loop, nursery)
                task_status.started()
        finally:
            self._host = None
            self._up.clear()

    async def stop_mdns(self, host: Any) -> None:
        """Stop discovery: unregister the bridge and stop zeroconf (joins its threads)."""
        if self._bridge is not None:
            self._bridge.unregister()
            self._bridge = None
        mdns = getattr(host, "mDNS", None)
        if mdns is None:
            return
        host.mDNS = None  # host.run's own shutdown must not close zeroconf twice
        scope = getattr(mdns, "_cleanup_cancel_scope", None)
        if scope is not None:
            scope.cancel()  # a trio object: cancel it here, not from the worker thread
        with trio.move_on_after(MDNS_STOP_TIMEOUT) as waited:
            # stop() joins zeroconf's threads (the browser may sit in a 5 s lookup)
            await trio.to_thread.run_sync(mdns.stop, abandon_on_cancel=True)
        if waited.cancelled_caught:
            self._log.warning("net.mdns_stop_slow", seconds=MDNS_STOP_TIMEOUT,
                              detail="zeroconf's threads were left to finish on their own")

    # ------------------------------------------------------------------ callbacks in
    def mark_foreign(self, peer: str) -> None:
        """A connected peer does not serve our swarm's sync: it is not one of ours."""
        if peer not in self._foreign:
            self._foreign.add(peer)
            self._log.info("net.foreign_peer", peer=peer,
                           detail="connected but not in this swarm; not counted")
            self._count_changed()

    def connection_failed(self, kind: ConnErrorKind, peer: str, exc: BaseException | None) -> None:
        """agent.net.wire closed one connection because it failed; we redial."""
        self._conn_stats.errors += 1
        bump(self._conn_stats.by_kind, kind.value)
        metrics.CONNECTION_ERRORS.labels(kind=kind.value).inc()
        error = f"{type(exc).__name__}: {exc}"[:300] if exc is not None else ""
        if kind is ConnErrorKind.UNEXPECTED:  # a bug here or in the library: keep the traceback
            self._log.error("net.connection_failed", peer=peer, kind=kind.value, error=error,
                            exc_info=exc)
        else:  # a peer can cause these at will: one line per (kind, peer), then summaries
            self._conn_errors.failed(kind.value, key=f"{kind.value}:{peer}", peer=peer,
                                     error=error, detail="closed this connection only; "
                                                         "reconnecting")
        self._wake.set()

    def found(self, peer: str, addrs: list[Multiaddr], *, how: str = "dht") -> None:
        """A discovery mechanism (the DHT rendezvous) saw a member at these addresses."""
        if peer == self._peer_id:
            return
        addrs = usable_addrs(addrs)
        if not addrs:
            return
        self._stats.discovered += 1
        if self.book.add(peer, addrs, static=False):
            self._log.info("net.discovered", peer=peer, addrs=[str(a) for a in addrs], how=how)
            self._wake.set()

    def _found_from_thread(self, peer_info: Any) -> None:
        """Trio thread (via run_sync_soon): queue an mDNS discovery."""
        try:
            self._found_send.send_nowait(peer_info)
        except (trio.WouldBlock, trio.ClosedResourceError, trio.BrokenResourceError):
            pass  # 1024 pending sightings or shutting down: mDNS repeats them

    # ------------------------------------------------------------------ loops
    def _count_changed(self) -> None:
        if self._on_count is not None:
            self._on_count(len(self.connected))

    async def _connection_events(self) -> None:
        async for kind, peer in self._events:
            now_connected = peer in self._connected_set()
            if kind == "up" and now_connected:
                # Every new connection is announced, even to a peer we think is connected:
                # a peer that restarted and reconnected before we processed its old
                # connection's "down" is a new process with (maybe) a new log to pull.
                # (Announcing only the first connection lost exactly that sync: the flaky
                # test_restart_with_same_key_reconnects_and_resumes.)
                first = peer not in self._up
                self._up.add(peer)
                self._stats.connects += 1
                known = self.book.peers.get(peer)
                if known is not None:
                    known.backoff.reset()
                self._log.info("net.peer_connected", peer=peer, connected=len(self._up),
                               again=not first)
                if self._on_connected is not None:
                    self._on_connected(peer)
                if first:
                    self._count_changed()
            elif kind == "down" and not now_connected and peer in self._up:
                self._up.discard(peer)
                self._foreign.discard(peer)
                self._stats.disconnects += 1
                self._log.info("net.peer_disconnected", peer=peer, connected=len(self._up))
                self._wake.set()
                self._count_changed()

    async def _discoveries(self) -> None:
        async for info in self._found:
            pid = info.peer_id.to_base58()
            if pid != self._peer_id and not usable_addrs(list(info.addrs)):
                self._log.debug("net.discovered_unusable", peer=pid,
                                addrs=[str(a) for a in info.addrs])
            self.found(pid, list(info.addrs), how="mdns")

    async def _reconnect_loop(self, nursery: trio.Nursery) -> None:
        while True:
            for peer in self.book.due(self._connected_set()):
                peer.dialing = True
                nursery.start_soon(self._dial, peer)
            with trio.move_on_after(self._interval):
                await self._wake.wait()
            self._wake = trio.Event()

    async def _dial(self, peer: KnownPeer) -> None:
        self._stats.dials += 1
        host = self._host
        try:
            pid = ID.from_base58(peer.peer_id)
            host.get_network().unblock_peer(pid)  # our backoff governs, not the 60 s cache
            if not peer.static:
                # the dialer tries one TCP address per peer: drop stale ones (old port of a
                # restarted peer); mDNS gave us the current set
                host.get_peerstore().clear_addrs(pid)
            with trio.fail_after(DIAL_TIMEOUT):
                await host.connect(PeerInfo(pid, peer.addrs))
            peer.backoff.reset()
            peer.last_error = ""
        except (SwarmException, trio.TooSlowError, OSError) as exc:
            # host.connect wraps transport, security and muxer failures in SwarmException
            self._stats.dial_failures += 1
            delay = peer.backoff.failed(time.monotonic())
            peer.last_error = f"{type(exc).__name__}: {exc}"[:300]
            self._log.debug("net.dial_failed", peer=peer.peer_id,
                            addrs=[str(a) for a in peer.addrs], error=peer.last_error,
                            failures=peer.backoff.failures, retry_in=round(delay, 1))
        finally:
            peer.dialing = False
