"""Detect: the closed intervals late bronze rows change, and the arrival watermark.

``detect`` looks at the bronze rows added since the last restatement (the watermark: the
Delta version of each bronze table prod reflects; the first time, every row) and keeps only
what prod does not reflect yet. For a fact source (``tardy.engine.facts``), the models that
read it are re-run on the records of the keys the new rows touch and compared with prod's
rows of those keys; for a dimension (``tardy.engine.dimension``), its validity windows at
the two versions. The days that differ are split into those the next ``sqlmesh run``
recomputes anyway (inside the grace window) and closed days, whose downstream closure over
the DAG (``tardy.engine.closure``: daily day, week, month, the 28 days of features that
include the day) is the change manifest. ``tardy.engine.machine`` stages the manifest's root
intervals and cascades only what changed, then advances the watermark
(``tardy.engine.watermark``), past the days inside the grace window too: those the watermark
row keeps as pending, reported here until the model's next run recomputes them.
"""

from __future__ import annotations

import typing as t
from datetime import date, timedelta

from tardy.engine import delta, dimension, facts, sqlmesh_api
from tardy.engine.closure import Closure
from tardy.engine.results import Manifest, days_of, ranges
from tardy.engine.watermark import ensure_table
from tardy.engine.watermark import read as read_watermark
from tardy.key_index import KeySet

if t.TYPE_CHECKING:
    from pyspark.sql import SparkSession
    from sqlmesh import Context


