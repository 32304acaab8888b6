"""The restatement log's Delta schema, its view, and the migration of logs written before it.

Schema 2 (this one) stores every structured value in a typed column: intervals as
``ARRAY<STRUCT<start: DATE, end: DATE>>`` per model, Delta versions as ``BIGINT``, audit
results as one struct per audit, model and interval, and the staged detail (staged tables,
manifest, whether a large change was accepted) in columns of their own, so ``message`` is
human text only. Schema 1 (tardy up to session 6) stored them as JSON text in ``intervals``,
``rows_before``, ... and the staged detail as JSON in ``message``.

The table is append-only (``delta.appendOnly``): no row is ever rewritten, and a column can
be neither dropped nor renamed without upgrading the table to column mapping (a protocol
change older readers refuse). So the typed values live in *new* columns (``model_``
prefixed), the schema-1 JSON columns stay, and every log, new or migrated, has the same
columns in the same order: the JSON columns are NULL in rows written since, and read only
for older rows (``tardy.engine.log``). A fresh log is created with both, so there is one
schema and one reader.

``ensure_log`` migrates a schema-1 log in two steps, each idempotent and each one atomic
commit, checked by reading the state rather than a marker:

1. ``ALTER TABLE ADD COLUMNS`` of every typed column: one Delta commit, so a kill leaves the
   table either as it was or with all of them (then this step is skipped);
2. ``CREATE OR REPLACE VIEW`` of ``tardy.restated_periods`` reading both kinds of row; its
   comment names the schema, so a view older than the table is replaced.

Between the two the old view still reads (schema-1 rows only); no row is appended before both
are done. Details: ``docs/log.md``.
"""

from __future__ import annotations

import os
import typing as t
import weakref

from tardy.engine.promote import failpoint

if t.TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession
    from pyspark.sql.types import DataType, StructType

LOG_TABLE = "tardy.restatement_log"
PERIODS_VIEW = "tardy.restated_periods"
SCHEMA_VERSION = 2
VIEW_COMMENT = f"tardy restated periods, log schema {SCHEMA_VERSION}"

SPANS = "ARRAY<STRUCT<`start`: DATE, `end`: DATE>>"
_STAGED_TABLE = (
    "STRUCT<model: STRING, prod_table: STRING, staged_table: STRING, time_column: STRING, "
    f"version_before: BIGINT, intervals: {SPANS}, snapshot_version: STRING, changed: {SPANS}>"
)
_MANIFEST = (
    "STRUCT<arrival_watermark: TIMESTAMP, previous_watermark: TIMESTAMP, bronze_version: BIGINT, "
    f"since_bronze_version: BIGINT, late_rows: BIGINT, impacted: MAP<STRING, {SPANS}>, "
    f"absorbed_by_next_run: MAP<STRING, {SPANS}>, reasons: MAP<STRING, STRING>, "
    f"roots: MAP<STRING, {SPANS}>, stock_commands: ARRAY<STRING>, "
    "source_versions: MAP<STRING, BIGINT>, since_source_versions: MAP<STRING, BIGINT>>"
)
# Fields added to the manifest struct after schema 2 (the dimensions' bronze versions), added
# to an older log's struct by ``ensure_log`` (Delta adds nested fields in one commit).
MANIFEST_FIELDS_ADDED = {
    "source_versions": "MAP<STRING, BIGINT>",
    "since_source_versions": "MAP<STRING, BIGINT>",
}
# Row count and exact column sums (decimal text: the measures' scales differ) per model.
_TOTALS = "MAP<STRING, STRUCT<`rows`: BIGINT, sums: MAP<STRING, STRING>>>"
_AUDIT = (
    "STRUCT<model: STRING, audit: STRING, interval_start: DATE, interval_end: DATE, "
    "blocking: BOOLEAN, failing_rows: BIGINT>"
)

