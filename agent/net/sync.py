"""Sync: pull a peer's event log over a libp2p request/response protocol, ids before bodies.

Requests (JSON, one request and one response per stream):

    {"epoch": <str|null>, "cursor": int, "limit": int, "ids": int}
        -> {"epoch": str, "ids": <base64>, "start": int, "next": int, "total": int}
    {"get": <base64>}
        -> {"events": [str | null, ...]}
    {"epoch": <str|null>, "cursor": int, "limit": int}
        -> {"epoch": str, "events": [str, ...], "next": int, "total": int}
    {"has": [<event id>, ...]}
        -> {"has": [bool, ...]}

The first pulls the event ids (32 bytes each, concatenated, base64) of a page of the peer's
log, positions [start, next), at most ``ids`` of them (``limit`` is what a server of the first
version, which ignores ``ids``, serves instead: that many whole events); the requester asks by ``get`` only for the events it does not
know yet, and the server answers with their stored lines in the order asked (null for one it
does not hold; possibly fewer than asked, never none, to stay under ``MAX_PAGE_BYTES``: the
requester asks again for the rest). What gossip already delivered thus costs 32 bytes (its
id), not the event, and is never decoded or verified twice.

The third is the first version's whole page (events, not ids); the fourth asks whether a peer
stored given events (how `submit` confirms its goal). Compatibility without a new protocol
id: a server of the first version ignores ``"ids"`` and answers a whole page, which the
requester takes as such (and keeps asking that peer for whole pages); an old requester never
sends ``ids`` or ``get``. Both versions serve the same positions of the same log.

A page (ids or whole) also carries ``"now"``: the server's clock (the one it stamps by, ms)
as it answered. The requester, which noted its own clock before sending and on receiving,
has a round trip that bounds its offset to the server whatever the delays (agent.core.skew);
a server or requester of an earlier version leaves it out or ignores it.

A request the server will not answer gets an error reply instead of a reset stream:
Response {"error": {"code": "bad_request" | "busy" | "unavailable", "message": str}}
which the client raises as :class:`SyncRefused` (the message says what was wrong).

Framing (one request and one response per stream, as libp2p's request/response helper):
an unsigned-varint length, then the JSON bytes.

The server only reads its store, and flushes it first (received events are fsynced in
batches): what it serves or confirms is on its disk, so a crash can never take back a
position a peer holds a cursor past. A page starts at ``cursor`` unless the requester named
another epoch (the log was wiped/recreated) or a cursor past the end; then it starts at 0.
The requester can tell where a page starts (``start``, or ``next - len(events)`` in a whole
page) and keeps a per-peer (epoch, cursor) in memory. Because a peer's store holds only what
it accepted, in acceptance order, pulling it in order delivers dependencies before dependents.

Pages are capped by count (``MAX_PAGE`` events, ``MAX_ID_PAGE`` ids, ``MAX_GET`` asked) and
by encoded bytes (``MAX_PAGE_BYTES``, 256 KiB). The byte cap is set by what a client can read,
not by the library's 10 MiB response limit: py-libp2p's ``read_exactly`` gives up after 101
reads, and over mplex a read returns at most one ~4 KiB frame, so a response over ~406 KiB
always fails (measured: responses of 426,742 and 429,268 bytes, and a 600 KiB page, arrived
cut at 415,749 bytes; 256 KiB responses arrived whole). A page holds at least one event (at
most 64 KiB, ~128 KiB encoded). A requester still accepts up to 4 MiB (+ JSON) from a server
of the first version, whose cap that was.
"""

from __future__ import annotations

import base64
import binascii
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import orjson

from agent.store import EventStore

__all__ = [
    "DEFAULT_PAGE", "MAX_GET", "MAX_ID_PAGE", "MAX_PAGE", "MAX_PAGE_BYTES", "OLD_MAX_PAGE_BYTES",
    "OrjsonCodec",
    "PeerCursor", "SyncProtocolError", "SyncRefused", "build_get", "build_page",
    "check_get_response", "check_has_response", "check_id_response", "check_response",
    "decode_request", "error_reply", "pack_ids", "parse_has_request", "parse_request",
    "sync_protocol_id", "unpack_ids",
]

DEFAULT_PAGE = 200
MAX_PAGE = 1000
MAX_ID_PAGE = 6000  # ids per page: 188 KiB of ids, 250 KiB as base64 (< MAX_PAGE_BYTES)
MAX_GET = 1500  # events asked per get request: its base64 (64,000 chars) fits a 64 KiB request
MAX_PAGE_BYTES = 256 * 1024  # encoded response (see above: larger ones were cut over Mplex)
OLD_MAX_PAGE_BYTES = 4 * 1024 * 1024  # what a server of the first version may send
ID_BYTES = 32


def sync_protocol_id(swarm: str) -> str:
    """Per swarm, so a peer of another swarm on the same LAN answers "not supported"."""
    return f"/swarm/{swarm}/sync/1"


class SyncProtocolError(ValueError):
    """A request or response that does not follow the protocol."""


