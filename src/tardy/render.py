"""The CLI's terminal rendering: every table ``tardy`` prints, laid out to fit 80 columns.

One function per table takes plain data or a domain object and returns a Rich renderable;
the ``render_*`` functions print a command's whole human output (its lines and tables) on a
console. Nothing here computes: the domain modules do, and ``--json`` never comes here.

Layout rules, so that a table fits an 80-column terminal and still says everything:

* A model name or a restatement id is never wrapped or cut: its column is ``no_wrap`` and at
  least as wide as the longest one. No column uses Rich's ``ellipsis`` overflow; a cell that
  cannot fit folds onto the next line instead.
* Intervals read ``2026-01-01 .. 2026-01-07`` (one day: ``2026-01-10``), several joined by
  ", "; they wrap between intervals, and inside one only when it alone is too wide.
* A change is two lines, ``5,360,334`` over ``→ 5,360,412``; other cells wrap at spaces.
* A table with more columns than 80 can hold switches layout: lateness is transposed (a row
  per measure, a column per source), the diff has a header row per model carrying its
  measure, the pending late data has a section per kind, and the log stacks each
  restatement's fields in three columns.
"""

from __future__ import annotations

import re
import typing as t
from collections.abc import Iterable, Mapping, Sequence
from datetime import date, datetime
from decimal import Decimal, InvalidOperation
from pathlib import Path

from rich.cells import cell_len
from rich.console import Console, ConsoleOptions, Group, RenderResult
from rich.markup import escape
from rich.measure import Measurement
from rich.table import Table
from rich.text import Text

from tardy.warm import EngineState

if t.TYPE_CHECKING:
    from tardy.alerts import Alert
    from tardy.consumers.rereads import Shown
    from tardy.engine.detect import Manifest
    from tardy.engine.diff import Diff, IntervalDiff
    from tardy.history import KeyHistory
    from tardy.report import Summary
    from tardy.status import RestatedDay, SourceStatus, Status
    from tardy.versions import Publication
    from tardy.warm import Status as EngineStatus

Spans = Sequence[Sequence[str]]  # closed [first, last] day ranges, ISO dates


# -- cells --------------------------------------------------------------------------------------


def span(first: str, last: str) -> str:
    """``first .. last``, or the day alone."""
    return first if first == last else f"{first} .. {last}"


def spans_text(spans: Spans, empty: str = "-") -> str:
    """Day ranges on one line: ``2026-01-01 .. 2026-01-07, 2026-01-10``."""
    return ", ".join(span(first, last) for first, last in spans) or empty


class Intervals:
    """Day ranges as a cell: wrapped between ranges, inside a range only when it alone does
    not fit (then at its spaces)."""

    def __init__(self, spans: Spans, empty: str = "-") -> None:
        self.parts = [span(first, last) for first, last in spans] or [empty]

    def __rich_measure__(self, console: Console, options: ConsoleOptions) -> Measurement:
        text = ", ".join(self.parts)
        return Measurement(max(cell_len(word) for word in text.split()), cell_len(text))

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        lines: list[str] = []
        for i, part in enumerate(self.parts):
            piece = part if i == len(self.parts) - 1 else f"{part},"
            if lines and cell_len(f"{lines[-1]} {piece}") <= options.max_width:
                lines[-1] = f"{lines[-1]} {piece}"
            else:
                lines.append(piece)
        yield Text("\n".join(lines), overflow="fold")  # a range alone too wide: at its spaces


def change(before: str, after: str) -> str:
    """``before`` over ``→ after``: right-justified, the two numbers line up."""
    return f"{before}\n→ {after}"


def amount(value: object) -> str:
    """A decimal sum with thousands separators (``12,345,678.90``); anything else as is."""
    try:
        return f"{Decimal(str(value)):,}"
    except (InvalidOperation, ValueError):
        return str(value)


def timestamp(value: object, seconds: bool = False) -> str:
    """``2026-01-15 09:30`` (``:12`` with ``seconds``) of a datetime or an ISO string; its
    space lets a narrow column wrap it."""
    if isinstance(value, str):
        text = value
        try:
            value = datetime.fromisoformat(text)
        except ValueError:
            return text
    if isinstance(value, datetime):
        return f"{value:%Y-%m-%d %H:%M:%S}" if seconds else f"{value:%Y-%m-%d %H:%M}"
    return "" if value is None else str(value)


