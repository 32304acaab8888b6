"""The HTML pages of ``tardy report``: one self-contained file each, charts a reader reads at a
glance.

``report_page`` draws a ``tardy.reporting.Report`` (what late data did to the numbers);
``restatement_page`` draws one ``RestatementReport`` for its reviewers. Each page carries
plotly.js once, inline, and every chart's data in its own script: it opens without a network.
Every chart sits in a ``<div class="tardy-chart" data-chart="NAME">`` (``data-empty="true"``
when there is nothing to draw yet: the chart then shows a "nothing yet" note instead of
traces), under a sentence saying what it shows and how to read it.

All text from the data is escaped: ``html.escape`` in the page, and in the charts too (plotly
reads a subset of HTML in its labels and hover texts, and turns the escaped entities back
into the plain characters).
"""

from __future__ import annotations

import html
import math
import typing as t
from collections import Counter, defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from decimal import Decimal, InvalidOperation

import plotly.graph_objects as go
import plotly.io as pio
from plotly.offline import get_plotlyjs
from plotly.subplots import make_subplots

from tardy.status import DAILY_TABLE

if t.TYPE_CHECKING:
    from tardy.reporting import (
        DailyRevision,
        IntervalChange,
        LatenessDay,
        QuarantineDay,
        Report,
        RestatedPeriod,
        RestatementReport,
        RestatementSummary,
        TrailRow,
    )

MAX_TABLE_ROWS = 200  # rows of a page table; the rest is counted in an "and N more" line
MAX_RESTATEMENTS = 10  # restatements in the report page's before/after chart (the latest)
MAX_INTERVALS = 40  # intervals per restatement in a before/after chart
MIN_BARS = 3  # bar slots of the before/after chart (its height: fewer bars leave some space)
BAR_PX = 34  # height of one bar slot of the before/after chart
MAX_HOVER_LINES = 8  # restatements listed in one hover text
MAX_TEXT = 90  # characters of a reason in a hover text or a chart note
MAX_DOTS = 60  # days up to which a line over days draws a dot per day

GREY = "#9ca3af"
BLUE = "#2563eb"
ORANGE = "#ea580c"
GREEN = "#16a34a"
RED = "#dc2626"
PERCENTILES = (  # name, colour, line dash, dot symbol
    ("p50", "#2563eb", "solid", "circle"),
    ("p95", "#d97706", "dash", "diamond"),
    ("p99", "#dc2626", "dot", "square"),
)
SOURCE_COLOURS = ("#0f766e", "#7c3aed", "#db2777", "#65a30d", "#0369a1", "#b45309", "#475569")
REASON_COLOURS = ("#dc2626", "#d97706", "#7c3aed", "#0891b2", "#65a30d", "#db2777", "#475569")

_AXIS = {"gridcolor": "#e5e7eb", "linecolor": "#9ca3af", "zerolinecolor": "#d1d5db"}
# A small template of our own: plotly's default one would add ~5 kB of JSON to every chart.
TEMPLATE = go.layout.Template(
    layout={
        "font": {"family": "system-ui, -apple-system, 'Segoe UI', Roboto, sans-serif", "size": 12},
        "paper_bgcolor": "white",
        "plot_bgcolor": "white",
        "colorway": list(SOURCE_COLOURS),
        "xaxis": {**_AXIS, "automargin": True},
        "yaxis": {**_AXIS, "automargin": True},
        "hoverlabel": {"align": "left", "font": {"size": 12}},
        "hovermode": "closest",
        "margin": {"l": 60, "r": 24, "t": 40, "b": 40},
        "legend": {"orientation": "h", "x": 0, "xanchor": "left", "y": 1.02, "yanchor": "bottom"},
    }
)
PLOT_CONFIG = {"displaylogo": False, "responsive": True}

