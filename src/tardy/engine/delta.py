"""Everything the engine asks Delta Lake: versions, history, exact writes, restores.

Also the engine's cost meter: seconds, Spark statements and executions per step, read from
Spark's own status store (``SQLAppStatusStore``). A *statement* is a root SQL execution:
every query, DDL and write that tardy or SQLMesh issues, each paying Spark's fixed
per-statement cost. *Executions* adds the nested ones Spark and Delta run inside a statement
(Delta's file filtering of each table scan, its snapshot jobs).
"""

from __future__ import annotations

import json
import os
import time
import typing as t
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import unquote, urlparse

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


@dataclass(frozen=True)
class Commit:
    """One commit of a Delta table: its version, operation and ``userMetadata`` (tardy's tag,
    ``tagged_commits``)."""

    version: int
    operation: str
    userMetadata: str | None  # noqa: N815 (Delta's own name, as DESCRIBE HISTORY's column)

    @classmethod
    def of_row(cls, row: Row) -> Commit:
        return cls(int(row.version), str(row.operation), row.userMetadata)


class History:
    """The commits of a restatement's tables, read from their Delta logs without a Spark
    statement when the tables are managed in this data home's warehouse (the embedded
    default, in-process or on its warm engine), else with ``DESCRIBE HISTORY`` (a remote
    gateway's warehouse is not this machine's to read).

    Delta's log is a folder ``_delta_log`` of commit files named by version (20 digits,
    ``00000000000000000007.json``), each a JSON action per line, the ``commitInfo`` action
    among them, written atomically (docs/engine.md, "Version reads from the log"). The tables'
    locations come from the catalog: one ``SHOW TABLE EXTENDED`` per schema, however many
    tables."""

    def __init__(self, spark: SparkSession, locations: dict[str, Path]) -> None:
        self.spark = spark
        self.locations = locations  # table -> its _delta_log, for the tables read from files

    @classmethod
    def of(cls, spark: SparkSession, tables: Iterable[str], home: Path | None = None) -> History:
        """The history of ``tables`` (Spark names, schema-qualified); those whose location is
        a folder of ``home`` (default: the data home) are read from their logs."""
        from pyspark.errors import AnalysisException

        from tardy.home import data_home

        home = home or data_home().root
        locations: dict[str, Path] = {}
        for schema, wanted in _by_schema(tables).items():
            like = "|".join(wanted)
            try:
                found = spark.sql(f"SHOW TABLE EXTENDED IN {schema} LIKE '{like}'").collect()
            except AnalysisException:  # no such schema: DESCRIBE HISTORY says what is wrong
                continue
            for row in found:
                name = wanted.get(row.tableName.lower())
                log = _local_log(row.information, home) if name is not None else None
                if name is not None and log is not None:
                    locations[name] = log
        return cls(spark, locations)

    def latest(self, table: str) -> Commit:
        """The table's latest commit."""
        log = self.locations.get(table)
        if log is None:
            return Commit.of_row(latest_commit(self.spark, table))
        return _read_commit(log, _latest_version(log))

    def version(self, table: str) -> int:
        return self.latest(table).version

    def after(self, table: str, after_version: int) -> list[Commit]:
        """The commits of ``table`` after ``after_version``, oldest first (those Delta still
        keeps: its log cleanup deletes commit files older than its retention, as
        ``DESCRIBE HISTORY`` no longer shows them)."""
        log = self.locations.get(table)
        if log is not None:
            versions = range(after_version + 1, _latest_version(log) + 1)
            if all((log / f"{v:020d}.json").is_file() for v in versions):
                return [_read_commit(log, v) for v in versions]
        return [Commit.of_row(row) for row in history(self.spark, table, after_version)]


def _by_schema(names: Iterable[str]) -> dict[str, dict[str, str]]:
    """Schema-qualified Spark names by schema: schema -> {the table's name in lower case (as
    ``SHOW TABLES`` lists it): the name given}."""
    from sqlglot import exp

    by_schema: dict[str, dict[str, str]] = {}
    for name in names:
        parsed = exp.to_table(name, dialect="spark")
        schema = exp.table_(parsed.db, catalog=parsed.catalog or None).sql(dialect="spark")
        by_schema.setdefault(schema, {})[parsed.name.lower()] = name
    return by_schema


def _local_log(information: str, home: Path) -> Path | None:
    """The ``_delta_log`` folder of a table (``SHOW TABLE EXTENDED``'s ``information``) when
    it is a Delta table in a folder of ``home`` without catalog-managed commits."""
    lines = dict(line.split(": ", 1) for line in information.splitlines() if ": " in line)
    location = urlparse(lines.get("Location", ""))
    if lines.get("Provider", "").lower() != "delta" or location.scheme != "file":
        return None
    log = Path(unquote(location.path)) / "_delta_log"
    if not log.resolve().is_relative_to(home.resolve()) or not log.is_dir():
        return None
    staged = log / "_staged_commits"  # commits a catalog holds until it backfills them
    if staged.is_dir() and any(staged.iterdir()):
        return None
    return log


def _latest_version(log: Path) -> int:
    versions = [
        int(entry.name[:20])
        for entry in os.scandir(log)
        if len(entry.name) == 25 and entry.name.endswith(".json") and entry.name[:20].isdigit()
    ]
    if not versions:
        raise NoRowError(f"{log} holds no commit")
    return max(versions)


def _read_commit(log: Path, version: int) -> Commit:
    with open(log / f"{version:020d}.json", encoding="utf-8") as commit:
        for line in commit:
            info = json.loads(line).get("commitInfo")
            if info is not None:
                return Commit(version, str(info.get("operation", "")), info.get("userMetadata"))
    return Commit(version, "", None)


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

    kinds = {**{name: "VIEW" for name in views}, **{name: "TABLE" for name in tables}}
    dropped = []
    for schema, wanted in _by_schema(kinds).items():
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


def _retained(store: t.Any) -> tuple[int, int]:
    """(how many executions the status store retains, the latest one's id; -1: none).
    Past ``spark.sql.ui.retainedExecutions`` Spark evicts the oldest ones asynchronously, so
    the count and the list (two calls) can disagree: a list shorter than the count said is
    read again (a long ``tardy demo`` met it: an empty list at the count's last offset)."""
    for _ in range(100):
        retained = int(store.executionsCount())
        if retained == 0:
            return 0, -1
        latest = store.executionsList(retained - 1, 1)
        if latest.size() > 0:
            return retained, int(latest.apply(0).executionId())
    raise RuntimeError("Spark's SQL status store kept changing while it was read")


def last_execution(spark: SparkSession) -> int:
    """The id of the latest SQL execution of this JVM (-1: none yet); ids only grow."""
    return _retained(_status_store(spark))[1]


def executions_since(spark: SparkSession, after: int) -> tuple[int, int]:
    """(statements, executions) run since execution ``after``: a *statement* is a root
    execution (a query, DDL or write issued by tardy or SQLMesh); *executions* adds the
    nested ones Spark and Delta run inside a statement (Delta's file filtering for each table
    scan, its snapshot jobs). Executions evicted from the status store before they are read
    (more than ``spark.sql.ui.retainedExecutions`` in a step, or an eviction between two
    reads) are counted, but not among the statements."""
    store = _status_store(spark)
    retained, last = _retained(store)
    count = last - after
    if retained == 0 or count <= 0:
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
