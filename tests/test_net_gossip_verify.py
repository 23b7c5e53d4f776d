"""A gossiped event's signature is verified once: by the topic validator, whose decoded Event
is what reaches the runtime's intake (agent.net.gossip)."""

from __future__ import annotations

from types import SimpleNamespace

import trio
from libp2p.peer.id import ID

from agent.core import events
from agent.core.events import Event
from agent.net.door import IngestDoor
from agent.net.gossip import GossipChannel
from builders import hello, ident


def test_the_validator_s_event_is_delivered_and_not_verified_again(monkeypatch):
    got: list[object] = []

    async def ingest(item, source):
        got.append(item)
        return True

    me, peer = ident("me"), ident("peer")
    ch = GossipChannel(peer_id=me.peer_id, topic="t", intake=IngestDoor(ingest, None))
    ev = hello(peer, "scorer", wall=1)
    msg = SimpleNamespace(data=ev.raw, from_id=ID.from_base58(peer.peer_id).to_bytes())
    checks = []
    real = events.verify
    monkeypatch.setattr(events, "verify", lambda *a: checks.append(1) or real(*a))

    async def main() -> None:
        send, recv = trio.open_memory_channel(10)
        ch._inbox = send
        assert ch._validate(ID.from_base58(peer.peer_id), msg)
        ch._take(msg)
        await send.aclose()
        await ch._deliver(recv)

    trio.run(main)
    assert len(checks) == 1
    assert len(got) == 1 and isinstance(got[0], Event) and got[0].id == ev.id
    assert not ch._verified  # taken: nothing kept


def test_a_message_never_taken_is_not_kept_for_ever():
    from agent.net import gossip

    ch = GossipChannel(peer_id=ident("me").peer_id, topic="t", intake=IngestDoor(lambda r, s: None, None))
    peer = ident("peer")
    fwd = ID.from_base58(peer.peer_id)
    for i in range(gossip.VERIFIED_KEEP + 5):
        ev = hello(peer, "scorer", wall=i + 1)
        assert ch._validate(fwd, SimpleNamespace(data=ev.raw, from_id=fwd.to_bytes()))
    assert len(ch._verified) == gossip.VERIFIED_KEEP