CSS = """
*{box-sizing:border-box}
body{margin:0;font-family:system-ui,-apple-system,'Segoe UI',Roboto,sans-serif;color:#1f2933;
 background:#f3f4f6;font-size:14px;line-height:1.45}
header{background:#0f172a;color:#f8fafc;padding:18px 32px}
header h1{margin:0 0 4px;font-size:22px}
header .meta{margin:0;color:#cbd5e1;font-size:13px}
main{max-width:1280px;margin:0 auto;padding:8px 24px 32px}
section{background:#fff;border:1px solid #e5e7eb;border-radius:8px;padding:14px 18px;margin:14px 0}
h2{font-size:17px;margin:0 0 4px}
h3{font-size:14px;margin:14px 0 6px}
p.how{color:#4b5563;margin:0 0 8px;max-width:980px}
.cards{display:flex;flex-wrap:wrap;gap:12px;margin:14px 0}
.card{background:#fff;border:1px solid #e5e7eb;border-radius:8px;padding:10px 16px;min-width:170px}
.card b{display:block;font-size:22px}
.card span{color:#4b5563;font-size:12px}
.tardy-chart{width:100%}
.tardy-chart>div{height:auto!important}
.scroll{max-height:420px;overflow:auto;border:1px solid #e5e7eb;border-radius:6px}
table{border-collapse:collapse;width:100%;font-size:13px}
th,td{padding:4px 8px;border-bottom:1px solid #e5e7eb;text-align:left;vertical-align:top;
 white-space:nowrap}
td.wrap{white-space:normal;min-width:240px}
th.num{text-align:right}
th{background:#f9fafb;position:sticky;top:0;white-space:normal}
td.num{text-align:right;font-variant-numeric:tabular-nums;white-space:nowrap}
tr.fail td{background:#fee2e2;color:#7f1d1d;font-weight:600}
.more,.none{color:#6b7280;font-style:italic;margin:6px 0}
.status{display:inline-block;padding:1px 8px;border-radius:10px;background:#e5e7eb;font-size:12px}
.status.promoted{background:#dcfce7;color:#14532d}
.status.rolled_back{background:#fee2e2;color:#7f1d1d}
.status.staged{background:#dbeafe;color:#1e3a8a}
code,pre{font-family:ui-monospace,SFMono-Regular,Menlo,Consolas,monospace;font-size:12.5px}
pre{background:#0f172a;color:#e2e8f0;padding:10px 12px;border-radius:6px;overflow:auto}
dl.facts{display:grid;grid-template-columns:max-content 1fr;gap:2px 16px;margin:0}
dl.facts dt{color:#4b5563}
dl.facts dd{margin:0}
""".strip()


class Markup(str):
    """Text that is already HTML (built here from escaped parts): table cells keep it as is."""


@dataclass(frozen=True)
class Chart:
    """One chart of a page: its name (``data-chart``), heading, how-to-read sentence, figure."""

    name: str
    title: str
    how: str
    figure: go.Figure
    empty: bool = False
    below: str = ""  # HTML under the chart (a table)


# -- text ----------------------------------------------------------------------------------------


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


# -- figures -------------------------------------------------------------------------------------


def nothing_yet(message: str, height: int = 240) -> go.Figure:
    """An empty chart that says why it is empty."""
    figure = go.Figure(
        layout={
            "template": TEMPLATE,
            "height": height,
            "xaxis": {"visible": False},
            "yaxis": {"visible": False},
            "margin": {"l": 20, "r": 20, "t": 20, "b": 20},
        }
    )
    figure.add_annotation(
        text=plain(message),
        x=0.5,
        y=0.5,
        xref="paper",
        yref="paper",
        showarrow=False,
        font={"size": 16, "color": "#6b7280"},
    )
    return figure


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


def daily_figure(days: Sequence[DailyRevision]) -> go.Figure:
    """First published vs final per day (top), their difference (bottom), restated days marked."""
    if not days:
        return nothing_yet(f"Nothing yet: {DAILY_TABLE} has no days.")
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
    figure.update_yaxes(title_text="revenue, all stores", row=1, col=1)
    figure.update_yaxes(title_text="change", row=2, col=1)
    return figure


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


def interval_label(change_: IntervalChange) -> str:
    return f"{change_.model} {change_.start}..{change_.end}"


def keys_touched(change_: IntervalChange) -> int:
    """Keys the restatement added, removed or changed in the interval."""
    return change_.keys_added + change_.keys_removed + change_.keys_changed


def changed_anything(summary: RestatementSummary) -> bool:
    return any(keys_touched(c) for c in summary.intervals)


