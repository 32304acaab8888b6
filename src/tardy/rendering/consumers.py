"""Rendering of what consumers read about a published model (``tardy card``): Rich tables
at 80 columns, printed by the CLI."""

from __future__ import annotations

import typing as t

from rich.markup import escape
from rich.table import Table

from tardy.rendering.cells import names_column, number, timestamp

if t.TYPE_CHECKING:
    from rich.console import Console

    from tardy.consumers.card import Card


def render_card(card: Card, console: Console) -> None:
    """``tardy card TABLE``: the model's card, then the lateness of the sources it reads."""
    table = Table(title=f"Data product: {card.table}", show_header=False)
    table.add_column("", style="bold", no_wrap=True)
    table.add_column("", overflow="fold")
    rows = [
        ("description", card.description or "-"),
        ("owner", card.owner or "-"),
        ("version", card.current_version or "not published yet (`tardy publish`)"),
        (
            "last published",
            f"{timestamp(card.last_published_at)} by {card.last_produced_by}"
            if card.last_published_at
            else "-",
        ),
        (
            "last restated",
            f"{timestamp(card.last_restated_at)} by {card.last_restatement_id}"
            if card.last_restated_at
            else "never",
        ),
        ("final through", card.final_through or "- (bronze is empty)"),
    ]
    for label, value in rows:
        table.add_row(label, escape(value))
    console.print(table)
    if card.sources:
        sources = Table(title="The sources it reads")
        names_column(sources, "source", [s.source_system for s in card.sources])
        for header in ("late %", "lag p95 h", "latest arrival"):
            sources.add_column(header, justify="right")
        for s in card.sources:
            sources.add_row(
                escape(s.source_system),
                "-" if s.late_ratio is None else f"{s.late_ratio:.2%}",
                number(s.lag_hours_p95, ".1f"),
                timestamp(s.max_arrival_ts) or "-",
            )
        console.print(sources)
