"""Sync: pull a peer's event log in pages over a libp2p request/response protocol.

Request  {"epoch": <str|null>, "cursor": int, "limit": int}
Response {"epoch": str, "events": [str, ...], "next": int, "total": int}
or, to ask whether a peer stored given events (`submit` confirms its goal this way):
Request  {"has": [<event id>, ...]}      Response {"has": [bool, ...]}

A request the server will not answer gets an error reply instead of a reset stream:
Response {"error": {"code": "bad_request" | "busy" | "unavailable", "message": str}}
which the client raises as :class:`SyncRefused` (the message says what was wrong).

Framing (one request and one response per stream, as libp2p's request/response helper):
an unsigned-varint length, then the JSON bytes.

The server only reads its store. A page starts at ``cursor`` unless the requester named
another epoch (the log was wiped/recreated) or a cursor past the end; then it starts at 0.
The requester can tell where a page starts (``next - len(events)``) and keeps a per-peer
(epoch, cursor) in memory. Because a peer's store holds only what it accepted, in acceptance
order, pulling it in order delivers dependencies before dependents.

Pages are capped by count (``MAX_PAGE``) and by encoded bytes (``MAX_PAGE_BYTES``). The byte
cap is set by what a client can read, not by the library's 10 MiB response limit: py-libp2p's
``read_exactly`` gives up after 101 reads, and over mplex a read returns at most one ~4 KiB
frame, so a response over ~406 KiB always fails with IncompleteReadError (measured: a 600 KiB
page fails at 415,749 bytes, every time; the 4 MiB cap this had made a log of large events
unsyncable). A page holds at least one event (at most 64 KiB, ~128 KiB encoded).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import orjson

from .store import EventStore

__all__ = [
    "DEFAULT_PAGE", "MAX_PAGE", "MAX_PAGE_BYTES", "OrjsonCodec", "PeerCursor", "SyncProtocolError",
    "SyncRefused", "build_page", "check_has_response", "check_response", "decode_request",
    "error_reply", "parse_has_request", "parse_request", "sync_protocol_id",
]

DEFAULT_PAGE = 200
MAX_PAGE = 1000
MAX_PAGE_BYTES = 256 * 1024  # encoded; a client cannot read a response over ~406 KiB (module doc)


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


ERROR_CODES = ("bad_request", "busy", "unavailable")


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
    return epoch, cursor, min(limit, MAX_PAGE)


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
    """The server side: one page of our log. Raises SyncProtocolError for a bad request,
    StoreError if our log cannot be read."""
    epoch, cursor, limit = parse_request(req)
    total = len(store)
    start = cursor
    if (epoch is not None and epoch != store.epoch) or cursor > total:
        start = 0
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
