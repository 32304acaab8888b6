"""Named restatements: the models a user names, over a range they choose.

``tardy restate --model M [--model ...] --start D --end D`` restates what the user names
instead of what ``detect`` finds (a partner says "week 12 is wrong", a backfill of a store's
history). The selection follows ``sqlmesh plan --restate-model``: SQLMesh's own selector
expands it (names, wildcards, tags), and an external model (bronze) stands for the models that
read it, as in a stock restatement. Each selected model's roots are its days in the range,
clipped to what prod has computed; the closure over the DAG and the rest of the flow (stage,
audit, diff, cascade only what changed, promote, log, rollback, lock) are the detected
restatement's.

A named restatement does not move the arrival watermark: prod reflects the range as bronze
holds it now, not every row that arrived since the watermark (``detect`` still reports those;
a key whose prod row the named restatement already brought up to date is then unchanged).
Its manifest therefore carries the watermark's own bronze version and arrival time.
"""

from __future__ import annotations

import typing as t
from dataclasses import dataclass
from datetime import date, timedelta

from tardy.engine import sqlmesh_api
from tardy.engine.closure import Closure
from tardy.engine.results import Manifest, ranges
from tardy.engine.watermark import ensure_table, read
from tardy.errors import InputError

if t.TYPE_CHECKING:
    from pyspark.sql import SparkSession
    from sqlmesh import Context


class SelectionError(InputError):
    """A named restatement names no model of the project, or an empty range."""


@dataclass(frozen=True)
class Selection:
    """What the user named: model selectors (as ``sqlmesh plan --restate-model`` takes them)
    and a closed range of days."""

    models: tuple[str, ...]
    start: date
    end: date

    def as_dict(self) -> dict[str, object]:
        return {
            "models": list(self.models),
            "start": self.start.isoformat(),
            "end": self.end.isoformat(),
        }

    def __str__(self) -> str:
        return f"{', '.join(self.models)} over {self.start}..{self.end}"


def selected_models(context: Context, selection: Selection) -> list[str]:
    """The project's materialized models the selection names, upstream first; an external
    model (bronze) stands for the models that read it."""
    snapshots = sqlmesh_api.model_snapshots(context)
    fqns = sqlmesh_api.expand_selection(context, selection.models)
    # An external model (bronze) or a model without intervals (a view: a dimension) stands for
    # the models that read it.
    through = fqns - {s.name for s in snapshots}
    named = []
    for s in snapshots:  # upstream first
        if s.name in fqns or any(p.name in through for p in s.parents):
            if sqlmesh_api.has_intervals(s):
                named.append(s.model.name)
            else:
                through.add(s.name)
    if not named:
        raise SelectionError(
            f"--model {' '.join(selection.models)} names no model of the project "
            "(the syntax of `sqlmesh plan --restate-model`: names, wildcards, tag:...)"
        )
    return named


def computed_range(context: Context, selectors: t.Sequence[str]) -> tuple[date, date]:
    """The days the selected models have computed in prod, the first one's first to the last
    one's last: what ``sqlmesh plan --restate-model`` restates when no range is given
    (``tardy plan``)."""
    names = set(selected_models(context, Selection(tuple(selectors), date.min, date.max)))
    snapshots = [s for s in sqlmesh_api.model_snapshots(context) if s.model.name in names]
    firsts = [d for s in snapshots if (d := sqlmesh_api.first_computed_day(s)) is not None]
    lasts = [d for s in snapshots if (d := sqlmesh_api.last_computed_day(s)) is not None]
    if not firsts or not lasts:
        raise SelectionError(
            f"{' '.join(selectors)}: prod has computed no day of it yet (`sqlmesh plan` first)"
        )
    return min(firsts), max(lasts)


def manifest(context: Context, spark: SparkSession, selection: Selection) -> Manifest:
    """The manifest of a named restatement: the selected models' days in the range as roots,
    their closure over the DAG as ``impacted``, the equivalent stock commands."""
    if selection.end < selection.start:
        raise SelectionError(f"--end {selection.end} is before --start {selection.start}")
    models = selected_models(context, selection)
    closure = Closure(context, sqlmesh_api.model_snapshots(context))
    span = (selection.end - selection.start).days + 1
    days = {selection.start + timedelta(days=i) for i in range(span)}
    roots = {model: closure.clip(model, days) for model in models}
    reached = closure.downstream(roots)
    ensure_table(spark)
    mark = read(spark)  # a named restatement moves no watermark
    since, previous, sources = mark.version, mark.stamp, mark.sources
    reasons = {model: f"named: {selection}" for model in models}
    for model in reached:
        if model not in reasons:
            parents = ", ".join(closure.parents(model))
            reasons[model] = f"the intervals that read an impacted day of {parents}"
    return Manifest(
        arrival_watermark=previous,
        previous_watermark=previous,
        bronze_version=-1 if since is None else since,
        since_bronze_version=since,
        late_rows=0,
        impacted={model: ranges(d) for model, d in reached.items()},
        absorbed_by_next_run={},
        reasons=reasons,
        roots={model: ranges(d) for model, d in roots.items() if d},
        stock_commands=[
            f"sqlmesh plan --restate-model {model} --start {selection.start} --end {selection.end}"
            for model in models
        ],
        named=selection.as_dict(),
        source_versions=sources,
        since_source_versions=sources,
    )
