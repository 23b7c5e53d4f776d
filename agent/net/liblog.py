"""py-libp2p's own log lines, routed through our logging: one line each, never a traceback.

py-libp2p logs with the standard library; nothing configures it in an agent, so its WARNING
and ERROR records went to Python's last-resort handler: raw text on the console, with
inlined tracebacks (``[ADDCONN_FAIL] ... Cannot schedule task after service has stopped``
after a demo finished, a 7-line "Failed to open stream to peer" block for every peer that
does not speak a protocol, the full traceback of every failed task). Here they become one
structlog line each (``libp2p.log``): the first line of the message, and the exception's
type and message when there is one. Lines this package reports itself, or that are normal
churn, are demoted to debug.
"""

from __future__ import annotations

import logging
from typing import Any

import structlog

__all__ = ["route_library_logs"]

# normal churn, or reported by this package in its own words (and counted)
_DEMOTED = (
    "Failed to open stream to peer",      # a peer without the protocol: callers handle it
    "[ADDCONN_FAIL]",                     # a connection closed while being added (shutdown)
    "Inbound pubsub RPC from peer",       # oversize gossip: counted by GossipChannel
    "request_response ",                  # our sync server does not use the helper's server
    "MultiselectClient handshake:",       # a dial that failed midway: logged by PeerKeeper
    "Failed to read DHT message",         # the DHT is best effort: peers come and go
    "Incomplete DHT message",
    "Failed to open stream to ",
    "Error sending ADD_PROVIDER",
    "Failed to send ADD_PROVIDER",
    "message channel of stream",          # a stream nobody read for 5 s is reset (mplex)
    "Received message for non-existent stream",  # data for a stream we reset (a timeout)
)
# loggers whose records we replace entirely (we log the same events ourselves)
_LEVELS = {
    "libp2p": logging.WARNING,                      # the library's INFO chatter is not ours
    "libp2p.transport.tcp.tcp": logging.CRITICAL,  # every failed dial at ERROR, 3 per attempt
}


class _Bridge(logging.Handler):
    def __init__(self, log: Any) -> None:
        super().__init__(logging.DEBUG)
        self._log = log

    def emit(self, record: logging.LogRecord) -> None:
        try:
            text = record.getMessage()
        except (TypeError, ValueError):  # a format string that does not match its args
            text = str(record.msg)
        first = text.strip().splitlines()[0] if text.strip() else ""
        fields: dict[str, Any] = {"logger": record.name, "msg": first[:300]}
        exc = record.exc_info[1] if record.exc_info else None
        if exc is not None:
            fields["error"] = f"{type(exc).__name__}: {exc}"[:300]
        if first.startswith(_DEMOTED):
            level = "debug"
        elif record.levelno >= logging.ERROR:
            level = "error"
        elif record.levelno >= logging.WARNING:
            level = "warning"
        else:
            level = "debug"
        getattr(self._log, level)("libp2p.log", **fields)


_installed = False


def route_library_logs(log: Any = None) -> None:
    """Install the bridge once per process. Loggers the application configured itself (a
    level already set) keep their level."""
    global _installed
    if _installed:
        return
    for name, level in _LEVELS.items():
        lg = logging.getLogger(name)
        if lg.level == logging.NOTSET:
            lg.setLevel(level)
    root = logging.getLogger("libp2p")
    root.addHandler(_Bridge(log if log is not None else structlog.get_logger("agent.net")))
    root.propagate = False  # not to the last-resort handler (raw text on stderr)
    _installed = True