def relative_change(change_: IntervalChange) -> Decimal | None:
    """``(after − before) / before`` of the measure; None without a measure or when before
    is 0 (no relative change from nothing)."""
    before, after = decimal(change_.before), decimal(change_.after)
    if before is None or after is None or not before:
        return None
    return (after - before) / before


def signed_percent(value: Decimal) -> str:
    """``+1.25%``, ``-0.27%``, ``0.00%``; a change too small for two decimals: ``-<0.01%``."""
    if not value:
        return "0.00%"
    if abs(value) < Decimal("0.00005"):
        return f"{'+' if value > 0 else '-'}<0.01%"
    return f"{value:+.2%}"


def interval_text(change_: IntervalChange) -> str:
    """A bar's text: ``before → after (±x.xx%)``, in the measure's own units."""
    if change_.measure is None:
        return f"no measure column · rows {change_.rows_before:,} → {change_.rows_after:,}"
    values = f"{amount(change_.before)} → {amount(change_.after)}"
    relative = relative_change(change_)
    if relative is not None:
        return f"{values} ({signed_percent(relative)})"
    before, after = decimal(change_.before), decimal(change_.after)
    if before is None or after is None:
        return values
    return f"{values} ({'unchanged' if before == after else 'before was 0: no relative change'})"


def interval_hover(change_: IntervalChange) -> str:
    lines = [f"<b>{plain(interval_label(change_))}</b>"]
    if change_.measure is None:
        lines.append("no measure column")
    else:
        lines += [
            f"{plain(change_.measure)} before: {amount(change_.before)}",
            f"{plain(change_.measure)} after: {amount(change_.after)}",
            f"change: {change(change_.before, change_.after)}",
        ]
    lines += [
        f"rows before: {change_.rows_before:,}, after: {change_.rows_after:,}",
        f"keys added {change_.keys_added:,}, removed {change_.keys_removed:,},"
        f" changed {change_.keys_changed:,}",
    ]
    return "<br>".join(lines)


def shown_intervals(summary: RestatementSummary) -> list[IntervalChange]:
    """The intervals a chart draws (the first ``MAX_INTERVALS``), by model and start."""
    return sorted(summary.intervals[:MAX_INTERVALS], key=lambda c: (c.model, c.start, c.end))


def interval_bars(
    summary: RestatementSummary, colours: dict[str, str], visible: bool
) -> list[go.Bar]:
    """One horizontal bar trace per model the restatement restated: per interval, the relative
    change of the measure (0 where there is none); hatched when the restatement was rolled
    back. (The numbers stand beside the bars: ``interval_notes``.)"""
    shown = shown_intervals(summary)
    rolled_back = summary.status == "rolled_back"
    out = []
    for model in sorted({c.model for c in shown}):
        mine = [c for c in shown if c.model == model]
        measure = next((c.measure for c in mine if c.measure), None)
        relative = [relative_change(c) for c in mine]
        out.append(
            go.Bar(
                y=[plain(interval_label(c)) for c in mine],
                x=[0.0 if r is None else float(r) for r in relative],
                orientation="h",
                name=plain(f"{model} ({measure or 'no measure'})"),
                marker={
                    "color": colours[model],
                    "pattern": {"shape": "/" if rolled_back else "", "solidity": 0.4},
                },
                hovertext=[interval_hover(c) for c in mine],
                hoverinfo="text",
                visible=visible,
            )
        )
    return out


def interval_notes(summary: RestatementSummary) -> list[dict[str, object]]:
    """Right of the panel, level with each bar: ``before → after (±x.xx%)`` (a column of
    its own: a bar's text would run into the labels or off the chart), under a heading."""
    common = {"xref": "paper", "x": 1, "xanchor": "left", "xshift": 10, "showarrow": False}
    notes: list[dict[str, object]] = [
        {
            **common,
            "text": "<b>before → after (change)</b>",
            "yref": "paper",
            "y": 1,
            "yanchor": "bottom",
            "yshift": 2,
            "font": {"size": 11, "color": "#4b5563"},
        }
    ]
    for c in shown_intervals(summary):
        notes.append(
            {
                **common,
                "text": plain(interval_text(c)),
                "yref": "y",
                "y": plain(interval_label(c)),
                "font": {"size": 11},
                "hovertext": interval_hover(c),
            }
        )
    return notes


