"""Stage a model's restated intervals away from prod: one table, one write, whatever their number.

Every prod snapshot has, besides its prod table, a *dev table* name (``snapshot.table_name(
is_deployable=False)``, ``<table>__dev``): SQLMesh writes there when a snapshot is evaluated
as non-deployable, and resolves a non-deployable parent to it. Staging uses exactly that name,
as an *overlay view* of prod (docs/engine.md, "Overlay staging"):

1. ``prepare``: reads the prod table's current Delta version (the staged view pins it);
2. ``write``: SQLMesh renders the model once for all its restated intervals (through the
   interval macros, ``Renderer.rows_over``; a Python model, or one also reading
   ``@start_date`` or ``@end_date``, once per interval, the renders combined: docs/engine.md,
   "One pass per model"), with a deployability index in which the staged models are
   non-deployable (they read their staged parents, and prod for every other model); the
   result is written by ONE
   ``CREATE OR REPLACE TABLE <rows table> AS SELECT ... WHERE <union of the intervals>``
   (the *rows table*: one Spark statement and one Delta commit per model), then the dev name
   becomes the view ``prod VERSION AS OF <v> WHERE NOT <the intervals> UNION ALL <rows
   table>``: the model's table as it will be after promotion, which its children read. No
   clone, no copy of prod. What reads only the intervals (the audits' ``@this_model``, the
   diff, the change trail, the promotion) reads ``StagedTable.staged_table``: the rows
   table, which holds exactly the view's rows of the intervals.
   The rows table is a Delta table at a path of the data home (``stage/<restatement
   id>/<model>``), not in the metastore: dropping the stage deletes the folder, no
   statement. Only a model that another staged model reads (or that reads itself, or is
   written by key) gets the view; a leaf's children are not staged, so nothing reads its
   dev name (docs/engine.md, "Overlay staging").
   A model that reads the key restriction (``key_restriction``: its query renders differently
   with the variable ``tardy_keys`` set) and has a one-column grain is written *by key* when
   detection knows the changed keys: rendered once with the variable set to those keys and
   the arrival dates holding their records; its predicate is ``<the intervals> AND <grain> IN
   (<keys>)``, so the view shows prod's rows for the other keys of the intervals.

Prod tables and views are never written, and SQLMesh's state is not touched.
"""

from __future__ import annotations

import re
import shutil
import typing as t
from dataclasses import asdict, dataclass, field
from functools import reduce
from pathlib import Path

import pandas as pd
from sqlglot import exp

from tardy.engine import delta, environment, sqlmesh_api
from tardy.key_index import KEY_RESTRICTION_VARIABLE, KeySet
from tardy.project.headline import measure_tag
from tardy.project.home import data_home
from tardy.sql import in_list

if t.TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession
    from sqlmesh import Context
    from sqlmesh.core.snapshot import Snapshot


@dataclass
class StagedTable:
    """A staged model. ``staged_table`` is where its staged rows of the intervals are read:
    its rows table, or, for a model written by key, its staged view (the rows table holds only
    the keys' rows). A restatement staged by a release before overlay staging recorded its
    clone there, which holds them too."""

    model: str
    prod_table: str
    staged_table: str
    time_column: str
    version_before: int
    intervals: list[list[str]]  # evaluated
    snapshot_version: str
    changed: list[list[str]] = field(default_factory=list)  # the days whose rows changed
    measure: str | None = None  # the model's ``measure=`` tag (its diff's sums show it first)

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


@dataclass(frozen=True)
class KeyRestriction:
    """A model written by key: its grain column and the keys (with where their records are)."""

    column: str
    keys: KeySet

    def predicate(self) -> str:
        return in_list(f"`{self.column}`", self.keys.keys)

    def variables(self) -> dict[str, t.Any]:
        """The render variables of the model's write and audits."""
        return {KEY_RESTRICTION_VARIABLE: self.keys.variable()}


def key_restriction(snapshot: Snapshot, keys: KeySet | None) -> KeyRestriction | None:
    """How to restrict the model's write to ``keys``, or None for the interval path: when
    detection did not know the keys as literals (more than ``facts.MAX_INLINED_ROWS`` new
    rows, or the first restatement), when the model's grain is not one column, or when its
    query does not read ``KEY_RESTRICTION_VARIABLE``.

    The contract of the variable, for a model that reads it: with it set, the model's query
    returns, for the interval, exactly the rows of those keys it returns without it (a row is
    a function of its key's records: silver's rows are), reading the records in the arrival
    dates given. A key whose rows moved between days is written on its old and new day (both
    are among the restated days: detection finds both)."""
    grain = sqlmesh_api.grain(snapshot)
    if keys is None or len(grain) != 1:
        return None
    if not sqlmesh_api.reads_variable(snapshot, KEY_RESTRICTION_VARIABLE, keys.variable()):
        return None
    return KeyRestriction(grain[0], keys)


def staged_view(snapshot: Snapshot) -> str:
    """The model's staged name: its dev table's, read by SQLMesh's renders of its children."""
    return sqlmesh_api.spark_name(snapshot.table_name(is_deployable=False))


def stage_folder() -> Path:
    return data_home().stage


def rows_table(restatement_id: str, snapshot: Snapshot) -> str:
    """The Delta table, at a path of the data home, of a staged model's rows."""
    folder = stage_folder() / re.sub(r"[^\w.-]", "_", restatement_id) / snapshot.model.name
    return f"delta.`{folder}`"


def legacy_rows_table(view: str) -> str:
    """Where a release before the rows at a path kept a staged view's rows (metastore)."""
    return f"{view}__rows"


