"""``tardy status``: lateness per source, the pending late data, the alerts of ``--check``, the
periods restatements changed."""

from __future__ import annotations

import typing as t
from collections.abc import Iterable, Mapping, Sequence
from datetime import date

from rich.console import Console, Group
from rich.markup import escape
from rich.table import Table
from rich.text import Text

from tardy.rendering.cells import Intervals, Spans, amount, names_column, number, timestamp

if t.TYPE_CHECKING:
    from tardy.consumers.revisions import Revisions
    from tardy.consumers.status import RestatedDay, SourceStatus, Status
    from tardy.lateness.alerts import Alert
    from tardy.outbox.notifications import Backlog


LATENESS_COLUMNS: list[tuple[str, t.Callable[[SourceStatus], str]]] = [
    ("rows", lambda s: f"{s.rows:,}"),
    # Rows whose lag is not measured: no event time, or an event time after the arrival.
    ("no lag", lambda s: f"{s.rows_without_event_ts + s.rows_event_after_arrival:,}"),
    (
        "late",
        lambda s: f"{s.late_rows:,}" + ("" if s.late_ratio is None else f"\n{s.late_ratio:.2%}"),
    ),
    (
        "lag h p50 p95 p99",
        lambda s: " ".join(
            number(h, ".1f") for h in (s.lag_hours_p50, s.lag_hours_p95, s.lag_hours_p99)
        ),
    ),
    (
        "latest arrival",
        lambda s: (timestamp(s.max_arrival_ts, seconds=True) or "-").replace(" ", "\n"),
    ),
]


def lateness_table(result: Status) -> Table:
    """The "Lateness by source" table: a row per source, then one for all of them, so ten
    sources read as well as two."""
    table = Table(
        title=f"Lateness by source (late: arrived > {result.grace_days} days after the event "
        "day ended)",
        caption="no lag: rows without an event time, or with one after their arrival",
    )
    names = [escape(source.source_system or "-") for source in result.sources]
    names_column(table, "source", [*names, "all"])
    everyone = [*result.sources, result.overall]
    for header, cell in LATENESS_COLUMNS:
        # As wide as its widest word: a cell wraps between numbers, never inside one.
        words = [w for text in [header, *map(cell, everyone)] for w in text.split()]
        table.add_column(header, justify="right", overflow="fold", min_width=max(map(len, words)))
    for name, source in zip(names, result.sources, strict=True):
        table.add_row(name, *(cell(source) for _, cell in LATENESS_COLUMNS))
    table.add_section()
    table.add_row(
        Text("all", style="bold"), *(cell(result.overall) for _, cell in LATENESS_COLUMNS)
    )
    return table


def _pending_kinds(result: Status) -> dict[str, Mapping[str, Spans]]:
    return {
        "final, to restate": result.pending_final,
        "to restate, but provisional": result.pending_provisional,
        "next run absorbs, but final": result.absorbed_but_final,
    }


def pending_table(result: Status) -> Table:
    """The "Late data prod does not reflect yet" table: detect's intervals split by the
    data watermark's finality, a section per kind (a header row, then a row per model); the
    first kind always, each other only when it holds an interval."""
    kinds = _pending_kinds(result)
    models = dict.fromkeys([*result.pending_final, *result.absorbed_but_final])
    table = Table(title="Late data prod does not reflect yet (tardy detect)")
    names_column(table, "model", [*models, *kinds])
    table.add_column("intervals", overflow="fold")
    for n, (kind, spans) in enumerate(kinds.items()):
        if n and not any(spans.values()):
            continue
        if n:
            table.add_section()
        table.add_row(Text(kind, style="bold"), "")
        for model in models:
            if not n or spans.get(model):
                table.add_row(model, Intervals(spans.get(model, [])))
    return table


