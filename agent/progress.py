"""Progress a person can watch: a plan's counts with elapsed time and an estimate (`demo`,
`submit --wait`), and the embedded model's download (`models install`). A live rich bar on a
terminal; elsewhere (CI, a pipe, a log file) one plain line per change, so nothing is lost
to a display nobody sees."""

from __future__ import annotations

import time
from typing import Mapping

from rich.console import Console
from rich.progress import (
    BarColumn, DownloadColumn, Progress, SpinnerColumn, TaskProgressColumn, TextColumn,
    TimeElapsedColumn, TimeRemainingColumn, TransferSpeedColumn,
)

ORDER = ("open", "voting", "split", "ready", "claimed", "done")


def plan_estimate(counts: Mapping[str, int], elapsed: float) -> float | None:
    """Seconds left, if the nodes known now finish at the pace the done ones did; None before
    the first node is done. A lower bound while nodes are still being split (the tree grows)."""
    total = sum(counts.values())
    done = counts.get("done", 0)
    if done <= 0 or total <= done or elapsed <= 0:
        return 0.0 if total and done >= total else None
    return elapsed * (total - done) / done


def _clock(seconds: float | None) -> str:
    if seconds is None:
        return "?"
    s = int(round(seconds))
    return f"{s // 60}:{s % 60:02d}" if s >= 60 else f"{s}s"


def counts_line(counts: Mapping[str, int]) -> str:
    return "  ".join(f"{k}={counts[k]}" for k in ORDER if counts.get(k)) or "waiting for the goal"


class PlanProgress:
    """``update(counts)`` as the tree changes; ``close()`` at the end (also a context manager)."""

    def __init__(self, console: Console, label: str = "plan", *, live: bool | None = None) -> None:
        self.console = console
        self.t0 = time.monotonic()
        self.live = console.is_terminal if live is None else live
        self._last = ""
        self._progress: Progress | None = None
        if self.live:
            self._progress = Progress(
                SpinnerColumn(), TextColumn("[bold]{task.description}"), BarColumn(),
                TextColumn("{task.completed}/{task.total} nodes done"),
                TextColumn("{task.fields[counts]}", style="dim"),
                TextColumn("elapsed"), TimeElapsedColumn(),
                TextColumn("{task.fields[eta]}"),
                console=console, transient=False)
            self._task = self._progress.add_task(label, total=1, completed=0, counts="", eta="")
            self._progress.start()

    def update(self, counts: Mapping[str, int]) -> str:
        """Show the counts; returns the plain line (what a non-terminal gets)."""
        elapsed = time.monotonic() - self.t0
        total = sum(counts.values())
        eta = plan_estimate(counts, elapsed)
        eta_text = f"~{_clock(eta)} left (estimate; the tree may still grow)" if eta else ""
        line = f"{elapsed:6.1f}s  {counts_line(counts)}" + (f"  {eta_text}" if eta_text else "")
        if self._progress is not None:
            self._progress.update(self._task, total=max(1, total), completed=counts.get("done", 0),
                                  counts=counts_line(counts), eta=eta_text)
        elif counts_line(counts) != self._last:
            self._last = counts_line(counts)
            # one line per change, however narrow the console (a pipe is 80 columns to rich)
            self.console.print(line, markup=False, highlight=False, soft_wrap=True)
        return line

    def close(self) -> None:
        if self._progress is not None:
            self._progress.stop()
            self._progress = None

    def __enter__(self) -> "PlanProgress":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class DownloadProgress:
    """Bytes of a download and of the check after it; plain lines every ``step`` bytes when
    not on a terminal."""

    def __init__(self, console: Console, *, live: bool | None = None, step: int = 100 * 2**20) -> None:
        self.console = console
        self.live = console.is_terminal if live is None else live
        self.step = step
        self._phase = ""
        self._shown = -1
        self._progress: Progress | None = None
        self._task = None
        if self.live:
            self._progress = Progress(
                TextColumn("[bold]{task.description}"), BarColumn(), TaskProgressColumn(),
                DownloadColumn(), TransferSpeedColumn(), TimeRemainingColumn(),
                console=console, transient=False)
            self._progress.start()

    def __call__(self, phase: str, done: int, total: int) -> None:
        if self._progress is not None:
            if phase != self._phase:
                self._phase = phase
                self._task = self._progress.add_task(phase, total=total)
            self._progress.update(self._task, completed=done, total=total)
            return
        if phase != self._phase:
            self._phase, self._shown = phase, -1
        if done >= total or self._shown < 0 or done - self._shown >= self.step:
            self._shown = done
            self.console.print(f"{phase}: {done / 1e6:,.0f} of {total / 1e6:,.0f} MB "
                               f"({100 * done / max(1, total):.0f}%)", markup=False, highlight=False,
                               soft_wrap=True)

    def close(self) -> None:
        if self._progress is not None:
            self._progress.stop()
            self._progress = None
