"""Progress on a terminal is a rich bar (:func:`progress_bar`); elsewhere (a log file, a batch
job's output) :class:`ProgressLog` prints a plain line every ``every`` steps or per finished run,
with the time elapsed and the ETA. Either way the lines are appended to ``progress.log`` in the
run or study directory, so ``tail -f DIR/progress.log`` follows a run started anywhere.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from rich.console import Console

from distillscope.cli.output import console as default_console
from distillscope.store import PROGRESS_FILE

if TYPE_CHECKING:
    from rich.progress import Progress

#: Progress lines a training run prints (one every ceil(steps / LINES_PER_RUN) steps).
LINES_PER_RUN = 20


def progress_bar(console: Console = default_console) -> Progress:
    """The CLI's rich progress bar (description, bar, done/total, elapsed, ETA); disabled off a
    terminal, where :class:`ProgressLog`'s plain lines show the progress instead."""
    from rich.progress import (
        BarColumn,
        MofNCompleteColumn,
        Progress,
        TextColumn,
        TimeElapsedColumn,
        TimeRemainingColumn,
    )

    return Progress(
        TextColumn("{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        TextColumn("ETA"),
        TimeRemainingColumn(),
        console=console,
        transient=False,
        disable=not console.is_terminal,  # elsewhere: ProgressLog's plain lines
    )


def duration(seconds: float) -> str:
    """``1h02m``, ``3m05s``, ``42s``: a time span as a log line shows it."""
    s = max(0, round(seconds))
    if s >= 3600:
        return f"{s // 3600}h{s % 3600 // 60:02d}m"
    return f"{s // 60}m{s % 60:02d}s" if s >= 60 else f"{s}s"


@dataclass
class ProgressLog:
    """Plain progress lines: ``WHAT: UNIT k/N DETAIL, elapsed E, ETA T``.

    Printed to ``console`` when ``echo`` (output that is not a terminal), always appended to
    ``path`` (when given). A line is written for the first update, every ``every``-th unit and
    the last; the ETA is the time since this log was made per unit done since, times the units
    left (a resumed run's earlier steps are not counted in the rate; loading the models is)."""

    what: str
    total: int
    unit: str
    console: Console
    path: Path | None = None
    every: int = 1
    echo: bool = True
    _start: float = field(default_factory=time.monotonic, init=False)
    _first: int | None = field(default=None, init=False)  # units done before this process

    @classmethod
    def for_steps(cls, what: str, total: int, console: Console, run_dir: Path) -> ProgressLog:
        """A training run's log: about :data:`LINES_PER_RUN` lines, into ``run_dir``."""
        every = max(1, math.ceil(total / LINES_PER_RUN))
        echo = not console.is_terminal
        return cls(what, total, "step", console, run_dir / PROGRESS_FILE, every, echo)

    def update(self, done: int, detail: str = "") -> None:
        """Record that ``done`` units of ``total`` are finished; ``detail``: e.g. the loss."""
        if self._first is None:
            self._first = done - 1
        if done not in (self._first + 1, self.total) and done % self.every:
            return
        elapsed = time.monotonic() - self._start
        rate = elapsed / max(1, done - self._first)
        eta = duration(rate * max(0, self.total - done))
        extra = f" {detail}" if detail else ""
        self.note(f"{self.unit} {done}/{self.total}{extra}, elapsed {duration(elapsed)}, ETA {eta}")

    def note(self, message: str) -> None:
        """One line ``WHAT: message`` (a phase such as the evaluation starting)."""
        line = f"{self.what}: {message}"
        if self.echo:
            self.console.print(line, markup=False, highlight=False, soft_wrap=True)
        if self.path is not None and self.path.parent.is_dir():
            stamp = time.strftime("%Y-%m-%d %H:%M:%S")
            with self.path.open("a") as f:
                f.write(f"{stamp} {line}\n")
