"""Finding peers: static multiaddrs, mDNS, concrete listen addresses, redial backoff.

mDNS (py-libp2p 0.8.1, zeroconf) only adds addresses to the peerstore and calls the
module-level ``peerDiscovery`` handlers from zeroconf's threads; it never connects. We
register a handler before ``host.run()`` (discoveries fire while it starts) that hands the
PeerInfo to trio without blocking the zeroconf thread, and the Network dials it.

Never run mDNS in a test outside a network namespace: zeroconf binds every interface.
"""

from __future__ import annotations

import ipaddress
import time
from dataclasses import dataclass, field
from typing import Any, Callable

import trio
from multiaddr import Multiaddr

from agent.core.backoff import Backoff

__all__ = [
    "DiscoveryBridge", "PeerBook", "concrete_ips", "parse_peer_addr", "usable_addrs",
]

_WILDCARDS = {"0.0.0.0", "::", ""}


def _up_interfaces() -> set[str] | None:
    try:
        import psutil  # optional: drops interfaces that are down
    except ImportError:  # pragma: no cover
        return None
    try:
        return {name for name, st in psutil.net_if_stats().items() if st.isup}
    except OSError:  # pragma: no cover - /proc or sysfs unreadable (sandboxes)
        return None


_ips_cache: tuple[float, list[str]] | None = None


def concrete_ips(listen_host: str) -> list[str]:
    """The IPv4 addresses a wildcard listener is reachable on: interface addresses first,
    127.0.0.1 last (cached 5 s). A concrete listen_host is returned as it is."""
    global _ips_cache
    if listen_host not in _WILDCARDS:
        return [listen_host]
    now = time.monotonic()
    if _ips_cache is not None and now - _ips_cache[0] < 5.0:
        return list(_ips_cache[1])
    found = _interface_ips()
    _ips_cache = (now, found)
    return list(found)


def _interface_ips() -> list[str]:
    import ifaddr  # a zeroconf dependency

    up = _up_interfaces()
    found: list[str] = []
    for adapter in ifaddr.get_adapters():
        if up is not None and adapter.nice_name not in up and adapter.name not in up:
            continue
        for ip in adapter.ips:
            if isinstance(ip.ip, str) and ip.ip not in found:
                found.append(ip.ip)
    found.sort(key=lambda a: (ipaddress.ip_address(a).is_loopback, a))
    if "127.0.0.1" not in found:
        found.append("127.0.0.1")
    return found


def parse_peer_addr(text: str) -> tuple[str, Multiaddr]:
    """'/ip4/1.2.3.4/tcp/4001/p2p/12D3...' -> (peer id, address without /p2p). ValueError if bad."""
    from libp2p.peer.peerinfo import info_from_p2p_addr

    try:
        info = info_from_p2p_addr(Multiaddr(text.strip()))
    except ValueError as exc:  # multiaddr's parse errors and InvalidAddrError are ValueErrors
        raise ValueError(f"bad peer address {text!r} (want /ip4/<host>/tcp/<port>/p2p/<peer id>):"
                         f" {exc}") from None
    return info.peer_id.to_base58(), info.addrs[0]


def usable_addrs(addrs: list[Multiaddr]) -> list[Multiaddr]:
    """Drop wildcard addresses (a peer advertising 0.0.0.0 would make us dial ourselves)."""
    out = []
    for a in addrs:
        s = str(a)
        if s.startswith("/ip4/0.0.0.0/") or s.startswith("/ip6/::/"):
            continue
        out.append(a)
    return out


@dataclass
class KnownPeer:
    peer_id: str
    addrs: list[Multiaddr]
    static: bool
    backoff: Backoff
    dialing: bool = False
    last_error: str = ""


@dataclass
class PeerBook:
    """Peers we keep connected to: static ones (SWARM_PEERS) and ones mDNS found."""

    interval: float
    peers: dict[str, KnownPeer] = field(default_factory=dict)

    def add(self, peer_id: str, addrs: list[Multiaddr], *, static: bool) -> bool:
        """Returns True if the peer is new or its addresses changed."""
        known = self.peers.get(peer_id)
        if known is None:
            cap = max(30.0, 6 * self.interval)
            self.peers[peer_id] = KnownPeer(peer_id, list(addrs), static,
                                            Backoff(self.interval, cap=cap))
            return True
        if static:  # configured addresses accumulate
            new = [a for a in addrs if a not in known.addrs]
            known.addrs.extend(new)
            known.static = True
            changed = bool(new)
        elif known.static:  # a static peer also seen on mDNS: keep both
            new = [a for a in addrs if a not in known.addrs]
            known.addrs.extend(new)
            changed = bool(new)
        else:  # mDNS gives the current set: a restarted peer may have a new port
            changed = list(addrs) != known.addrs
            known.addrs = list(addrs)
        if changed:
            known.backoff.reset()
        return changed

    def due(self, connected: set[str], now: float | None = None) -> list[KnownPeer]:
        now = time.monotonic() if now is None else now
        return [p for p in self.peers.values()
                if p.peer_id not in connected and not p.dialing and p.backoff.due(now)]


class DiscoveryBridge:
    """Receives mDNS discoveries on zeroconf's threads and queues them for trio.

    Uses ``TrioToken.run_sync_soon``: it never blocks the zeroconf thread, so stopping
    zeroconf from the trio thread (which joins those threads) cannot deadlock against a
    handler waiting for the trio loop, as ``trio.from_thread.run_sync`` could.
    """

    def __init__(self, own_peer_id: str, on_found: Callable[[Any], None]) -> None:
        self._own = own_peer_id
        self._on_found = on_found
        self._token: trio.lowlevel.TrioToken | None = None
        self._registered = False
        self.seen = 0

    def register(self) -> None:
        from libp2p.discovery.events.peerDiscovery import peerDiscovery

        self._token = trio.lowlevel.current_trio_token()
        peerDiscovery.register_peer_discovered_handler(self._handler)
        self._registered = True

    def unregister(self) -> None:
        from libp2p.discovery.events.peerDiscovery import peerDiscovery

        if self._registered:
            peerDiscovery.unregister_peer_discovered_handler(self._handler)
            self._registered = False
        self._token = None

    def _handler(self, peer_info: Any) -> None:  # zeroconf thread
        token = self._token
        if token is None:
            return
        if peer_info.peer_id.to_base58() == self._own:
            return
        try:
            token.run_sync_soon(self._deliver, peer_info)
        except trio.RunFinishedError:
            pass  # trio already gone: we are shutting down

    def _deliver(self, peer_info: Any) -> None:  # trio thread
        if self._token is None:
            return
        self.seen += 1
        self._on_found(peer_info)
