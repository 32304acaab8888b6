"""The cells every table shares: day ranges, changes, amounts, times, shell commands, name
columns (the layout rules: ``tardy.rendering``)."""

from __future__ import annotations

import re
import typing as t
from collections.abc import Iterable, Sequence
from datetime import datetime
from decimal import Decimal, InvalidOperation

from rich.cells import cell_len
from rich.console import Console, ConsoleOptions, RenderResult
from rich.measure import Measurement
from rich.table import Table
from rich.text import Text

if t.TYPE_CHECKING:
    pass

Spans = Sequence[Sequence[str]]  # closed [first, last] day ranges, ISO dates


def span(first: str, last: str) -> str:
    """``first .. last``, or the day alone."""
    return first if first == last else f"{first} .. {last}"


def spans_text(spans: Spans, empty: str = "-") -> str:
    """Day ranges on one line: ``2026-01-01 .. 2026-01-07, 2026-01-10``."""
    return ", ".join(span(first, last) for first, last in spans) or empty


class Intervals:
    """Day ranges as a cell: wrapped between ranges, inside a range only when it alone does
    not fit (then at its spaces)."""

    def __init__(self, spans: Spans, empty: str = "-") -> None:
        self.parts = [span(first, last) for first, last in spans] or [empty]

    def __rich_measure__(self, console: Console, options: ConsoleOptions) -> Measurement:
        text = ", ".join(self.parts)
        return Measurement(max(cell_len(word) for word in text.split()), cell_len(text))

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        lines: list[str] = []
        for i, part in enumerate(self.parts):
            piece = part if i == len(self.parts) - 1 else f"{part},"
            if lines and cell_len(f"{lines[-1]} {piece}") <= options.max_width:
                lines[-1] = f"{lines[-1]} {piece}"
            else:
                lines.append(piece)
        yield Text("\n".join(lines), overflow="fold")  # a range alone too wide: at its spaces


def change(before: str, after: str) -> str:
    """``before`` over ``→ after``: right-justified, the two numbers line up."""
    return f"{before}\n→ {after}"


def amount(value: object) -> str:
    """A decimal sum with thousands separators (``12,345,678.90``); anything else as is."""
    try:
        return f"{Decimal(str(value)):,}"
    except (InvalidOperation, ValueError):
        return str(value)


def timestamp(value: object, seconds: bool = False) -> str:
    """``2026-01-15 09:30`` (``:12`` with ``seconds``) of a datetime or an ISO string; its
    space lets a narrow column wrap it."""
    if isinstance(value, str):
        text = value
        try:
            value = datetime.fromisoformat(text)
        except ValueError:
            return text
    if isinstance(value, datetime):
        return f"{value:%Y-%m-%d %H:%M:%S}" if seconds else f"{value:%Y-%m-%d %H:%M}"
    return "" if value is None else str(value)


def shell_lines(command: str, width: int, indent: str = "  ") -> str:
    """A shell command indented, continued with `` \\`` before an option (kept with its
    value) to fit ``width``: wrapped by Rich instead, its lines would paste as separate
    commands."""
    if len(indent) + cell_len(command) <= width:
        return indent + command
    lines = [indent]
    for word in re.findall(r"--\S+ (?!--)\S+|\S+", command):
        line = lines[-1]
        if line.strip() and cell_len(f"{line} {word} \\") > width:
            lines[-1] = f"{line} \\"
            lines.append(f"{indent}    {word}")
        else:
            lines[-1] = f"{line} {word}" if line.strip() else f"{line}{word}"
    return "\n".join(lines)


def names_column(table: Table, header: str, names: Iterable[str], **kwargs: t.Any) -> None:
    """A column of model names or ids: never wrapped, as wide as the longest."""
    widest = max((cell_len(name) for name in names), default=0)
    table.add_column(header, no_wrap=True, overflow="fold", min_width=widest or None, **kwargs)


def number(value: float | None, fmt: str) -> str:
    """``value`` in ``fmt``, or ``-`` when there is none."""
    return "-" if value is None else format(value, fmt)


def day_span(days: list[str]) -> str:
    if not days:
        return "none"
    span = days[0] if len(days) == 1 else f"{days[0]}..{days[-1]}"
    return f"{len(days)}: {span}"
