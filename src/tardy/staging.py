"""Stage a restatement away from prod: shallow clones, SQLMesh's own evaluator, its audits.

Every prod snapshot has, besides its prod table, a *dev table* (``snapshot.table_name(
is_deployable=False)``, ``<table>__dev``): SQLMesh writes there when a snapshot is evaluated
as non-deployable (its forward-only previews), and resolves a non-deployable parent to it.
Staging uses exactly that mechanism:

1. the dev table of each model with intervals to restate becomes a Delta ``SHALLOW CLONE``
   of its prod table at the current version (metadata only: the clone points at prod's
   files), or an empty table of its schema when nothing reads it beyond the intervals
   written into it (``reads_beyond_intervals``: a leaf of the DAG such as the weekly rollup);
2. ``SnapshotEvaluator.evaluate`` and ``.audit`` run the manifest's intervals, upstream first,
   with a deployability index in which exactly those models are non-deployable: SQLMesh
   renders the models (SQL and Python), writes the intervals with the exact REPLACE WHERE
   strategy into the clones, reads restated upstream models from their clones and every
   other model from prod (which the restatement leaves as it is), and runs every audit
   against the clones.

Prod tables and views are never written, and SQLMesh's state is not touched (no interval is
added or removed: prod's intervals stay complete, so ``sqlmesh plan`` and ``sqlmesh run``
see nothing to do before or after promotion).
"""

from __future__ import annotations

import typing as t
from dataclasses import asdict, dataclass
from datetime import date, timedelta

from rich.console import Console

if t.TYPE_CHECKING:
    from pyspark.sql import SparkSession
    from sqlmesh import Context

err = Console(stderr=True)


class AuditFailed(RuntimeError):
    """A blocking audit failed on the staged data."""

    def __init__(self, failures: list[dict[str, object]]) -> None:
        self.failures = failures
        names = "; ".join(
            f"audit {f['audit']} on {f['model']} for {f['interval'][0]}..{f['interval'][1]}"
            f" ({f['rows']} rows)"
            for f in failures
        )
        super().__init__(f"blocking audit failed: {names}")


@dataclass
class StagedTable:
    model: str
    prod_table: str
    staged_table: str
    time_column: str
    version_before: int
    intervals: list[list[str]]
    snapshot_version: str

    def as_dict(self) -> dict[str, object]:
        return asdict(self)

    def predicate(self) -> str:
        """The SQL predicate selecting the restated intervals."""
        return " OR ".join(
            f"`{self.time_column}` BETWEEN DATE'{first}' AND DATE'{last}'"
            for first, last in self.intervals
        )


def prod_snapshots(context: Context) -> dict[str, t.Any]:
    env = context.state_sync.get_environment("prod")
    if env is None:
        raise RuntimeError("no prod environment yet: run `sqlmesh plan` first")
    snapshots = context.state_sync.get_snapshots(env.snapshots).values()
    return {s.name if not s.is_model else s.model.name: s for s in snapshots}


def delta_version(spark: SparkSession, table: str) -> int:
    return int(spark.sql(f"DESCRIBE HISTORY {table} LIMIT 1").first().version)


def spark_name(table: str) -> str:
    """A SQLMesh table name (SQLGlot's quoting) as Spark SQL."""
    from sqlglot import exp

    return exp.to_table(table).sql(dialect="spark")


def _ordered_model_snapshots(context: Context) -> list[t.Any]:
    """The prod snapshots of the project's materialized models, upstream first."""
    snapshots = {
        s.name: s for s in prod_snapshots(context).values() if s.is_model and not s.is_external
    }
    return [snapshots[name] for name in context.dag if name in snapshots]


