"""The lateness series: per source and arrival hour, how many records arrived, how long they
took (lag p50 / p95 / p99, hours from event to arrival) and how late they were under any
grace window.

``tardy.lateness_series`` has one row per (``source_system``, ``arrival_hour``): ``rows``,
``measured_rows`` (an event time known and not after the arrival: ``MEASURED_SQL``),
``rows_without_event_ts``, the hour's latest ``max_arrival_ts``, ``lag_sketch`` (a KLL
quantile sketch of the measured rows' lags, DataSketches' through Spark's ``kll_*``
functions), the three lag percentiles read from it, and ``days_late``: the measured rows by
the smallest grace window, in whole days, under which they came on time.
A record whose event day ended ``d > 0`` before it arrived is in bucket ``ceil(d / 1 day)``
(0 when it arrived before its day ended), and it is *late* under a window of ``g`` days
exactly when its bucket is above ``g`` (``LATE_SQL``: it arrived after its event day plus
``g`` days had ended). So the series does not depend on ``grace_days``: the alerts read it
under the project's window, ``tardy grace`` under every candidate one, and ``tardy status``
sums it (``totals``) into each source's lateness since its first arrival.

Every count adds up over hours; percentiles do not, so each hour keeps its lags' sketch and
a reader merges the sketches of the hours it spans (``kll_merge_agg_double``). A percentile
is the nearest rank: the smallest lag with at least that share of the measured rows at or
below it (numpy's ``inverted_cdf``). An hour's sketch is exact up to ``HOUR_SKETCH_K``
measured rows and a merge up to ``MERGED_SKETCH_K``; beyond, the rank is within the
sketch's error (about 0.3 % at 1,024, DataSketches' KLL bound). A sketch stores at most a
few thousand doubles, so an hour's row stays small however busy the hour.

It is extended by ``tardy ingest`` for what it committed, and by every reader for whatever
it has not covered yet (``extend``): the ledger (``bronze.ingest_ledger``) has a row per file
ingested, written after the file's bronze commit, and ``tardy.lateness_series_covered`` the
files the series holds (by content hash).
A home ingested before the series existed is thereby backfilled once; an ingest killed
between its commit and the extension, or the library's ``ingest()``, is caught up by the
next command that extends it. An hour is always recomputed whole from bronze (its arrival
dates' partitions only), so an extension is idempotent and two at once converge: the MERGE
of the one that read bronze before the other's commit conflicts with the other's MERGE on
the series (Delta's optimistic concurrency) and is retried.

Cost: one statement when nothing is pending (the ledger's files not covered); else three
(that read, one MERGE reading the pending arrival dates' partitions of the bronze tables they
touched, the covered files' append). The first extension of a process also looks both tables
up in the catalog (``ensure_tables``: two lookups, plans on Spark Connect). (A file whose
bronze commit a kill left without its ledger entry is recognised by ingest through bronze and
never gets one: its rows stay out of the series, and so out of every lateness number.)

A series written before the sketches existed is dropped and rebuilt once (``ensure_tables``).
"""

from __future__ import annotations

import os
import typing as t
import weakref
from collections import defaultdict
from dataclasses import dataclass, field
from datetime import UTC, date, datetime

from tardy.engine.delta import query
from tardy.ingest.tables import LEDGER_TABLE, bronze_tables, table_of
from tardy.sql import date_list, literal

if t.TYPE_CHECKING:
    from pyspark.sql import SparkSession

# A bronze row's lag is measured when its event time is known and not after its arrival; it is
# late when it arrived after its event day had become final (``tardy.consumers.status``).
MEASURED_SQL = "event_ts IS NOT NULL AND event_ts <= arrival_ts"
LATE_SQL = "arrival_ts > CAST(DATE_ADD(CAST(event_ts AS DATE), 1 + {grace_days}) AS TIMESTAMP)"

SERIES_TABLE = "tardy.lateness_series"
COVERED_TABLE = "tardy.lateness_series_covered"
MERGE_ATTEMPTS = 5  # against a concurrent extension (each retry recomputes the hours)
HOUR_SKETCH_K = 1024  # an hour's lags are exact up to this many measured rows
MERGED_SKETCH_K = 65535  # a merge of hours is exact up to this many (Spark's largest k)
QUANTILES = "ARRAY(0.5, 0.95, 0.99)"

