"""The lateness chart: per source, lag percentiles over arrival hours (the lateness series),
then the late ratio; the alerts against each source's own history drawn over their hours."""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from datetime import datetime, timedelta

import plotly.graph_objects as go
from plotly.subplots import make_subplots

from tardy.rendering.html.style import RED, SOURCE_COLOURS, TEMPLATE, nothing_yet
from tardy.rendering.html.text import count, plain
from tardy.reporting.records import LatenessAlert, LatenessHour

MAX_DOTS = 60  # points up to which a line draws a dot per point

PERCENTILES = (  # name, colour, line dash, dot symbol
    ("p50", "#2563eb", "solid", "circle"),
    ("p95", "#d97706", "dash", "diamond"),
    ("p99", "#dc2626", "dot", "square"),
)


def points(values: Sequence[float | None]) -> dict[str, object]:
    """How a line draws its points: a line with a dot per point while there are few
    (``MAX_DOTS``), and always a bigger dot on a point without a neighbour (no value before or
    after it in the series, e.g. a source that delivers once a week): a line alone would not
    show such a point at all."""
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


def lateness_figure(
    days: Sequence[LatenessHour],
    grace_days: int,
    alerts: Sequence[LatenessAlert] = (),
    lag_limits: dict[str, float] | None = None,
) -> go.Figure:
    """Per source, lag p50/p95/p99 in hours over arrival hours (one row each) with the p99
    lag above which its baseline alert fires (``lag_limits``), then the late ratio of every
    source (last row); each alert a red column over its hours, on its source's row and the
    last."""
    if not days:
        return nothing_yet("Nothing yet: no bronze row has arrived.")
    sources = sorted({d.source_system for d in days})
    arrival_hours = Counter(d.source_system for d in days)
    rows = len(sources) + 1
    figure = make_subplots(
        rows=rows,
        cols=1,
        shared_xaxes=True,
        vertical_spacing=min(0.35 / rows, 0.08),
        subplot_titles=[
            f"{plain(s)}: lag in hours ({count(arrival_hours[s], 'arrival hour')})" for s in sources
        ]
        + [f"late ratio: share of rows arriving after the {grace_days}-day grace window"],
    )
    for row, source in enumerate(sources, start=1):
        mine = [d for d in days if d.source_system == source]
        x = [d.arrival_hour for d in mine]
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
                    f"<b>{plain(source)}</b> {plain(d.arrival_hour)}<br>lag {name}: "
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
        limit = (lag_limits or {}).get(source)
        if limit is not None:
            figure.add_hline(
                y=limit,
                line={"color": RED, "dash": "dashdot", "width": 1},
                annotation_text=f"alert: p99 above {limit:,.1f} h (its baseline)",
                annotation_position="bottom right",
                annotation_font={"size": 10, "color": RED},
                row=row,
                col=1,
            )
        figure.update_yaxes(title_text="hours", rangemode="tozero", row=row, col=1)
    for i, source in enumerate(sources):
        mine = [d for d in days if d.source_system == source]
        ratios = [d.late_ratio for d in mine]
        figure.add_scatter(
            x=[d.arrival_hour for d in mine],
            y=ratios,
            name=f"late ratio: {plain(source)}",
            **points(ratios),
            line={"color": SOURCE_COLOURS[i % len(SOURCE_COLOURS)], "width": 1.5},
            hovertext=[
                f"<b>{plain(source)}</b> {plain(d.arrival_hour)}<br>"
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
    for alert in alerts:
        if alert.source_system not in sources or not alert.hours:
            continue
        end = datetime.fromisoformat(alert.hours[-1]) + timedelta(hours=1)
        for row in (sources.index(alert.source_system) + 1, rows):
            figure.add_vrect(
                x0=alert.hours[0],
                x1=end.isoformat(),
                fillcolor=RED,
                opacity=0.15,
                layer="below",
                line_width=0,
                annotation_text=f"alert: {plain(alert.metric)}" if row < rows else "",
                annotation_position="top left",
                annotation_font={"size": 10, "color": RED},
                row=row,
                col=1,
            )
    figure.update_xaxes(title_text="arrival hour (UTC)", row=rows, col=1)
    figure.update_annotations(font_size=13)
    figure.update_layout(template=TEMPLATE, height=90 + 210 * rows, margin={"t": 60})
    return figure