def stage(
    context: Context, spark: SparkSession, impacted: dict[str, list[list[str]]]
) -> list[StagedTable]:
    """Stage every model with intervals in ``impacted``: its dev table becomes a clone of its
    prod table (or an empty table, see ``reads_beyond_intervals``), and those intervals are
    evaluated there, upstream first.

    The staged models are non-deployable (SQLMesh writes them to, and their children read
    them from, the dev tables); every other model stays deployable, so the staged models and
    their audits read its prod table, which the restatement does not change. Returns the
    staged tables, upstream first. Raises AuditFailed (after evaluating and auditing
    everything) when a blocking audit fails.

    Measured on the bench: running the clones, the evaluations of one DAG level and the
    audits on 4 threads saved nothing (stage 27.5 s against 26.2 s on one thread; 4 clones
    side by side took as long as one after another): the two cores are already busy, and
    Spark's Hive metastore client runs one call at a time.
    """
    from sqlmesh.core.snapshot import DeployabilityIndex
    from sqlmesh.utils.date import to_timestamp

    snapshots_by_name = {s.name: s for s in prod_snapshots(context).values()}
    by_model = {s.model.name: s for s in _ordered_model_snapshots(context)}
    restated = [s for s in by_model.values() if impacted.get(s.model.name)]
    index = DeployabilityIndex.all_deployable()
    for snapshot in restated:
        index = index.with_non_deployable(snapshot)

    def prepare(snapshot: t.Any) -> StagedTable:
        prod_table = spark_name(snapshot.table_name(is_deployable=True))
        staged_table = spark_name(snapshot.table_name(is_deployable=False))
        version = delta_version(spark, prod_table)
        # Not CREATE OR REPLACE: Delta refuses to clone onto a table that holds rows.
        spark.sql(f"DROP TABLE IF EXISTS {staged_table}")
        if reads_beyond_intervals(snapshot, list(by_model.values())):
            spark.sql(
                f"CREATE TABLE {staged_table} SHALLOW CLONE {prod_table} VERSION AS OF {version}"
            )
        else:  # nothing reads it beyond the intervals written into it: a clone is not needed
            spark.sql(f"CREATE TABLE {staged_table} LIKE {prod_table} USING delta")
        return StagedTable(
            model=snapshot.model.name,
            prod_table=prod_table,
            staged_table=staged_table,
            time_column=snapshot.model.time_column.column.name,
            version_before=version,
            intervals=impacted[snapshot.model.name],
            snapshot_version=snapshot.version,
        )

    staged = [prepare(snapshot) for snapshot in restated]
    evaluator = context.snapshot_evaluator
    execution_time = max(
        (
            to_timestamp(date.fromisoformat(last) + timedelta(days=1))
            for table in staged
            for _, last in table.intervals
        ),
        default=None,
    )
    failures: list[dict[str, object]] = []
    for table in staged:  # upstream first: a model reads its restated parents' clones
        snapshot = by_model[table.model]
        for first, last in table.intervals:
            start = to_timestamp(first)
            end = to_timestamp(date.fromisoformat(last) + timedelta(days=1))
            with err.status(f"Staging {table.model} {first}..{last}"):
                evaluator.evaluate(
                    snapshot,
                    start=start,
                    end=end,
                    execution_time=execution_time,
                    snapshots=snapshots_by_name,
                    deployability_index=index,
                    target_table_exists=True,
                )
                results = evaluator.audit(
                    snapshot,
                    snapshots=snapshots_by_name,
                    start=start,
                    end=end,
                    execution_time=execution_time,
                    deployability_index=index,
                )
            blocking = declared_blocking(snapshot)
            failures += [
                {
                    "audit": result.audit.name,
                    "model": table.model,
                    "interval": [first, last],
                    "rows": int(result.count),
                }
                for result in results
                if result.count and blocking.get(result.audit.name, True)
            ]
            passed = sum(1 for r in results if not r.count)
            err.print(
                f"  staged {table.model} {first}..{last}: audits {passed}/{len(results)} passed"
            )
    if failures:
        raise AuditFailed(failures)
    return staged


def reads_beyond_intervals(snapshot: t.Any, snapshots: list[t.Any]) -> bool:
    """Whether staging may read rows of the model's staged table outside the intervals it
    writes there: a child model does (a week reads its days), so does a model that reads
    itself, or an audit that names the model (its own audits see only ``@this_model``'s
    audited interval). Such a table is staged as a shallow clone of prod; any other as an
    empty table of the same schema (about 0.4 s against 1.5 s for a clone, measured).
    """
    if snapshot.model.depends_on_self:
        return True
    if any(snapshot.name in {p.name for p in other.parents} for other in snapshots):
        return True
    name = _plain(snapshot.model.name)
    for other in snapshots:
        for audit, args in other.node.audits_with_args:
            texts = [audit.query.sql(), *(value.sql() for value in args.values())]
            if any(name in _plain(text) for text in texts):
                return True
    return False


def _plain(sql: str) -> str:
    return sql.replace('"', "").replace("`", "").lower()


def declared_blocking(snapshot: t.Any) -> dict[str, bool]:
    """Whether each audit of the model is blocking, as the project declares it.

    SQLMesh downgrades every audit of a non-deployable table to non-blocking on engines
    without table cloning (its dev previews there hold only a subset of the data). A staged
    table is a shallow clone of the whole prod table, so the declared setting applies.
    """
    from sqlglot import exp

    out = {}
    for audit, args in snapshot.node.audits_with_args:
        flag = args.get("blocking")
        out[audit.name] = audit.blocking if flag is None else flag == exp.true()
    return out


def drop_stage(context: Context, spark: SparkSession) -> None:
    """Drop every model's staged clone (prod's files are not touched: a shallow clone's
    own directory holds only what was written into it)."""
    for snapshot in _ordered_model_snapshots(context):
        spark.sql(f"DROP TABLE IF EXISTS {spark_name(snapshot.table_name(is_deployable=False))}")