def detect(context: Context, spark: SparkSession) -> Manifest:
    ensure_table(spark)
    grace = int(context.config.variables["grace_days"])
    snapshots = sqlmesh_api.model_snapshots(context)
    closure = Closure(context, snapshots)
    dimensions = dimension.dimensions(context, snapshots)
    sources = facts.project_fact_sources(context, snapshots)
    if not sources:
        raise facts.FactSourceError(
            "no model reads a fact source declared in sources.yaml (after a change to the "
            "models, `sqlmesh plan` applies it)"
        )
    # The watermark advances past in-grace records because each reader's next run recomputes
    # the grace window (``tardy.engine.watermark``): its lookback must cover it.
    short = sorted(
        r.name for s in sources for r in s.readers if (r.snapshot.model.lookback or 0) < grace
    )
    if short:
        raise facts.FactSourceError(
            f"{', '.join(short)}: lookback below grace_days ({grace}); a model reading a fact "
            "source must recompute the grace window on each run: its kind's `lookback` must "
            "be at least grace_days (docs/engine.md, the fact watermark advances)"
        )
    primary = sources[0].table
    mark = read_watermark(spark)
    since, previous, since_sources = mark.version, mark.stamp, mark.sources
    bronze = [s.table for s in sources] + [t for d in dimensions for t in d.sources]
    history = delta.History.of(spark, bronze)
    version = history.version(primary)
    # Bronze is append-only: its latest arrival is in the partitions from the previous one on.
    newer = f"WHERE arrival_date >= DATE'{previous[:10]}'" if previous else ""
    arrival = delta.query(
        spark, f"SELECT MAX(arrival_ts) AS m FROM {primary} VERSION AS OF {version} {newer}"
    )
    latest = delta.single_row(arrival).m
    found: dict[str, set[date]] = {}
    counts: dict[str, int] = {}
    keys: dict[str, KeySet] = {}
    read_by: dict[str, str] = {}  # reader model -> the bronze table it reads
    source_versions: dict[str, int] = {}
    for source in sources:
        if source.table == primary:
            before, until = since, version
        else:
            before = since_sources.get(source.table)
            until = source_versions[source.table] = history.version(source.table)
        changed = (
            facts.changes(context, spark, source, before, until)
            if before != until
            else facts.Changes()
        )
        for reader in source.readers:
            found[reader.name] = changed.days.get(reader.name, set())
            counts[reader.name] = changed.counts.get(reader.name, 0)
            read_by[reader.name] = source.table
        keys |= changed.keys
    roots: dict[str, set[date]] = {}
    absorbed: dict[str, list[list[str]]] = {}
    commands: list[str] = []
    for model, days in found.items():
        # The next `sqlmesh run` recomputes the last grace_days of the model's intervals.
        end = sqlmesh_api.last_computed_day(closure.snapshots[model])
        closed = {d for d in days if end is not None and d <= end - timedelta(days=grace)}
        roots[model] = closed
        absorbed[model] = ranges(days - closed)
        commands += stock_commands(closure, {model: closed}, read_by[model])
    reasons: dict[str, str] = {}
    windows: dict[str, list[dict[str, str | None]]] = {}
    for dim in dimensions:
        altered = dimension.detect(context, spark, history, dim, since_sources)
        for child, days in altered.days.items():
            end = sqlmesh_api.last_computed_day(closure.snapshots[child])
            closed = {d for d in days if end is not None and d <= end - timedelta(days=grace)}
            roots[child] = roots.get(child, set()) | closed
            for table in dim.sources:
                commands += stock_commands(closure, {child: closed}, table)
            absorbed[child] = ranges(days_of(absorbed.get(child, [])) | (days - closed))
            reasons[child] = (
                f"{len(altered.windows)} validity window(s) of {len(altered.keys)} key(s) of "
                f"{dim.name} that late changes alter (its as-of join)"
            )
        # The dimension's watermark advances even when some altered days are inside the grace
        # window: SQLMesh's lookback makes the next run, whenever it comes, recompute them
        # (it moves the start of the missing intervals back by the lookback). Held back, the
        # same windows would be found again and again (detection compares bronze versions,
        # not prod's rows as the facts' rule does).
        source_versions.update(altered.versions)
        if altered.windows:
            windows[dim.name] = [w.as_dict() for w in altered.windows]
    # The days an earlier advance found inside the grace window that no run recomputed since
    # (``tardy.engine.watermark``): the next run still absorbs them.
    for model, pending in mark.pending.items():
        snapshot = closure.snapshots.get(model)
        if snapshot is None:  # a model no longer in the project
            continue
        carried = pending.still_pending(sqlmesh_api.last_computed_day(snapshot))
        if carried:
            absorbed[model] = ranges(days_of(absorbed.get(model, [])) | carried)
    reached = closure.downstream(roots)
    for model, n in counts.items():
        reasons[model] = (
            f"{n} {sqlmesh_api.grain(closure.snapshots[model])[0]} value(s) whose prod rows differ "
            f"from the model re-run on their {read_by[model]} records (new records, "
            "duplicates, corrections, voids, invalid records)"
        )
    for model in reached:
        if model not in reasons:
            parents = ", ".join(closure.parents(model))
            reasons[model] = f"the intervals that read an impacted day of {parents}"
    manifest = Manifest(
        arrival_watermark=latest.isoformat() if latest else None,
        previous_watermark=previous,
        bronze_version=version,
        since_bronze_version=since,
        late_rows=sum(counts.values()),
        impacted={model: ranges(days) for model, days in reached.items()},
        absorbed_by_next_run=absorbed,
        reasons=reasons,
        roots={model: ranges(days) for model, days in roots.items()},
        source_versions=source_versions,
        since_source_versions=since_sources,
        altered=windows,
    )
    manifest.keys = keys  # the changed keys are known: staging may restrict models to them
    manifest.stock_commands = list(dict.fromkeys(commands))
    return manifest


def stock_commands(closure: Closure, roots: dict[str, set[date]], source: str) -> list[str]:
    """The stock restatements covering the same changes: per range of root days, one hull
    from the earliest to the latest day any model's closure reaches, restating what reads
    ``source``."""
    commands = []
    for model, days in roots.items():
        for span in ranges(days):
            reached = closure.downstream({model: days_of([span])})
            every = [d for model_days in reached.values() for d in model_days]
            commands.append(
                f"sqlmesh plan --restate-model {source} --start {min(every)} --end {max(every)}"
            )
    return list(dict.fromkeys(commands))
