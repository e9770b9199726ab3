"""The report's tables, fitted to the terminal without breaking a word: rich wraps a cell
at spaces, and folds a word only when the columns' narrowest (each as wide as its longest
word) still do not fit — so columns are dropped, least needed first (below 80 columns,
those always shown at 80 too, all but the first), until they do, and the caller says which.
A pipe (or --wide) gets every column, one row per line."""
from __future__ import annotations

import io
from typing import Mapping, Sequence

import attrs
from rich import box
from rich.console import Console
from rich.measure import Measurement
from rich.table import Table


@attrs.frozen
class Column:
    name: str
    right: bool = False
    drop: int = 0           # 0: always shown; else dropped on a narrow terminal, highest first


def fitted(title: str, columns: Sequence[Column], rows: Sequence[Mapping[str, str]],
           width: int | None) -> tuple[Table, list[str]]:
    """The table, and the columns it left out to fit `width` (None: no limit, no wrapping)."""
    if width is None:
        return _table(title, columns, rows, None), []
    shown = list(columns)
    dropped: list[str] = []
    while True:
        budget = width - _overhead(title, shown)
        least = [_longest_word(c, rows) for c in shown]
        if sum(least) <= budget or len(shown) == 1:
            break
        # The least needed first; on a terminal narrower than 80 columns, then those always
        # shown at 80, right to left -- never the first, which names the row.
        candidates = [c for c in shown if c.drop]
        gone = max(candidates, key=lambda c: c.drop) if candidates else shown[-1]
        shown.remove(gone)
        dropped.append(gone.name)
    widths = [max(len(c.name), *(len(r[c.name]) for r in rows)) for c in shown]
    least = [_longest_word(c, rows) for c in shown]
    # Narrow the widest column that can still wrap, a column at a time, until it fits.
    while sum(widths) > budget:
        slack = [(w - m, w, i) for i, (w, m) in enumerate(zip(widths, least, strict=True)) if w > m]
        if not slack:
            break           # nothing left to drop or wrap: rich folds what it must
        _, _, i = max(slack, key=lambda t: (t[1], t[0]))
        widths[i] -= 1
    return _table(title, shown, rows, widths), dropped


def left_out_note(what: str, width: int, dropped: Sequence[str]) -> str:
    return (f"(a {width}-column terminal: the {what} table leaves out {', '.join(dropped)}; "
            "--wide or --output json shows them)")


def _longest_word(column: Column, rows: Sequence[Mapping[str, str]]) -> int:
    words = [*column.name.split(), *(w for r in rows for w in r[column.name].split())]
    return max((len(w) for w in words), default=1)


def _table(title: str, columns: Sequence[Column], rows: Sequence[Mapping[str, str]],
           widths: Sequence[int] | None) -> Table:
    table = Table(title=title, box=box.SIMPLE_HEAD, title_justify="left", pad_edge=False)
    for i, c in enumerate(columns):
        table.add_column(c.name, justify="right" if c.right else "left",
                         no_wrap=widths is None, overflow="fold",
                         width=widths[i] if widths is not None else None)
    for row in rows:
        table.add_row(*(row[c.name] for c in columns))
    return table


def _overhead(title: str, columns: Sequence[Column]) -> int:
    """What the table's padding and rules add to its columns' widths."""
    probe = _table(title, columns, [], [1] * len(columns))
    console = Console(file=io.StringIO(), width=10_000)
    return Measurement.get(console, console.options, probe).maximum - len(columns)