class SyncRefused(SyncProtocolError):
    """The server answered with an error reply."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(f"{code}: {message}")
        self.code = code
        self.message = message


ERROR_CODES = ("bad_request", "busy", "unavailable", "idle_timeout")


def error_reply(code: str, message: str) -> dict[str, Any]:
    assert code in ERROR_CODES, code
    return {"error": {"code": code, "message": message[:500]}}


def _raise_if_error(resp: Any) -> None:
    if isinstance(resp, dict) and "error" in resp:
        err = resp["error"]
        if isinstance(err, dict) and isinstance(err.get("code"), str):
            raise SyncRefused(err["code"][:40], str(err.get("message", ""))[:500])
        raise SyncProtocolError("malformed error reply")


def decode_request(payload: bytes) -> Any:
    try:
        return orjson.loads(payload)
    except orjson.JSONDecodeError as exc:
        raise SyncProtocolError(f"request is not JSON: {exc}") from None


class OrjsonCodec:
    """JSON codec for libp2p's RequestResponse (orjson: fast, UTF-8, no ASCII escaping)."""

    def encode_request(self, request: Any) -> bytes:
        return orjson.dumps(request)

    def decode_request(self, payload: bytes) -> Any:
        return orjson.loads(payload)

    def encode_response(self, response: Any) -> bytes:
        return orjson.dumps(response)

    def decode_response(self, payload: bytes) -> Any:
        return orjson.loads(payload)


def _int(obj: dict, key: str, lo: int, hi: int) -> int:
    v = obj.get(key)
    if not isinstance(v, int) or isinstance(v, bool) or not lo <= v <= hi:
        raise SyncProtocolError(f"{key!r} must be an integer in [{lo}, {hi}], got {v!r}")
    return v


def parse_request(req: Any) -> tuple[str | None, int, int]:
    if not isinstance(req, dict):
        raise SyncProtocolError("request must be a JSON object")
    epoch = req.get("epoch")
    if epoch is not None and (not isinstance(epoch, str) or len(epoch) > 64):
        raise SyncProtocolError("'epoch' must be a short string or null")
    cursor = _int(req, "cursor", 0, 2**53)
    limit = _int(req, "limit", 1, 2**31)
    if "ids" in req:
        return epoch, cursor, min(_int(req, "ids", 1, 2**31), MAX_ID_PAGE)
    return epoch, cursor, min(limit, MAX_PAGE)


def pack_ids(ids: list[str]) -> str:
    """Event ids (64 hex digits each) as one base64 string of their concatenated bytes."""
    return base64.b64encode(b"".join(bytes.fromhex(i) for i in ids)).decode()


def unpack_ids(text: Any, max_n: int) -> list[str]:
    if not isinstance(text, str) or len(text) > 4 * (max_n * ID_BYTES + 2) // 3 + 4:
        raise SyncProtocolError(f"ids must be a base64 string of at most {max_n} ids")
    try:
        blob = base64.b64decode(text, validate=True)
    except (binascii.Error, ValueError):
        raise SyncProtocolError("ids are not base64") from None
    if len(blob) % ID_BYTES or len(blob) // ID_BYTES > max_n:
        raise SyncProtocolError(f"ids must be whole {ID_BYTES}-byte ids, at most {max_n}")
    return [blob[i:i + ID_BYTES].hex() for i in range(0, len(blob), ID_BYTES)]


MAX_HAS = 256
_HEX = frozenset("0123456789abcdef")


def parse_has_request(req: dict) -> list[str]:
    ids = req.get("has")
    if not isinstance(ids, list) or not 1 <= len(ids) <= MAX_HAS:
        raise SyncProtocolError(f"'has' must be a list of 1..{MAX_HAS} event ids")
    for i in ids:
        if not isinstance(i, str) or len(i) != 64 or not set(i) <= _HEX:
            raise SyncProtocolError("'has' entries must be 64-char hex event ids")
    return ids


def check_has_response(resp: Any, n: int) -> list[bool]:
    _raise_if_error(resp)
    if not isinstance(resp, dict) or not isinstance(resp.get("has"), list) or len(resp["has"]) != n \
            or not all(isinstance(b, bool) for b in resp["has"]):
        raise SyncProtocolError(f"'has' response must be a list of {n} booleans")
    return resp["has"]


def build_page(store: EventStore, req: Any) -> dict[str, Any]:
    """The server side: one page of our log (its events, or with ``"ids": n`` their ids).
    Raises SyncProtocolError for a bad request, StoreError if our log cannot be read."""
    epoch, cursor, limit = parse_request(req)
    total = len(store)
    start = cursor
    if (epoch is not None and epoch != store.epoch) or cursor > total:
        start = 0
    if "ids" in req:
        ids = store.ids_from(start, limit)
        known = [i for i in ids if len(i) == 64]  # a line without an id is never asked for
        return {"epoch": store.epoch, "ids": pack_ids(known), "start": start,
                "next": start + len(ids), "total": total}
    events: list[str] = []
    size = 0
    for raw in store.read_from(start, limit):
        try:
            text = raw.decode("utf-8")
        except UnicodeDecodeError:
            text = raw.decode("utf-8", "replace")  # the requester's verification rejects it
        cost = len(orjson.dumps(text)) + 1
        if events and size + cost > MAX_PAGE_BYTES:
            break
        events.append(text)
        size += cost
    return {"epoch": store.epoch, "events": events, "next": start + len(events), "total": total}


