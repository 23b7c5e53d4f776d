"""The pulling side of sync: per-peer cursors, paging, anti-entropy, and reports of who answered.

Ids before bodies (agent.net.sync): a page of a peer's log comes as event ids; only the ids we
do not know (``knows``: stored, pending or held) are asked for, and an id another pull is
already fetching (several peers are pulled at once, and hold mostly the same events) is left
to it: that pull's batch is awaited, and whatever it did not bring is asked of this peer.
So a late joiner takes about one copy of the log however many peers it pulls, and
anti-entropy costs 32 bytes per event gossip already delivered. A body is taken only if its
id is the one asked (a peer that lies about ids is counted and logged; nothing it sent
under a wrong id is ingested). A peer of the first version answers the ids request with a
whole page: it is pulled in whole pages from then on. Without ``knows`` (or with
``ids=False``) every peer is pulled in whole pages.

A late joiner is only as good as the peers that answer it: ``sync_all()`` returns a
:class:`SyncReport` saying how many peers were asked and how many answered, so a caller
(``observe --once``) never mistakes "nobody answered" for "there is nothing".
"""

from __future__ import annotations

import random
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

from .door import IngestDoor
from .stats import SyncClientStats
from agent.store import raw_event_id
from .sync import (
    MAX_GET, MAX_ID_PAGE, OLD_MAX_PAGE_BYTES, RESCAN_EVERY, OrjsonCodec, PeerCursor, SyncProtocolError,
    SyncClock, SyncRefused, check_get_response, check_has_response, check_id_response, check_response,
    pack_ids, page_clock,
)

__all__ = ["PeerSync", "SyncClient", "SyncReport"]

