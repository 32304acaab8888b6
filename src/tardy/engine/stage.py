"""Stage a model's restated intervals away from prod: one table, one write, whatever their number.

Every prod snapshot has, besides its prod table, a *dev table* (``snapshot.table_name(
is_deployable=False)``, ``<table>__dev``): SQLMesh writes there when a snapshot is evaluated
as non-deployable, and resolves a non-deployable parent to it. Staging uses exactly that:

1. ``prepare``: the model's dev table becomes a Delta ``SHALLOW CLONE`` of its prod table at
   the current version (metadata only), or an empty table of its schema when nothing reads
   it beyond the intervals written into it (``reads_beyond_intervals``: a leaf of the DAG);
2. ``write``: SQLMesh renders the model (SQL or Python) once per restated interval, with a
   deployability index in which the staged models are non-deployable (they read their staged
   parents, and prod for every other model); the renders are combined into ONE
   ``INSERT INTO <dev table> REPLACE WHERE <union of the intervals> SELECT ...``: one Spark
   statement and one Delta commit per model, exact like SQLMesh's own REPLACE WHERE writes.

Prod tables and views are never written, and SQLMesh's state is not touched.
"""

from __future__ import annotations

import re
import typing as t
from dataclasses import asdict, dataclass, field
from functools import reduce

import pandas as pd
from sqlglot import exp

from tardy.engine import delta, sqlmesh_api

if t.TYPE_CHECKING:
    from pyspark.sql import SparkSession
    from sqlmesh import Context
    from sqlmesh.core.snapshot import Snapshot


@dataclass
class StagedTable:
    model: str
    prod_table: str
    staged_table: str
    time_column: str
    version_before: int
    intervals: list[list[str]]  # evaluated
    snapshot_version: str
    changed: list[list[str]] = field(default_factory=list)  # the days whose rows changed

    def as_dict(self) -> dict[str, object]:
        return asdict(self)

    def predicate(self, spans: list[list[str]] | None = None) -> str:
        """The SQL predicate selecting ``spans`` (default: the evaluated intervals)."""
        spans = self.intervals if spans is None else spans
        if not spans:
            return "FALSE"
        return " OR ".join(
            f"`{self.time_column}` BETWEEN DATE'{first}' AND DATE'{last}'" for first, last in spans
        )


def reads_beyond_intervals(snapshot: Snapshot, snapshots: list[Snapshot]) -> bool:
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
    return sqlmesh_api.names_in_audits(snapshot, snapshots)


def prepare(
    spark: SparkSession, snapshot: Snapshot, snapshots: list[Snapshot], intervals: list[list[str]]
) -> StagedTable:
    """Create the model's staged table (clone or empty) for ``intervals``."""
    prod_table = sqlmesh_api.spark_name(snapshot.table_name(is_deployable=True))
    staged_table = sqlmesh_api.spark_name(snapshot.table_name(is_deployable=False))
    version = delta.version(spark, prod_table)
    clone = reads_beyond_intervals(snapshot, snapshots)
    delta.stage_table(spark, staged_table, prod_table, version, clone=clone)
    return StagedTable(
        model=snapshot.model.name,
        prod_table=prod_table,
        staged_table=staged_table,
        time_column=sqlmesh_api.time_column(snapshot),
        version_before=version,
        intervals=intervals,
        snapshot_version=snapshot.version,
    )


def write(
    spark: SparkSession, renderer: sqlmesh_api.Renderer, snapshot: Snapshot, table: StagedTable
) -> None:
    """Evaluate every interval of ``table`` into its staged table in one statement."""
    rendered = [
        part for first, last in table.intervals for part in renderer.rows(snapshot, first, last)
    ]
    queries = [part for part in rendered if isinstance(part, exp.Query)]
    view = None
    if not rendered:  # a Python model that yielded nothing: the intervals become empty
        source = f"(SELECT * FROM {table.staged_table} WHERE FALSE)"
    elif len(queries) == len(rendered):
        branches = [
            exp.select("*").from_(query.subquery(f"_interval_{i}"))
            for i, query in enumerate(queries)
        ]
        union = reduce(lambda a, b: exp.union(a, b, distinct=False), branches)
        source = f"({union.sql(dialect='spark', identify=True)})"
    else:  # DataFrames (a Python model): one union, read through a temporary view
        frames = [
            spark.createDataFrame(part) if isinstance(part, pd.DataFrame) else part
            for part in rendered
        ]
        view = "_tardy_stage_" + re.sub(r"\W", "_", table.model)
        reduce(lambda a, b: a.unionByName(b), frames).createOrReplaceTempView(view)
        source = view
    schema = spark.table(table.staged_table).schema
    columns = ", ".join(
        f"CAST(`{f.name}` AS {f.dataType.simpleString()}) AS `{f.name}`" for f in schema.fields
    )
    predicate = table.predicate()
    try:
        delta.replace_where(
            spark,
            table.staged_table,
            predicate,
            f"SELECT {columns} FROM {source} AS _rows WHERE {predicate}",
        )
    finally:
        if view is not None:
            spark.catalog.dropTempView(view)


def drop_stage(context: Context, spark: SparkSession) -> None:
    """Drop every model's staged table (prod's files are not touched: a shallow clone's own
    directory holds only what was written into it)."""
    for snapshot in sqlmesh_api.model_snapshots(context):
        delta.drop(spark, sqlmesh_api.spark_name(snapshot.table_name(is_deployable=False)))
