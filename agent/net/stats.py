"""Typed statistics of the network layer, in the manner of trio's ``statistics()``.

Each part owns one mutable counters object and hands out copies (``snapshot()``); the
facade's ``Network.stats`` bundles them. Prometheus counters are incremented where the
things happen; these objects are for tests, diagnostics and reports.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass, field
from typing import Self


class _Snapshot:
    def snapshot(self) -> Self:
        return copy.deepcopy(self)


@dataclass
class GossipStats(_Snapshot):
    published: int = 0         # events we gossiped
    publish_offline: int = 0   # publish() while not running (the event is stored; sync delivers)
    publish_stalls: int = 0    # times a peer's outbound queue did not drain in time
    received: int = 0          # messages from others off the subscription
    new: int = 0               # of which the runtime accepted as new
    own: int = 0               # our own messages coming back (not re-ingested)
    rejected: int = 0          # refused by our topic validator (never forwarded)
    dropped: dict[str, int] = field(default_factory=dict)  # below the validator: oversize, ...
    inbox_overflow: int = 0    # dropped because the runtime fell 10,000 messages behind


@dataclass
class SyncClientStats(_Snapshot):
    requests: int = 0   # page or "has" requests sent
    answered: int = 0   # ... that got a well-formed answer
    failed: int = 0     # ... that did not (dead peer, timeout, refusal, malformed answer)
    refused: int = 0    # ... of which the server refused with an error reply
    pulled: int = 0     # events received through sync
    new: int = 0        # ... that were new to us
    ids: int = 0        # event ids received (ids-before-bodies sync)
    skipped: int = 0    # ... of events we already knew: their bodies were not asked for
    missing: int = 0    # events a peer listed but did not hold when asked
    lied: int = 0       # bodies whose id was not the one asked (not taken)
    rescans: int = 0    # pulls that read a peer's ids from the start again (RESCAN_EVERY)
    bytes_in: int = 0   # encoded responses received
    bytes_out: int = 0  # encoded requests sent


@dataclass
class SyncServerStats(_Snapshot):
    served: int = 0       # requests answered
    active: int = 0       # streams being served right now
    refused: dict[str, int] = field(default_factory=dict)  # bad_request, busy, idle_timeout


@dataclass
class PeerStats(_Snapshot):
    dials: int = 0
    dial_failures: int = 0
    connects: int = 0
    disconnects: int = 0
    discovered: int = 0  # mDNS sightings


@dataclass
class ConnectionStats(_Snapshot):
    errors: int = 0  # connections we closed because of an error on them
    by_kind: dict[str, int] = field(default_factory=dict)


@dataclass
class IntakeStats(_Snapshot):
    errors: int = 0  # events the runtime could not take (it raised); the source retries


@dataclass(frozen=True)
class NetworkStats:
    """One consistent-enough picture of every part (each field is a copy)."""

    gossip: GossipStats
    sync: SyncClientStats
    serve: SyncServerStats
    peers: PeerStats
    connections: ConnectionStats
    intake: IntakeStats


def bump(counts: dict[str, int], key: str, n: int = 1) -> None:
    counts[key] = counts.get(key, 0) + n
