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
