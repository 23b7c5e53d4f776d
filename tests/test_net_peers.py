"""PeerKeeper without a network: connection notifications, foreign peers, failure reports."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import trio

from agent.net.peers import PeerKeeper, _ConnNotifee
from agent.net.wire import ConnErrorKind
from support.net_runner import identity_for, wait_for

B = identity_for("b").peer_id


class FakeHost:
    """Just enough of a libp2p host: the swarm's connection table and a notifee slot."""

    def __init__(self) -> None:
        self.conns: dict[Any, list[Any]] = {}
        self.notifee: _ConnNotifee | None = None

    def get_network(self) -> Any:
        return SimpleNamespace(connections=self.conns, register_notifee=self._register)

    def _register(self, notifee: _ConnNotifee) -> None:
        self.notifee = notifee

    def conn(self, peer: str) -> Any:
        return SimpleNamespace(muxed_conn=SimpleNamespace(peer_id=_Pid(peer)))


class _Pid:
    def __init__(self, b58: str) -> None:
        self.b58 = b58

    def to_base58(self) -> str:
        return self.b58

    def __hash__(self) -> int:
        return hash(self.b58)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, _Pid) and other.b58 == self.b58


async def test_a_quick_reconnect_is_announced_so_the_new_process_is_synced():
    """Regression (the flaky test_restart_with_same_key_reconnects_and_resumes): the peer
    restarts and its new connection is up before we process the old one's "down". The new
    connection must still be announced (it triggers the sync of the restarted peer's log)."""
    announced: list[str] = []
    counts: list[int] = []
    keeper = PeerKeeper(peer_id="me", on_connected=announced.append, on_count=counts.append)
    host = FakeHost()
    keeper.prepare(host, lambda: [])
    async with trio.open_nursery() as nursery:
        await nursery.start(keeper.run, host)
        old, new = host.conn(B), host.conn(B)
        host.conns[_Pid(B)] = [old]
        await host.notifee.connected(None, old)
        await wait_for(lambda: announced == [B], 2, "the first connection")
        # the peer restarts: the new connection replaces the old one before its "down"
        host.conns[_Pid(B)] = [new]
        await host.notifee.connected(None, new)
        await host.notifee.disconnected(None, old)
        await wait_for(lambda: announced == [B, B], 2, "the second connection announced")
        assert keeper.connected == [B] and counts == [1]
        # the peer goes away for good
        host.conns[_Pid(B)] = []
        await host.notifee.disconnected(None, new)
        await wait_for(lambda: counts == [1, 0], 2, "the disconnect")
        assert keeper.connected == []
        nursery.cancel_scope.cancel()


async def test_foreign_peers_are_not_counted_and_failures_are_counted():
    counts: list[int] = []
    keeper = PeerKeeper(peer_id="me", on_count=counts.append)
    host = FakeHost()
    keeper.prepare(host, lambda: [])
    async with trio.open_nursery() as nursery:
        await nursery.start(keeper.run, host)
        c = host.conn(B)
        host.conns[_Pid(B)] = [c]
        await host.notifee.connected(None, c)
        await wait_for(lambda: counts == [1], 2, "connected")
        keeper.mark_foreign(B)
        assert keeper.connected == [] and counts == [1, 0]
        for _ in range(3):
            keeper.connection_failed(ConnErrorKind.DECRYPT, B, ValueError("x"))
        keeper.connection_failed(ConnErrorKind.WRITE_STALLED, B, None)
        stats = keeper.connection_statistics()
        assert stats.errors == 4 and stats.by_kind == {"decrypt": 3, "write_stalled": 1}
        nursery.cancel_scope.cancel()
