"""The terminal rendering of the models commands (``train``, ``impact``, ``retrain``,
``models``), with ``tardy.rendering``'s layout rules: 80 columns, names never cut."""

from __future__ import annotations

import typing as t

from rich.console import Console
from rich.table import Table

from tardy.rendering.cells import day_span

if t.TYPE_CHECKING:
    from tardy.training.pipeline import Impact, Retrained
    from tardy.training.registry import Registered


def _inputs(model: Registered) -> str:
    return "\n".join(f"{i.name} {i.first_day}..{i.last_day}" for i in model.inputs)


def render_model(model: Registered, console: Console) -> None:
    """``tardy train``: the version registered, what it read, how it scored."""
    crowned = " (champion)" if model.champion else ""
    console.print(f"Registered store_revenue v{model.version}{crowned}: {model.uri}")
    table = Table(box=None, show_header=False)
    table.add_column(no_wrap=True)
    table.add_column()
    table.add_row("trained on", _inputs(model))
    if model.trained_after:
        table.add_row("after", model.trained_after)
    table.add_row("snapshot", f"SHA-256 {model.snapshot_sha256[:16]}...")
    table.add_row("holdout MAE", f"{model.metrics.get('holdout_mae', float('nan')):,.2f}")
    dirty = "-dirty" if model.code_version.endswith("-dirty") else ""
    table.add_row("code", model.code_version[:12] + dirty)
    console.print(table)


def render_models(models: list[Registered], console: Console) -> None:
    """``tardy models``: every registered version, newest first, the champion marked."""
    if not models:
        console.print("No model registered yet: `tardy train` trains the first.")
        return
    table = Table(box=None, title="store_revenue")
    table.add_column("version", no_wrap=True)
    table.add_column("trained on", no_wrap=True)
    table.add_column("MAE", justify="right", no_wrap=True)
    for model in reversed(models):
        label = f"v{model.version}" + (" champion" if model.champion else "")
        table.add_row(
            label,
            _inputs(model),
            f"{model.metrics.get('holdout_mae', float('nan')):,.2f}",
        )
    console.print(table)


def render_impact(impact: Impact, console: Console) -> None:
    """``tardy impact``: the versions a restatement superseded, the models it made stale."""
    table = Table(box=None, title=f"Published by {impact.restatement_id}")
    table.add_column("superseded", no_wrap=True)
    table.add_column("by", no_wrap=True)
    table.add_column("changed days")
    for s in impact.superseded:
        table.add_row(
            s.old.name if s.old else "-", f"v{s.new.version}", day_span(s.new.changed_days)
        )
    console.print(table)
    if not impact.stale:
        console.print(
            f"No registered model read a day it changed ({impact.models} versions checked)."
        )
        return
    stale = Table(box=None, title="Stale models")
    stale.add_column("model", no_wrap=True)
    stale.add_column("read", no_wrap=True)
    stale.add_column("changed days it read")
    for model in impact.stale:
        name = f"v{model.version}" + (" champion" if model.champion else "")
        stale.add_row(name, model.reads, day_span(model.days))
    console.print(stale)
    console.print("Retrain on the corrected versions:")
    console.print(f"tardy retrain --after {impact.restatement_id}", markup=False, highlight=False)


def render_retrained(result: Retrained, console: Console) -> None:
    """``tardy retrain``: the challenger, both backtests, the verdict."""
    challenger = result.challenger
    console.print(
        f"Registered store_revenue v{challenger.version}, trained after "
        f"{challenger.trained_after} on:"
    )
    console.print(_inputs(challenger), markup=False, highlight=False)
    table = Table(box=None, title=f"Backtest from {result.snapshot['holdout_start']}")
    table.add_column("model", no_wrap=True)
    table.add_column("MAE", justify="right", no_wrap=True)
    table.add_row(f"v{result.champion_before} (champion)", f"{result.champion_mae:,.2f}")
    table.add_row(f"v{challenger.version} (challenger)", f"{result.challenger_mae:,.2f}")
    console.print(table)
    if result.promoted:
        console.print(f"store_revenue@champion is now v{result.champion}: {result.reason}.")
    else:
        console.print(f"Not promoted: {result.reason}.")
