"""The serving side of sync: answers peers' page and "has" requests from our store.

Nobody can starve it (SyncLimits): a peer holds at most ``per_peer`` streams, all peers
``total``, the last ``reserved`` of which only go to peers holding none; a stream whose
request does not arrive within ``idle_timeout`` is closed. Measured before: 40 idle streams
from one peer (a slowloris) took every slot of the library's request/response helper (a
single semaphore of 32 shared by all peers), and a fresh observer got nothing.

A request it will not answer gets an error reply (``sync.error_reply``) the client can show;
the server writes one debug line and counts it, no traceback.
"""

from __future__ import annotations

from typing import Any

import orjson
import structlog
import trio
from libp2p.exceptions import ParseError
from libp2p.io.exceptions import IncompleteReadError, MessageTooLarge
from libp2p.io.msgio import VarIntLengthMsgReadWriter
from libp2p.network.stream.exceptions import StreamError

from agent import metrics

from .config import SyncLimits
from agent.errlog import RepeatedErrorLog
from .stats import SyncServerStats, bump
from agent.store import EventStore, StoreError
from .sync import (
    MAX_PAGE_BYTES, SyncProtocolError, build_get, build_page, decode_request, error_reply,
    parse_has_request,
)

__all__ = ["SyncServer"]

REFUSAL_WRITE_TIMEOUT = 2.0
# largest encoded response: a page is capped at MAX_PAGE_BYTES of events plus a little JSON
MAX_RESPONSE_BYTES = MAX_PAGE_BYTES + 64 * 1024


