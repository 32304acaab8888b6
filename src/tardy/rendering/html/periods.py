"""The periods chart: how many periods of each model promoted restatements changed."""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Sequence

import plotly.graph_objects as go

from tardy.rendering.html.style import MAX_HOVER_LINES, ORANGE, TEMPLATE, nothing_yet
from tardy.rendering.html.text import plain, short
from tardy.reporting.records import RestatedPeriod


def periods_figure(periods: Sequence[RestatedPeriod]) -> go.Figure:
    """Periods restated per model: all time and in the last 7 days (horizontal bars)."""
    if not periods:
        return nothing_yet("Nothing yet: no promoted restatement has changed a period.")
    models = sorted({p.model for p in periods})
    figure = go.Figure()
    for label, colour, chosen in (
        ("all time", "#94a3b8", list(periods)),
        ("last 7 days", ORANGE, [p for p in periods if p.recent]),
    ):
        by_model: dict[str, Counter[tuple[str, str]]] = defaultdict(Counter)
        for p in chosen:
            by_model[p.model][(p.restatement_id, p.reason)] += 1
        hover = []
        for model in models:
            counts = by_model[model]
            lines = [f"<b>{plain(model)}</b>: {sum(counts.values())} period(s), {label}"]
            lines += [
                f"{plain(rid)} · {plain(short(reason))}: {n}"
                for (rid, reason), n in counts.most_common(MAX_HOVER_LINES)
            ]
            if len(counts) > MAX_HOVER_LINES:
                lines.append(f"… and {len(counts) - MAX_HOVER_LINES} more restatements")
            hover.append("<br>".join(lines))
        counts_per_model = [sum(by_model[m].values()) for m in models]
        figure.add_bar(
            y=[plain(m) for m in models],
            x=counts_per_model,
            orientation="h",
            name=label,
            marker_color=colour,
            text=counts_per_model,
            textposition="outside",
            cliponaxis=False,
            hovertext=hover,
            hoverinfo="text",
        )
    figure.update_layout(
        template=TEMPLATE,
        barmode="group",
        height=120 + 56 * len(models),
        xaxis_title="periods restated (days, week starts or month starts)",
        yaxis={"autorange": "reversed"},
    )
    return figure