def prod_table(snapshot: Snapshot) -> str:
    """The model's prod (deployable) table, as Spark names it."""
    return sqlmesh_api.spark_name(snapshot.table_name(is_deployable=True))


def prepare(
    spark: SparkSession,
    history: delta.History,
    snapshot: Snapshot,
    intervals: list[list[str]],
    rows: str,
    restriction: KeyRestriction | None = None,
) -> StagedTable:
    """The model's staging over ``intervals`` into the rows table ``rows``, pinned to its
    prod table's current version (read from ``history``; nothing may be left at its staged
    names: ``drop_staged`` first).

    A model that reads itself reads, while it is written, its staged name as a view of prod
    at that version (what it reads in prod; ``write`` then overlays its rows)."""
    prod = prod_table(snapshot)
    view = staged_view(snapshot)
    version = history.version(prod)
    if snapshot.model.depends_on_self:
        delta.create_view(spark, view, f"SELECT * FROM {prod} VERSION AS OF {version}")
    return StagedTable(
        model=snapshot.model.name,
        prod_table=prod,
        staged_table=view if restriction is not None else rows,
        time_column=sqlmesh_api.time_column(snapshot),
        version_before=version,
        intervals=intervals,
        snapshot_version=sqlmesh_api.version(snapshot),
        measure=measure_tag(snapshot.model),
    )


def write(
    spark: SparkSession,
    renderer: sqlmesh_api.Renderer,
    snapshot: Snapshot,
    table: StagedTable,
    rows: str,
    restriction: KeyRestriction | None = None,
    *,
    viewed: bool = True,
) -> None:
    """Evaluate every interval of ``table`` into the rows table ``rows`` in one statement
    (one render over all of them when the model reads its interval through the interval
    macros: ``sqlmesh_api.Renderer.rows_over``), then, when ``viewed`` (another staged
    model reads it), overlay them on prod as its staged view; with a ``restriction``, only
    the rows of its keys (one render, over the intervals' hull: the restricted query reads
    the same records whatever the interval; the predicate keeps the restated days), always
    viewed."""
    if restriction is None:
        rendered = renderer.rows_over(snapshot, table.intervals)
    else:
        first, last = table.intervals[0][0], table.intervals[-1][1]
        rendered = renderer.rows(snapshot, first, last, restriction.variables())
    queries = [part for part in rendered if isinstance(part, exp.Query)]
    temporary = None
    if not rendered:  # a Python model that yielded nothing: the intervals become empty
        source = f"(SELECT * FROM {table.prod_table} WHERE FALSE)"
    elif len(queries) == len(rendered):
        branches: list[exp.Query] = [
            exp.select("*").from_(query.subquery(f"_interval_{i}"))
            for i, query in enumerate(queries)
        ]
        union = reduce(_union_all, branches)
        source = f"({union.sql(dialect='spark', identify=True)})"
    else:  # DataFrames (a Python model): one union, read through a temporary view
        frames: list[DataFrame] = []
        for part in rendered:
            if isinstance(part, exp.Query):  # a model renders queries or DataFrames, not both
                raise TypeError(f"{table.model} rendered both queries and DataFrames")
            frames.append(spark.createDataFrame(part) if isinstance(part, pd.DataFrame) else part)
        temporary = "_tardy_stage_" + re.sub(r"\W", "_", table.model)
        reduce(lambda a, b: a.unionByName(b), frames).createOrReplaceTempView(temporary)
        source = temporary
    schema = spark.table(table.prod_table).schema
    columns = ", ".join(
        f"CAST(`{f.name}` AS {f.dataType.simpleString()}) AS `{f.name}`" for f in schema.fields
    )
    predicate = table.predicate()
    if restriction is not None:
        predicate = f"({predicate}) AND {restriction.predicate()}"
    try:
        delta.create_table_as(
            spark, rows, f"SELECT {columns} FROM {source} AS _rows WHERE {predicate}"
        )
    finally:
        if temporary is not None:
            spark.catalog.dropTempView(temporary)
    if not viewed and restriction is None:
        return
    delta.create_view(
        spark,
        staged_view(snapshot),
        f"SELECT * FROM {table.prod_table} VERSION AS OF {table.version_before} "
        f"WHERE NOT COALESCE({predicate}, FALSE) UNION ALL SELECT * FROM {rows}",
    )


def _union_all(left: exp.Query, right: exp.Query) -> exp.Query:
    return exp.union(left, right, distinct=False)


def drop_stage(context: Context, spark: SparkSession, *, environments: bool = True) -> None:
    """Drop the restatement's environment, if it has one (``environments=False``: the
    caller knows it has none: a catalog listing less), and every staged view and rows
    table (``drop_staged``)."""
    if environments:
        environment.drop(spark)
    drop_staged(context, spark)


def drop_staged(context: Context, spark: SparkSession) -> list[str]:
    """Drop every model's staged view that exists and delete the stage folder (the rows
    tables; prod's files are not touched; an earlier release's stage, rows tables or a
    shallow clone at the staged names in the metastore, is dropped too: its own directory
    holds only what was written into it); what it dropped. One listing per schema
    (``delta.drop_existing``)."""
    views = [
        staged_view(snapshot)
        for snapshot in sqlmesh_api.model_snapshots(context)
        if sqlmesh_api.has_intervals(snapshot)  # a view (a dimension) is never staged
    ]
    dropped = delta.drop_existing(spark, views, [legacy_rows_table(view) for view in views])
    if stage_folder().exists():
        shutil.rmtree(stage_folder())
        dropped.append(str(stage_folder()))
    return dropped
