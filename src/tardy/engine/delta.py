"""Everything the engine asks Delta Lake: versions, history, exact writes, restores.

Also the engine's cost meter: seconds, Spark statements and executions per step, read from
Spark's own status store (``SQLAppStatusStore``). A *statement* is a root SQL execution:
every query, DDL and write that tardy or SQLMesh issues, each paying Spark's fixed
per-statement cost. *Executions* adds the nested ones Spark and Delta run inside a statement
(Delta's file filtering of each table scan, its snapshot jobs).
"""

from __future__ import annotations

import time
import typing as t
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field

if t.TYPE_CHECKING:
    from pyspark.sql import DataFrame, Row, SparkSession

USER_METADATA = "spark.databricks.delta.commitInfo.userMetadata"


class NoRowError(RuntimeError):
    """A query that always returns a row (an aggregate, a Delta table's history) returned
    none."""


def single_row(frame: DataFrame) -> Row:
    """The first row of ``frame``, a query that always has one (an aggregate without
    ``GROUP BY``, ``DESCRIBE HISTORY`` of a Delta table)."""
    row = frame.first()
    if row is None:
        raise NoRowError("a query that always returns a row returned none")
    return row


def version(spark: SparkSession, table: str) -> int:
    """The table's latest Delta version."""
    return int(latest_commit(spark, table).version)


def latest_commit(spark: SparkSession, table: str) -> Row:
    """The table's latest commit (one row of ``DESCRIBE HISTORY``)."""
    return single_row(spark.sql(f"DESCRIBE HISTORY {table} LIMIT 1"))


def history(spark: SparkSession, table: str, after_version: int) -> list[Row]:
    """The commits of ``table`` after ``after_version``, oldest first, reading only those (a
    table's whole history grows with every interval ever written): one statement when at
    most one commit came after."""
    latest = latest_commit(spark, table)
    if latest.version <= after_version:
        return []
    if latest.version == after_version + 1:
        return [latest]
    rows = spark.sql(f"DESCRIBE HISTORY {table} LIMIT {latest.version - after_version}")
    return sorted((r for r in rows.collect() if r.version > after_version), key=lambda r: r.version)


@contextmanager
def tagged_commits(spark: SparkSession, value: str) -> Iterator[None]:
    """Every Delta commit in the block carries ``value`` in its ``userMetadata``."""
    spark.conf.set(USER_METADATA, value)
    try:
        yield
    finally:
        spark.conf.unset(USER_METADATA)


def create_table_as(spark: SparkSession, target: str, select: str) -> None:
    """``target`` (created, or replaced whatever it held) as a Delta table of ``select``'s
    rows: one statement, one commit."""
    spark.sql(f"CREATE OR REPLACE TABLE {target} USING delta AS {select}")


def create_view(spark: SparkSession, view: str, select: str) -> None:
    spark.sql(f"CREATE OR REPLACE VIEW {view} AS {select}")


def drop_existing(
    spark: SparkSession, views: t.Iterable[str], tables: t.Iterable[str]
) -> list[str]:
    """Drop those of ``views`` and ``tables`` (Spark names, schema-qualified) that exist; the
    ones dropped. A name listed as a view may be a table (and the other way round): when the
    expected ``DROP`` refuses it, the other one drops it. One ``SHOW TABLES ... LIKE`` per
    schema, of those names only (``a|b|...``): a catalog lookup per name costs a plan on a
    Connect client (NOTES 20), and ``Catalog.listTables`` fails under the small-data profile
    (Spark 4.2 cannot decode its rows without code generation)."""
    from pyspark.errors import AnalysisException
    from sqlglot import exp

    kinds = {**{name: "VIEW" for name in views}, **{name: "TABLE" for name in tables}}
    by_schema: dict[str, dict[str, str]] = {}
    for name in kinds:
        parsed = exp.to_table(name, dialect="spark")
        schema = exp.table_(parsed.db, catalog=parsed.catalog or None).sql(dialect="spark")
        by_schema.setdefault(schema, {})[parsed.name.lower()] = name
    dropped = []
    for schema, wanted in by_schema.items():
        try:
            found = spark.sql(f"SHOW TABLES IN {schema} LIKE '{'|'.join(wanted)}'").collect()
        except AnalysisException:  # no such schema: nothing in it to drop
            continue
        for row in found:
            existing = wanted.get(row.tableName.lower())
            if existing is None or row.isTemporary:
                continue
            expected = kinds[existing]
            try:
                spark.sql(f"DROP {expected} {existing}")
            except AnalysisException:  # the other kind
                spark.sql(f"DROP {'TABLE' if expected == 'VIEW' else 'VIEW'} {existing}")
            dropped.append(existing)
    return dropped