def summary_note(summary: RestatementSummary) -> str:
    """Two or three lines over the chart: which restatement, and what it changed."""
    status = summary.status.replace("_", " ")
    note = (
        f"<b>{plain(summary.restatement_id)}</b> · {plain(status)} · "
        f"{plain(summary.logged_at[:16])} · {plain(short(summary.reason, 70))}"
    )
    intervals = summary.intervals
    if not intervals:
        return note + "<br>no interval diff in this data home (diff.json)"
    added = sum(c.keys_added for c in intervals)
    removed = sum(c.keys_removed for c in intervals)
    changed = sum(c.keys_changed for c in intervals)
    note += f"<br>{count(len(intervals), 'interval')}"
    if len(intervals) > MAX_INTERVALS:
        note += f" (the first {MAX_INTERVALS} shown)"
    note += (
        f" · keys added {added:,}, removed {removed:,}, changed {changed:,}"
        if added + removed + changed
        else " · changed nothing: no key added, removed or changed"
    )
    if summary.status == "rolled_back":
        note += "<br>rolled back (hatched): prod holds the “before” values again"
    return note


def menu_label(summary: RestatementSummary) -> str:
    """A restatement in the chart's menu: its id, status, and whether it changed nothing."""
    facts = [summary.status.replace("_", " ")]
    if summary.intervals and not changed_anything(summary):
        facts.append("changed nothing")
    elif not summary.intervals:
        facts.append("no diff")
    return plain(f"{summary.restatement_id} ({', '.join(facts)})")


def default_restatement(summaries: Sequence[RestatementSummary]) -> int:
    """The restatement a chart shows first: the latest one whose intervals changed a key,
    else the latest one."""
    by_time = sorted(range(len(summaries)), key=lambda i: summaries[i].logged_at, reverse=True)
    return next((i for i in by_time if changed_anything(summaries[i])), by_time[0])


def intervals_figure(summaries: Sequence[RestatementSummary]) -> go.Figure:
    """The relative change of the measure per restated interval, every model in one panel
    (one horizontal bar per interval, coloured by model); one restatement at a time (a menu
    picks it when there are several; the latest that changed anything is shown first)."""
    if not summaries:
        return nothing_yet("Nothing yet: no restatement has been logged.")
    models = sorted({c.model for s in summaries for c in s.intervals[:MAX_INTERVALS]})
    if not models:
        return nothing_yet(f"No interval diff of {summaries[0].restatement_id} in this data home.")
    colours = {m: SOURCE_COLOURS[i % len(SOURCE_COLOURS)] for i, m in enumerate(models)}
    first = default_restatement(summaries)
    menu = len(summaries) > 1
    top = 120 if menu else 82  # the menu, the note (up to three lines), the numbers' heading

    def selection(summary: RestatementSummary) -> dict[str, object]:
        """The layout of one restatement: its note, its intervals (top to bottom) with
        their numbers, and a height that fits them and the legend (two models a line)."""
        shown = shown_intervals(summary)
        bottom = 60 + 20 * math.ceil(len({c.model for c in shown}) / 2)
        labels = [plain(interval_label(c)) for c in shown]
        relative = [relative_change(c) for c in shown]
        widest = max((len(interval_text(c)) for c in shown), default=0)
        # Every bar at 0 (nothing changed): ±1% around it rather than plotly's ±100%.
        span = (
            {"xaxis.autorange": True}
            if any(relative)
            else {"xaxis.autorange": False, "xaxis.range": [-0.01, 0.01]}
        )
        note = {
            "text": summary_note(summary),
            "xref": "paper",
            "yref": "paper",
            "x": 0,
            "y": 1,
            "xanchor": "left",
            "yanchor": "bottom",
            "yshift": 22,  # above the heading of the numbers beside the bars
            "align": "left",
            "showarrow": False,
            "font": {"size": 12},
        }
        return {
            "height": top + bottom + BAR_PX * max(len(labels), MIN_BARS),
            "annotations": [note, *interval_notes(summary)] if labels else [note],
            "margin.r": min(40 + 7 * widest, 420),
            "margin.b": bottom,
            **span,
            "yaxis.categoryarray": labels,
            "xaxis.visible": bool(labels),
            "yaxis.visible": bool(labels),
        }

    figure = go.Figure()
    owners: list[int] = []
    for i, summary in enumerate(summaries):
        bars = interval_bars(summary, colours, visible=i == first)
        figure.add_traces(bars)
        owners += [i] * len(bars)
    layout: dict[str, object] = {
        "template": TEMPLATE,
        "barmode": "overlay",
        "bargap": 0.25,
        "margin": {"t": top},
        "showlegend": True,
        "legend": {
            "orientation": "h",
            "xref": "container",
            "x": 0.01,
            "yref": "container",
            "y": 0.01,
            "yanchor": "bottom",
        },
        "xaxis": {
            "title": {"text": "relative change of the measure: (after − before) / before"},
            "tickformat": ".2~%",
            "zeroline": True,
            "zerolinecolor": "#6b7280",
            "zerolinewidth": 1.5,
        },
        "yaxis": {
            "type": "category",
            "categoryorder": "array",
            "autorange": "reversed",
            "tickfont": {"size": 11},
        },
    }
    if menu:
        buttons = [
            {
                "label": menu_label(summary),
                "method": "update",
                "args": [{"visible": [owner == i for owner in owners]}, selection(summary)],
            }
            for i, summary in enumerate(summaries)
        ]
        layout["updatemenus"] = [
            {
                "buttons": buttons,
                "active": first,
                "direction": "down",
                "x": 0,
                "xanchor": "left",
                "y": 1,
                "yanchor": "bottom",
                "pad": {"b": 74},
                "showactive": True,
            }
        ]
    figure.update_layout(**layout)
    figure.update_layout(selection(summaries[first]))
    return figure


