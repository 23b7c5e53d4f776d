"""Membership in one agent (the I/O around agent.core.membership): what the runtime publishes
with its credential, what it says at start, a credential renewed or replaced while it runs,
the web page without the submitter role, and the credential tools on the command line."""

from __future__ import annotations

import subprocess
import sys
import time

import orjson
import pytest
import trio

from agent.app import RESTART, _watch_credential, announce_membership
from agent.core.events import Goal, Hello, Revoke, sign_event
from agent.core.hlc import Timestamp
from agent.core.membership import Membership, issue_credential
from agent.credentials import load_credential, write_new
from agent.store import MemoryLog
from agent.drivers.real.runtime import NotMember, Runtime, load_identity
from agent.settings import load_settings
from builders import AUTHORITY, ident, params

pytestmark = pytest.mark.timeout(60)


def now_ms() -> int:
    return time.time_ns() // 1_000_000


class Lines:
    def __init__(self) -> None:
        self.items: list[dict] = []

    def __getattr__(self, level: str):
        return lambda event, **kw: self.items.append({"level": level, "event": event, **kw})

    def bind(self, **kw):
        return self

    def events(self) -> list[str]:
        return [x["event"] for x in self.items]


def cred_for(peer: str, roles, days: float = 1.0, swarm: str = "default"):
    now = now_ms()
    return issue_credential(AUTHORITY, peer, roles, swarm, now - 60_000, now + int(days * 86_400_000))


def runtime(tmp_path, roles=("scorer",), credential=True, **kw) -> Runtime:
    s = load_settings(data_dir=tmp_path, mdns=False, authority=AUTHORITY.peer_id, **kw)
    ident_ = load_identity(tmp_path)
    cred = cred_for(ident_.peer_id, roles) if credential else None
    rt = Runtime(s, "scorer", identity=ident_, log=MemoryLog(),
                 membership=Membership(AUTHORITY.peer_id, "default"), credential=cred)
    rt.log = Lines()
    return rt


async def test_every_hello_carries_the_credential_and_a_new_one_goes_before_the_next_event(tmp_path):
    rt = runtime(tmp_path, roles=("scorer", "submitter"))
    g = await rt.publish(Goal(title="Plan a trip", params=params(electorate=[rt.me], quorum=1)))
    hellos = [e for e in rt.plan.events.values() if e.type == "hello"]
    assert len(hellos) == 1 and hellos[0].body.credential == rt.credential  # published first
    assert hellos[0].hlc < g.hlc and g.id in rt.plan
    first, renewed = rt.credential, cred_for(rt.me, ("scorer", "submitter"), days=30)
    rt.set_credential(renewed)
    await rt.publish(Goal(title="Plan another trip", params=params(electorate=[rt.me], quorum=1)))
    hellos = [e for e in rt.plan.events.values() if e.type == "hello"]
    assert len(hellos) == 2 and {h.body.credential for h in hellos} == {first, renewed}


async def test_without_a_usable_credential_an_agent_may_listen_but_not_publish(tmp_path):
    rt = runtime(tmp_path, credential=False)
    assert rt.member_problem() == "no credential"
    with pytest.raises(NotMember):
        await rt.publish(Hello(role="scorer"))
    rt2 = runtime(tmp_path / "b")
    await rt2.publish(Hello(role="scorer"))
    assert rt2.member_problem() is None
    rev = sign_event(AUTHORITY, Timestamp(now_ms(), 0), Revoke(peer=rt2.me, reason="test"))
    assert await rt2.ingest(rev.raw, "peer")
    assert rt2.member_problem() == "the authority revoked this agent"
    with pytest.raises(NotMember):
        await rt2.publish(Hello(role="scorer"))


def test_the_agent_says_at_start_what_its_membership_is(tmp_path):
    rt = runtime(tmp_path)
    announce_membership(rt, rt.settings)
    assert rt.log.events() == ["membership.member"]
    key_only = runtime(tmp_path / "k")
    key_only.settings = load_settings(data_dir=tmp_path / "k", mdns=False, key="ab" * 32, authority=None)
    announce_membership(key_only, key_only.settings)
    [line] = key_only.log.items
    assert line["event"] == "membership.key_only" and "every role" in line["detail"]
    none = runtime(tmp_path / "n", credential=False)
    announce_membership(none, none.settings)
    assert none.log.events() == ["membership.not_member"]