SERIES_DDL = f"""
CREATE TABLE IF NOT EXISTS {SERIES_TABLE} (
  source_system STRING NOT NULL,
  arrival_hour TIMESTAMP NOT NULL,
  rows BIGINT NOT NULL,
  measured_rows BIGINT NOT NULL,
  rows_without_event_ts BIGINT NOT NULL,
  max_arrival_ts TIMESTAMP NOT NULL,
  lag_sketch BINARY,
  lag_hours_p50 DOUBLE,
  lag_hours_p95 DOUBLE,
  lag_hours_p99 DOUBLE,
  days_late MAP<INT, BIGINT> NOT NULL
) USING delta
COMMENT 'tardy: per source and arrival hour, rows, a sketch of their lags and its percentiles,
and the measured rows by the smallest grace window (days) under which they came on time'
"""
# The series' columns but the sketch (what ``Hour`` holds).
HOUR_COLUMNS = (
    "source_system, arrival_hour, rows, measured_rows, rows_without_event_ts, max_arrival_ts, "
    "lag_hours_p50, lag_hours_p95, lag_hours_p99, days_late"
)

COVERED_DDL = f"""
CREATE TABLE IF NOT EXISTS {COVERED_TABLE} (
  file_sha256 STRING NOT NULL,
  covered_at TIMESTAMP NOT NULL
) USING delta
COMMENT 'tardy: the ingested files (bronze.ingest_ledger) tardy.lateness_series holds'
"""

# The hours of the records of ``{records}`` (``source_system``, ``arrival_ts``, ``event_ts``).
HOURS_SQL = f"""
WITH records AS (
  SELECT
    source_system,
    arrival_ts,
    event_ts,
    DATE_TRUNC('HOUR', arrival_ts) AS arrival_hour,
    {MEASURED_SQL} AS measured,
    (UNIX_MICROS(arrival_ts) - UNIX_MICROS(event_ts)) / 3600e6 AS lag_hours,
    GREATEST(0, CAST(CEIL(
      (UNIX_MICROS(arrival_ts)
        - UNIX_MICROS(CAST(DATE_ADD(CAST(event_ts AS DATE), 1) AS TIMESTAMP))) / 86400e6
    ) AS INT)) AS days_late
  FROM ({{records}})
), hours AS (
  SELECT
    source_system,
    arrival_hour,
    COUNT(*) AS rows,
    COUNT_IF(measured) AS measured_rows,
    COUNT_IF(event_ts IS NULL) AS rows_without_event_ts,
    MAX(arrival_ts) AS max_arrival_ts,
    CASE WHEN COUNT_IF(measured) > 0
      THEN KLL_SKETCH_AGG_DOUBLE(CASE WHEN measured THEN lag_hours END, {HOUR_SKETCH_K})
    END AS lag_sketch
  FROM records
  GROUP BY source_system, arrival_hour
), quantiles AS (
  SELECT *, KLL_SKETCH_GET_QUANTILE_DOUBLE(lag_sketch, {QUANTILES}) AS lag
  FROM hours
), buckets AS (
  SELECT source_system, arrival_hour, MAP_FROM_ENTRIES(COLLECT_LIST(STRUCT(days_late, n))) AS m
  FROM (
    SELECT source_system, arrival_hour, days_late, COUNT(*) AS n
    FROM records
    WHERE measured
    GROUP BY source_system, arrival_hour, days_late
  )
  GROUP BY source_system, arrival_hour
)
SELECT
  h.source_system,
  h.arrival_hour,
  h.rows,
  h.measured_rows,
  h.rows_without_event_ts,
  h.max_arrival_ts,
  h.lag_sketch,
  h.lag[0] AS lag_hours_p50,
  h.lag[1] AS lag_hours_p95,
  h.lag[2] AS lag_hours_p99,
  COALESCE(b.m, CAST(MAP() AS MAP<INT, BIGINT>)) AS days_late
FROM quantiles AS h
LEFT JOIN buckets AS b ON b.source_system = h.source_system AND b.arrival_hour = h.arrival_hour
"""

