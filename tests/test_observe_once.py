"""`python -m agent observe --once` says how many peers answered, and fails loudly when none
did (it used to print an empty tree and exit 0 when sync was starved)."""

from __future__ import annotations

import os

import orjson
import pytest

from agent.net.config import SyncLimits
from builders import goal, ident
from support.net_runner import Node, running, wait_for
from swarm_harness import cli
from test_net_resilience import _dial, stranger
from test_net_sync_server import _open_idle

pytestmark = pytest.mark.timeout(120)


def _env(node: Node) -> dict[str, str]:
    # the node is an open swarm with no authority, and so is the tool: said outright, since the
    # tool runs in the checkout and reads its .env, where `make up` wrote the Compose swarm's
    # SWARM_KEY and SWARM_AUTHORITY (read from there, the handshake was refused)
    return {**os.environ, "SWARM_KEY": "", "SWARM_AUTHORITY": "",
            "SWARM_SWARM": node.swarm, "SWARM_MDNS": "false",
            "SWARM_LISTEN_HOST": "127.0.0.1", "SWARM_PEERS": node.addr,
            "SWARM_LOG_LEVEL": "warning", "SWARM_LOG_FORMAT": "json"}


async def test_observe_once_reports_peers_that_answered(tmp_path):
    b = Node("b", tmp_path, sync_interval=3600)
    g = goal(ident("alice"))
    b.store.append(g.raw)
    async with running(b.net):
        p = await cli("observe", "--once", "--json", "--timeout", "20", env=_env(b))
    assert p.returncode == 0, p.stderr.decode()[-2000:]
    assert "synced from 1 peer" in p.stderr.decode()
    assert [x["id"] for x in orjson.loads(p.stdout)["goals"]] == [g.id]


async def test_observe_once_fails_when_no_peer_answers(tmp_path):
    """The only peer's sync server is taken by a slowloris: no answer is not an empty plan."""
    b = Node("b", tmp_path, sync_interval=3600,
             sync_limits=SyncLimits(per_peer=1, total=1, reserved=0, idle_timeout=60))
    b.store.append(goal(ident("alice")).raw)
    async with running(b.net):
        async with stranger() as bad:
            await _dial(bad, b)
            await _open_idle(bad, b, 1)
            await wait_for(lambda: b.net.stats.serve.active == 1, 5, "the slot taken")
            p = await cli("observe", "--once", "--json", "--timeout", "20", env=_env(b))
    err = p.stderr.decode()
    assert p.returncode == 1, err[-2000:]
    assert "no peer answered a sync request in 10 s: the tree may be incomplete" in err
    assert "busy" in err and p.stdout == b""
