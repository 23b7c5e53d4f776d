"""Network layer: event store, libp2p host + gossipsub, sync protocol, discovery.

Import cost: ``agent.net.store`` is light; ``Network`` imports py-libp2p lazily (about 1.2 s)
only when it runs.
"""

from .store import EventStore, StoreError

__all__ = ["EventStore", "IngestFn", "ListenError", "Network", "StoreError", "gossip_topic", "sync_protocol_id"]


def __getattr__(name: str):  # lazy: keep `import agent.net` cheap for store-only users
    if name in ("Network", "IngestFn", "ListenError", "gossip_topic", "make_gossipsub"):
        from . import host

        return getattr(host, name)
    if name == "sync_protocol_id":
        from .sync import sync_protocol_id

        return sync_protocol_id
    raise AttributeError(name)
