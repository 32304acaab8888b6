"""The tables of ``tardy detect``, ``restate``, ``promote`` and ``log``: the manifest, the diff,
the log."""

from __future__ import annotations

import typing as t
from collections.abc import Iterable

from rich.cells import cell_len
from rich.console import Console
from rich.table import Table
from rich.text import Text

from tardy.rendering.cells import (
    Intervals,
    amount,
    change,
    names_column,
    shell_lines,
    span,
    spans_text,
    timestamp,
)

if t.TYPE_CHECKING:
    from tardy.engine.results import Diff, IntervalDiff, Manifest


# -- tardy detect / restate --------------------------------------------------------------------


def manifest_table(manifest: Manifest) -> Table:
    """The "Closed intervals to restate" table: per model, its intervals."""
    table = Table(title="Closed intervals to restate")
    names_column(table, "model", manifest.impacted)
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
    from tardy.engine.results import measure_of

    table = Table(
        title=f"Restatement {diff.restatement_id}: staged vs prod",
        caption="keys (the model's grain): +added −removed ~changed",
    )
    models: dict[str, list[IntervalDiff]] = {}
    for item in diff.intervals:
        models.setdefault(item.model, []).append(item)
    names_column(table, "model / interval", models)
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
    names_column(table, "id\ncreated", (r["restatement_id"] for r in kept))
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
