"""The pulling side of sync: per-peer cursors, paging, anti-entropy, and reports of who answered.

A late joiner is only as good as the peers that answer it: ``sync_all()`` returns a
:class:`SyncReport` saying how many peers were asked and how many answered, so a caller
(``observe --once``) never mistakes "nobody answered" for "there is nothing".
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import structlog
import trio
from libp2p.peer.id import ID
from libp2p.request_response import (
    ProtocolNotSupportedError, RequestResponse, RequestResponseConfig, RequestResponseError,
    RequestTimeoutError,
)

from agent import metrics

from .intake import Intake
from .stats import SyncClientStats
from .sync import (
    MAX_PAGE_BYTES, OrjsonCodec, PeerCursor, SyncProtocolError, SyncRefused,
    check_has_response, check_response,
)

__all__ = ["PeerSync", "SyncClient", "SyncReport"]

NEW_PEER_ATTEMPTS = 4
# pages pulled from one peer in one sync (200 events each by default): the rest waits for the
# next sync, from the same cursor. A peer that always claims more (total 2**40) would otherwise
# keep a sync_all, and with it anti-entropy from every peer, waiting forever.
MAX_PAGES_PER_PULL = 100
MAX_RESPONSE_BYTES = MAX_PAGE_BYTES + 64 * 1024


@dataclass(frozen=True)
class PeerSync:
    """The outcome of pulling one peer's log."""

    peer: str
    answered: bool      # the peer answered every request of this sync
    new: int = 0        # events new to us
    pulled: int = 0     # events received
    error: str = ""     # why not, when it did not answer


@dataclass(frozen=True)
class SyncReport:
    """The outcome of one ``sync_all()``."""

    results: tuple[PeerSync, ...] = ()

    @property
    def new(self) -> int:
        return sum(r.new for r in self.results)

    @property
    def peers_asked(self) -> int:
        return len(self.results)

    @property
    def peers_answered(self) -> int:
        return sum(1 for r in self.results if r.answered)

    @property
    def errors(self) -> dict[str, str]:
        return {r.peer: r.error for r in self.results if not r.answered}


