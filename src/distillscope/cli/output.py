"""How the command line prints: tables readable at any width or piped, progress a log shows.

A table on a terminal wide enough for every cell is a rich table; piped, redirected, or on a
terminal too narrow, it is plain text with every cell whole (rich would squeeze the columns to
the width and cut each number to ``0.…``). Cells are text, never markup: ``[lmeval,lang]`` in an
install hint stays as written.

Progress on a terminal is the CLI's rich bar; elsewhere (a log file, a batch job's output)
:class:`ProgressLog` prints a plain line every ``every`` steps or per finished run, with the time
elapsed and the ETA. Either way the lines are appended to ``progress.log`` in the run or study
directory, so ``tail -f DIR/progress.log`` follows a run started anywhere.
"""

from __future__ import annotations

import math
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from rich.console import Console
from rich.markup import escape
from rich.table import Table

from distillscope.store import PROGRESS_FILE

#: Progress lines a training run prints (one every ceil(steps / LINES_PER_RUN) steps).
LINES_PER_RUN = 20
#: The width a wrapped column of prose needs at least, on a terminal.
WRAPPED_WIDTH = 30


def print_table(
    console: Console,
    title: str,
    columns: Sequence[str],
    rows: Sequence[Sequence[object]],
    *,
    numeric: Sequence[int] = (),
    styles: Sequence[str | None] = (),
    wrap: int | None = None,
) -> None:
    """Print a table with every cell whole: rich on a terminal wide enough, plain text else.

    ``numeric``: indices of right-aligned columns; ``styles``: a rich style per row (terminal
    only; the cells themselves must say what a style marks); ``wrap``: the index of a column of
    prose that a terminal table may wrap (counted as :data:`WRAPPED_WIDTH` wide)."""
    cells = [[str(c) for c in row] for row in rows]
    widths = [max([len(name), *(len(r[j]) for r in cells)]) for j, name in enumerate(columns)]
    shown = [min(w, WRAPPED_WIDTH) if j == wrap else w for j, w in enumerate(widths)]
    needed = sum(shown) + 3 * len(columns) + 1  # rich's borders and one space of padding
    if not console.is_terminal or needed > console.width:
        _plain(console, title, columns, cells, widths, numeric)
        return
    table = Table(title=escape(title))
    for j, name in enumerate(columns):
        justify = "right" if j in numeric else "left"
        table.add_column(escape(name), justify=justify, no_wrap=j != wrap)
    for i, row in enumerate(cells):
        table.add_row(*map(escape, row), style=styles[i] if i < len(styles) else None)
    console.print(table)


def _plain(console, title, columns, cells, widths, numeric) -> None:
    def line(row: Sequence[str]) -> str:
        parts = [
            v.rjust(w) if j in numeric else v.ljust(w)
            for j, (v, w) in enumerate(zip(row, widths, strict=True))
        ]
        return "  ".join(parts).rstrip()

    # soft_wrap: a line longer than the console's width is left to the reader's pager
    rule = ["-" * w for w in widths[:-1]] + ["-" * len(columns[-1])]  # the last: not padded
    for text in (title, line(columns), line(rule), *map(line, cells)):
        console.print(text, markup=False, highlight=False, soft_wrap=True)


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
