"""Stage a restatement away from prod: shallow clones, SQLMesh's own evaluator, its audits.

Every prod snapshot has, besides its prod table, a *dev table* (``snapshot.table_name(
is_deployable=False)``, ``<table>__dev``): SQLMesh writes there when a snapshot is evaluated
as non-deployable (its forward-only previews), and resolves a non-deployable parent to it.
Staging uses exactly that mechanism:

1. each model's dev table becomes a Delta ``SHALLOW CLONE`` of its prod table at the current
   version (metadata only: the clone points at prod's files);
2. ``SnapshotEvaluator.evaluate`` and ``.audit`` run the manifest's intervals, upstream first,
   with ``DeployabilityIndex.none_deployable()``: SQLMesh renders the models (SQL and
   Python), writes the intervals with the exact REPLACE WHERE strategy into the clones,
   reads upstream models from their clones, and runs every audit against the clones.

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
    """Clone every model's prod table into its dev table and evaluate ``impacted`` there.

    Returns the staged tables that received intervals, upstream first. Raises AuditFailed
    (after evaluating what it could) when a blocking audit fails.
    """
    from sqlmesh.core.snapshot import DeployabilityIndex
    from sqlmesh.utils.date import to_timestamp

    ordered = _ordered_model_snapshots(context)
    snapshots_by_name = {s.name: s for s in prod_snapshots(context).values()}
    index = DeployabilityIndex.none_deployable()
    staged: list[StagedTable] = []
    # Every model is cloned, not only the restated ones: an audit or a downstream model of a
    # restated model may read any of them, and reads resolve to the clones.
    for snapshot in ordered:
        prod_table = spark_name(snapshot.table_name(is_deployable=True))
        staged_table = spark_name(snapshot.table_name(is_deployable=False))
        version = delta_version(spark, prod_table)
        spark.sql(f"DROP TABLE IF EXISTS {staged_table}")
        spark.sql(f"CREATE TABLE {staged_table} SHALLOW CLONE {prod_table} VERSION AS OF {version}")
        spans = impacted.get(snapshot.model.name) or []
        if spans:
            staged.append(
                StagedTable(
                    model=snapshot.model.name,
                    prod_table=prod_table,
                    staged_table=staged_table,
                    time_column=snapshot.model.time_column.column.name,
                    version_before=version,
                    intervals=spans,
                    snapshot_version=snapshot.version,
                )
            )
    evaluator = context.snapshot_evaluator
    execution_time = max(
        to_timestamp(date.fromisoformat(last) + timedelta(days=1))
        for table in staged
        for _, last in table.intervals
    )
    failures: list[dict[str, object]] = []
    by_model = {s.model.name: s for s in ordered}
    for table in staged:
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
            for result in results:
                if result.count and blocking.get(result.audit.name, True):
                    failures.append(
                        {
                            "audit": result.audit.name,
                            "model": table.model,
                            "interval": [first, last],
                            "rows": int(result.count),
                        }
                    )
            passed = sum(1 for r in results if not r.count)
            err.print(
                f"  staged {table.model} {first}..{last}: audits {passed}/{len(results)} passed"
            )
    if failures:
        raise AuditFailed(failures)
    return staged


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