def shell_lines(command: str, width: int, indent: str = "  ") -> str:
    """A shell command indented, continued with `` \\`` before an option (kept with its
    value) to fit ``width``: wrapped by Rich instead, its lines would paste as separate
    commands."""
    if len(indent) + cell_len(command) <= width:
        return indent + command
    lines = [indent]
    for word in re.findall(r"--\S+ (?!--)\S+|\S+", command):
        line = lines[-1]
        if line.strip() and cell_len(f"{line} {word} \\") > width:
            lines[-1] = f"{line} \\"
            lines.append(f"{indent}    {word}")
        else:
            lines[-1] = f"{line} {word}" if line.strip() else f"{line}{word}"
    return "\n".join(lines)


def _names_column(table: Table, header: str, names: Iterable[str], **kwargs: t.Any) -> None:
    """A column of model names or ids: never wrapped, as wide as the longest."""
    widest = max((cell_len(name) for name in names), default=0)
    table.add_column(header, no_wrap=True, overflow="fold", min_width=widest or None, **kwargs)


# -- tardy detect / restate --------------------------------------------------------------------


def manifest_table(manifest: Manifest) -> Table:
    """The "Closed intervals to restate" table: per model, its intervals."""
    table = Table(title="Closed intervals to restate")
    _names_column(table, "model", manifest.impacted)
    table.add_column("intervals", overflow="fold")
    for model, spans in manifest.impacted.items():
        table.add_row(model, Intervals(spans))
    return table


def render_manifest(manifest: Manifest, console: Console) -> None:
    since = manifest.since_bronze_version
    console.print(
        f"Bronze version {manifest.bronze_version} (watermark was "
        f"{since if since is not None else 'unset'}); arrival watermark "
        f"{manifest.arrival_watermark}; {manifest.late_rows} late changes not yet in prod."
    )
    console.print(manifest_table(manifest))
    for name, windows in manifest.altered.items():
        shown = "; ".join(
            f"{w['key']} {(w['from'] or '')[:16]} .. {(w['to'] or 'now')[:16]}" for w in windows[:3]
        )
        more = f" and {len(windows) - 3} more" if len(windows) > 3 else ""
        console.print(
            f"Late changes of {name} alter the as-of join of {len(windows)} validity "
            f"window(s): {shown}{more}.",
            markup=False,
        )
    for model, spans in manifest.absorbed_by_next_run.items():
        if spans:
            console.print(
                f"Inside the grace window, the next `sqlmesh run` absorbs {model} "
                f"{spans_text(spans)}",
                markup=False,
            )
    if manifest.stock_commands:
        console.print("Stock equivalent (recomputes whole hulls):")
        for command in manifest.stock_commands:
            console.print(
                shell_lines(command, console.width), markup=False, highlight=False, soft_wrap=True
            )


def diff_table(diff: Diff) -> Table:
    """Staged against prod: a header row per model (its name and the measure its sums are
    of), then a row per interval: rows and the measure before and → after, keys +added
    −removed ~changed."""
    from tardy.engine.diff import measure_of

    table = Table(
        title=f"Restatement {diff.restatement_id}: staged vs prod",
        caption="keys (the model's grain): +added −removed ~changed",
    )
    models: dict[str, list[IntervalDiff]] = {}
    for item in diff.intervals:
        models.setdefault(item.model, []).append(item)
    _names_column(table, "model / interval", models)
    table.add_column("rows", justify="right", overflow="fold")
    table.add_column("sum", justify="right", overflow="fold")
    table.add_column("keys", justify="right", overflow="fold")
    for items in models.values():
        measure = measure_of(items[0].sums_before)
        if table.row_count:
            table.add_section()
        table.add_row(Text(items[0].model, style="bold"), "", Text(measure or "", style="bold"))
        for item in items:
            table.add_row(
                f"  {span(*item.interval)}",
                change(f"{item.rows_before:,}", f"{item.rows_after:,}"),
                ""
                if measure is None
                else change(
                    amount(item.sums_before.get(measure, "")),
                    amount(item.sums_after.get(measure, "")),
                ),
                f"+{item.keys_added:,} −{item.keys_removed:,} ~{item.keys_changed:,}",
            )
    return table


# -- tardy log ---------------------------------------------------------------------------------


