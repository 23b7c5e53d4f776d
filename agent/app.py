"""Process-level glue: run one role until SIGTERM/SIGINT, plus the short-lived tools
(submit, observe --once) that join the swarm as a temporary peer."""

from __future__ import annotations

import hashlib
import signal
import tempfile
import time
from pathlib import Path
from typing import Any, Awaitable, Callable

import trio

from agent import metrics
from agent.behaviour import make as make_behaviour, strategy_for
from agent.core.backoff import Backoff
from agent.behaviour.base import Behaviour
from agent.core.events import Hello
from agent.drivers.real.driver import Driver, declare_llm_series
from agent.goals import SubmitError, choose_electorate, make_goal
from agent.supervise import _sleep_backoff, supervise
from agent.llm.base import LLMError, LLMUnavailable
from agent.drivers.real.runtime import NotMember, Runtime, open_runtime, wall_ms
from agent.settings import Settings

RESTART = 75  # exit status: this slot has a new identity; start again (EX_TEMPFAIL)

async def _until_signal(cancel: trio.CancelScope, log: Any) -> None:
    with trio.open_signal_receiver(signal.SIGTERM, signal.SIGINT) as signals:
        async for sig in signals:
            log.info("shutting down", signal=signal.Signals(sig).name)
            cancel.cancel()
            return


async def _llm_with_retry(settings: Settings, log: Any):
    from agent.llm import make_llm

    backoff = Backoff(2_000, 60_000)
    while True:
        try:
            llm = await make_llm(settings)
            probe = getattr(llm, "probe", None)  # a server backend: is it there, with the model?
            if probe is not None:
                usable, why = await probe()
                if not usable:
                    await llm.aclose()
                    raise LLMUnavailable(why)
            log.info("LLM ready", backend=llm.backend, model=str(llm.model))
            return llm
        except LLMError as exc:
            await _sleep_backoff(backoff, log, exc, "LLM unavailable")


def behaviour_for(settings: Settings, rt: Runtime) -> Behaviour:
    role = rt.role
    seed = settings.seed
    if seed is None:
        seed = int.from_bytes(hashlib.sha256(rt.me.encode() + str(wall_ms()).encode()).digest()[:4], "big")
    strategy = settings.strategy or strategy_for(seed)
    return make_behaviour(role, rt.me, settings.timing(), seed, strategy=strategy)


# ---------------------------------------------------------------------- membership
def announce_membership(rt: Runtime, settings: Settings) -> None:
    """Say at start what this agent's membership is, and what the swarm's limits are."""
    if settings.authority is None:
        if settings.swarm_psk() is not None:
            rt.log.warning(
                "membership.key_only", swarm=settings.swarm,
                detail="a swarm key without an authority: anyone holding SWARM_KEY can make "
                       "new identities and act in every role (submit, propose, vote, claim, "
                       "report). Set SWARM_AUTHORITY and give each agent a credential "
                       "(`python -m agent keygen --authority`; docs/network.md)")
        return
    why = rt.member_problem()
    c = rt.credential
    if why is None and c is not None:
        rt.log.info("membership.member", authority=settings.authority, roles=list(c.roles),
                    expires=time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(c.expires / 1000)))
    else:
        files = rt.member_files
        rt.log.warning("membership.not_member", authority=settings.authority, why=why,
                       credential=str(getattr(files, "credential", None)),
                       detail="this agent can listen; its events would be refused by every member")


async def _open_when_issued(settings: Settings, role: str, log: Any) -> Runtime:
    """open_runtime, once this agent's slot has a key and a credential (a credentials
    directory that lacks them: a replica scaled beyond what `make up` issued waits)."""
    from agent.credentials import member_files

    if settings.credentials_dir is not None and settings.authority and (role != "observer" or settings.web_port):
        files = member_files(settings, settings.data_dir)
        said = False
        while not (files.key.exists() and files.credential.exists()):
            if not said:
                log.warning("membership.waiting_for_credential", slot=str(files.key.parent),
                            detail="no key and credential for this slot yet: `make credentials` "
                                   "(or `make up`) with the new scale issues them",
                            retry_s=settings.credential_wait)
                said = True
            await trio.sleep(settings.credential_wait)
        if said:
            log.info("membership.credential_found", slot=str(files.key.parent))
    return open_runtime(settings, role)


