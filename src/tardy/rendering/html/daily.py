"""The daily chart: the headline model's measure per period, first published vs today,
restated and provisional periods marked.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime, timedelta

import plotly.graph_objects as go
from plotly.subplots import make_subplots

from tardy.rendering.html.style import (
    BLUE,
    GREEN,
    GREY,
    MAX_HOVER_LINES,
    ORANGE,
    RED,
    TEMPLATE,
    nothing_yet,
)
from tardy.rendering.html.text import amount, change, decimal, number, plain, short
from tardy.reporting.records import DailyRevision


def runs(days: Sequence[str], flags: Sequence[bool]) -> list[tuple[str, str]]:
    """The first and last day of each run of consecutive flagged days."""
    out: list[tuple[str, str]] = []
    start: str | None = None
    for i, (day, flag) in enumerate(zip(days, flags, strict=True)):
        if flag and start is None:
            start = day
        if start is not None and (not flag or i == len(days) - 1):
            out.append((start, day if flag else days[i - 1]))
            start = None
    return out


def day_hover(day: DailyRevision) -> str:
    lines = [
        f"<b>{plain(day.event_date)}</b> ({plain(day.period_status)})",
        f"first published: {amount(day.first_published)}",
        f"final (today): {amount(day.final)}",
    ]
    if day.revision or day.first_published != day.final:
        lines.append(f"change: {change(day.first_published, day.final)}")
    if day.revision:
        lines.append(f"revision r{day.revision}")
    for i, restated in enumerate(day.restatements[:MAX_HOVER_LINES], start=1):
        lines.append(
            f"r{i}: {plain(restated.restatement_id)} · {plain(short(restated.reason))}"
            f" · {plain(restated.promoted_at[:16])}"
        )
    if len(day.restatements) > MAX_HOVER_LINES:
        lines.append(f"… and {len(day.restatements) - MAX_HOVER_LINES} more")
    return "<br>".join(lines)


def difference(day: DailyRevision) -> float | None:
    """Final minus first published (None when either is missing)."""
    final, first = decimal(day.final), decimal(day.first_published)
    return None if final is None or first is None else float(final - first)


def half_day_around(first: str, last: str) -> tuple[str, str]:
    """A band over whole days: from noon before ``first`` to noon after ``last``."""
    half = timedelta(hours=12)
    start = datetime.fromisoformat(first) - half
    end = datetime.fromisoformat(last) + half
    return start.isoformat(sep=" "), end.isoformat(sep=" ")


def daily_figure(days: Sequence[DailyRevision], model: str, measure: str) -> go.Figure:
    """First published vs final per period of ``model`` (top), their difference (bottom),
    restated periods marked."""
    if not days:
        return nothing_yet(f"Nothing yet: {model or 'no published model'} has no periods.")
    x = [d.event_date for d in days]
    hover = [day_hover(d) for d in days]
    figure = make_subplots(
        rows=2, cols=1, shared_xaxes=True, row_heights=[0.72, 0.28], vertical_spacing=0.05
    )
    line = {"mode": "lines", "hovertext": hover, "hoverinfo": "text", "row": 1, "col": 1}
    figure.add_scatter(
        x=x,
        y=[number(d.first_published) for d in days],
        name="first published",
        line={"color": GREY, "width": 2, "dash": "dot"},
        **line,
    )
    figure.add_scatter(
        x=x, y=[number(d.final) for d in days], name="final (today)", line={"color": BLUE}, **line
    )
    restated = [d for d in days if d.revision > 0]
    figure.add_scatter(
        x=[d.event_date for d in restated],
        y=[number(d.final) for d in restated],
        name="restated day (r = revision)",
        mode="markers+text" if len(restated) <= 30 else "markers",
        text=[f"r{d.revision}" for d in restated],
        textposition="top center",
        textfont={"size": 10, "color": ORANGE},
        marker={
            "symbol": "diamond",
            "size": 9,
            "color": ORANGE,
            "line": {"width": 1, "color": "white"},
        },
        hovertext=[day_hover(d) for d in restated],
        hoverinfo="text",
        row=1,
        col=1,
    )
    deltas = [difference(d) for d in days]
    figure.add_bar(
        x=x,
        y=deltas,
        name="final − first published",
        marker={"color": [RED if (v or 0) < 0 else GREEN for v in deltas]},
        hovertext=hover,
        hoverinfo="text",
        showlegend=False,
        row=2,
        col=1,
    )
    for first, last in runs(x, [d.period_status == "provisional" for d in days])[:20]:
        start, end = half_day_around(first, last)
        figure.add_vrect(
            x0=start, x1=end, fillcolor="#fde68a", opacity=0.5, layer="below", line_width=0
        )
    figure.update_layout(template=TEMPLATE, height=520, bargap=0.1)
    figure.update_yaxes(title_text=f"{measure or 'rows'}, summed", row=1, col=1)
    figure.update_yaxes(title_text="change", row=2, col=1)
    return figure