async def test_a_renewed_credential_file_is_taken_and_a_new_key_for_the_slot_restarts(tmp_path):
    rt = runtime(tmp_path, credential_wait=0.05)
    path = tmp_path / "credential.json"
    write_new(path, orjson.dumps(rt.credential.model_dump(mode="json")))
    from agent.credentials import MemberFiles

    key = tmp_path / "slot.key"
    write_new(key, rt.identity.seed)
    rt.member_files = MemberFiles(key, path)
    await rt.publish(Hello(role="scorer"))
    restart: list[int] = []
    async with trio.open_nursery() as nursery:
        nursery.start_soon(_watch_credential, rt, rt.settings, restart, nursery.cancel_scope)
        await trio.sleep(0.2)
        renewed = cred_for(rt.me, ("scorer",), days=30)
        write_new(path, orjson.dumps(renewed.model_dump(mode="json")), overwrite=True)
        with trio.move_on_after(5):
            while rt.credential != renewed:
                await trio.sleep(0.05)
        assert rt.credential == renewed, rt.log.items
        with trio.fail_after(5):
            while not any(e.type == "hello" and e.body.credential == renewed for e in rt.plan.events.values()):
                await trio.sleep(0.05)
        # the slot got a new key (the old one was revoked): stop, to start again as the new peer
        write_new(key, ident("a new key").seed, overwrite=True)
        write_new(path, orjson.dumps(cred_for(ident("a new key").peer_id, ("scorer",)).model_dump(mode="json")),
                  overwrite=True)
        with trio.fail_after(5):
            while not restart:
                await trio.sleep(0.05)
    assert restart == [RESTART] and "membership.credential_renewed" in rt.log.events()
    assert "membership.new_identity" in rt.log.events()


def test_credential_tools_on_the_command_line(tmp_path):
    def agent(*args, env=None):
        return subprocess.run([sys.executable, "-m", "agent", *args], capture_output=True, text=True,
                              timeout=60, env=env)

    r = agent("keygen", "--authority", "--out", str(tmp_path / "authority.key"))
    assert r.returncode == 0
    authority = r.stdout.strip()
    assert agent("keygen", "--authority", "--out", str(tmp_path / "authority.key")).returncode == 1  # never overwrites
    r = agent("keygen", "--identity", "--out", str(tmp_path / "key.ed25519"))
    peer = r.stdout.strip()
    r = agent("credential", "issue", "--authority-key", str(tmp_path / "authority.key"), "--key",
              str(tmp_path / "key.ed25519"), "--role", "scorer", "--role", "submitter", "--swarm", "s1",
              "--days", "2", "--out", str(tmp_path / "credential.json"))
    assert r.returncode == 0, r.stderr
    cred = load_credential(tmp_path / "credential.json")
    assert cred.peer == peer and cred.roles == ("scorer", "submitter") and cred.authority == authority
    import os

    env = {**os.environ, "SWARM_AUTHORITY": authority, "SWARM_SWARM": "s1"}
    r = agent("credential", "show", str(tmp_path / "credential.json"), env=env)
    assert r.returncode == 0 and "valid for this swarm" in r.stdout
    r = agent("credential", "show", str(tmp_path / "credential.json"), env={**env, "SWARM_SWARM": "s2"})
    assert r.returncode == 1 and "NOT valid here" in r.stdout
    r = agent("revoke", peer, "--authority-key", str(tmp_path / "authority.key"), "--reason", "left")
    from agent.core.events import decode_event

    ev = decode_event(r.stdout.strip())
    assert ev.type == "revoke" and ev.body.peer == peer and ev.author == authority
    assert agent("credential", "issue", "--authority-key", str(tmp_path / "authority.key"), "--peer", peer,
                 "--role", "king").returncode == 2


@pytest.mark.slow
@pytest.mark.timeout(240)
async def test_a_revocation_signed_elsewhere_is_published_and_stored(tmp_path):
    """`agent revoke` signs offline; `agent publish` joins the swarm as a temporary peer and
    waits until a peer stored it (the podman cluster's `make revoke` path). With nobody to
    reach it says so in one line."""
    import os

    from swarm_harness import LocalSwarm, cli, wait_ready

    sw = LocalSwarm(tmp_path / "swarm", decomposers=1, scorers=1, executors=1, observers=0)
    key = tmp_path / "authority.key"
    write_new(key, sw.cfg.authority_seed)
    victim = sw.child("executor-1")
    r = subprocess.run([sys.executable, "-m", "agent", "revoke", victim.peer_id, "--authority-key", str(key),
                        "--reason", "left"], capture_output=True, timeout=60)
    assert r.returncode == 0, r.stderr.decode()[-1000:]
    (tmp_path / "revoke.jsonl").write_bytes(r.stdout)
    from agent.core.events import decode_event

    ev = decode_event(r.stdout.strip())
    with sw:
        rt = sw.driver()
        async with trio.open_nursery() as nursery:
            await nursery.start(rt.run)
            await wait_ready(rt, sw.children, 90)
            p = await cli("publish", str(tmp_path / "revoke.jsonl"), "--timeout", "30",
                          env=sw.env([sw.child("scorer-1")], exactly=True))
            assert p.returncode == 0, p.stderr.decode()[-2000:]
            assert p.stdout.decode().split() == [ev.id]
            with trio.fail_after(30):
                while ev.id not in rt.plan:  # gossiped on to everyone
                    await trio.sleep(0.2)
            assert rt.plan.members.revoked_at(victim.peer_id, (2**62, 0))
            nursery.cancel_scope.cancel()
    env = {**sw.env([sw.child("scorer-1")], exactly=True), "SWARM_LOG_LEVEL": "warning"}
    p = await cli("publish", str(tmp_path / "revoke.jsonl"), "--timeout", "5", env=env)
    err = p.stderr.decode()
    assert p.returncode == 1 and "no peer connected" in err and "Traceback" not in err, err[-1000:]
    assert os.path.exists(tmp_path / "revoke.jsonl")
