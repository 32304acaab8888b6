"""``tardy versions`` and what a re-read of a version shows (``--as-of``)."""

from __future__ import annotations

import typing as t

from rich.console import Console
from rich.table import Table
from rich.text import Text

from tardy.rendering.cells import day_span

if t.TYPE_CHECKING:
    from tardy.consumers.rereads import Shown
    from tardy.consumers.versions import Publication


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
            table.add_row(label, publication.produced_by, day_span(publication.changed_days))
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