MERGE_SQL = f"""
MERGE INTO {SERIES_TABLE} AS s
USING ({{hours}}) AS n
ON s.source_system = n.source_system AND s.arrival_hour = n.arrival_hour
WHEN MATCHED THEN UPDATE SET *
WHEN NOT MATCHED THEN INSERT *
"""

PENDING_SQL = f"""
SELECT l.file_sha256, l.source_system, CAST(l.arrival_ts AS DATE) AS arrival_date
FROM {LEDGER_TABLE} AS l
LEFT ANTI JOIN {COVERED_TABLE} AS c ON c.file_sha256 = l.file_sha256
"""


@dataclass
class Extension:
    """What one ``extend`` did."""

    files: int = 0  # the ledger's files it covered
    dates: dict[str, list[str]] = field(default_factory=dict)  # bronze table -> arrival dates
    statements: int = 0


# The sessions that found the series' tables in this process, with the data home they were
# found in: a later extension runs no DDL (nothing drops them). Each ``CREATE ... IF NOT
# EXISTS`` is a statement (a plan on Spark Connect), and ``tardy ingest`` and ``tardy status``
# extend the series in every process.
_ENSURED: weakref.WeakKeyDictionary[SparkSession, str] = weakref.WeakKeyDictionary()


def ensure_tables(spark: SparkSession) -> None:
    """Create the series' tables where they are missing; once per session and data home."""
    home = os.environ.get("TARDY_HOME", "")
    if _ENSURED.get(spark) == home:
        return
    exists = [spark.catalog.tableExists(name) for name in (SERIES_TABLE, COVERED_TABLE)]
    if exists[0] and "lag_sketch" not in spark.table(SERIES_TABLE).columns:
        # A series written before it kept its lags' sketches: derived data, so it is dropped
        # with its covered files and the extension that follows rebuilds it from bronze.
        spark.sql(f"DROP TABLE IF EXISTS {SERIES_TABLE}")
        spark.sql(f"DROP TABLE IF EXISTS {COVERED_TABLE}")
        exists = [False, False]
    if not all(exists):
        spark.sql("CREATE SCHEMA IF NOT EXISTS tardy")
        spark.sql(SERIES_DDL)
        spark.sql(COVERED_DDL)
    _ENSURED[spark] = home


def records_sql(dates: t.Mapping[str, t.Iterable[date]]) -> str:
    """The records of each bronze table (by name) that arrived on its ``dates``."""
    by_name = {table.name: table for table in bronze_tables()}
    return " UNION ALL ".join(
        f"SELECT source_system, arrival_ts, {by_name[name].ts_field} AS event_ts FROM {name} "
        f"WHERE {date_list('arrival_date', set(days))}"
        for name, days in sorted(dates.items())
    )


def hours_sql(dates: t.Mapping[str, t.Iterable[date]]) -> str:
    """The series' rows of every hour of ``dates`` (bronze table -> arrival dates)."""
    return HOURS_SQL.format(records=records_sql(dates))


def extend(spark: SparkSession) -> Extension:
    """Bring the series up to date with the ledger (module docstring)."""
    from tardy.engine.meter import Meter

    meter = Meter(spark)
    done = Extension()
    with meter.step("series"):
        ensure_tables(spark)
        pending = _pending(spark)
        dates: dict[str, set[date]] = defaultdict(set)
        for row in pending:
            table = table_of(row.source_system)
            if table is not None:  # a source since removed from sources.yaml: nothing to read
                dates[table.name].add(row.arrival_date)
        if dates:
            for attempt in range(1, MERGE_ATTEMPTS + 1):
                try:
                    # A command: runs where it is called (on Connect a ``collect`` after
                    # it would be a second plan for the command's metrics).
                    spark.sql(MERGE_SQL.format(hours=hours_sql(dates)))
                    break
                except Exception as error:
                    if "Concurrent" not in f"{type(error).__name__} {error}":
                        raise  # not Delta's conflict with another extension's commit
                    if attempt == MERGE_ATTEMPTS:
                        raise
        shas = sorted({row.file_sha256 for row in pending})
        if shas:
            now = datetime.now(UTC).replace(tzinfo=None).isoformat(sep=" ")
            values = ", ".join(f"({literal(sha)}, TIMESTAMP {literal(now)})" for sha in shas)
            spark.sql(f"INSERT INTO {COVERED_TABLE} VALUES {values}")
    done.files = len(shas)
    done.dates = {name: sorted(d.isoformat() for d in days) for name, days in dates.items()}
    done.statements = meter.statements["series"]
    return done


