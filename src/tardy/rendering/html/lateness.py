"""The lateness chart: per source, lag percentiles over arrival days, then the late ratio."""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence

import plotly.graph_objects as go
from plotly.subplots import make_subplots

from tardy.rendering.html.style import RED, SOURCE_COLOURS, TEMPLATE, nothing_yet
from tardy.rendering.html.text import count, plain
from tardy.report_records import LatenessDay

MAX_DOTS = 60  # days up to which a line over days draws a dot per day

PERCENTILES = (  # name, colour, line dash, dot symbol
    ("p50", "#2563eb", "solid", "circle"),
    ("p95", "#d97706", "dash", "diamond"),
    ("p99", "#dc2626", "dot", "square"),
)


def points(values: Sequence[float | None]) -> dict[str, object]:
    """How a line over days draws its points: a line with a dot per day while there are few
    days (``MAX_DOTS``), and always a bigger dot on a day without a neighbour (no value the day
    before or after in the series, e.g. a source that delivers once a week): a line alone
    would not show such a day at all."""
    isolated = [
        v is not None
        and (i == 0 or values[i - 1] is None)
        and (i == len(values) - 1 or values[i + 1] is None)
        for i, v in enumerate(values)
    ]
    dot = 5 if len(values) <= MAX_DOTS else 0
    if not any(isolated) and not dot:
        return {"mode": "lines"}
    return {"mode": "lines+markers", "marker_size": [8 if i else dot for i in isolated]}


def lateness_figure(days: Sequence[LatenessDay], grace_days: int) -> go.Figure:
    """Per source, lag p50/p95/p99 in hours over arrival days (one row each), then the late
    ratio of every source over arrival days (last row)."""
    if not days:
        return nothing_yet("Nothing yet: no bronze row has arrived.")
    sources = sorted({d.source_system for d in days})
    arrival_days = Counter(d.source_system for d in days)
    rows = len(sources) + 1
    figure = make_subplots(
        rows=rows,
        cols=1,
        shared_xaxes=True,
        vertical_spacing=min(0.35 / rows, 0.08),
        subplot_titles=[
            f"{plain(s)}: lag in hours ({count(arrival_days[s], 'arrival day')})" for s in sources
        ]
        + [f"late ratio: share of rows arriving after the {grace_days}-day grace window"],
    )
    for row, source in enumerate(sources, start=1):
        mine = [d for d in days if d.source_system == source]
        x = [d.arrival_date for d in mine]
        for name, colour, dash, symbol in PERCENTILES:
            y = [getattr(d, f"lag_hours_{name}") for d in mine]
            figure.add_scatter(
                x=x,
                y=y,
                name=f"lag {name}",
                legendgroup=name,
                showlegend=row == 1,
                **points(y),
                marker_symbol=symbol,
                line={"color": colour, "dash": dash, "width": 1.5},
                hovertext=[
                    f"<b>{plain(source)}</b> {plain(d.arrival_date)}<br>lag {name}: "
                    + ("—" if v is None else f"{v:,.1f} h")
                    for d, v in zip(mine, y, strict=True)
                ],
                hoverinfo="text",
                row=row,
                col=1,
            )
        # Late: arrived after event day + 1 + grace_days (00:00), i.e. a lag of between
        # grace_days and grace_days + 1 days, depending on the event's time of day.
        figure.add_hrect(
            y0=24 * grace_days,
            y1=24 * (grace_days + 1),
            fillcolor="#fee2e2",
            opacity=0.7,
            layer="below",
            line_width=0,
            annotation_text=(
                f"grace window ends ({24 * grace_days}–{24 * (grace_days + 1)} h)"
                if row == 1
                else ""
            ),
            annotation_position="top right",
            annotation_font={"size": 10, "color": RED},
            row=row,
            col=1,
        )
        figure.update_yaxes(title_text="hours", rangemode="tozero", row=row, col=1)
    for i, source in enumerate(sources):
        mine = [d for d in days if d.source_system == source]
        ratios = [d.late_ratio for d in mine]
        figure.add_scatter(
            x=[d.arrival_date for d in mine],
            y=ratios,
            name=f"late ratio: {plain(source)}",
            **points(ratios),
            line={"color": SOURCE_COLOURS[i % len(SOURCE_COLOURS)], "width": 1.5},
            hovertext=[
                f"<b>{plain(source)}</b> {plain(d.arrival_date)}<br>"
                f"late: {d.late_rows:,} of {d.rows:,} rows"
                + ("" if d.late_ratio is None else f" ({d.late_ratio:.1%})")
                for d in mine
            ],
            hoverinfo="text",
            row=rows,
            col=1,
        )
    figure.update_yaxes(
        title_text=f"late (> {grace_days} d grace)",
        tickformat=".0%",
        rangemode="tozero",
        row=rows,
        col=1,
    )
    figure.update_xaxes(title_text="arrival day", row=rows, col=1)
    figure.update_annotations(font_size=13)
    figure.update_layout(template=TEMPLATE, height=90 + 210 * rows, margin={"t": 60})
    return figure
