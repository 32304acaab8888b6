"""The arrival watermark: what of bronze prod reflects, and the days the next run absorbs.

One row per advance in ``tardy.arrival_watermarks`` (append-only); the latest row holds:

- ``bronze_version``: the version of the first declared fact source's table prod reflects
  (-1: nothing yet), ``arrival_watermark`` its latest arrival then;
- ``source_versions``: every other bronze table's version prod reflects;
- ``pending_days``: per model, the days late records changed inside the grace window when
  the watermark advanced past them, and the model's last computed day then
  (``computed_through``). The watermark advances past such records: SQLMesh's lookback
  (``lookback`` = ``grace_days``) makes the model's next run, whenever it comes, recompute
  every one of those days (docs/engine.md, "The fact watermark advances"). The row keeps them
  only so that ``detect`` (and so ``tardy status``) still reports them as absorbed by the
  next run until the model's last computed day moves.

Read in one statement (``read``); written by one append (``advance``).
"""

from __future__ import annotations

import os
import typing as t
import weakref
from dataclasses import dataclass, field
from datetime import UTC, date, datetime

from tardy.engine.delta import query

if t.TYPE_CHECKING:
    from pyspark.sql import SparkSession
    from pyspark.sql.types import StructType

WATERMARK_TABLE = "tardy.arrival_watermarks"
# Columns added after the table's first release: added to watermark tables created before.
ADDED_COLUMNS = {
    "source_versions": "MAP<STRING, BIGINT>",
    "pending_days": "MAP<STRING, STRUCT<days: ARRAY<DATE>, computed_through: DATE>>",
}
WATERMARK_DDL = f"""
CREATE TABLE IF NOT EXISTS {WATERMARK_TABLE} (
  bronze_version BIGINT NOT NULL,
  arrival_watermark TIMESTAMP,
  advanced_at TIMESTAMP NOT NULL,
  reason STRING NOT NULL,
  {", ".join(f"{name} {kind}" for name, kind in ADDED_COLUMNS.items())}
) USING delta
TBLPROPERTIES ('delta.appendOnly' = 'true')
"""


@dataclass(frozen=True)
class Pending:
    """A model's days the next run absorbs, and its last computed day when they were found."""

    days: frozenset[date]
    computed_through: date | None

    def still_pending(self, last_computed: date | None) -> frozenset[date]:
        """The days no run recomputed since: all of them while the model's last computed day
        has not moved (a run that moves it recomputes its lookback, which covers them)."""
        return self.days if last_computed == self.computed_through else frozenset()


@dataclass(frozen=True)
class Watermark:
    """The latest watermark row (``version`` None: never set, or rolled back to the start)."""

    version: int | None = None
    stamp: str | None = None
    sources: dict[str, int] = field(default_factory=dict)
    pending: dict[str, Pending] = field(default_factory=dict)


# Per session: the data home whose watermark table was found current, and its schema.
_CURRENT: weakref.WeakKeyDictionary[SparkSession, tuple[str, StructType]] = (
    weakref.WeakKeyDictionary()
)


def ensure_table(spark: SparkSession) -> StructType:
    """Create the table, or add the columns it lacks; its schema. Checked once per session
    and data home in this process (a catalog lookup and an analysis: plans on Connect)."""
    home = os.environ.get("TARDY_HOME", "")
    known = _CURRENT.get(spark)
    if known is not None and known[0] == home:
        return known[1]
    if spark.catalog.tableExists(WATERMARK_TABLE):
        names = spark.table(WATERMARK_TABLE).schema.fieldNames()
        for column, kind in ADDED_COLUMNS.items():
            if column in names:
                continue
            try:
                spark.sql(f"ALTER TABLE {WATERMARK_TABLE} ADD COLUMNS ({column} {kind})")
            except Exception:  # another process added it first
                if column not in spark.table(WATERMARK_TABLE).schema.fieldNames():
                    raise
    else:
        spark.sql("CREATE SCHEMA IF NOT EXISTS tardy")
        spark.sql(WATERMARK_DDL)
    schema = spark.table(WATERMARK_TABLE).schema
    _CURRENT[spark] = (home, schema)
    return schema


def read(spark: SparkSession) -> Watermark:
    """The latest row, in one statement (``ensure_table`` first)."""
    row = query(
        spark,
        f"SELECT bronze_version, arrival_watermark, source_versions, pending_days "
        f"FROM {WATERMARK_TABLE} ORDER BY advanced_at DESC, bronze_version DESC LIMIT 1",
    ).first()
    if row is None:
        return Watermark()
    sources = {k: int(v) for k, v in (row.source_versions or {}).items()}
    pending = {
        model: Pending(frozenset(p.days or ()), p.computed_through)
        for model, p in (row.pending_days or {}).items()
    }
    if row.bronze_version < 0:  # rolled back to the start: no version, nothing stamped
        return Watermark(sources=sources, pending=pending)
    stamp = row.arrival_watermark.isoformat() if row.arrival_watermark else None
    return Watermark(int(row.bronze_version), stamp, sources, pending)


def advance(
    spark: SparkSession,
    version: int,
    arrival_watermark: str | None,
    reason: str,
    source_versions: dict[str, int] | None = None,
    pending: dict[str, Pending] | None = None,
) -> None:
    """Record that prod reflects bronze up to ``version`` (-1: nothing yet), the other bronze
    tables up to ``source_versions`` (None or a missing table: never recorded), and the days
    the next run absorbs (``pending``; None keeps the latest row's: a rollback does not
    change what the next run recomputes)."""
    schema = ensure_table(spark)
    if pending is None:
        pending = read(spark).pending
    stamp = datetime.fromisoformat(arrival_watermark) if arrival_watermark else None
    kept = {model: (sorted(p.days), p.computed_through) for model, p in pending.items() if p.days}
    spark.createDataFrame(
        [(version, stamp, datetime.now(UTC), reason, source_versions or None, kept or None)],
        schema=schema,
    ).write.format("delta").mode("append").saveAsTable(WATERMARK_TABLE)