# -- page parts ----------------------------------------------------------------------------------


def table(
    headers: Sequence[str],
    rows: Iterable[Sequence[object]],
    *,
    numeric: Sequence[int] = (),
    wrap: Sequence[int] = (),
    classes: Sequence[str] | None = None,
    total: int | None = None,
    scroll: bool = True,
) -> str:
    """An HTML table of at most ``MAX_TABLE_ROWS`` rows, then "… and N more" when cut.
    Cells are escaped unless they are ``Markup``; ``numeric`` columns align right, ``wrap``
    columns (long text) may wrap; ``classes`` gives each row's class."""
    rows = list(rows)
    count = len(rows) if total is None else total
    if not rows:
        return '<p class="none">None.</p>'
    kinds = {j: " class=num" for j in numeric} | {j: " class=wrap" for j in wrap}
    head = "".join(f"<th{kinds.get(j, '')}>{esc(h)}</th>" for j, h in enumerate(headers))
    body = []
    for i, row in enumerate(rows[:MAX_TABLE_ROWS]):
        cells = "".join(
            f"<td{kinds.get(j, '')}>"
            f"{cell if isinstance(cell, Markup) else esc('' if cell is None else cell)}</td>"
            for j, cell in enumerate(row)
        )
        css = classes[i] if classes and classes[i] else ""
        body.append(f'<tr class="{esc(css)}">{cells}</tr>' if css else f"<tr>{cells}</tr>")
    out = f"<table><thead><tr>{head}</tr></thead><tbody>{''.join(body)}</tbody></table>"
    if scroll and len(rows) > 15:
        out = f'<div class="scroll">{out}</div>'
    shown = min(len(rows), MAX_TABLE_ROWS)
    if count > shown:
        out += f'<p class="more">… and {count - shown:,} more</p>'
    return out


def status_badge(status: str) -> Markup:
    return Markup(f'<span class="status {esc(status)}">{esc(status)}</span>')


def code_block(lines: Sequence[str]) -> str:
    if not lines:
        return '<p class="none">None.</p>'
    return f"<pre><code>{esc(chr(10).join(lines))}</code></pre>"


