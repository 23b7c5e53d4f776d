"""The thin trio driver: runs a role's sans-I/O behaviour for a real agent.

It polls the behaviour whenever the log grows, a WakeAt comes due or an answer arrives, and
executes the effects: publishing through the runtime, LLM calls in their own cancel scopes
(a Cancel really stops the work), sync with every peer, metrics and structured logs. The
simulator (agent.drivers.sim) is the other driver of the very same objects.
"""

from __future__ import annotations

import time
from typing import Any

import trio

from agent import metrics
from agent.behaviour.base import Behaviour
from agent.behaviour.effects import (
    Ask, Cancel, Count, Effect, LLMReply, Log, Metric, Observe, Publish, PublishFailed, SyncDone,
    SyncPeers, WakeAt,
)
from agent.llm.base import LLM, LLMBadOutput, LLMError, LLMRequest, LLMUnavailable, ModelMissing
from agent.core.reasons import Rejected
from agent.store import StoreError
from agent.drivers.real.runtime import NotMember, Runtime
from agent.shell import route

IDLE_POLL_S = 5.0  # poll at least this often even if nothing happens (cheap)


def _kind(exc: LLMError) -> str:
    if isinstance(exc, ModelMissing):
        return "model_missing"
    if isinstance(exc, LLMUnavailable):
        return "unavailable"
    if isinstance(exc, LLMBadOutput):
        return "invalid_output"
    return "other"


def declare_llm_series(role: str, backend: str) -> None:
    """Create this agent's LLM series at zero, so dashboards show 0 rather than no data."""
    metrics.LLM_REQUEST_DURATION.labels(role=role, backend=backend)
    metrics.LLM_CANCELLED.labels(role=role)
    metrics.LLM_UNUSABLE.labels(role=role)
    metrics.SET_ASIDE.labels(role=role)
    for kind in ("model_missing", "unavailable", "invalid_output", "other"):
        metrics.LLM_ERRORS.labels(role=role, backend=backend, kind=kind)


async def ask(llm: LLM, req: LLMRequest, role: str, timing: dict[str, Any] | None = None) -> LLMReply:
    """One LLM request, timed and counted; errors propagate to the caller. ``timing`` gets what
    the server said about the call (``Answer.timing``), when it says."""
    t0 = time.perf_counter()
    try:
        complete = getattr(llm, "complete", None)
        if complete is not None:
            ans = await complete(req)
            metrics.count_tokens(role, ans.prompt_tokens, ans.completion_tokens)
            if timing is not None and ans.timing:
                timing.update({k: v for k, v in ans.timing.items() if v is not None})
            return LLMReply(ans.value, ans.prompt_tokens, ans.completion_tokens)
        return LLMReply(await llm.generate(req))
    except LLMError as exc:
        metrics.LLM_ERRORS.labels(role=role, backend=llm.backend, kind=_kind(exc)).inc()
        raise
    finally:
        metrics.LLM_REQUEST_DURATION.labels(role=role, backend=llm.backend).observe(time.perf_counter() - t0)


