"""Child processes that never outlive the process that started them."""

from __future__ import annotations

import os
import signal
import sys
from functools import partial
from typing import Callable


def _die_with(parent: int) -> None:
    try:
        import ctypes

        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(1, signal.SIGTERM, 0, 0, 0)  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        return
    if os.getppid() != parent:  # it died between the fork and the prctl: no signal will come
        os._exit(1)


def die_with_parent() -> Callable[[], None] | None:
    """A ``preexec_fn`` that has the child get SIGTERM when its parent dies, however it dies
    (kill -9 included), so nothing outlives it holding ports or a model in memory. Linux only
    (None elsewhere). The kernel sends it when the *thread* that forked exits: start such a
    child from a thread that lives as long as the parent (the main thread)."""
    return partial(_die_with, os.getpid()) if sys.platform.startswith("linux") else None


class HeldSignals:
    """Holds SIGINT, SIGTERM and SIGHUP while a child is started, so an interruption cannot
    land between its fork and the caller owning its handle (the child would outlive it); call
    ``release()`` once the handle is owned, inside the block that cleans up: a held signal then
    goes to the handler it was meant for. Outside the main thread (no handlers can be set
    there) it holds nothing."""

    SIGNALS = tuple(s for s in (signal.SIGINT, signal.SIGTERM, getattr(signal, "SIGHUP", None)) if s)

    def __init__(self) -> None:
        self._saved: dict[int, object] = {}
        self._held: list[int] = []

    def __enter__(self) -> "HeldSignals":
        import threading

        if threading.current_thread() is threading.main_thread():
            for s in self.SIGNALS:
                self._saved[s] = signal.signal(s, lambda signum, _frame: self._held.append(signum))
        return self

    def __exit__(self, *exc: object) -> None:
        self.release()  # (a no-op once released; otherwise nothing that arrived is lost)

    def _restore(self) -> None:
        for s, h in self._saved.items():
            signal.signal(s, h)  # type: ignore[arg-type]
        self._saved.clear()

    def release(self) -> None:
        """Put the handlers back and deliver what arrived meanwhile (a KeyboardInterrupt for
        Ctrl-C, or whatever the caller's handler raises)."""
        saved = dict(self._saved)
        self._restore()
        for s in dict.fromkeys(self._held):
            h = saved.get(s)
            if callable(h):
                h(s, None)
            elif h == signal.SIG_DFL:
                os.kill(os.getpid(), s)
        self._held.clear()


# ------------------------------------------------------------ short-lived tools and signals
# What stops a short-lived tool (submit, observe --once, revoke's publish): Ctrl-C, `kill`,
# `timeout`, CI, systemd, a closed terminal. Each must leave the swarm and remove its temporary
# directory; the default action of SIGTERM and SIGHUP ends the process on the spot and leaves
# /tmp/swarm-* behind.
STOP_SIGNALS = tuple(s for s in (signal.SIGINT, signal.SIGTERM, getattr(signal, "SIGHUP", None)) if s)


class Stopped(Exception):
    """A short-lived tool was stopped by a signal after cleaning up; the CLI exits with
    128 + the signal's number, as a shell reports a process the signal ended."""

    def __init__(self, signum: int) -> None:
        super().__init__(f"stopped by {signal.Signals(signum).name}")
        self.signum = signum