def chart_section(chart: Chart) -> str:
    div = pio.to_html(
        chart.figure,
        config=PLOT_CONFIG,
        include_plotlyjs=False,
        full_html=False,
        div_id=f"chart-{chart.name}",
    )
    return (
        f'<section id="{esc(chart.name)}"><h2>{esc(chart.title)}</h2>'
        f'<p class="how">{esc(chart.how)}</p>'
        f'<div class="tardy-chart" data-chart="{esc(chart.name)}"'
        f' data-empty="{"true" if chart.empty else "false"}">{div}</div>{chart.below}</section>'
    )


def cards(facts: Sequence[tuple[str, str]]) -> str:
    items = "".join(
        f'<div class="card"><b>{esc(v)}</b><span>{esc(k)}</span></div>' for k, v in facts
    )
    return f'<div class="cards">{items}</div>'


def page(title: str, meta: str, body: Sequence[str]) -> str:
    """The whole document: CSS, plotly.js (once, inline), the header and the sections."""
    return (
        '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        f"<title>{esc(title)}</title><style>{CSS}</style>"
        f'<script type="text/javascript">{get_plotlyjs()}</script></head>'
        f'<body><header><h1>{esc(title)}</h1><p class="meta">{esc(meta)}</p></header>'
        f"<main>{''.join(body)}</main></body></html>\n"
    )


# -- the report page -----------------------------------------------------------------------------


def periods_table(periods: Sequence[RestatedPeriod]) -> str:
    latest = sorted(periods, key=lambda p: (p.promoted_at, p.model, p.period), reverse=True)
    return "<h3>Restated periods, latest first</h3>" + table(
        ["model", "period", "restatement", "reason", "promoted at"],
        ([p.model, p.period, p.restatement_id, p.reason, p.promoted_at] for p in latest),
        wrap=[3],
    )


def restatements_table(summaries: Sequence[RestatementSummary]) -> str:
    return "<h3>The restatements shown</h3>" + table(
        ["restatement", "status", "logged at", "actor", "intervals", "reason"],
        (
            [s.restatement_id, status_badge(s.status), s.logged_at, s.actor, len(s.intervals)]
            + [s.reason]
            for s in summaries
        ),
        numeric=[4],
        wrap=[5],
        scroll=False,
    )


def report_page(report: Report) -> str:
    """The ``tardy report`` page: five charts over the whole lakehouse."""
    latest = sorted(report.restatements, key=lambda s: s.logged_at, reverse=True)
    latest = latest[:MAX_RESTATEMENTS]
    restated_days = sum(1 for d in report.daily if d.revision)
    charts = [
        Chart(
            "daily",
            f"{DAILY_TABLE}: first published vs today",
            "Revenue per day, summed over all stores. The dotted grey line is the value first "
            "published, the blue line today's value; they part only where a restatement "
            "changed the day (orange diamonds, r1, r2… = how many times). The bars below show "
            "final minus first published. Yellow bands: provisional days, still inside the "
            "grace window. Hover a day for the restatements and their reasons.",
            daily_figure(report.daily),
            empty=not report.daily,
        ),
        Chart(
            "periods",
            "Periods restated, by model",
            "How many periods (days, week or month starts) of each model a promoted "
            "restatement changed: all time (grey) and in the last 7 days (orange). Hover a bar "
            "for the restatements and reasons; the table lists every period.",
            periods_figure(report.periods),
            empty=not report.periods,
            below=periods_table(report.periods) if report.periods else "",
        ),
        Chart(
            "lateness",
            f"Lateness per source (grace window: {report.grace_days} days)",
            "For each source system, how long its rows took to arrive (hours from event to "
            "arrival; p50 = typical row, p95/p99 = the slowest 5% / 1%), per arrival day. The "
            f"red band marks the end of the {report.grace_days}-day grace window: rows that "
            "lag beyond it arrive after their day became final and force a restatement. The "
            "last panel shows that late share per source.",
            lateness_figure(report.lateness, report.grace_days),
            empty=not report.lateness,
        ),
        Chart(
            "quarantine",
            "Quarantined rows by reason",
            "Rows the pipeline set aside instead of counting, per day of the row, stacked by "
            "reason (the legend gives each reason's total). A tall bar is a day whose "
            "numbers miss rows until the source sends them again, corrected.",
            quarantine_figure(report.quarantine),
            empty=not report.quarantine,
        ),
        Chart(
            "restatements",
            f"Before and after, per restatement (latest {MAX_RESTATEMENTS})",
            "One restatement at a time (pick it in the menu; it opens on the latest one that "
            "changed anything): one bar per restated interval of every model, the relative "
            "change of its measure, (after − before) / before, coloured by model; beside it "
            "the measure before → after in its own units. A bar at 0 changed nothing, or "
            "started from 0 (its numbers say so). Hatched bars: the restatement was rolled "
            "back. Hover a bar for rows and keys added, removed and changed.",
            intervals_figure(latest),
            empty=not any(s.intervals for s in latest),
            below=restatements_table(latest) if latest else "",
        ),
    ]
    quarantined = sum(q.rows for q in report.quarantine)
    facts = [
        ("days restated", f"{restated_days:,} of {len(report.daily):,}"),
        ("periods restated in the last 7 days", f"{sum(p.recent for p in report.periods):,}"),
        ("restatements logged", f"{len(report.restatements):,}"),
        ("rows quarantined", f"{quarantined:,}"),
        ("grace window", f"{report.grace_days} days"),
    ]
    return page(
        "tardy report: what late data did to the numbers",
        f"Generated {report.generated_at} · data home {report.home}",
        [cards(facts)] + [chart_section(c) for c in charts],
    )


