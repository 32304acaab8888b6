"""The report's data products section: each published model as its consumers see it (its
card, ``tardy card``)."""

from __future__ import annotations

from collections.abc import Sequence

from tardy.consumers.card import Card
from tardy.rendering.html.page import Markup, table
from tardy.rendering.html.text import esc

HOW = (
    "Each published model as the people who read it see it: whom to ask (its owner), the "
    "version <schema>_published.<table> reads now, when it was last published and last "
    "restated, the last day of its final periods (<schema>_final.<table> holds those only; "
    "later days may still change), and the share of late rows of each source it reads. "
    "`tardy card TABLE` prints one; `tardy versions TABLE --notes latest`, its release note."
)


def _sources(card: Card) -> Markup:
    return Markup(
        "<br>".join(
            f"{esc(s.source_system)} " + ("-" if s.late_ratio is None else f"{s.late_ratio:.2%}")
            for s in card.sources
        )
        or "-"
    )


def _when(value: str | None, none: str) -> str:
    """An ISO instant to the minute, ``2026-01-15 09:30`` (as the terminal's tables show it)."""
    return value[:16].replace("T", " ") if value else none


def products_section(cards: Sequence[Card]) -> str:
    rows = [
        (
            c.table,
            c.owner or "-",
            c.current_version.rsplit("@", 1)[1] if c.current_version else "not yet",
            _when(c.last_published_at, "-"),
            _when(c.last_restated_at, "never"),
            c.final_through or "-",
            _sources(c),
        )
        for c in cards
    ]
    return (
        '<section id="products"><h2>Data products</h2>'
        f'<p class="how">{esc(HOW)}</p>'
        + table(
            ("table", "owner", "version", "published", "restated", "final through", "late %"),
            rows,
            wrap=(1,),
        )
        + "</section>"
    )
