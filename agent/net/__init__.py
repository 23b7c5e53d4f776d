"""Network layer: libp2p host + gossipsub, sync protocol, discovery (the event store it
serves is agent.store).

Import cost: ``.config``, ``.swarmkey``, ``.errlog`` and ``.stats`` are
light; ``Network`` (``agent.net.host``) imports py-libp2p (about 1.2 s), so it is loaded
lazily here.
"""

from .config import NetConfig, SyncLimits

__all__ = ["IngestFn", "ListenError", "NetConfig", "Network", "PeerSync",
           "SyncLimits", "SyncReport", "gossip_topic", "sync_protocol_id"]

_LAZY = {"Network", "IngestFn", "ListenError", "PeerSync", "SyncReport", "gossip_topic",
         "make_gossipsub"}


def __getattr__(name: str):  # lazy: keep `import agent.net` cheap for config-only users
    if name in _LAZY:
        from . import host

        return getattr(host, name)
    if name == "sync_protocol_id":
        from .sync import sync_protocol_id

        return sync_protocol_id
    raise AttributeError(name)