# -- the restatement page ------------------------------------------------------------------------


def spans(value: object) -> str:
    """``[[a, b], [c, c]]`` -> ``a..b, c``."""
    if not isinstance(value, list) or not value:
        return ""
    out = []
    for span in value:
        if isinstance(span, list | tuple) and len(span) == 2:
            out.append(str(span[0]) if span[0] == span[1] else f"{span[0]}..{span[1]}")
        else:
            out.append(str(span))
    return ", ".join(out)


def manifest_section(manifest: dict[str, object]) -> str:
    """Per model: roots, impacted, absorbed by the next run and reason; then the other facts
    and the stock commands."""
    if not manifest:
        return '<p class="none">No manifest in the log or in this data home.</p>'
    per_model = ("roots", "impacted", "absorbed_by_next_run", "reasons")
    maps = {k: v for k in per_model if isinstance(v := manifest.get(k), dict)}
    models = sorted({m for v in maps.values() for m in v})
    out = table(
        ["model", "roots", "impacted", "absorbed by next run", "reason"],
        (
            [m]
            + [spans(maps.get(k, {}).get(m)) for k in per_model[:3]]
            + [maps.get("reasons", {}).get(m, "")]
            for m in models
        ),
        wrap=[1, 2, 3, 4],
    )
    other = [
        (k, v)
        for k, v in manifest.items()
        if k not in per_model and k != "stock_commands" and not isinstance(v, dict | list)
    ]
    if other:
        items = "".join(
            f"<dt>{esc(k)}</dt><dd>{esc('—' if v is None else v)}</dd>" for k, v in other
        )
        out += f'<h3>Detection</h3><dl class="facts">{items}</dl>'
    commands = manifest.get("stock_commands")
    if isinstance(commands, list):
        out += "<h3>Stock commands (what plain SQLMesh would run instead)</h3>"
        out += code_block([str(c) for c in commands])
    return out


def diff_table(intervals: Sequence[IntervalChange]) -> str:
    intervals = sorted(intervals, key=lambda c: (c.model, c.start, c.end))
    return table(
        ["model", "interval", "measure", "before", "after", "change", "rows before", "rows after"]
        + ["keys added", "keys removed", "keys changed"],
        (
            [c.model, f"{c.start}..{c.end}", c.measure or "—", amount(c.before), amount(c.after)]
            + [change(c.before, c.after), f"{c.rows_before:,}", f"{c.rows_after:,}"]
            + [f"{c.keys_added:,}", f"{c.keys_removed:,}", f"{c.keys_changed:,}"]
            for c in intervals
        ),
        numeric=range(3, 11),
    )


def audits_table(audits: Sequence[dict[str, object]]) -> str:
    def failing(audit: dict[str, object]) -> int:
        value = audit.get("failing_rows")
        return int(value) if isinstance(value, int | str) and str(value).isdigit() else 0

    return table(
        ["model", "audit", "interval", "blocking", "failing rows"],
        (
            [a.get("model"), a.get("audit")]
            + [f"{a.get('interval_start')}..{a.get('interval_end')}"]
            + ["yes" if a.get("blocking") else "no", f"{failing(a):,}"]
            for a in audits
        ),
        numeric=[4],
        classes=["fail" if failing(a) else "" for a in audits],
    )