# Schema 1: the columns every log has had since session 1 (JSON text where noted).
LEGACY_COLUMNS = """
  restatement_id STRING NOT NULL,
  action STRING NOT NULL,
  status STRING NOT NULL,
  logged_at TIMESTAMP NOT NULL,
  reason STRING NOT NULL,
  actor STRING NOT NULL,
  intervals STRING,
  rows_before STRING,
  rows_after STRING,
  bronze_version BIGINT,
  arrival_watermark TIMESTAMP,
  code_version STRING,
  snapshot_versions STRING,
  table_versions_before STRING,
  table_versions_after STRING,
  audit_results STRING,
  message STRING"""
# The JSON text columns of schema 1, read for rows written before schema 2.
JSON_COLUMNS = (
    "intervals",
    "rows_before",
    "rows_after",
    "snapshot_versions",
    "table_versions_before",
    "table_versions_after",
    "audit_results",
)
# Schema 2: added to schema 1, in this order (ADD COLUMNS appends them at the end).
TYPED_COLUMNS: dict[str, str] = {
    "model_intervals": f"MAP<STRING, {SPANS}>",
    "model_rows_before": _TOTALS,
    "model_rows_after": _TOTALS,
    "model_snapshot_versions": "MAP<STRING, STRING>",
    "model_versions_before": "MAP<STRING, BIGINT>",
    "model_versions_after": "MAP<STRING, BIGINT>",
    "audits": f"ARRAY<{_AUDIT}>",
    "staged_tables": f"ARRAY<{_STAGED_TABLE}>",
    "manifest": _MANIFEST,
    "accepted_large_change": "BOOLEAN",
}
# Each schema-1 JSON column and the typed column that replaces it.
TYPED_OF = dict(zip(JSON_COLUMNS, list(TYPED_COLUMNS)[:7], strict=True))

_TYPED_DDL = ",\n".join(f"  {name} {kind}" for name, kind in TYPED_COLUMNS.items())
LOG_DDL = f"""
CREATE TABLE IF NOT EXISTS {LOG_TABLE} ({LEGACY_COLUMNS},
{_TYPED_DDL}
) USING delta
TBLPROPERTIES ('delta.appendOnly' = 'true')
"""
MIGRATION_DDL = f"ALTER TABLE {LOG_TABLE} ADD COLUMNS (\n{_TYPED_DDL}\n)"

# One row per model and day of every promoted restatement that was not rolled back; the latest
# promotion of a day wins. Schema-1 rows' JSON intervals are read into the typed shape.
PERIODS_VIEW_SQL = f"""
CREATE OR REPLACE VIEW {PERIODS_VIEW} COMMENT '{VIEW_COMMENT}' AS
WITH promoted AS (
  SELECT restatement_id, reason, actor, logged_at AS promoted_at,
         coalesce(
           model_intervals,
           transform_values(
             from_json(intervals, 'map<string, array<array<string>>>'),
             (model, spans) -> transform(
               spans, span -> named_struct('start', to_date(span[0]), 'end', to_date(span[1]))
             )
           )
         ) AS spans_by_model
  FROM {LOG_TABLE}
  WHERE action = 'promoted'
    AND restatement_id NOT IN (
      SELECT restatement_id FROM {LOG_TABLE} WHERE action = 'rolled_back'
    )
), days AS (
  SELECT restatement_id, reason, actor, promoted_at, model,
         explode(sequence(span.`start`, span.`end`)) AS period
  FROM promoted
  LATERAL VIEW explode(spans_by_model) AS model, spans
  LATERAL VIEW explode(spans) AS span
)
SELECT model, period, restatement_id AS last_restatement_id, reason AS last_restatement_reason,
       actor AS last_restated_by, promoted_at AS last_restated_at
FROM (
  SELECT *, ROW_NUMBER() OVER (PARTITION BY model, period ORDER BY promoted_at DESC) AS rn
  FROM days
)
WHERE rn = 1
"""


# The sessions whose log this process found current, with the log's schema and the data home
# it was found in: an append then reads neither (each catalog lookup and schema read is a
# plan on a Spark Connect client, and a restatement appends three times). Nothing drops or
# downgrades the log, so once current it stays current.
_CURRENT: weakref.WeakKeyDictionary[SparkSession, tuple[str, StructType]] = (
    weakref.WeakKeyDictionary()
)