class Driver:
    def __init__(self, behaviour: Behaviour, rt: Runtime, llm: LLM | None) -> None:
        self.behaviour = behaviour
        self.rt = rt
        self.llm = llm
        self.role = behaviour.role
        self.log = rt.log
        self._kick = trio.Event()
        self._answers: list[tuple[int, Any]] = []
        self._scopes: dict[int, trio.CancelScope] = {}
        self._wake_ms: int | None = None
        self._nursery: trio.Nursery | None = None
        rt.on_change(self.kick)

    async def run(self) -> None:
        async with trio.open_nursery() as nursery:
            self._nursery = nursery
            while True:
                self._wake_ms = None
                if not self.behaviour.idle(self.rt.plan):
                    now = self._net_view()
                    await self._execute(self.behaviour.poll(self.rt.tree(), now))
                await self._wait()
                while self._answers:
                    ticket, answer = self._answers.pop(0)
                    self._scopes.pop(ticket, None)
                    now = self._net_view()
                    await self._execute(self.behaviour.answered(ticket, answer, self.rt.tree(), now))

    def _net_view(self) -> int:
        now = self.rt.now_ms()
        self.rt.shell.hand_net_view(self.behaviour, now)
        return now

    def kick(self) -> None:
        """Poll soon: the log grew, or (the observer's page) the person acted."""
        self._kick.set()

    async def _wait(self) -> None:
        if self._answers:
            return
        timeout = IDLE_POLL_S
        if self._wake_ms is not None:
            timeout = min(timeout, max(0.0, (self._wake_ms - self.rt.now_ms()) / 1000))
        with trio.move_on_after(timeout):
            await self._kick.wait()
        self._kick = trio.Event()

    async def _execute(self, effects: list[Effect]) -> None:
        for eff in effects:
            if isinstance(eff, Publish):  # the one effect that awaits here
                ev = await self.on_publish(eff)
                if eff.ticket is not None:
                    await self._execute(self.behaviour.answered(eff.ticket, ev, self.rt.tree(), self._net_view()))
            else:
                getattr(self, route(eff))(eff)

    # ------------------------------------------------------------------ effects (agent.shell.effects)
    async def on_publish(self, eff: Publish) -> Any:
        try:
            return await self.rt.publish(eff.body)
        except (StoreError, NotMember) as exc:  # a full disk; a lapsed membership
            return PublishFailed(str(exc))
        except Rejected as exc:
            # our own fold refused what our role decided on a tree it read a moment before: a
            # revocation's refold in between. The simulator treats this as a bug (no revocation
            # there); here it is logged and counted, and the role goes on, never restarted
            metrics.EVENTS_REJECTED.labels(reason=f"own_{exc.reason.value}").inc()
            self.log.error("own event refused by our own fold", type=eff.body.type, error=str(exc)[:300])
            return PublishFailed(str(exc))

    def on_ask(self, eff: Ask) -> None:
        scope = trio.CancelScope()
        self._scopes[eff.ticket] = scope
        assert self._nursery is not None
        self.log.info("llm.call", ticket=eff.ticket, kind=eff.request.kind, node_id=eff.node)
        self._nursery.start_soon(self._ask, eff.ticket, eff.request, scope)

    def on_cancel(self, eff: Cancel) -> None:
        scope = self._scopes.pop(eff.ticket, None)
        if scope is not None:
            scope.cancel()
            metrics.LLM_CANCELLED.labels(role=self.role).inc()
            self.log.info("llm.cancelled", ticket=eff.ticket)

    def on_sync(self, eff: SyncPeers) -> None:
        assert self._nursery is not None
        self._nursery.start_soon(self._sync, eff.ticket, eff.confirm)

    def on_wake(self, eff: WakeAt) -> None:
        self._wake_ms = eff.at_ms if self._wake_ms is None else min(self._wake_ms, eff.at_ms)

    def on_metric(self, eff: Count | Observe) -> None:
        record(eff, self.role)

    def on_log(self, eff: Log) -> None:
        getattr(self.log, eff.level)(eff.event, **eff.fields)

    def _answer(self, ticket: int, answer: Any) -> None:
        self._answers.append((ticket, answer))
        self._kick.set()

    async def _ask(self, ticket: int, req: LLMRequest, scope: trio.CancelScope) -> None:
        assert self.llm is not None
        t0 = time.perf_counter()
        timing: dict[str, Any] = {}
        with scope:
            try:
                answer: Any = await ask(self.llm, req, self.role, timing)
            except LLMError as exc:
                answer = exc
            # the call's tokens and the server's figures: what `bench --sections realmodel` reads
            tokens = ({} if isinstance(answer, LLMError) else
                      {"prompt_tokens": answer.prompt_tokens, "completion_tokens": answer.completion_tokens})
            self.log.info("llm.answer", ticket=ticket, kind=req.kind, seconds=round(time.perf_counter() - t0, 4),
                          outcome="error" if isinstance(answer, LLMError) else "answered", **tokens, **timing)
            self._answer(ticket, answer)

    async def _sync(self, ticket: int, confirm: str | None = None) -> None:
        t0 = time.perf_counter()
        net = self.rt.net
        report = await net.sync_all() if net is not None else None
        new = getattr(report, "new", report if isinstance(report, int) else 0)
        peers = getattr(report, "peers_answered", len(net.connected) if net is not None else 0)
        holders = None
        # who answered the pull is asked whether it stored ``confirm``; a net whose report
        # does not say who answered (a bare count) cannot be asked: not asked (None), never
        # "none stored" (0), which would drop every task (the in-memory swarm's did)
        answered = [r.peer for r in getattr(report, "results", ()) if r.answered]
        if confirm is not None and net is not None and answered:
            found: list[bool] = []

            async def ask(peer: str) -> None:
                found.append(await net.peer_has(peer, confirm))

            async with trio.open_nursery() as nursery:
                for peer in answered:
                    nursery.start_soon(ask, peer)
            holders = sum(found)
        self.log.info("sync.done", ticket=ticket, seconds=round(time.perf_counter() - t0, 4),
                      peers=int(peers), holders=holders)
        self._answer(ticket, SyncDone(int(new or 0), int(peers), holders))


def record(eff: Count | Observe, role: str) -> None:
    """A metric effect into Prometheus: every Metric has its series here (the simulator and the
    central baseline keep them in a Tally)."""
    m = eff.metric
    if m is Metric.CLAIMS_WON:
        metrics.CLAIMS.labels(outcome="won").inc(eff.value)
    elif m is Metric.CLAIMS_LOST:
        metrics.CLAIMS.labels(outcome="lost").inc(eff.value)
    elif m is Metric.WORK_DROPPED:
        metrics.WORK_DROPPED.inc(eff.value)
    elif m is Metric.TASK_SECONDS:
        metrics.TASK_DURATION.observe(eff.value)
    elif m is Metric.PROPOSALS_SCORED:
        metrics.FIRST_PREVOTES.inc()
        if eff.value >= 2:
            metrics.FIRST_PREVOTES_COMPETING.inc()
    elif m is Metric.PULL_UNANSWERED:
        metrics.PULLS_UNANSWERED.inc(eff.value)
    elif m is Metric.CLAIM_UNSTORED:
        metrics.CLAIMS.labels(outcome="unstored").inc(eff.value)
    elif m is Metric.TASK_RELEASED:
        metrics.CLAIMS.labels(outcome="released").inc(eff.value)
    elif m is Metric.LLM_BAD_OUTPUT:
        metrics.LLM_UNUSABLE.labels(role=role).inc(eff.value)
    elif m is Metric.SET_ASIDE:
        metrics.SET_ASIDE.labels(role=role).inc(eff.value)
    elif m is Metric.LEAF_BY_FALLBACK:
        metrics.LEAF_BY_FALLBACK.inc(eff.value)
    else:
        raise TypeError(f"no series for metric {m!r}")


__all__ = ["Driver", "ask", "declare_llm_series", "record"]
