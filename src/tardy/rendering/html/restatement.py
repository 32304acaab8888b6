"""The ``tardy report --restatement ID`` page: one restatement for its reviewers (manifest,
before/after chart, audits, circuit breaker, change trail, what to do with it).
"""

from __future__ import annotations

import typing as t
from collections.abc import Sequence

from tardy.rendering.html.intervals import intervals_figure
from tardy.rendering.html.page import (
    Chart,
    Markup,
    chart_section,
    code_block,
    page,
    status_badge,
    table,
)
from tardy.rendering.html.text import amount, change, esc, short
from tardy.reporting.records import IntervalChange, RestatementReport, TrailRow


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