def build_get(store: EventStore, req: Any) -> dict[str, Any]:
    """The server side of ``get``: the stored lines of the events asked, in order (null for
    one we do not hold), as many as fit in MAX_PAGE_BYTES (at least one)."""
    ids = unpack_ids(req.get("get"), MAX_GET)
    if not ids:
        raise SyncProtocolError("'get' asks for no event")
    events: list[str | None] = []
    size = 0
    for raw in store.get(ids):
        if raw is None:
            events.append(None)
            size += 5
            continue
        text = raw.decode("utf-8", "replace")  # the requester's checks reject a mangled one
        cost = len(orjson.dumps(text)) + 1
        if events and size + cost > MAX_PAGE_BYTES:
            break
        events.append(text)
        size += cost
    return {"events": events}


def check_get_response(resp: Any, asked: int) -> list[str | None]:
    """The client side of ``get``: 1..asked entries, each an event line or null."""
    _raise_if_error(resp)
    events = resp.get("events") if isinstance(resp, dict) else None
    if not isinstance(events, list) or not 1 <= len(events) <= asked \
            or not all(e is None or isinstance(e, str) for e in events):
        raise SyncProtocolError(f"'get' response must list 1..{asked} events or nulls")
    return events


def check_id_response(resp: Any) -> tuple[str, list[str], int, int, int]:
    """The client side of an ids page: (epoch, ids, start, next, total)."""
    _raise_if_error(resp)
    if not isinstance(resp, dict):
        raise SyncProtocolError("response must be a JSON object")
    epoch = resp.get("epoch")
    if not isinstance(epoch, str) or not epoch or len(epoch) > 64:
        raise SyncProtocolError("'epoch' must be a non-empty short string")
    ids = unpack_ids(resp.get("ids"), MAX_ID_PAGE)
    start = _int(resp, "start", 0, 2**53)
    nxt = _int(resp, "next", 0, 2**53)
    total = _int(resp, "total", 0, 2**53)
    if not start <= nxt <= total or len(ids) > nxt - start:
        raise SyncProtocolError(f"inconsistent ids page: start={start} next={nxt} "
                                f"ids={len(ids)} total={total}")
    return epoch, ids, start, nxt, total


def check_response(resp: Any) -> tuple[str, list[str], int, int]:
    """The client side: validate the shape of a page (SyncRefused for an error reply)."""
    _raise_if_error(resp)
    if not isinstance(resp, dict):
        raise SyncProtocolError("response must be a JSON object")
    epoch = resp.get("epoch")
    if not isinstance(epoch, str) or not epoch or len(epoch) > 64:
        raise SyncProtocolError("'epoch' must be a non-empty short string")
    events = resp.get("events")
    if not isinstance(events, list) or not all(isinstance(e, str) for e in events):
        raise SyncProtocolError("'events' must be a list of strings")
    nxt = _int(resp, "next", 0, 2**53)
    total = _int(resp, "total", 0, 2**53)
    if nxt < len(events) or nxt > total:
        raise SyncProtocolError(f"inconsistent page: next={nxt} events={len(events)} total={total}")
    return epoch, events, nxt, total


# every this many pulls of a peer read its ids from the start again, and ask for the ones we do
# not hold: an event our intake refused for now (its author over its rate, too many held or
# waiting) lies behind our cursor, and that peer would never offer it again. Peers that
# stored a member's flood in different parts then differed for good (the simulator's seed
# 3560: an honest observer held 7 claims no other honest peer did). 32 bytes per event of
# that peer's log, every RESCAN_EVERY-th pull of it. The simulator's anti-entropy does the
# same (agent.drivers.sim.network).
RESCAN_EVERY = 10

@dataclass
class PeerCursor:
    """How far we have pulled one peer's log (in memory only)."""

    epoch: str | None = None
    cursor: int = 0
    total: int = 0
    pulled: int = 0  # events received from this peer, all syncs
    new: int = 0  # of which were new to us
    pages: int = 0  # pages received, all syncs
    resets: int = 0  # times the peer's log changed under us (new epoch / shorter log)
    pulls: int = 0  # syncs from this peer (every RESCAN_EVERY-th reads its ids from the start)
    old: bool = False  # the peer answered an ids request with a whole page (first version)


@dataclass(frozen=True)
class SyncClock:
    """The runtime's clocks as sync uses them: ``serve`` the one we stamp by (sent in every
    page we serve), ``local`` ours uncorrected (around each request we send), and
    ``round_trip(peer, sent, peer_ms, received)`` for what a page's ``now`` told us."""

    serve: Callable[[], int]
    local: Callable[[], int]
    round_trip: Callable[[str, int, int, int], None]


def page_clock(resp: Any) -> int | None:
    """A page's ``now`` (the server's clock), if it sent a usable one."""
    if isinstance(resp, dict):
        now = resp.get("now")
        if isinstance(now, int) and not isinstance(now, bool) and 0 <= now < 2**53:
            return now
    return None