class SyncServer:
    def __init__(self, *, protocol: str, store: EventStore, limits: SyncLimits, log: Any = None,
                 clock: Any = None) -> None:
        self._clock = clock  # a SyncClock: every page says what our clock reads
        self.protocol = protocol
        self._store = store
        self._limits = limits
        self._log = log if log is not None else structlog.get_logger("agent.net.sync")
        self._stats = SyncServerStats()
        self._active: dict[str, int] = {}  # peer -> streams being served
        self._store_errors = RepeatedErrorLog(self._log, "net.sync_store_unreadable")

    def statistics(self) -> SyncServerStats:
        stats = self._stats.snapshot()
        stats.active = sum(self._active.values())
        return stats

    def attach(self, host: Any) -> None:
        host.set_stream_handler(self.protocol, self.handle)

    # ------------------------------------------------------------------ admission
    def _admit(self, peer: str) -> bool:
        held = self._active.get(peer, 0)
        total = sum(self._active.values())
        lim = self._limits
        if held >= lim.per_peer or total >= lim.total:
            return False
        if held > 0 and total >= lim.total - lim.reserved:
            return False  # the rest is kept for peers that hold no stream yet
        self._active[peer] = held + 1
        return True

    def _release(self, peer: str) -> None:
        left = self._active[peer] - 1
        if left:
            self._active[peer] = left
        else:
            del self._active[peer]

    # ------------------------------------------------------------------ serving
    async def handle(self, stream: Any) -> None:
        """Stream handler for the sync protocol (one request, one response per stream)."""
        peer = stream.muxed_conn.peer_id.to_base58()
        if not self._admit(peer):
            await self._refuse(stream, peer, "busy", "busy",
                               f"too many sync streams open (at most {self._limits.per_peer} "
                               "per peer); retry later")
            return
        try:
            await self._serve(stream, peer)
        finally:
            self._release(peer)

    async def _serve(self, stream: Any, peer: str) -> None:
        lim = self._limits
        reader = VarIntLengthMsgReadWriter(stream, max_msg_size=lim.max_request_bytes)
        with trio.move_on_after(lim.idle_timeout) as idle:
            try:
                payload = await reader.read_msg()
            except MessageTooLarge:
                await self._refuse(stream, peer, "bad_request", "bad_request",
                                   f"request over {lim.max_request_bytes} bytes")
                return
            except ParseError as exc:
                await self._refuse(stream, peer, "bad_request", "bad_request",
                                   f"bad length prefix: {exc}")
                return
            except (IncompleteReadError, StreamError) as exc:  # the client went away
                self._log.debug("net.sync_client_gone", peer=peer, error=repr(exc)[:200])
                await _reset(stream)
                return
        if idle.cancelled_caught:
            # a slowloris, or a request this agent was too busy to read in time (a starved CPU):
            # either way the client hears why (bounded in time), and an honest one retries
            self._log.debug("net.sync_idle_stream_closed", peer=peer, seconds=lim.idle_timeout)
            await self._refuse(stream, peer, "idle_timeout", "idle_timeout",
                               f"no request read within {lim.idle_timeout:g} s; retry later")
            return
        try:
            response = self.answer(decode_request(payload))
        except SyncProtocolError as exc:
            await self._refuse(stream, peer, "bad_request", "bad_request", str(exc))
            return
        except StoreError as exc:  # our disk, not the peer: say so, log once
            self._store_errors.failed(str(exc))
            await self._refuse(stream, peer, "unavailable", None, "the serving peer cannot "
                               "read its event log right now")
            return
        body = orjson.dumps(response)
        with trio.move_on_after(lim.response_timeout) as slow:
            try:
                await VarIntLengthMsgReadWriter(stream, MAX_RESPONSE_BYTES).write_msg(body)
                await stream.close()
            except StreamError as exc:
                self._log.debug("net.sync_client_gone", peer=peer, error=repr(exc)[:200])
                await _reset(stream)
                return
        if slow.cancelled_caught:
            self._log.debug("net.sync_response_timeout", peer=peer, bytes=len(body))
            await _reset(stream)
            return
        self._stats.served += 1
        metrics.SYNC_REQUESTS_SERVED.inc()
        if self._store_errors.failing:
            self._store_errors.succeeded()

    def answer(self, request: Any) -> dict[str, Any]:
        """The response to one decoded request. SyncProtocolError if it is bad, StoreError
        if our log cannot be read or flushed."""
        # what we serve or confirm must be on our disk: received events are fsynced in
        # batches, and a crash must not take back a position a peer's cursor went past
        self._store.flush()
        if isinstance(request, dict) and "has" in request:
            # stored, as the protocol says, not merely known: an event we hold (stamped ahead of
            # our clock) or that waits for a dependency counts nowhere yet. An executor asks
            # whether its claim is stored before it spends an LLM call (issue 23); answered
            # "known", a claim every peer held because the executor's clock runs ahead read as
            # stored, and the work went ahead on a claim that counted nowhere
            ids = parse_has_request(request)
            return {"has": [self._store.position(i) is not None for i in ids]}
        if isinstance(request, dict) and "get" in request:
            return build_get(self._store, request)
        page = build_page(self._store, request)
        if self._clock is not None:
            page["now"] = self._clock.serve()
        return page

    def _count_refusal(self, reason: str) -> None:
        bump(self._stats.refused, reason)
        metrics.SYNC_REQUESTS_REFUSED.labels(reason=reason).inc()

    async def _refuse(self, stream: Any, peer: str, code: str, reason: str | None,
                      message: str) -> None:
        """Answer with an error reply (bounded in time), then close the stream."""
        if reason is not None:
            self._count_refusal(reason)
        self._log.debug("net.sync_refused", peer=peer, code=code, error=message[:200])
        body = orjson.dumps(error_reply(code, message))
        with trio.move_on_after(REFUSAL_WRITE_TIMEOUT):
            try:
                await VarIntLengthMsgReadWriter(stream, MAX_RESPONSE_BYTES).write_msg(body)
                await stream.close()
                return
            except StreamError:
                pass  # the client went away: nothing to tell
        await _reset(stream)


async def _reset(stream: Any) -> None:
    with trio.CancelScope(shield=True):
        try:
            await stream.reset()
        except StreamError:
            pass  # already closed or reset: what we wanted