class SyncClient:
    def __init__(self, *, protocol: str, intake: Intake, connected: Callable[[], list[str]],
                 on_foreign: Callable[[str], None], page: int = 200, timeout: float = 10.0,
                 interval: float = 10.0, log: Any = None) -> None:
        self.protocol = protocol
        self._intake = intake
        self._connected = connected
        self._on_foreign = on_foreign
        self._page = max(1, int(page))
        self._cfg = RequestResponseConfig(timeout=timeout, max_response_size=MAX_RESPONSE_BYTES)
        self._interval = interval
        self._log = log if log is not None else structlog.get_logger("agent.net.sync")
        self._stats = SyncClientStats()
        self.cursors: dict[str, PeerCursor] = {}
        self._locks: dict[str, trio.Lock] = {}
        self._rr: RequestResponse | None = None
        self._resync = trio.Event()
        self._arrivals_send, self._arrivals = trio.open_memory_channel[str](1024)

    def statistics(self) -> SyncClientStats:
        return self._stats.snapshot()

    # ------------------------------------------------------------------ lifecycle
    async def run(self, host: Any, *, task_status: Any = trio.TASK_STATUS_IGNORED) -> None:
        """Anti-entropy and the first sync of every newly connected peer, until cancelled."""
        self._rr = RequestResponse(host)  # its client side only; SyncServer serves
        try:
            async with trio.open_nursery() as nursery:
                nursery.start_soon(self._anti_entropy)
                nursery.start_soon(self._greet_arrivals, nursery)
                task_status.started()
        finally:
            self._rr = None

    def request_resync(self) -> None:
        """Run anti-entropy now (e.g. gossip overflowed and lost messages)."""
        self._resync.set()

    def peer_connected(self, peer: str) -> None:
        """A peer just connected: pull its log soon (never blocks)."""
        try:
            self._arrivals_send.send_nowait(peer)
        except trio.WouldBlock:  # 1024 arrivals queued: anti-entropy will cover this one
            self._resync.set()

    async def _greet_arrivals(self, nursery: trio.Nursery) -> None:
        async for peer in self._arrivals:
            nursery.start_soon(self._sync_new_peer, peer)

    async def _sync_new_peer(self, peer: str) -> None:
        for attempt in range(NEW_PEER_ATTEMPTS):
            result = await self.sync_from(peer)
            if result.answered or peer not in self._connected():
                return
            await trio.sleep(0.5 * (attempt + 1))

    async def _anti_entropy(self) -> None:
        while True:
            with trio.move_on_after(self._interval):
                await self._resync.wait()
            self._resync = trio.Event()
            await self.sync_all()

    # ------------------------------------------------------------------ API
    async def sync_all(self) -> SyncReport:
        """Pull from every connected peer concurrently."""
        results: list[PeerSync] = []

        async def one(peer: str) -> None:
            results.append(await self.sync_from(peer))

        async with trio.open_nursery() as nursery:
            for peer in self._connected():
                nursery.start_soon(one, peer)
        return SyncReport(tuple(sorted(results, key=lambda r: r.peer)))

    async def sync_from(self, peer: str) -> PeerSync:
        """Pull what this peer's store has that we lack, in pages, feeding each event to the
        intake. Never raises for a dead, foreign, slow or misbehaving peer."""
        if self._rr is None:
            return PeerSync(peer, False, error="the network is not running")
        lock = self._locks.setdefault(peer, trio.Lock())
        async with lock:
            return await self._pull(peer)

    async def peer_has(self, peer: str, event_id: str) -> bool:
        """Whether a peer has stored an event (how `submit` confirms its goal landed).
        False for a dead, foreign or slow peer; never raises."""
        try:
            resp = await self._request(peer, {"has": [event_id]})
            return check_has_response(resp, 1)[0]
        except (_Unreachable, SyncProtocolError) as exc:
            self._log.debug("net.peer_has_failed", peer_id=peer, event_id=event_id,
                            error=str(exc)[:200])
            return False

    # ------------------------------------------------------------------ internals
    async def _request(self, peer: str, req: dict[str, Any]) -> Any:
        rr = self._rr
        if rr is None:
            raise _Unreachable("the network is not running")
        try:
            pid = ID.from_base58(peer)
        except ValueError:
            raise _Unreachable(f"not a peer id: {peer!r}") from None
        self._stats.requests += 1
        try:
            resp = await rr.send_request(pid, [self.protocol], req, OrjsonCodec(), self._cfg)
        except ProtocolNotSupportedError:
            self._failed("error")
            self._on_foreign(peer)
            raise _Unreachable(f"peer does not serve {self.protocol}") from None
        except RequestTimeoutError:
            self._failed("timeout")
            raise _Unreachable(f"no answer within {self._cfg.timeout:g} s") from None
        except RequestResponseError as exc:  # the helper maps every transport failure here
            self._failed("error")
            cause = exc.__cause__
            why = f"{exc}" + (f" ({type(cause).__name__}: {cause})" if cause else "")
            raise _Unreachable(why[:300]) from None
        return resp

    def _failed(self, outcome: str) -> None:
        self._stats.failed += 1
        metrics.SYNC_REQUESTS.labels(outcome=outcome).inc()

    def _answered(self) -> None:
        self._stats.answered += 1
        metrics.SYNC_REQUESTS.labels(outcome="ok").inc()

    async def _pull(self, peer: str) -> PeerSync:
        cur = self.cursors.setdefault(peer, PeerCursor())
        new = pulled = pages = 0
        t0 = time.monotonic()
        while True:
            req = {"epoch": cur.epoch, "cursor": cur.cursor, "limit": self._page}
            try:
                epoch, events, nxt, total = check_response(await self._request(peer, req))
            except _Unreachable as exc:
                self._log.debug("net.sync_failed", peer=peer, error=str(exc))
                return PeerSync(peer, False, new, pulled, str(exc))
            except SyncProtocolError as exc:  # a refusal or a malformed page
                self._failed("error")
                if isinstance(exc, SyncRefused):
                    self._stats.refused += 1
                self._log.info("net.sync_refused_by_peer" if isinstance(exc, SyncRefused)
                               else "net.sync_bad_response", peer=peer, error=str(exc)[:300])
                return PeerSync(peer, False, new, pulled, str(exc)[:300])
            self._answered()
            pages += 1
            cur.pages += 1
            start = nxt - len(events)
            same_log = epoch == cur.epoch and cur.cursor <= total
            expected = cur.cursor if same_log else 0
            if not same_log and cur.epoch is not None:
                cur.resets += 1
                self._log.info("net.sync_log_reset", peer=peer, old_epoch=cur.epoch,
                               epoch=epoch, cursor=cur.cursor, total=total)
            if start != expected:  # served from our stale cursor: start again from 0
                cur.epoch, cur.cursor = epoch, 0
                if pages > 3:
                    return PeerSync(peer, False, new, pulled, "the peer's log keeps changing")
                continue
            cur.epoch = epoch
            for text in events:
                is_new = await self._intake(text.encode("utf-8"), f"sync:{peer}")
                if is_new is None:  # the runtime failed (e.g. disk full): retry this page later
                    cur.cursor = start
                    return PeerSync(peer, False, new, pulled, "could not store what it sent")
                pulled += 1
                cur.pulled += 1
                self._stats.pulled += 1
                if is_new:
                    new += 1
                    cur.new += 1
                    self._stats.new += 1
                    metrics.SYNC_EVENTS_PULLED.inc()
            cur.cursor, cur.total = nxt, total
            if not events or nxt >= total:
                break
            if pages >= MAX_PAGES_PER_PULL:
                self._log.info("net.sync_paused", peer=peer, pages=pages, cursor=cur.cursor,
                               total=total, detail="the rest on the next sync")
                break
        if pulled:
            self._log.info("net.synced", peer=peer, pulled=pulled, new=new, pages=pages,
                           cursor=cur.cursor, total=cur.total,
                           seconds=round(time.monotonic() - t0, 3))
        return PeerSync(peer, True, new, pulled)


class _Unreachable(Exception):
    """A request got no usable answer (dead, foreign or slow peer)."""