async def _watch_credential(rt: Runtime, settings: Settings, restart: list[int],
                            cancel: trio.CancelScope) -> None:
    """Take a renewed credential file without a restart (the next event goes with a hello
    carrying it); a new key for this slot means a new identity: stop, to start again."""
    from agent.credentials import CredentialError, check_own, load_credential, load_seed

    files = rt.member_files
    if rt.membership is None or files is None or files.credential is None:
        return
    last = None
    warned_expiry = 0.0
    while True:
        try:
            st = files.credential.stat()
            seen = (st.st_mtime_ns, st.st_size)
        except OSError:
            seen = None
        if seen is not None and seen != last:
            if last is not None:
                try:
                    new = load_credential(files.credential)
                    if files.key is not None and load_seed(files.key).peer_id != rt.me:
                        rt.log.warning("membership.new_identity", detail="this slot was given a new "
                                       "key (the old one was revoked?): stopping to start again")
                        restart.append(RESTART)
                        cancel.cancel()
                        return
                    why = check_own(new, rt.identity, rt.membership, rt.now_ms())
                    if why is not None:
                        rt.log.warning("membership.credential_not_usable", why=why)
                    elif new != rt.credential:
                        rt.set_credential(new)
                        rt.log.info("membership.credential_renewed", roles=list(new.roles),
                                    expires=time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(new.expires / 1000)))
                        if rt._announced is not None:
                            await rt.publish(Hello(role=rt.hello_role(), name=settings.name or ""))
                except (CredentialError, NotMember) as exc:
                    rt.log.warning("membership.credential_not_usable", why=str(exc))
            last = seen
        c = rt.credential
        if c is not None and c.expires - rt.now_ms() < 86_400_000 and time.monotonic() - warned_expiry > 6 * 3600:
            warned_expiry = time.monotonic()
            rt.log.warning("membership.credential_expiring", expires_in_s=(c.expires - rt.now_ms()) // 1000)
        await trio.sleep(settings.credential_wait)


async def _while_member(rt: Runtime, settings: Settings, act: Callable[[], Awaitable[None]]) -> None:
    """Run ``act`` while this agent may publish; stop it when it may not (revoked, expired)
    and start it again once it may (a renewed credential)."""
    check = min(5.0, settings.credential_wait)
    while True:
        why = rt.member_problem()
        if why is not None:
            rt.log.warning("membership.not_acting", why=why, retry_s=check)
            while rt.member_problem() is not None:
                await trio.sleep(check)
            rt.log.info("membership.acting_again")
        async with trio.open_nursery() as nursery:
            async def watch() -> None:
                while rt.member_problem() is None:
                    await trio.sleep(check)
                nursery.cancel_scope.cancel()

            nursery.start_soon(watch)
            await act()
            return


async def _serve_metrics(settings: Settings, log: Any) -> None:
    """/metrics on its port; a port someone else holds is one line and a retry with backoff,
    never the agent's exit (the agent plans without its metrics meanwhile)."""
    backoff = Backoff(2.0, 60.0)
    while True:
        try:
            metrics.start_metrics_server(settings.metrics_port, settings.metrics_host)
        except OSError as exc:
            delay = backoff.failed(trio.current_time())
            log.error("metrics.unavailable", port=settings.metrics_port, error=str(exc), retry_s=round(delay, 1))
            await trio.sleep(delay)
            continue
        if backoff.failures:
            log.info("metrics.up", port=settings.metrics_port, after_failures=backoff.failures)
        return


async def serve(settings: Settings, role: str) -> int:
    log = _boot_log(role)
    rt = await _open_when_issued(settings, role, log)
    metrics.set_agent_info(role, settings.swarm)
    restart: list[int] = []
    async with trio.open_nursery() as nursery:
        nursery.start_soon(_serve_metrics, settings, rt.log)
        nursery.start_soon(_until_signal, nursery.cancel_scope, rt.log)
        await nursery.start(rt.run)
        rt.log.info("agent up", addrs=rt.net.listen_addrs, events=len(rt.plan))
        announce_membership(rt, settings)
        nursery.start_soon(_watch_credential, rt, settings, restart, nursery.cancel_scope)
        if role == "observer":
            from agent.observe import show

            if settings.web_port:
                from agent.web import serve_web

                await nursery.start(serve_web, settings, rt)
            await show(rt)
            return restart[0] if restart else 0  # (the nursery runs on until a signal)
        llm = await _llm_with_retry(settings, rt.log)
        declare_llm_series(role, llm.backend)

        async def act() -> None:
            await rt.publish(Hello(role=role, name=settings.name or ""))
            await supervise(lambda: Driver(behaviour_for(settings, rt), rt, llm).run(), rt)

        try:
            await _while_member(rt, settings, act)
        finally:
            with trio.CancelScope(shield=True):
                await llm.aclose()
        nursery.cancel_scope.cancel()
    return restart[0] if restart else 0


def _boot_log(role: str) -> Any:
    import structlog

    return structlog.get_logger().bind(role=role)


def _stop_signal_receiver() -> Any:
    """SIGINT, SIGTERM and SIGHUP as trio messages (procs.STOP_SIGNALS); outside the main
    thread, where no handler can be set, nothing (the signals keep their handlers)."""
    import contextlib
    import threading

    from agent.procs import STOP_SIGNALS

    if threading.current_thread() is not threading.main_thread():
        return contextlib.nullcontext(None)
    return trio.open_signal_receiver(*STOP_SIGNALS)


async def _stop_on_signal(signals: Any, cancel: trio.CancelScope, got: list[int]) -> None:
    async for sig in signals:
        got.append(sig)
        cancel.cancel()
        return


async def _with_temp_peer(settings: Settings, role: str, body: Callable[[Runtime], Awaitable[Any]]) -> Any:
    """Run ``body`` as a temporary peer whose key and log live in a temporary directory. A
    stopping signal (agent.procs.STOP_SIGNALS) cancels it: the peer leaves and the directory is
    removed, then ``Stopped``. The signals are taken before the directory exists and given
    back after it is gone, so no signal can leave it behind."""
    from agent.procs import Stopped

    settings = settings.model_copy(update={"listen_port": 0})  # never clash with a local agent
    got: list[int] = []
    with _stop_signal_receiver() as signals, tempfile.TemporaryDirectory(prefix=f"swarm-{role}-") as tmp:
        rt = open_runtime(settings, role, data_dir=Path(tmp))
        failure: SubmitError | None = None
        async with trio.open_nursery() as nursery:
            if signals is not None:
                nursery.start_soon(_stop_on_signal, signals, nursery.cancel_scope, got)
            await nursery.start(rt.run)
            try:
                result = await body(rt)
            except SubmitError as exc:  # raised here it would leave wrapped in an ExceptionGroup
                failure = exc
            finally:
                nursery.cancel_scope.cancel()
    if got:  # (before failure: the body was cut short, and result was never set)
        raise Stopped(got[0])
    if failure is not None:
        raise failure
    return result


HANDSHAKE_FAILURES = 2  # dials in a row that reach a peer's port but never finish the handshake


async def _tcp_open(addr: Any, timeout: float = 2.0) -> bool:
    """Does a plain TCP connection to this /ip4/.../tcp/... address open?"""
    try:
        host, port = addr.value_for_protocol("ip4"), int(addr.value_for_protocol("tcp"))
    except (ValueError, TypeError, LookupError):  # not an ip4/tcp address: no opinion
        return False
    with trio.move_on_after(timeout):
        try:
            stream = await trio.open_tcp_stream(host, port)
        except OSError:
            return False
        await stream.aclose()
        return True
    return False


async def _why_no_peer(rt: Runtime) -> tuple[str, bool]:
    """Why no peer connected, in words, and whether it is a lasting refusal (every known peer
    took our TCP connection but not our handshake: a swarm key, or none, that differs)."""
    failures = rt.net.dial_failures()
    if not failures:
        return "none found (no SWARM_PEERS reachable, nobody on mDNS)", False
    refused = []
    for f in failures:
        if f.error.startswith("TooSlowError") and any([await _tcp_open(a) for a in f.addrs[:2]]):
            refused.append(f)
    if refused and len(refused) == len(failures):
        lasting = all(f.failures >= HANDSHAKE_FAILURES for f in refused)
        return (f"no peer accepted the key: {len(refused)} peer{'s' if len(refused) > 1 else ''} "
                f"took the connection but refused the handshake (a different SWARM_KEY, or none, "
                f"on one side; e.g. {refused[0].peer[-8:]} at {refused[0].addrs[0]})"), lasting
    f = failures[0]
    return (f"could not connect to {len(failures)} known peer{'s' if len(failures) > 1 else ''} "
            f"(e.g. {f.peer[-8:]} at {f.addrs[0] if f.addrs else '?'}: "
            f"{f.error or 'no answer'})"), False


async def find_a_peer(rt: Runtime, timeout: float) -> None:
    """Wait until one peer of the swarm is connected; SubmitError saying why not (no peer known,
    unreachable, or the handshake refused: a swarm key that differs, which ends the wait early:
    it will not heal by waiting)."""
    deadline = trio.current_time() + timeout
    next_look = trio.current_time() + 5
    while not rt.net.connected:
        now = trio.current_time()
        if now >= deadline:
            why, _ = await _why_no_peer(rt)
            raise SubmitError(f"no peer connected within {timeout:.0f}s: {why}")
        if now >= next_look:
            next_look = now + 5
            why, lasting = await _why_no_peer(rt)
            if lasting:
                raise SubmitError(f"no peer connected: {why}")
        await trio.sleep(0.1)


async def submit(settings: Settings, title: str, description: str = "", timeout: float = 60.0,
                 electorate: list[str] | None = None,
                 follow: Callable[[Runtime, str], Awaitable[None]] | None = None) -> str:
    """Publish a goal; returns its id once a peer stored it. With ``follow``, stays in the
    swarm and awaits ``follow(rt, goal_id)`` first (`submit --wait`: progress until done)."""
    async def body(rt: Runtime) -> str:
        await find_a_peer(rt, timeout)
        voters = electorate or await choose_electorate(settings, rt, timeout)
        try:
            ev = await rt.publish(make_goal(settings, title, description, voters, author=rt.me))
        except NotMember as exc:
            raise SubmitError(f"{exc} (a swarm with an authority takes goals only from a submitter: "
                              "set SWARM_CREDENTIAL_FILE and SWARM_IDENTITY_FILE)") from None
        stored = False
        with trio.move_on_after(timeout):
            while not stored:
                for peer in list(rt.net.connected):
                    if await rt.net.peer_has(peer, ev.id):
                        rt.log.info("goal stored by a peer", event_id=ev.id, peer_id=peer,
                                    electorate=len(voters))
                        stored = True
                        break
                else:
                    await trio.sleep(0.2)
        if not stored:
            raise SubmitError(f"goal {ev.id} published but no peer confirmed storing it within {timeout:.0f}s")
        if follow is not None:  # outside the storing timeout: a plan takes its own time
            await follow(rt, ev.id)
        return ev.id

    return await _with_temp_peer(settings, "submitter", body)


async def publish_events(settings: Settings, raws: list[bytes], timeout: float = 60.0) -> list[str]:
    """Join the swarm as a temporary peer, publish events signed elsewhere (a revocation the
    authority signed on another machine), wait until a peer stored each; their ids."""
    from agent.core.events import decode_event
    from agent.core.reasons import Rejected

    events = []
    for raw in raws:
        try:
            events.append(decode_event(raw))
        except Rejected as exc:
            raise SubmitError(f"not a signed event: {exc}") from None

    async def body(rt: Runtime) -> list[str]:
        await find_a_peer(rt, timeout)
        for ev in events:
            if not await rt.ingest(ev.raw, "self") and ev.id not in rt.plan:
                raise SubmitError(f"event {ev.id[:12]} ({ev.type}) refused here: see the log line above")
            await rt.net.publish(ev.raw)
        left = {ev.id for ev in events}
        with trio.move_on_after(timeout):
            while left:
                for peer in list(rt.net.connected):
                    for eid in list(left):
                        if await rt.net.peer_has(peer, eid):
                            left.discard(eid)
                await trio.sleep(0.2)
        if left:
            raise SubmitError(f"{len(left)} event(s) published but no peer confirmed storing them within {timeout:.0f}s")
        return [ev.id for ev in events]

    return await _with_temp_peer(settings, "observer", body)


class NoAnswer(SubmitError):
    """Peers were connected but none answered a sync request: the tree may be incomplete."""


async def observe_once(settings: Settings, timeout: float = 30.0, settle: float = 1.0,
                       sync_timeout: float = 10.0) -> tuple[dict, int]:
    """Join, pull every connected peer's log, return (the tree as JSON, peers that answered).
    Raises SubmitError if no peer was found, NoAnswer if none answered within sync_timeout:
    an empty tree from nobody is not an answer."""
    async def body(rt: Runtime) -> tuple[dict, int]:
        await find_a_peer(rt, timeout)
        await trio.sleep(settle)
        answered: set[str] = set()
        errors: dict[str, str] = {}
        with trio.move_on_after(sync_timeout):
            while True:
                report = await rt.net.sync_all()
                answered |= {r.peer for r in report.results if r.answered}
                errors.update(report.errors)
                if answered and report.new == 0:
                    break
                if not answered:
                    await trio.sleep(0.5)  # nobody answered yet (busy, restarting): ask again
        if not answered:
            why = "; ".join(f"{p[-8:]}: {e}" for p, e in sorted(errors.items())[:3])
            raise NoAnswer(f"no peer answered a sync request in {sync_timeout:.0f} s: the tree "
                           f"may be incomplete" + (f" ({why})" if why else ""))
        return rt.tree().to_json(), len(answered)

    return await _with_temp_peer(settings, "observer", body)
