"""Executing a behaviour's effects: the one routing every driver uses, and what each driver
implements, only where drivers really differ (network I/O, LLM calls, time).

A driver has one method per kind of effect, named by ``route``:

    on_publish   sign, store, send; its answer (the Event, or PublishFailed) goes back to the
                 behaviour at once when the Publish carries a ticket
    on_ask       start an LLM call; its answer comes back later with the ticket
    on_cancel    stop that call; no answer follows
    on_sync      pull the peers' logs; SyncDone comes back with the ticket
    on_wake      poll again by then at the latest
    on_metric    a Count or Observe, into the driver's metrics sink (a Tally, or Prometheus)
    on_log       a structured log line

The drivers call them with what they need beside the effect (the simulator and the central
baseline run many agents: they pass which), so only the routing is shared, and a new kind of
effect is a TypeError in every driver at once, not a silent drop in one.
"""

from __future__ import annotations

from agent.behaviour.effects import Ask, Cancel, Count, Effect, Log, Observe, Publish, SyncPeers, WakeAt

ROUTES: dict[type, str] = {
    Publish: "on_publish", Ask: "on_ask", Cancel: "on_cancel", SyncPeers: "on_sync",
    WakeAt: "on_wake", Count: "on_metric", Observe: "on_metric", Log: "on_log",
}


def route(eff: Effect) -> str:
    """The name of the driver's method for ``eff``: that of the nearest class of it that is an
    effect (a simulated Byzantine member's forged publish is a Publish)."""
    for cls in type(eff).__mro__:
        name = ROUTES.get(cls)
        if name is not None:
            return name
    raise TypeError(f"unknown effect {eff!r}")


__all__ = ["ROUTES", "route"]
