"""Tables that read at any width: in an 80-column terminal, piped into a file, in a CI log.

Rich shrinks a table that is too wide by cutting cells (``ddtree(budge…``, ``1,080…``), which loses exactly what
identifies a row. :func:`fit_table` decides the widths itself instead, so nothing is cut:

- every column is measured on its own cells (markup removed);
- a column that may wrap (the configuration) wraps between words, never inside one;
- when the whole does not fit, low-value columns (``priority`` below ``wrap_above``) are dropped before a
  configuration is wrapped, then the wrapping columns wrap, then the remaining optional columns go, lowest
  ``priority`` first; the caption says which were left out (``--json`` and the report keep them all);
- columns marked ``required`` (what identifies a row, and the figure the table is about) are never dropped;
  when even they do not fit, the table is as wide as they need and the terminal wraps it, whole.

Widths given to rich as fixed column widths are never collapsed by it, so what is computed here is what prints.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal

from rich import box as boxes
from rich.box import Box
from rich.table import Table
from rich.text import Text

__all__ = ["Column", "fit_table", "plain_width", "word_width"]

Justify = Literal["left", "right", "center"]


@dataclass
class Column:
    """One column of a fitted table."""

    header: str
    justify: Justify = "right"
    #: Never dropped (what identifies a row, and the figure the table is about).
    required: bool = False
    #: Higher stays longer when the table must lose columns.
    priority: int = 0
    #: May wrap between words (the configuration); other columns are never wrapped.
    wrap: bool = False


def _text(cell: Any) -> Text:
    """A cell as rich Text: Text as it is, anything else read as rich markup (escape what a user wrote)."""
    if isinstance(cell, Text):
        return cell
    return Text.from_markup(str(cell))


def plain_width(cell: Any) -> int:
    """The cells a value takes on one line, markup removed (the widest line of a multi-line value)."""
    return max((Text(line).cell_len for line in _text(cell).plain.splitlines()), default=0)


def word_width(cell: Any) -> int:
    """The widest word of a value: the narrowest a wrapping column can get without cutting one."""
    return max((Text(word).cell_len for word in _text(cell).plain.split()), default=0)


def _overhead(count: int, table_box: Box | None, show_edge: bool, padding: int) -> int:
    if count == 0:
        return 0
    lines = (count - 1 + (2 if show_edge else 0)) if table_box is not None else 0
    return 2 * padding * count + lines


def fit_table(
    columns: Sequence[Column],
    rows: Sequence[Sequence[Any]],
    width: int,
    *,
    title: str | None = None,
    caption: str | None = None,
    table_box: Box | None = boxes.SIMPLE_HEAD,
    show_edge: bool = False,
    sections: Sequence[int] = (),
    wrap_above: int = 50,
    legends: Sequence[tuple[str, str]] = (),
) -> Table:
    """A rich Table of ``rows`` under ``columns`` that fits ``width`` without cutting a cell (module docstring).

    ``sections``: row indexes after which a section ends (a blank line between groups of rows). An optional
    column with nothing in it (every cell empty or ``-``) is left out. ``legends``: (column header, what it
    means), said in the caption, joined by ``; ``, only for the columns the table keeps (a legend of a margin
    under a table that left its margin out explained nothing).
    """
    padding = 1
    empty = {
        i
        for i, c in enumerate(columns)
        if not c.required and rows and all(_text(r[i]).plain.strip() in ("", "-") for r in rows)
    }
    natural = [max([plain_width(c.header), *(plain_width(r[i]) for r in rows)]) for i, c in enumerate(columns)]
    narrow = [
        max([word_width(c.header), *(word_width(r[i]) for r in rows)]) if c.wrap else natural[i]
        for i, c in enumerate(columns)
    ]
    keep = [i for i in range(len(columns)) if i not in empty]

    def needed(indexes: list[int], widths: list[int]) -> int:
        return sum(widths[i] for i in indexes) + _overhead(len(indexes), table_box, show_edge, padding)

    dropped: list[str] = []

    def drop_until_fits(widths: list[int], below: float) -> None:
        while needed(keep, widths) > width:
            optional = [i for i in keep if not columns[i].required and columns[i].priority < below]
            if not optional:
                return
            lowest = min(optional, key=lambda i: (columns[i].priority, -i))
            keep.remove(lowest)
            dropped.append(columns[lowest].header)

    drop_until_fits(natural, wrap_above)  # low-value figures go before a configuration wraps
    drop_until_fits(narrow, float("inf"))
    widths = {i: natural[i] for i in keep}
    spare = width - needed(keep, natural)
    if spare < 0:
        # Wrap the wrapping columns down to their widest word: optional ones before the identifying ones.
        wrapping = (i for i in keep if columns[i].wrap)
        for i in sorted(wrapping, key=lambda i: (columns[i].required, columns[i].priority, -natural[i])):
            cut = min(-spare, natural[i] - narrow[i])
            widths[i] -= cut
            spare += cut
            if spare >= 0:
                break
    kept = {columns[i].header for i in keep}
    legend = "; ".join(text for header, text in legends if header in kept)
    notes = [n for n in (caption, legend) if n]
    if dropped:
        notes.append(f"left out at this width: {', '.join(reversed(dropped))} (--json has every figure)")
    # A caption or title wider than the columns widens the table (up to ``width``) instead of wrapping into a
    # narrow strip under it.
    words = [plain_width(t) for t in (title, *notes) if t]
    table = Table(
        min_width=min(width, max(words, default=0)) or None,
        title=title,
        title_justify="left",
        caption="\n".join(notes) or None,
        caption_justify="left",
        box=table_box,
        show_edge=show_edge,
        padding=(0, padding),
        pad_edge=True,
    )
    for i in keep:
        column = columns[i]
        table.add_column(
            column.header,
            justify=column.justify,
            width=widths[i],
            no_wrap=not column.wrap,
            overflow="fold",
        )
    ends = set(sections)
    for index, row in enumerate(rows):
        table.add_row(*(_text(row[i]) for i in keep), end_section=index in ends)
    return table