NEW_PEER_ATTEMPTS = 4
DEFAULT_FANOUT = 3  # peers pulled per periodic anti-entropy round
# pages pulled from one peer in one sync: the rest waits for the next sync, from the same
# cursor. A peer that always claims more (total 2**40) would otherwise keep a sync_all, and with
# it anti-entropy from every peer, waiting forever.
MAX_PAGES_PER_PULL = 100
MAX_RESPONSE_BYTES = OLD_MAX_PAGE_BYTES + 64 * 1024  # a server of the first version
ID_PAGE = 5000  # ids asked per page (213 KiB as base64)
GET_BATCH = 500  # events asked per get request (the server sends fewer if over 256 KiB)


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
    def __init__(self, *, protocol: str, intake: IngestDoor, connected: Callable[[], list[str]],
                 on_foreign: Callable[[str], None], page: int = 200, timeout: float = 10.0,
                 interval: float = 10.0, log: Any = None,
                 knows: Callable[[str], bool] | None = None, ids: bool = True,
                 id_page: int = ID_PAGE, get_batch: int = GET_BATCH,
                 fanout: int = DEFAULT_FANOUT, clock: SyncClock | None = None) -> None:
        self.protocol = protocol
        self._clock = clock  # each pull's first page is a round trip for the clock estimate
        self._fanout = int(fanout)  # peers pulled per anti-entropy round (0 or less: every peer)
        self._rotation: list[str] = []  # peers not yet pulled in this pass over the connected ones
        self._intake = intake
        self._knows = knows
        self._use_ids = ids and knows is not None
        self._id_page = max(1, min(int(id_page), MAX_ID_PAGE))
        self._get_batch = max(1, min(int(get_batch), MAX_GET))
        self._inflight: dict[str, trio.Event] = {}  # event id -> set when its fetch ended
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
            with trio.move_on_after(self._interval) as timer:
                await self._resync.wait()
            self._resync = trio.Event()
            if timer.cancelled_caught:  # the period: a few peers in turn
                await self.sync_some(self.next_round())
            else:  # asked for (gossip overflowed, arrivals queue full): every peer now
                await self.sync_all()

    def next_round(self) -> list[str]:
        """The peers of the next periodic anti-entropy round: ``fanout`` of the connected
        peers, taken in turn (a shuffled pass over all of them, then another), so every peer
        is pulled once per ceil(connected / fanout) rounds. Pulling all of them each round cost
        an idle agent O(peers) requests and served requests per period: in a 20-agent swarm
        that was most of its idle CPU. Safety never depended on it: anti-entropy only repairs
        what gossip lost, and any one peer holding an event is enough."""
        connected = self._connected()
        if self._fanout <= 0 or len(connected) <= self._fanout:
            self._rotation = []
            return list(connected)
        live = set(connected)
        self._rotation = [p for p in self._rotation if p in live]
        out: list[str] = []
        while len(out) < self._fanout:
            if not self._rotation:
                fresh = [p for p in connected if p not in out]
                random.shuffle(fresh)
                self._rotation = fresh
            out.append(self._rotation.pop())
        return out

    async def sync_some(self, peers: list[str]) -> SyncReport:
        """Pull from these peers concurrently."""
        results: list[PeerSync] = []

        async def one(peer: str) -> None:
            results.append(await self.sync_from(peer))

        async with trio.open_nursery() as nursery:
            for peer in peers:
                nursery.start_soon(one, peer)
        return SyncReport(tuple(sorted(results, key=lambda r: r.peer)))

    # ------------------------------------------------------------------ API
    async def sync_all(self) -> SyncReport:
        """Pull from every connected peer concurrently."""
        return await self.sync_some(list(self._connected()))

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
            resp = await rr.send_request(pid, [self.protocol], req, _CountingCodec(self._stats),
                                         self._cfg)
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
        tally = _Tally()
        pages = 0
        t0 = time.monotonic()
        cur.pulls += 1
        if self._use_ids and not cur.old and cur.cursor > 0 and cur.pulls % RESCAN_EVERY == 0:
            cur.cursor = 0  # the same epoch from 0: only ids we do not know are asked for
            self._stats.rescans += 1
            self._log.debug("net.sync_rescan", peer=peer, total=cur.total)
        while True:
            by_ids = self._use_ids and not cur.old
            req: dict[str, Any] = {"epoch": cur.epoch, "cursor": cur.cursor, "limit": self._page}
            if by_ids:  # a first-version server ignores "ids": it sends `limit` whole events
                req["ids"] = self._id_page
            try:
                sent = self._clock.local() if self._clock is not None else 0
                resp = await self._request(peer, req)
                if self._clock is not None and pages == 0:
                    peer_ms = page_clock(resp)
                    if peer_ms is not None:
                        self._clock.round_trip(peer, sent, peer_ms, self._clock.local())
                if by_ids and isinstance(resp, dict) and "events" in resp and "ids" not in resp:
                    cur.old, by_ids = True, False  # a first-version peer: it sent a whole page
                    self._log.info("net.sync_peer_sends_pages", peer=peer)
                if by_ids:
                    epoch, ids, start, nxt, total = check_id_response(resp)
                    events: list[str] = []
                else:
                    epoch, events, nxt, total = check_response(resp)
                    ids, start = [], nxt - len(events)
            except _Unreachable as exc:
                self._log.debug("net.sync_failed", peer=peer, error=str(exc))
                return tally.result(peer, False, str(exc))
            except SyncProtocolError as exc:  # a refusal or a malformed page
                self._failed("error")
                if isinstance(exc, SyncRefused):
                    self._stats.refused += 1
                self._log.info("net.sync_refused_by_peer" if isinstance(exc, SyncRefused)
                               else "net.sync_bad_response", peer=peer, error=str(exc)[:300])
                return tally.result(peer, False, str(exc)[:300])
            self._answered()
            pages += 1
            cur.pages += 1
            same_log = epoch == cur.epoch and cur.cursor <= total
            expected = cur.cursor if same_log else 0
            if not same_log and cur.epoch is not None:
                cur.resets += 1
                self._log.info("net.sync_log_reset", peer=peer, old_epoch=cur.epoch,
                               epoch=epoch, cursor=cur.cursor, total=total)
            if start != expected:  # served from our stale cursor: start again from 0
                cur.epoch, cur.cursor = epoch, 0
                if pages > 3:
                    return tally.result(peer, False, "the peer's log keeps changing")
                continue
            if not same_log:  # a new log, served from 0: our cursor starts there too
                cur.cursor, cur.total = 0, total
            cur.epoch = epoch
            if by_ids:
                why = await self._fetch_unknown(peer, ids, tally, cur)
            else:
                why = await self._ingest_all(peer, [e.encode("utf-8") for e in events], tally, cur)
            if why is not None:  # the runtime failed (e.g. disk full): retry this page later
                cur.cursor = start
                return tally.result(peer, False, why)
            cur.cursor, cur.total = nxt, total
            if nxt >= total or nxt == start:
                break
            if pages >= MAX_PAGES_PER_PULL:
                self._log.info("net.sync_paused", peer=peer, pages=pages, cursor=cur.cursor,
                               total=total, detail="the rest on the next sync")
                break
        if tally.pulled or tally.ids:
            self._log.info("net.synced", peer=peer, pulled=tally.pulled, new=tally.new,
                           ids=tally.ids, pages=pages, cursor=cur.cursor, total=cur.total,
                           seconds=round(time.monotonic() - t0, 3))
        return tally.result(peer, True)

    async def _ingest_all(self, peer: str, raws: list[bytes], tally: "_Tally",
                          cur: PeerCursor) -> str | None:
        """Feed events to the intake in order; a reason if the runtime could not take one."""
        source = f"sync:{peer}"
        for raw in raws:
            is_new = await self._intake(raw, source)
            if is_new is None:
                return "could not store what it sent"
            tally.pulled += 1
            cur.pulled += 1
            self._stats.pulled += 1
            if is_new:
                tally.new += 1
                cur.new += 1
                self._stats.new += 1
                metrics.SYNC_EVENTS_PULLED.inc()
        return None

    async def _fetch_unknown(self, peer: str, ids: list[str], tally: "_Tally",
                             cur: PeerCursor) -> str | None:
        """Ask this peer for the events of ``ids`` we do not know and no other pull is
        fetching; then wait for those other pulls and ask for what they did not bring."""
        assert self._knows is not None
        knows = self._knows
        tally.ids += len(ids)
        self._stats.ids += len(ids)
        unknown = [i for i in dict.fromkeys(ids) if not knows(i)]
        self._stats.skipped += len(ids) - len(unknown)
        mine = [i for i in unknown if i not in self._inflight]
        theirs = {self._inflight[i] for i in unknown if i in self._inflight}
        why = await self._fetch(peer, mine, tally, cur)
        if why is not None or not theirs:
            return why
        with trio.move_on_after(2 * self._cfg.timeout):
            for done in theirs:
                await done.wait()
        rest = [i for i in unknown if not knows(i)]
        return await self._fetch(peer, rest, tally, cur) if rest else None

    async def _fetch(self, peer: str, ids: list[str], tally: "_Tally",
                     cur: PeerCursor) -> str | None:
        """Ask this peer for these events, in batches, and ingest them in order. Pipelined:
        the next batch is asked for while this one is ingested (verifying signatures is
        the joiner's bottleneck; the peer's reading and sending overlap it)."""
        if not ids:
            return None
        batches = [ids[i:i + self._get_batch] for i in range(0, len(ids), self._get_batch)]
        marks = [trio.Event() for _ in batches]
        for batch, done in zip(batches, marks):  # all at once: no other pull asks for them
            for i in batch:
                self._inflight.setdefault(i, done)
        why: str | None = None
        send, recv = trio.open_memory_channel[Any](1)  # one response ahead of the ingest
        try:
            async with trio.open_nursery() as nursery:
                nursery.start_soon(self._get_batches, peer, batches, send)
                async with recv:
                    async for item in recv:
                        if isinstance(item, str):
                            why = item
                            break
                        k, raws, complete = item
                        why = await self._ingest_all(peer, raws, tally, cur)
                        if why is not None:
                            break
                        if complete:
                            self._release(marks[k], batches[k])
                    nursery.cancel_scope.cancel()
        finally:
            for asked, done in zip(batches, marks):
                self._release(done, asked)
        return why

    async def _get_batches(self, peer: str, batches: list[list[str]],
                           send: trio.MemorySendChannel[Any]) -> None:
        """Request each batch (again for the rest if the peer sent fewer), and send on
        (batch index, the bodies that are what was asked, whether the batch is complete),
        or a reason string if the peer failed."""
        async with send:
            try:
                for k, asked in enumerate(batches):
                    batch = asked
                    while batch:
                        try:
                            got = check_get_response(
                                await self._request(peer, {"get": pack_ids(batch)}), len(batch))
                        except _Unreachable as exc:
                            await send.send(str(exc))
                            return
                        except SyncProtocolError as exc:
                            self._failed("error")
                            self._log.info("net.sync_bad_response", peer=peer,
                                           error=str(exc)[:300])
                            await send.send(str(exc)[:300])
                            return
                        self._answered()
                        raws: list[bytes] = []
                        for want, text in zip(batch, got):
                            if text is None:  # listed but not held: another peer's gain
                                self._stats.missing += 1
                                continue
                            raw = text.encode("utf-8")
                            if raw_event_id(raw) != want:
                                self._stats.lied += 1
                                self._log.warning("net.sync_wrong_event", peer=peer, asked=want,
                                                  detail="the peer sent another event than "
                                                         "the id it listed; not taken")
                                continue
                            raws.append(raw)
                        batch = batch[len(got):]
                        await send.send((k, raws, not batch))
            except trio.BrokenResourceError:  # the ingest stopped (it failed): nothing to do
                return

    def _release(self, done: trio.Event, ids: list[str]) -> None:
        if done.is_set():
            return
        done.set()
        inflight = self._inflight
        for i in ids:
            if inflight.get(i) is done:
                del inflight[i]


@dataclass
class _Tally:
    """What one ``sync_from`` got."""

    pulled: int = 0
    new: int = 0
    ids: int = 0

    def result(self, peer: str, answered: bool, error: str = "") -> PeerSync:
        return PeerSync(peer, answered, self.new, self.pulled, error)


class _CountingCodec(OrjsonCodec):
    """Counts the encoded bytes of our requests and of the responses we decode."""

    def __init__(self, stats: SyncClientStats) -> None:
        self._stats = stats

    def encode_request(self, request: Any) -> bytes:
        data = super().encode_request(request)
        self._stats.bytes_out += len(data)
        return data

    def decode_response(self, payload: bytes) -> Any:
        self._stats.bytes_in += len(payload)
        return super().decode_response(payload)


class _Unreachable(Exception):
    """A request got no usable answer (dead, foreign or slow peer)."""
