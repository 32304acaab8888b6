"""The before/after chart: per restatement, the relative change of the measure in each
restated interval (one restatement at a time, a menu picks it).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from decimal import Decimal

import plotly.graph_objects as go

from tardy.rendering.html.style import SOURCE_COLOURS, TEMPLATE, nothing_yet
from tardy.rendering.html.text import amount, change, count, decimal, plain, short
from tardy.reporting.records import IntervalChange, RestatementSummary

MAX_INTERVALS = 40  # intervals per restatement in a before/after chart
MIN_BARS = 3  # bar slots of the before/after chart (its height: fewer bars leave some space)
BAR_PX = 34  # height of one bar slot of the before/after chart


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
