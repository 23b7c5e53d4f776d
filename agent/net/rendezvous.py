"""Finding the swarm beyond the local network: a Kademlia DHT used as a rendezvous.

mDNS stops at the network segment. With ``SWARM_DHT=true`` every agent also runs a
Kademlia DHT (py-libp2p's ``kad_dht``, protocol prefix ``/swarm/<name>`` so it never mixes
with another network's DHT), announces itself as a *provider* of the swarm's rendezvous key,
and regularly looks the other providers up. Each peer found goes to the PeerKeeper's book,
like an mDNS sighting, and is dialled. An agent therefore only needs one reachable member
(``SWARM_PEERS``: a bootstrap peer) to find all the others, on any network, and no
central registry: every member holds part of the DHT. Once connected, members stay connected
to each other even if the bootstrap peer goes away.

The key is derived from the swarm name and, for a private swarm, the key's id, so
different private swarms with the same name do not meet (and cannot connect anyway).
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from typing import Any

import structlog
import trio
from libp2p.kad_dht.kad_dht import DHTMode, KadDHT
from libp2p.tools.anyio_service import background_trio_service
from multiaddr import Multiaddr

from .discovery import usable_addrs

__all__ = ["DhtRendezvous", "rendezvous_key"]

FIRST_ROUNDS = (1.0, 2.0, 4.0)  # look up soon after start, then every ``interval``
QUERY_TIMEOUT = 30.0


def rendezvous_key(swarm: str, key_id: str | None) -> str:
    """A sha2-256 multihash (hex), as the DHT's provider records are keyed."""
    digest = hashlib.sha256(f"swarm-planner/{swarm}/{key_id or 'open'}".encode()).digest()
    return (b"\x12\x20" + digest).hex()


class DhtRendezvous:
    def __init__(self, *, peer_id: str, swarm: str, key_id: str | None,
                 on_found: Callable[[str, list[Multiaddr]], None],
                 connected: Callable[[], list[str]], interval: float = 30.0,
                 log: Any = None) -> None:
        self._peer_id = peer_id
        self._prefix = f"/swarm/{swarm}"
        self.key = rendezvous_key(swarm, key_id)
        self._on_found = on_found
        self._connected = connected
        self._interval = interval
        self._log = log if log is not None else structlog.get_logger("agent.net.dht")
        self._dht: KadDHT | None = None
        self.rounds = 0
        self.found: set[str] = set()

    @property
    def routing_table_size(self) -> int:
        return self._dht.get_routing_table_size() if self._dht is not None else 0

    async def run(self, host: Any, *, task_status: Any = trio.TASK_STATUS_IGNORED) -> None:
        """Run the DHT for ``host`` (once it listens) and the lookups, until cancelled."""
        task_status.started()
        dht = KadDHT(host, DHTMode.SERVER, protocol_prefix=self._prefix,
                     enable_random_walk=False)
        try:
            async with background_trio_service(dht):
                self._dht = dht
                await self._lookups(dht)
        except Exception as exc:
            # Broad on purpose: the DHT runs under the library's service manager, which
            # raises whatever stopped it. It is an optional discovery aid: losing it must not
            # stop the agent, which keeps its static peers and mDNS. The traceback is logged.
            self._log.error("net.dht_failed", error=f"{type(exc).__name__}: {exc}"[:300],
                            exc_info=exc, detail="discovery beyond this network stopped; "
                                                 "static peers and mDNS still work")
        finally:
            self._dht = None

    async def _lookups(self, dht: KadDHT) -> None:
        delays = iter(FIRST_ROUNDS)
        while True:
            await trio.sleep(next(delays, self._interval))
            if not self._connected():
                continue  # nobody to ask yet: the peer keeper is still dialling
            with trio.move_on_after(QUERY_TIMEOUT) as slow:
                await self._round(dht)
            if slow.cancelled_caught:
                self._log.info("net.dht_round_slow", seconds=QUERY_TIMEOUT)

    async def _round(self, dht: KadDHT) -> None:
        self.rounds += 1
        await dht.provide(self.key)
        for info in await dht.find_providers(self.key):
            peer = info.peer_id.to_base58()
            if peer == self._peer_id:
                continue
            addrs = usable_addrs([Multiaddr(str(a).split("/p2p/")[0]) for a in info.addrs])
            if not addrs:
                continue
            if peer not in self.found:
                self.found.add(peer)
                self._log.info("net.dht_found", peer=peer, addrs=[str(a) for a in addrs])
            self._on_found(peer, addrs)