def render_status(result: Status, console: Console) -> None:
    if result.data_watermark is None:
        console.print("Bronze is empty: no data watermark yet, every day is provisional.")
    else:
        console.print(
            f"Data watermark [bold]{result.data_watermark}[/] = latest arrival "
            f"{result.max_arrival_ts} - {result.grace_days} days of grace: days through "
            f"[bold]{result.last_final_day}[/] are [green]final[/], from "
            f"{result.first_provisional_day} [yellow]provisional[/]."
        )
    console.print(lateness_table(result))
    if any(spans for kind in _pending_kinds(result).values() for spans in kind.values()):
        console.print(pending_table(result))
    else:
        console.print("No late data waits for a restatement: every final period reflects bronze.")
    if any(result.pending_final.values()):
        console.print("Final periods have late data: `tardy restate --reason ...` applies it.")
    if result.restated:
        console.print(restated_table(result.restated))
    for moved in sorted(result.revisions_by_model.values(), key=lambda r: r.model):
        console.print(moved_line(moved), highlight=False)
    if result.quarantine_review:
        from tardy.rendering.quarantine import counts_table

        console.print(counts_table(result.quarantine_review))
    if result.view is not None:
        console.print("Per period:", f"SELECT * FROM {result.view}", sep="\n", markup=False)


def moved_line(moved: Revisions) -> str:
    """How much restatements moved one model since first published, in a sentence."""
    line = (
        f"Since first published, restatements moved {moved.rows:,} rows of {moved.model} on "
        f"{moved.days:,} periods (up to revision r{moved.max_revision})"
    )
    if moved.measure is None:
        return line + "."
    return (
        f"{line}: {moved.measure} {amount(moved.first_published)} → {amount(moved.now)}, net "
        f"{_signed(moved.net_change)}, gross {amount(moved.gross_change)}; most on "
        f"{moved.largest_day} ({_signed(moved.largest_day_change)})."
    )


def _signed(value: object) -> str:
    text = amount(value)
    return text if text.startswith("-") else f"+{text}"


def render_alerts(alerts: Sequence[Alert], console: Console) -> None:
    """``tardy status --check``'s verdict: one line per exceeded threshold, or all clear."""
    if not alerts:
        console.print("Check passed: every source within its lateness tier, nothing waits.")
        return
    for alert in alerts:
        console.print(f"[red]alert:[/] {escape(alert.message)}")


def restated_table(days: Iterable[RestatedDay]) -> Table:
    """The periods promoted restatements changed, one row per model, latest restatement and
    status (final or provisional): the model, the restatement, its periods and its reason."""
    from tardy.engine.results import ranges

    groups: dict[tuple[str, str, str, str], list[str]] = {}
    for day in days:
        key = (day.model, day.restatement_id, day.period_status, day.reason)
        groups.setdefault(key, []).append(day.event_date)
    table = Table(title="Periods changed by restatements (the latest one)")
    names_column(table, "model / restatement", [n for key in groups for n in key[:2]])
    table.add_column("periods / reason", overflow="fold")
    for (model, rid, period_status, reason), dates in groups.items():
        spans = ranges(date.fromisoformat(d) for d in dates)
        table.add_row(
            f"{model}\n{rid}\n{period_status}",
            Group(Intervals(spans), Text(reason, style="italic")),
        )
    return table


def render_notifications(backlog: Backlog, console: Console) -> None:
    """The outbox's state, when it holds anything: events waiting per sink, and each dead
    letter (an event a sink refused for good) with its reason and the command to retry it."""
    waiting = sum(backlog.pending.values())
    if waiting:
        sinks = ", ".join(f"{name} {count}" for name, count in sorted(backlog.pending.items()))
        console.print(f"Notifications waiting for delivery: {waiting} ({escape(sinks)})")
    if not backlog.dead:
        return
    table = Table(title="Notifications refused for good (dead letters)")
    table.add_column("sink / key", overflow="fold")
    table.add_column("event", overflow="fold")
    table.add_column("reason", overflow="fold")
    for letter in backlog.dead:
        table.add_row(
            f"{escape(letter.sink)}\n{letter.key[:12]}",
            escape(letter.text),
            f"{escape(letter.reason)}\n{timestamp(letter.dead_at)}",
        )
    console.print(table)
    console.print("Once the sink accepts them again:")
    console.print("tardy notifications retry", markup=False, highlight=False)
