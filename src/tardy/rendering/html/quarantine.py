"""The quarantine chart: quarantined rows per day, stacked by reason."""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Sequence

import plotly.graph_objects as go

from tardy.quarantine.listing import Count
from tardy.rendering.html.page import table
from tardy.rendering.html.style import TEMPLATE, nothing_yet
from tardy.rendering.html.text import plain, short
from tardy.reporting.records import QuarantineDay

REASON_COLOURS = ("#dc2626", "#d97706", "#7c3aed", "#0891b2", "#65a30d", "#db2777", "#475569")


def quarantine_figure(days: Sequence[QuarantineDay]) -> go.Figure:
    """Quarantined rows per day, stacked by reason (the most frequent reason at the bottom)."""
    if not days:
        return nothing_yet("Nothing yet: no row has been quarantined.")
    totals: Counter[str] = Counter()
    by_reason: dict[str, Counter[str]] = defaultdict(Counter)
    for d in days:
        totals[d.reason] += d.rows
        by_reason[d.reason][d.day] += d.rows
    figure = go.Figure()
    for i, (reason, total) in enumerate(totals.most_common()):
        per_day = sorted(by_reason[reason].items())
        figure.add_bar(
            x=[day for day, _ in per_day],
            y=[rows for _, rows in per_day],
            name=f"{plain(short(reason, 50))} ({total:,})",
            marker_color=REASON_COLOURS[i % len(REASON_COLOURS)],
            hovertext=[f"<b>{plain(day)}</b><br>{plain(reason)}: {n:,} rows" for day, n in per_day],
            hoverinfo="text",
        )
    figure.update_layout(
        template=TEMPLATE,
        barmode="stack",
        bargap=0.15,
        legend_traceorder="normal",
        height=380,
        yaxis_title="rows quarantined",
        xaxis_title="day of the row",
    )
    return figure


def review_table(counts: Sequence[Count]) -> str:
    """The stewards' review: open and reviewed records per source and reason."""
    return "<h3>Quarantine review: open and reviewed, per source and reason</h3>" + table(
        ["source", "reason", "open", "reviewed", "oldest open (h)"],
        (
            [
                c.source,
                c.reason,
                c.open,
                c.reviewed,
                "-" if c.oldest_open_hours is None else f"{c.oldest_open_hours:,.0f}",
            ]
            for c in counts
        ),
        numeric=[2, 3, 4],
    )