def log_table(rows: Iterable[dict[str, t.Any]], restatement_id: str | None = None) -> Table:
    """The "Restatement log" table of ``tardy.engine.log.summary``'s rows (only
    ``restatement_id``'s when given), in three columns: the id over its creation time; the
    status over the promotion time; the reason, the actor and the number of intervals per
    model."""
    kept = [r for r in rows if restatement_id is None or r["restatement_id"] == restatement_id]
    intervals = {
        r["restatement_id"]: [
            f"{model} {len(spans)}" for model, spans in (r.get("intervals") or {}).items()
        ]
        for r in kept
    }
    table = Table(title="Restatement log", show_lines=True)
    _names_column(table, "id\ncreated", (r["restatement_id"] for r in kept))
    table.add_column("status\npromoted", no_wrap=True, overflow="fold")
    widest = max((cell_len(line) for lines in intervals.values() for line in lines), default=0)
    table.add_column(
        "reason\nactor, intervals per model", overflow="fold", min_width=widest or None
    )
    for row in kept:
        details = Text(row["reason"])
        details.append(f"\nby {row['actor']}", style="dim")
        for line in intervals[row["restatement_id"]]:
            details.append(f"\n{line}")
        table.add_row(
            f"{row['restatement_id']}\n{timestamp(row['created_at'])}",
            f"{row['status']}\n{timestamp(row.get('promoted_at'))}".rstrip(),
            details,
        )
    return table


# -- tardy status ------------------------------------------------------------------------------


def _num(value: float | None, fmt: str) -> str:
    return "-" if value is None else format(value, fmt)


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
            _num(h, ".1f") for h in (s.lag_hours_p50, s.lag_hours_p95, s.lag_hours_p99)
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
    _names_column(table, "source", [*names, "all"])
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
    _names_column(table, "model", [*models, *kinds])
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
    moved = result.revisions
    if moved.rows:
        console.print(
            f"Since first published, restatements moved {moved.rows:,} (day, store) rows on "
            f"{moved.days:,} days (up to revision r{moved.max_revision}): "
            f"{amount(moved.first_published)} → {amount(moved.now)}, net "
            f"{_signed(moved.net_change)}, gross {amount(moved.gross_change)}; most on "
            f"{moved.largest_day} ({_signed(moved.largest_day_change)}).",
            highlight=False,
        )
    console.print(f"Per day: SELECT * FROM {result.view}", markup=False)


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
    from tardy.engine.closure import ranges

    groups: dict[tuple[str, str, str, str], list[str]] = {}
    for day in days:
        key = (day.model, day.restatement_id, day.period_status, day.reason)
        groups.setdefault(key, []).append(day.event_date)
    table = Table(title="Periods changed by restatements (the latest one)")
    _names_column(table, "model / restatement", [n for key in groups for n in key[:2]])
    table.add_column("periods / reason", overflow="fold")
    for (model, rid, period_status, reason), dates in groups.items():
        spans = ranges(date.fromisoformat(d) for d in dates)
        table.add_row(
            f"{model}\n{rid}\n{period_status}",
            Group(Intervals(spans), Text(reason, style="italic")),
        )
    return table


# -- tardy summary / demo ----------------------------------------------------------------------


def _counts_table(title: str, header: str, counts: dict[str, int]) -> Table:
    table = Table(title=title)
    _names_column(table, header, counts)
    table.add_column("rows", justify="right")
    for name, count in counts.items():
        table.add_row(name, f"{count:,}")
    return table


def layers_table(rows: dict[str, int]) -> Table:
    return _counts_table("Rows per layer", "table", rows)


