"""The DHT rendezvous (SWARM_DHT): members that only know one bootstrap peer find each other
and stay connected when the bootstrap peer leaves. (The same across two routed networks with
real processes: tests/test_swarm_two_networks.py.)"""

from __future__ import annotations

import os

import pytest
import trio

from agent.net.rendezvous import rendezvous_key
from builders import hello, ident
from support.net_runner import Node, running, wait_for

pytestmark = pytest.mark.timeout(90)


def test_rendezvous_key_separates_swarms():
    assert rendezvous_key("a", None) != rendezvous_key("b", None)
    assert rendezvous_key("a", "k1") != rendezvous_key("a", "k2") != rendezvous_key("a", None)
    assert rendezvous_key("a", None).startswith("1220") and len(rendezvous_key("a", None)) == 68


async def test_members_find_each_other_through_the_dht(tmp_path):
    key = os.urandom(32)
    kw = dict(dht=True, dht_interval=1.0, swarm_key=key, sync_interval=3600)
    boot = Node("boot", tmp_path, **kw)
    boot_scope = trio.CancelScope()

    async def run_boot(task_status=trio.TASK_STATUS_IGNORED) -> None:
        with boot_scope:
            await boot.net.run(task_status=task_status)

    async with trio.open_nursery() as nursery:
        await nursery.start(run_boot)
        a = Node("a", tmp_path, peers=[boot.addr], **kw)
        c = Node("c", tmp_path, peers=[boot.addr], **kw)
        async with running(a.net), running(c.net):
            took = await wait_for(lambda: c.net.peer_id in a.net.connected, 30,
                                  "A and C to meet through the DHT")
            print(f"\nA met C {took:.1f}s after starting (only the bootstrap peer configured)")
            # (without the DHT they never meet: measured, nothing in 25 s; the DHT's own
            # provide/lookup traffic connects them, and find_providers feeds the book)
            boot_scope.cancel()  # the bootstrap peer leaves
            await wait_for(lambda: boot.net.peer_id not in a.net.connected, 10, "boot gone")
            ev = hello(ident("x"), "scorer", wall=1)
            await a.publish(ev)
            await wait_for(lambda: ev.id in c.rt.ids, 10, "gossip A -> C without boot")
            assert c.rt.sources[ev.id] == a.net.peer_id
