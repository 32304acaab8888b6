"""``tardy quarantine``: the quarantined records and their review, the counts ``status``,
``summary`` and the report show, and what a steward's decision did."""

from __future__ import annotations

import typing as t
from collections.abc import Mapping, Sequence

from rich.console import Console
from rich.markup import escape
from rich.table import Table

from tardy.rendering.cells import names_column

if t.TYPE_CHECKING:
    from tardy.quarantine.listing import Count, Quarantined
    from tardy.quarantine.steward import Decided


def _hours(value: float | None) -> str:
    return "-" if value is None else f"{value:,.0f}"


def listing_tables(
    records: Sequence[Quarantined], ids: Mapping[str, str], state: str
) -> list[Table]:
    """A table per source, a row per record: its short id, day, reason, age (h), review."""
    tables = []
    for source in sorted({r.source for r in records}):
        mine = [r for r in records if r.source == source]
        table = Table(title=f"{escape(source)}: {len(mine):,} quarantined ({state})")
        names_column(table, "id", [ids[r.record_id] for r in mine])
        table.add_column("day", no_wrap=True)
        names_column(table, "reason", [r.reason for r in mine])
        table.add_column("age h", justify="right", no_wrap=True)
        table.add_column("review", no_wrap=True)
        for record in mine:
            table.add_row(
                ids[record.record_id],
                record.day or "-",
                escape(record.reason),
                _hours(record.age_hours),
                str(record.review),
            )
        tables.append(table)
    return tables


def counts_table(counts: Sequence[Count]) -> Table:
    """Open and reviewed quarantined records per source and reason."""
    table = Table(title="Quarantine review by source and reason")
    names_column(
        table, "source / reason", [*(c.source for c in counts), *(c.reason for c in counts)]
    )
    for header in ("open", "reviewed", "oldest open h"):
        table.add_column(header, justify="right")
    source = None
    for count in counts:
        if count.source != source:
            if source is not None:
                table.add_section()
            source = count.source
            table.add_row(f"[bold]{escape(source)}[/]", "", "", "")
        table.add_row(
            f"  {escape(count.reason)}",
            f"{count.open:,}",
            f"{count.reviewed:,}",
            _hours(count.oldest_open_hours),
        )
    return table


def render_listing(
    records: Sequence[Quarantined], ids: Mapping[str, str], state: str, console: Console
) -> None:
    if not records:
        console.print(f"No quarantined record ({state}).")
        return
    for table in listing_tables(records, ids, state):
        console.print(table)
    console.print("Review one (ids as listed):")
    console.print("tardy quarantine fix ID --set FIELD=VALUE --reason TEXT", markup=False)


def render_decided(decided: Decided, console: Console) -> None:
    for decision in decided.decisions:
        also = ""
        if decision.duplicate_of:
            also = f" of {decision.duplicate_of}"
        console.print(
            f"{decision.record_id}: {decision.decision}{also} by {decision.steward} "
            f"({decision.review_id}): {decision.reason}",
            markup=False,
        )
    if decided.fix is not None:
        done = "completed an interrupted fix: " if decided.completed else ""
        console.print(
            f"{done}the steward record lands as {decided.fix.source_file}; then run:",
            markup=False,
        )
        console.print("tardy ingest && tardy restate --reason 'steward fix'", markup=False)
    if decided.notified:
        console.print(f"Told: {', '.join(decided.notified)}", markup=False)
