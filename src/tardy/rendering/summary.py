"""``tardy summary`` (and the demo's end): rows per layer, the quarantine by model and reason,
late arrivals per source, the headline model's weekly totals."""

from __future__ import annotations

import typing as t
from collections.abc import Mapping

from rich.console import Console
from rich.markup import escape
from rich.table import Table
from rich.text import Text

from tardy.rendering.cells import amount, names_column

if t.TYPE_CHECKING:
    from tardy.reporting.summary import Summary


def _counts_table(title: str, header: str, counts: dict[str, int]) -> Table:
    table = Table(title=title)
    names_column(table, header, counts)
    table.add_column("rows", justify="right")
    for name, count in counts.items():
        table.add_row(name, f"{count:,}")
    return table


def layers_table(rows: dict[str, int]) -> Table:
    return _counts_table("Rows per layer", "table", rows)


def quarantine_table(by_model: dict[str, dict[str, int]]) -> Table:
    """Every source's quarantine: a section per quarantine model, a row per reason."""
    table = Table(title="Quarantined by source and reason")
    names_column(
        table, "quarantine / reason", [*by_model, *(r for c in by_model.values() for r in c)]
    )
    table.add_column("rows", justify="right")
    for n, (model, counts) in enumerate(by_model.items()):
        if n:
            table.add_section()
        table.add_row(Text(model, style="bold"), f"{sum(counts.values()):,}")
        for reason, count in counts.items():
            table.add_row(f"  {reason}", f"{count:,}")
    return table


def late_arrivals_table(by_source: Mapping[str, Mapping[str, t.Any]], grace_days: int) -> Table:
    """``tardy summary``'s late arrivals, a row per source."""
    table = Table(title=f"Late arrivals by source (grace: {grace_days} days)")
    names_column(table, "source", by_source)
    for header in ("records", "late", f"> {grace_days} days", "p95 lag h"):
        table.add_column(header, justify="right")
    for name, lat in by_source.items():
        table.add_row(
            escape(name),
            f"{lat['records_with_event_ts']:,}",
            f"{lat['late_share']:.1%}",
            f"{lat['beyond_grace_share']:.2%}",
            str(lat["p95_lag_hours"]),
        )
    return table


def weekly_table(weekly: t.Sequence[dict[str, object]], model: str) -> Table:
    """Per week: the headline model's first measure (its own) and its rows."""
    measure = next((k for k in (weekly[0] if weekly else {}) if k not in WEEK_KEYS), None)
    table = Table(title=f"{model or 'The headline model'} by week")
    table.add_column("week", no_wrap=True)
    if measure is not None:
        table.add_column(measure, justify="right", overflow="fold")
    table.add_column("rows", justify="right")
    for week in weekly:
        rows = f"{t.cast(int, week['rows']):,}"
        if measure is None:
            table.add_row(str(week["week_start"]), rows)
        else:
            table.add_row(str(week["week_start"]), amount(week[measure]), rows)
    return table


WEEK_KEYS = ("week_start", "rows")


def render_summary(summary: Summary, console: Console) -> None:
    console.print(layers_table(summary.rows))
    lat = summary.lateness
    console.print(
        f"Late arrivals, every source: [bold]{lat['late_share']:.1%}[/] of "
        f"{lat['records_with_event_ts']:,} "
        f"records arrived after their event day; [bold]{lat['beyond_grace_share']:.2%}[/] "
        f"beyond the {lat['grace_days']}-day grace window (p95 lag {lat['p95_lag_hours']} h)."
    )
    by_source = t.cast(Mapping[str, Mapping[str, t.Any]], lat.get("by_source") or {})
    if by_source:
        console.print(late_arrivals_table(by_source, t.cast(int, lat["grace_days"])))
    console.print(quarantine_table(summary.quarantined_by_model))
    if summary.quarantine_review:
        from tardy.rendering.quarantine import counts_table

        console.print(counts_table(summary.quarantine_review))
    console.print(weekly_table(summary.weekly, summary.headline_model))
