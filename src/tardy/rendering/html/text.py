"""Text on the report pages: escaping what comes from the data, and numbers written out
(decimal texts with separators, changes and percentages).
"""

from __future__ import annotations

import html
from decimal import Decimal, InvalidOperation

MAX_TEXT = 90  # characters of a reason in a hover text or a chart note


def esc(value: object) -> str:
    """Text for the page (quotes too: it may stand in an attribute)."""
    return html.escape(str(value), quote=True)


def plain(value: object) -> str:
    """Text for a plotly label or hover text: escaped, so that plotly shows it as written."""
    return html.escape(str(value), quote=False)


def count(n: int, noun: str) -> str:
    """``1 arrival day``, ``12 arrival days``."""
    return f"{n:,} {noun}{'' if n == 1 else 's'}"


def short(text: str, limit: int = MAX_TEXT) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


def decimal(text: str | None) -> Decimal | None:
    if text is None:
        return None
    try:
        return Decimal(text)
    except InvalidOperation:
        return None


def number(text: str | None) -> float | None:
    value = decimal(text)
    return None if value is None else float(value)


def amount(text: str | None) -> str:
    """A decimal text with thousands separators, as exact as given ("—" when missing)."""
    value = decimal(text)
    if value is None:
        return "—" if text is None else text
    return f"{value:,}"


def change(before: str | None, after: str | None) -> str:
    """``+12.50 (+1.3%)``: after minus before, and relative to before."""
    b, a = decimal(before), decimal(after)
    if b is None or a is None:
        return "new" if b is None and a is not None else "—"
    delta = a - b
    return f"{delta:+,} ({percent(before, after)})" if b else f"{delta:+,}"


def percent(before: str | None, after: str | None) -> str:
    """The relative change, precise enough not to show a change as 0.0%."""
    b, a = decimal(before), decimal(after)
    if b is None or a is None or not b:
        return ""
    relative = (a - b) / b
    return (
        f"{relative:+.2%}" if relative and abs(relative) < Decimal("0.001") else f"{relative:+.1%}"
    )
