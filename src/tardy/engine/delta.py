"""Everything the engine asks Delta Lake: versions, history, clones, exact writes, restores.

Also the engine's cost meter: seconds and Spark statements per step. A *statement* is one SQL
execution as Spark's own status store counts them (``SQLAppStatusStore``): every query, DDL
and write, including the executions Delta runs inside a write (its snapshot and statistics
jobs), so the count is what the engine pays in fixed per-statement cost.
"""

from __future__ import annotations

import time
import typing as t
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field

if t.TYPE_CHECKING:
    from pyspark.sql import SparkSession

USER_METADATA = "spark.databricks.delta.commitInfo.userMetadata"


def version(spark: SparkSession, table: str) -> int:
    """The table's latest Delta version."""
    return int(spark.sql(f"DESCRIBE HISTORY {table} LIMIT 1").first().version)


def history(spark: SparkSession, table: str, after_version: int) -> list[t.Any]:
    """The commits of ``table`` after ``after_version``, oldest first (reading only those:
    a table's whole history grows with every interval ever written)."""
    latest = version(spark, table)
    if latest <= after_version:
        return []
    rows = spark.sql(f"DESCRIBE HISTORY {table} LIMIT {latest - after_version}").collect()
    return sorted((r for r in rows if r.version > after_version), key=lambda r: r.version)


@contextmanager
def tagged_commits(spark: SparkSession, value: str) -> Iterator[None]:
    """Every Delta commit in the block carries ``value`` in its ``userMetadata``."""
    spark.conf.set(USER_METADATA, value)
    try:
        yield
    finally:
        spark.conf.unset(USER_METADATA)


def stage_table(spark: SparkSession, target: str, source: str, at_version: int, clone: bool):
    """``target`` as a shallow clone of ``source`` at a version (metadata only: it reads the
    source's files), or as an empty table of its schema.

    Not CREATE OR REPLACE: Delta refuses to clone onto a table that holds rows.
    """
    spark.sql(f"DROP TABLE IF EXISTS {target}")
    if clone:
        spark.sql(f"CREATE TABLE {target} SHALLOW CLONE {source} VERSION AS OF {at_version}")
    else:
        spark.sql(f"CREATE TABLE {target} LIKE {source} USING delta")


def drop(spark: SparkSession, table: str) -> None:
    spark.sql(f"DROP TABLE IF EXISTS {table}")


def replace_where(spark: SparkSession, target: str, predicate: str, select: str) -> None:
    """One atomic Delta commit: delete the rows matching ``predicate``, insert ``select``'s
    rows (Delta refuses any row outside the predicate)."""
    spark.sql(f"INSERT INTO {target} REPLACE WHERE {predicate} {select}")


def restore(spark: SparkSession, table: str, to_version: int) -> None:
    spark.sql(f"RESTORE TABLE {table} TO VERSION AS OF {to_version}")


def statements(spark: SparkSession) -> int:
    """SQL executions Spark has run in this JVM so far (see the module docstring): the id of
    the latest one, which keeps counting after the store drops old executions."""
    jvm_session = spark._jsparkSession
    jvm_session.sparkContext().listenerBus().waitUntilEmpty()  # the store is fed async
    store = jvm_session.sharedState().statusStore()
    retained = int(store.executionsCount())
    if retained == 0:
        return 0
    return int(store.executionsList(retained - 1, 1).apply(0).executionId()) + 1


@dataclass
class Meter:
    """Seconds and Spark statements per step; a step may be entered many times."""

    spark: SparkSession
    seconds: dict[str, float] = field(default_factory=dict)
    statements: dict[str, int] = field(default_factory=dict)

    @contextmanager
    def step(self, name: str) -> Iterator[None]:
        started, count = time.perf_counter(), statements(self.spark)
        try:
            yield
        finally:
            self.seconds[name] = self.seconds.get(name, 0.0) + time.perf_counter() - started
            used = statements(self.spark) - count
            self.statements[name] = self.statements.get(name, 0) + used

    def as_dict(self) -> dict[str, dict[str, float] | dict[str, int]]:
        return {
            "seconds": {k: round(v, 3) for k, v in self.seconds.items()},
            "statements": dict(self.statements),
        }
