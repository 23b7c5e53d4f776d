"""What a Network is configured with: plain values, no behaviour, no libp2p import."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

__all__ = ["InboundLimits", "NetConfig", "SyncLimits"]


@dataclass(frozen=True)
class SyncLimits:
    """Bounds of the sync server, so no peer can starve the others.

    A peer may hold ``per_peer`` streams at once; all peers together ``total``, of which the
    last ``reserved`` go only to peers holding none (a newcomer always gets in, however many
    streams others keep open). A stream that has not sent its request within
    ``idle_timeout`` is closed (requests are a few bytes, sent right after opening); a
    response not written within ``response_timeout`` too.
    """

    per_peer: int = 4
    total: int = 64
    reserved: int = 16
    idle_timeout: float = 5.0
    response_timeout: float = 20.0
    max_request_bytes: int = 64 * 1024

    def __post_init__(self) -> None:
        if not 1 <= self.per_peer <= self.total or not 0 <= self.reserved < self.total:
            raise ValueError(f"inconsistent sync limits: {self}")
        if self.idle_timeout <= 0 or self.response_timeout <= 0:
            raise ValueError("sync timeouts must be positive")


@dataclass(frozen=True)
class InboundLimits:
    """Bounds on inbound connections before their security handshake (agent.net.wire)."""

    per_ip: int = 8  # unfinished handshakes from one address (an honest one takes milliseconds)
    total: int = 64  # unfinished handshakes in all
    handshake_timeout: float = 5.0  # then the connection is closed

    def __post_init__(self) -> None:
        if not 1 <= self.per_ip <= self.total or self.handshake_timeout <= 0:
            raise ValueError(f"inconsistent inbound limits: {self}")


@dataclass(frozen=True)
class NetConfig:
    swarm: str = "default"
    listen_host: str = "0.0.0.0"
    listen_port: int = 0
    peers: tuple[str, ...] = ()          # static peers: /ip4/<host>/tcp/<port>/p2p/<id>
    mdns: bool = False
    reconnect_interval: float = 5.0
    sync_interval: float = 10.0          # anti-entropy period
    sync_fanout: int = 3                 # peers pulled per anti-entropy period, in turn (<= 0: all)
    sync_timeout: float = 10.0           # one sync request, client side
    sync_page: int = 200                 # events per sync page
    sync_ids: bool = True                # pull ids before bodies (False: whole pages, as v1)
    sync_id_page: int = 5000             # ids per page (ids before bodies)
    sync_get_batch: int = 500            # events asked per request (ids before bodies)
    muxer: Literal["MPLEX", "YAMUX"] = "MPLEX"  # Mplex: lower latency measured here
    swarm_key: bytes | None = field(default=None, repr=False)  # 32 bytes: private network
    dht: bool = False                    # Kademlia rendezvous: find members beyond the LAN
    dht_interval: float = 30.0           # seconds between DHT lookups (after the first few)
    sync_limits: SyncLimits = SyncLimits()
    inbound_limits: InboundLimits = InboundLimits()

    def __post_init__(self) -> None:
        object.__setattr__(self, "peers", tuple(self.peers))
        if self.swarm_key is not None and len(self.swarm_key) != 32:
            raise ValueError("the swarm key must be 32 bytes")

    @classmethod
    def from_settings(cls, settings: Any, **overrides: Any) -> "NetConfig":
        """From agent.settings.Settings (duck-typed: this module imports no settings)."""
        values = dict(
            swarm=settings.swarm, listen_host=settings.listen_host,
            listen_port=settings.listen_port, peers=tuple(settings.peers), mdns=settings.mdns,
            reconnect_interval=settings.reconnect_interval,
            sync_interval=settings.sync_interval, swarm_key=settings.swarm_psk(),
            sync_fanout=getattr(settings, "sync_fanout", 3),
            dht=settings.dht,
        )
        values.update(overrides)
        return cls(**values)
