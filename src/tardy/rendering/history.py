"""``tardy history``: one key's story through bronze, silver and the restatements."""

from __future__ import annotations

import typing as t
from collections.abc import Iterable, Mapping
from pathlib import Path

from rich.console import Console, Group
from rich.table import Table
from rich.text import Text

from tardy.rendering.cells import names_column, timestamp

if t.TYPE_CHECKING:
    from tardy.consumers.history import KeyHistory


def _delta(before: dict[str, str] | None, after: dict[str, str] | None) -> str:
    """The columns a change touched, ``column: before → after``; the whole row (each column
    with a value, in the model's order) when added or removed."""
    if before is None or after is None:
        row = after or before or {}
        return ", ".join(f"{k}: {v}" for k, v in row.items() if v is not None)
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
        names_column(changes, "restatement", [c["restatement_id"] for c in story.changes])
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