def quarantine_table(by_model: dict[str, dict[str, int]]) -> Table:
    """Every source's quarantine: a section per quarantine model, a row per reason."""
    table = Table(title="Quarantined by source and reason")
    _names_column(
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
    _names_column(table, "source", by_source)
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


def weekly_table(weekly: Iterable[dict[str, object]]) -> Table:
    table = Table(title="Gold revenue by week (all stores)")
    table.add_column("week", no_wrap=True)
    table.add_column("transactions", justify="right")
    table.add_column("revenue", justify="right")
    for week in weekly:
        transactions = t.cast(int, week["transactions"])
        table.add_row(str(week["week_start"]), f"{transactions:,}", amount(week["revenue"]))
    return table


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
    console.print(weekly_table(summary.weekly))


# -- tardy history -------------------------------------------------------------------------------


def _delta(before: dict[str, str] | None, after: dict[str, str] | None) -> str:
    """The columns a change touched, ``column: before → after``; a whole row when added or
    removed (its amount)."""
    if before is None or after is None:
        row = after or before or {}
        shown = ("event_date", "net_amount", "revenue")
        return ", ".join(f"{k}: {row[k]}" for k in shown if k in row)
    touched = sorted(k for k in after if before.get(k) != after[k])
    return "; ".join(f"{k}: {before.get(k)} → {after[k]}" for k in touched)


def _fields(values: Mapping[str, t.Any], names: Iterable[str]) -> str:
    """``name value, ...`` of the names with a value."""
    return ", ".join(f"{k} {values[k]}" for k in names if values.get(k) is not None)


def render_history(story: KeyHistory, console: Console) -> None:
    if not story.found:
        console.print(f"No bronze record and no restatement names key {story.key}.")
        return
    records = Table(title=f"Bronze records of {story.key} (by arrival)")
    records.add_column("arrived", overflow="fold")
    records.add_column("event / record", overflow="fold")
    records.add_column("file", overflow="fold")
    for r in story.records:
        records.add_row(
            timestamp(r["arrival_ts"]),
            f"{timestamp(r['event_time']) or r['parse_error']}\n{_fields(r, r['fields'])}",
            f"{r['bronze_table']}\n"
            f"{r['source_system']}/{Path(str(r['source_file'])).name}:{r['line_number']}",
        )
    console.print(records)
    if story.changes:
        changes = Table(title="Restatements that changed its rows")
        _names_column(changes, "restatement", [c["restatement_id"] for c in story.changes])
        changes.add_column("change", overflow="fold")
        for c in story.changes:
            changes.add_row(
                f"{c['restatement_id']}\n{c['action']}\n{timestamp(c['promoted_at'])}",
                Group(
                    Text(f"{c['model']} {c['event_date']}: {c['change']}", style="bold"),
                    Text(_delta(c["before"], c["after"])),
                    Text(c["reason"], style="italic"),
                ),
            )
        console.print(changes)
    else:
        console.print("No restatement changed its rows.")
    for model, rows in story.current.items():
        if not rows:
            console.print(f"Now in {model}: no row (voided, quarantined or not yet run).")
        for row in rows:
            console.print(f"Now in {model}: {_fields(row, row)}.", highlight=False)


def render_engine(status: EngineStatus, console: Console) -> None:
    """``tardy engine``: the data home's engine, its clients and where its log is."""
    record = status.record
    if record is not None and status.state is EngineState.WEDGED and status.probe:
        console.print(
            f"Engine: wedged on {record.url} (pid {record.server_pid}): "
            f"{status.probe.statement} {status.probe.error}. The next command restarts it, "
            "or:",
            soft_wrap=True,
        )
        console.print("tardy engine stop --force", soft_wrap=True)
        console.print(f"Log: {status.log}", soft_wrap=True)
        return
    if record is None or status.state is not EngineState.RUNNING:
        console.print(f"Engine: {status.state.value}. Log: {status.log}", soft_wrap=True)
        return
    idle = "in use" if status.idle_for is None else f"idle {status.idle_for:.0f} s"
    console.print(
        f"Engine: running on {record.url} (pid {record.server_pid}), {idle}; "
        f"stops after {record.idle_seconds:.0f} s idle.",
        soft_wrap=True,
    )
    if status.clients:
        table = Table("pid", "command", box=None)
        for client in status.clients:
            table.add_row(str(client.pid), client.command[:60])
        console.print(table)
    console.print(f"Log: {status.log}", soft_wrap=True)


def _day_span(days: list[str]) -> str:
    if not days:
        return "none"
    span = days[0] if len(days) == 1 else f"{days[0]}..{days[-1]}"
    return f"{len(days)}: {span}"


def render_versions(
    publications: list[Publication], console: Console, unreadable: set[str] | None = None
) -> None:
    """``tardy versions``: each published model's versions, newest first, ``latest`` marked,
    and with ``--check`` those time travel can no longer read. Delta versions and hashes are
    in ``--json`` (80 columns hold the rest whole)."""
    if not publications:
        console.print("Nothing published yet: `tardy publish` publishes the current versions.")
        return
    by_table: dict[str, list[Publication]] = {}
    for publication in publications:
        by_table.setdefault(publication.table_name, []).append(publication)
    for name, mine in by_table.items():
        table = Table(box=None, title=name)
        table.add_column("version", no_wrap=True)
        table.add_column("produced by", no_wrap=True)
        table.add_column("changed days", no_wrap=True)
        for publication in reversed(mine):
            label = f"v{publication.version}" + (" latest" if publication is mine[-1] else "")
            if unreadable and publication.name in unreadable:
                label += " gone"
            table.add_row(label, publication.produced_by, _day_span(publication.changed_days))
        console.print(table)
    if unreadable:
        console.print(
            f"gone: {len(unreadable)} versions time travel can no longer read (a VACUUM, "
            "the log's retention, or the model's table dropped)."
        )


def render_shown(shown: Shown, console: Console) -> None:
    """``tardy show``: a published version's rows, titled with what it is."""
    publication = shown.publication
    table = Table(*shown.columns, box=None)
    table.title = (
        f"{publication.name}: Delta version {publication.delta_version}, "
        f"by {publication.produced_by}" + (f", {shown.day}" if shown.day else "")
    )
    for row in shown.rows:
        table.add_row(*(Text(value) for value in row))
    console.print(table)
    console.print(f"{len(shown.rows):,} rows.")
