"""How the command line prints: its consoles, and tables readable at any width or piped.

A table on a terminal wide enough for every cell is a rich table; piped, redirected, or on a
terminal too narrow, it is plain text with every cell whole (rich would squeeze the columns to
the width and cut each number to ``0.…``). Cells are text, never markup: ``[lmeval,lang]`` in an
install hint stays as written.

(Progress bars and log lines: :mod:`distillscope.cli.progress`.)
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from rich.console import Console
from rich.markup import escape
from rich.table import Table

#: What commands print; errors and warnings go to ``err_console``, one line each.
console = Console()
err_console = Console(stderr=True, soft_wrap=True)
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


def print_eval(run_dir: Path, metrics: dict) -> None:
    """A run's evaluation (``train``, ``eval``): its metrics, or its status and reason when it
    has none, then where its samples and student are."""
    if not metrics:
        from distillscope.store import read_status

        st = read_status(run_dir)
        console.print(f"[red]{st['status']}[/red]: {st.get('reason', '')}")
        return
    rows = [[key, f"{value:.4f}"] for key, value in sorted(metrics.items())]
    print_table(console, f"evaluation of {run_dir}", ("metric", "value"), rows, numeric=[1])
    console.print(f"what the student wrote: {run_dir / 'samples.jsonl'}")
    if (run_dir / "student").is_dir():
        console.print(f"the student (from_pretrained): {run_dir / 'student'}")
