"""``tardy grace``: per source, the late share of candidate grace windows, and the
suggestion (``tardy.lateness.grace``)."""

from __future__ import annotations

import typing as t

from rich.table import Table

from tardy.rendering.cells import names_column, shell_lines

if t.TYPE_CHECKING:
    from rich.console import Console

    from tardy.lateness.grace import Fit, SourceFit


def fit_table(source: SourceFit, current: int) -> Table:
    """One source's candidate windows: late rows and share, the days kept provisional."""
    low, high = source.bounds
    table = Table(
        title=f"{source.source_system} (tier {source.tier}: late share <= "
        f"{source.target:.2%}, windows {low}-{high} days)"
    )
    table.add_column("window", justify="right", no_wrap=True)
    for header in ("late rows", "late share", "provisional"):
        table.add_column(header, justify="right")
    table.add_column("", no_wrap=True)
    for c in source.candidates:
        marks = []
        if c.days == source.suggested:
            marks.append("suggested")
        if c.days == current:
            marks.append("current")
        table.add_row(
            f"{c.days} d",
            f"{c.late_rows:,}",
            "-" if c.late_share is None else f"{c.late_share:.2%}",
            f"{c.provisional_days} d",
            ", ".join(marks),
        )
    return table


def render_fit(result: Fit, console: Console) -> None:
    """``tardy grace``'s human output: a table per source, the suggestion, what to run."""
    for source in result.sources:
        console.print(fit_table(source, result.current))
        if not source.meets_target:
            console.print(
                f"No window within {source.source_system}'s bounds keeps its late share "
                f"within {source.target:.2%}: the largest is suggested.",
                highlight=False,
            )
    names = [s.source_system for s in result.sources]
    if names:
        table = Table(show_header=False, box=None)
        names_column(table, "", names)
        table.add_column("")
        for s in result.sources:
            table.add_row(s.source_system, f"{s.suggested} d")
        console.print(table)
    if result.suggested == result.current:
        console.print(f"The grace window stays {result.current} days.", highlight=False)
        return
    if result.applied:
        console.print(
            f"project.yaml: grace_days {result.current} -> {result.suggested}. Review and "
            "apply the models whose lookback it moves:",
            highlight=False,
        )
    else:
        console.print(
            f"Suggested: {result.suggested} days (now {result.current}). To write it:",
            highlight=False,
        )
        console.print(shell_lines(".venv/bin/tardy grace --apply", console.width), highlight=False)
        console.print("then review and apply it:", highlight=False)
    console.print(shell_lines(".venv/bin/sqlmesh plan", console.width), highlight=False)