def _pending(spark: SparkSession) -> list[t.Any]:
    """The ledger's files the series does not cover (none before the first ingest created
    the ledger)."""
    try:
        return query(spark, PENDING_SQL).collect()
    except Exception as error:
        if "TABLE_OR_VIEW_NOT_FOUND" in str(error) and LEDGER_TABLE.split(".")[1] in str(error):
            return []
        raise


@dataclass(frozen=True)
class Hour:
    """One row of the series."""

    source_system: str
    arrival_hour: datetime
    rows: int
    measured_rows: int
    lag_hours_p50: float | None
    lag_hours_p95: float | None
    lag_hours_p99: float | None
    days_late: dict[int, int]
    rows_without_event_ts: int = 0
    max_arrival_ts: datetime | None = None

    def late_rows(self, grace_days: int) -> int:
        """The measured rows that came late under a grace window of ``grace_days``."""
        return sum(n for bucket, n in self.days_late.items() if bucket > grace_days)


def hours_of(spark: SparkSession, where: str | None = None) -> list[Hour]:
    """The series' rows (``where``: a SQL condition on them), in source and hour order (one
    statement)."""
    clause = f" WHERE {where}" if where else ""
    return hours_from(
        spark,
        f"SELECT {HOUR_COLUMNS} FROM {SERIES_TABLE}{clause} ORDER BY source_system, arrival_hour",
    )


def hours_from(spark: SparkSession, sql: str) -> list[Hour]:
    """The series' rows a query of its columns selects (one statement)."""
    rows = spark.sql(sql).collect()
    return [
        Hour(
            source_system=r.source_system,
            arrival_hour=r.arrival_hour,
            rows=int(r.rows),
            measured_rows=int(r.measured_rows),
            lag_hours_p50=r.lag_hours_p50,
            lag_hours_p95=r.lag_hours_p95,
            lag_hours_p99=r.lag_hours_p99,
            days_late={int(k): int(v) for k, v in (r.days_late or {}).items()},
            rows_without_event_ts=int(r.rows_without_event_ts),
            max_arrival_ts=r.max_arrival_ts,
        )
        for r in rows
    ]


# Per source since its first arrival, and over all sources (the grouping set ()): the sums of
# the series' hours, the measured rows late under ``{grace_days}`` (their buckets above it)
# and the percentiles of the hours' merged sketches.
TOTALS_SQL = f"""
SELECT
  source_system,
  GROUPING(source_system) = 1 AS is_total,
  SUM(rows) AS n_rows,
  SUM(measured_rows) AS measured_rows,
  SUM(rows_without_event_ts) AS rows_without_event_ts,
  SUM(AGGREGATE(MAP_VALUES(MAP_FILTER(days_late, (bucket, n) -> bucket > {{grace_days}})),
    0L, (total, n) -> total + n)) AS late_rows,
  CASE WHEN SUM(measured_rows) > 0 THEN KLL_SKETCH_GET_QUANTILE_DOUBLE(
    KLL_MERGE_AGG_DOUBLE(lag_sketch, {MERGED_SKETCH_K}), {QUANTILES}
  ) END AS lag_hours,
  MAX(max_arrival_ts) AS max_arrival_ts
FROM {SERIES_TABLE}
GROUP BY GROUPING SETS ((source_system), ())
"""


def totals(spark: SparkSession, grace_days: int) -> list[t.Any]:
    """Each source's lateness since its first arrival and all sources' (``is_total``), from
    the series as it stands (one statement; ``extend`` brings it up to date first)."""
    return spark.sql(TOTALS_SQL.format(grace_days=int(grace_days))).collect()
