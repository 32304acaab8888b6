"""Everything the engine asks Delta Lake: versions, history, exact writes, restores. The
cost meter is ``tardy.engine.meter``."""

from __future__ import annotations

import json
import os
import typing as t
import weakref
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import unquote, urlparse

if t.TYPE_CHECKING:
    from pyspark.sql import DataFrame, Row, SparkSession

USER_METADATA = "spark.databricks.delta.commitInfo.userMetadata"


class NoRowError(RuntimeError):
    """A query that always returns a row (an aggregate, a Delta table's history) returned
    none."""


def query(spark: SparkSession, sql: str) -> DataFrame:
    """A read query as a lazy DataFrame: nothing runs until an action, which is one plan on
    Spark Connect, where ``spark.sql`` first runs the query's analysis as an eager command (a
    second plan: docs/engine.md, "One plan a read"). In-process it is ``spark.sql``. Never
    for a write or a command: those must run where they are called."""
    from tardy.engine.meter import is_connect

    if not is_connect(spark):
        return spark.sql(sql)
    # The Connect client's own SQL relation (what ``spark.sql`` wraps after its eager
    # command), not a public class: pyspark is pinned (constraints.txt), and the cluster
    # smoke (tests/integration/test_cluster_smoke.py) checks the plans and the rows.
    from pyspark.sql.connect.dataframe import DataFrame as ConnectFrame
    from pyspark.sql.connect.plan import SQL

    return t.cast("DataFrame", ConnectFrame(SQL(sql), t.cast(t.Any, spark)))


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


# Per session: the data home, and the ``_delta_log`` folders found there by table name. A
# table's location does not change while it exists (a managed table's is its name's folder
# in the warehouse), so a process that stages and promotes lists each schema once.
_LOCATIONS: weakref.WeakKeyDictionary[SparkSession, tuple[Path, dict[str, Path]]] = (
    weakref.WeakKeyDictionary()
)


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

        from tardy.project.home import data_home

        home = home or data_home().root
        known = _LOCATIONS.get(spark)
        if known is None or known[0] != home:
            known = _LOCATIONS[spark] = (home, {})
        cached = known[1]
        tables = list(tables)
        # A cached folder still there (a dropped table's is gone: listed again).
        locations = {n: cached[n] for n in tables if n in cached and cached[n].is_dir()}
        for schema, wanted in _by_schema(n for n in tables if n not in locations).items():
            like = "|".join(wanted)
            try:
                found = spark.sql(f"SHOW TABLE EXTENDED IN {schema} LIKE '{like}'").collect()
            except AnalysisException:  # no such schema: DESCRIBE HISTORY says what is wrong
                continue
            for row in found:
                name = wanted.get(row.tableName.lower())
                log = _local_log(row.information, home) if name is not None else None
                if name is not None and log is not None:
                    locations[name] = cached[name] = log
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
    Connect client (docs/facts.md, fact 20), and ``Catalog.listTables`` fails under the
    small-data profile (Spark 4.2 cannot decode its rows without code generation)."""
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