def replace_where(spark: SparkSession, target: str, predicate: str, select: str) -> None:
    """One atomic Delta commit: delete the rows matching ``predicate``, insert ``select``'s
    rows (Delta refuses any row outside the predicate)."""
    spark.sql(f"INSERT INTO {target} REPLACE WHERE {predicate} {select}")


def restore(spark: SparkSession, table: str, to_version: int) -> None:
    spark.sql(f"RESTORE TABLE {table} TO VERSION AS OF {to_version}")


def is_connect(spark: SparkSession) -> bool:
    """A Spark Connect client (the warm engine, the ``connect`` gateway): its driver is the
    server's, another process."""
    return type(spark).__module__.startswith("pyspark.sql.connect")


def _connect_counts(spark: SparkSession) -> list[int]:
    """[plans executed, plans analysed] by this Connect client since it was first metered:
    the client's own calls, counted as it makes them (the server's status store is out of
    reach). An analysis (``df.schema``, ``df.columns``) is a round trip too (NOTES 20)."""
    # The client's private calls are wrapped (and a counter attached): untyped on purpose.
    client: t.Any = spark.client
    counts: list[int] | None = getattr(client, "_tardy_counts", None)
    if counts is None:
        counts = [0, 0]
        execute, analyze = client._execute_and_fetch_as_iterator, client._analyze

        def executed(*args: t.Any, **kwargs: t.Any) -> t.Any:
            counts[0] += 1
            return execute(*args, **kwargs)

        def analysed(*args: t.Any, **kwargs: t.Any) -> t.Any:
            counts[1] += 1
            return analyze(*args, **kwargs)

        client._execute_and_fetch_as_iterator, client._analyze = executed, analysed
        client._tardy_counts = counts
    return counts


def _status_store(spark: SparkSession) -> t.Any:
    jvm_session = spark._jsparkSession
    jvm_session.sparkContext().listenerBus().waitUntilEmpty()  # the store is fed async
    return jvm_session.sharedState().statusStore()


def last_execution(spark: SparkSession) -> int:
    """The id of the latest SQL execution of this JVM (-1: none yet); ids only grow."""
    store = _status_store(spark)
    retained = int(store.executionsCount())
    if retained == 0:
        return -1
    return int(store.executionsList(retained - 1, 1).apply(0).executionId())


def executions_since(spark: SparkSession, after: int) -> tuple[int, int]:
    """(statements, executions) run since execution ``after``: a *statement* is a root
    execution (a query, DDL or write issued by tardy or SQLMesh); *executions* adds the
    nested ones Spark and Delta run inside a statement (Delta's file filtering for each table
    scan, its snapshot jobs)."""
    store = _status_store(spark)
    retained = int(store.executionsCount())
    if retained == 0:
        return 0, 0
    last = int(store.executionsList(retained - 1, 1).apply(0).executionId())
    count = last - after
    if count <= 0:
        return 0, 0
    recent = store.executionsList(max(retained - count, 0), min(count, retained))
    roots = 0
    for i in range(recent.size()):
        execution = recent.apply(i)
        roots += int(execution.rootExecutionId() == execution.executionId())
    return roots, count


class Measured(t.TypedDict):
    """A meter's measures per step (``Meter.as_dict``)."""

    seconds: dict[str, float]
    statements: dict[str, int]
    executions: dict[str, int]


@dataclass
class Meter:
    """Seconds, Spark statements and executions per step; a step may be entered many times."""

    spark: SparkSession
    seconds: dict[str, float] = field(default_factory=dict)
    statements: dict[str, int] = field(default_factory=dict)
    executions: dict[str, int] = field(default_factory=dict)

    @contextmanager
    def step(self, name: str) -> Iterator[None]:
        """On a classic session, *statements* are root SQL executions and *executions* add
        the nested ones (``executions_since``); over Spark Connect, statements are the plans
        the client had executed and executions add its analysis round trips."""
        connect = is_connect(self.spark)
        started = time.perf_counter()
        counted = list(_connect_counts(self.spark)) if connect else [0, 0]
        last = -1 if connect else last_execution(self.spark)
        try:
            yield
        finally:
            self.seconds[name] = self.seconds.get(name, 0.0) + time.perf_counter() - started
            if connect:
                executed, analysed = _connect_counts(self.spark)
                roots = executed - counted[0]
                count = roots + analysed - counted[1]
            else:
                roots, count = executions_since(self.spark, last)
            self.statements[name] = self.statements.get(name, 0) + roots
            self.executions[name] = self.executions.get(name, 0) + count

    def as_dict(self) -> Measured:
        return {
            "seconds": {k: round(v, 3) for k, v in self.seconds.items()},
            "statements": dict(self.statements),
            "executions": dict(self.executions),
        }