def breaker_table(trips: Sequence[dict[str, object]]) -> str:
    def relative(value: object) -> str:
        return "new" if value is None else f"{float(t.cast(float, value)):+.1%}"

    return table(
        ["day", "measure", "before", "after", "change"],
        (
            [b.get("day"), b.get("measure"), amount(t.cast("str | None", b.get("before")))]
            + [amount(t.cast("str | None", b.get("after"))), relative(b.get("change"))]
            for b in trips
        ),
        numeric=[2, 3, 4],
    )


def row_change(row: TrailRow) -> Markup:
    """The columns that differ: ``col: before → after`` (all columns of an added or removed
    row)."""
    before, after = row.before or {}, row.after or {}
    columns = [c for c in {**before, **after} if before.get(c) != after.get(c)]
    if not columns:
        return Markup('<span class="none">no column differs</span>')
    return Markup(
        "<br>".join(
            f"<code>{esc(c)}</code>: {esc(before.get(c, '—'))} → {esc(after.get(c, '—'))}"
            for c in columns
        )
    )


def changes_table(rows: Sequence[TrailRow], total: int) -> str:
    return table(
        ["model", "row key", "event date", "change", "action", "before → after"],
        ([r.model, r.row_key, r.event_date, r.change, r.action, row_change(r)] for r in rows),
        wrap=[5],
        total=total,
    )


def restatement_page(report: RestatementReport) -> str:
    """One restatement for its reviewers: what it is, what it touched, what it changed."""
    s = report.summary
    header = (
        f"<section><h2>{esc(s.restatement_id)} {status_badge(s.status)}</h2>"
        f'<dl class="facts"><dt>reason</dt><dd>{esc(s.reason)}</dd>'
        f"<dt>logged at</dt><dd>{esc(s.logged_at)}</dd><dt>actor</dt><dd>{esc(s.actor)}</dd>"
        f"<dt>intervals</dt><dd>{len(s.intervals):,}</dd>"
        f"<dt>rows in the change trail</dt><dd>{report.changes_total:,}</dd></dl></section>"
    )
    chart = Chart(
        "intervals",
        "Before and after, per restated interval",
        "One bar per restated interval of every model: the relative change of its measure, "
        "(after − before) / before, coloured by model, with the measure before → after "
        "beside it (hatched: rolled back). Hover a bar for rows and keys added, removed and "
        "changed; the table below has every number.",
        intervals_figure([s]),
        empty=not s.intervals,
        below="<h3>Interval diff</h3>" + diff_table(s.intervals),
    )
    shown = len(report.changes)

    def section(title: str, how: str, content: str) -> str:
        return f'<section><h2>{esc(title)}</h2><p class="how">{esc(how)}</p>{content}</section>'

    body = [
        header,
        section(
            "Manifest",
            "What detection found: per model the root days it found late rows for, the days "
            "those reach downstream (impacted), the days the next normal run absorbs, and why.",
            manifest_section(report.manifest),
        ),
        chart_section(chart),
        section(
            "Audits",
            "The audits run on the staged intervals; rows in red failed (blocking ones stop "
            "the promotion).",
            audits_table(report.audits),
        ),
        section(
            "Circuit breaker",
            "Closed days whose measure or row count moved by more than the threshold ("
            + (report.breaker_rule or "threshold unknown: no diff in this data home")
            + "); none means the breaker did not trip.",
            breaker_table(report.breaker),
        ),
        section(
            "Change trail",
            f"The rows this restatement added, removed or changed: the first {shown:,} of "
            f"{report.changes_total:,}, with the columns that differ.",
            changes_table(report.changes, report.changes_total),
        ),
        section(
            "What to do with it",
            "The commands that act on this restatement now.",
            code_block(report.how_to),
        ),
    ]
    return page(
        f"Restatement {s.restatement_id}",
        f"Generated {report.generated_at} · {s.status} · {short(s.reason, 120)}",
        body,
    )