def current_schema(spark: SparkSession) -> StructType:
    """The log's schema, once ``ensure_log`` has made it current: checked once per session
    and data home in this process."""
    home = os.environ.get("TARDY_HOME", "")
    known = _CURRENT.get(spark)
    if known is not None and known[0] == home:
        return known[1]
    ensure_log(spark)
    schema = spark.table(LOG_TABLE).schema
    _CURRENT[spark] = (home, schema)
    return schema


def ensure_log(spark: SparkSession) -> None:
    """Create the log and its view, or bring a schema-1 log to schema 2; idempotent and
    crash-safe (module docstring). When both are current it costs catalog lookups and one
    schema read, no Spark job; ``current_schema`` calls it once per session."""
    if spark.catalog.tableExists(LOG_TABLE):
        _add_typed_columns(spark)
        _add_manifest_fields(spark)
    else:
        spark.sql("CREATE SCHEMA IF NOT EXISTS tardy")
        spark.sql(LOG_DDL)
    failpoint("migrate_log", 1)
    if not _view_is_current(spark):
        spark.sql(PERIODS_VIEW_SQL)


def readable_log(spark: SparkSession) -> DataFrame:
    """The log for reading. When it exists in the current schema this costs one schema
    read and no Spark job (a fresh ``tardy log`` on the warm engine: docs/facts.md, fact
    25); a missing or older log is first created or migrated (``ensure_log``)."""
    from pyspark.errors import AnalysisException

    try:
        schema = spark.table(LOG_TABLE).schema
    except AnalysisException:  # no log yet
        ensure_log(spark)
        return spark.table(LOG_TABLE)
    present = set(schema.fieldNames())
    fields = _field_names(schema["manifest"].dataType) if "manifest" in present else set()
    if any(name not in present for name in TYPED_COLUMNS) or any(
        name not in fields for name in MANIFEST_FIELDS_ADDED
    ):
        ensure_log(spark)
    return spark.table(LOG_TABLE)


def _field_names(struct: DataType) -> set[str]:
    """The field names of a struct column's type (the log's ``manifest``)."""
    from pyspark.sql.types import StructType

    if not isinstance(struct, StructType):
        raise TypeError(f"a struct column expected, not {struct.simpleString()}")
    return set(struct.fieldNames())


def missing_columns(spark: SparkSession) -> list[str]:
    """The schema-2 columns the log lacks (all of them, or none: they come in one commit)."""
    present = set(spark.table(LOG_TABLE).schema.fieldNames())
    return [name for name in TYPED_COLUMNS if name not in present]


def _add_typed_columns(spark: SparkSession) -> None:
    if not missing_columns(spark):
        return
    try:
        spark.sql(MIGRATION_DDL)
    except Exception:
        # Another process may have migrated it first (a concurrent metadata commit, or the
        # columns exist by now): fine if the columns are there.
        if missing_columns(spark):
            raise


def missing_manifest_fields(spark: SparkSession) -> list[str]:
    present = _field_names(spark.table(LOG_TABLE).schema["manifest"].dataType)
    return [name for name in MANIFEST_FIELDS_ADDED if name not in present]


def _add_manifest_fields(spark: SparkSession) -> None:
    missing = missing_manifest_fields(spark)
    if not missing:
        return
    added = ", ".join(f"manifest.{name} {MANIFEST_FIELDS_ADDED[name]}" for name in missing)
    try:
        spark.sql(f"ALTER TABLE {LOG_TABLE} ADD COLUMNS ({added})")
    except Exception:  # another process added them first
        if missing_manifest_fields(spark):
            raise


def _view_is_current(spark: SparkSession) -> bool:
    if not spark.catalog.tableExists(PERIODS_VIEW):
        return False
    return spark.catalog.getTable(PERIODS_VIEW).description == VIEW_COMMENT
