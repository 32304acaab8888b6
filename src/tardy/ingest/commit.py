"""The bronze commit and the ledger: one insert-only MERGE per batch of files of one bronze table
(the key index first, the ledger entries after), retried without the files a concurrent
ingest committed; and what the ledger and bronze already hold.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import UTC, datetime

import pandas as pd
from delta.exceptions import ConcurrentAppendException
from pyspark.sql import DataFrame, SparkSession

from tardy.ingest.discovery import LandingFile
from tardy.ingest.errors import FileRefused, IngestError
from tardy.ingest.parsing import bronze_rows
from tardy.ingest.result import IngestResult, refuse, skip
from tardy.ingest.tables import LEDGER_TABLE, BronzeTable, bronze_tables
from tardy.sql import date_list

COMMIT_ATTEMPTS = 5  # per batch, against concurrent ingests (each retry drops their files)
_BATCH_VIEW = "_tardy_ingest_batch"


def ledger_and_bronze(spark: SparkSession, *columns: str) -> DataFrame:
    """``columns`` of the ledger and of every bronze table, one union (duplicates kept)."""
    union = spark.table(LEDGER_TABLE).select(*columns)
    for table in bronze_tables():
        union = union.union(spark.table(table.name).select(*columns))
    return union


def ingested_hashes(spark: SparkSession) -> set[str]:
    """The content hashes of every file in the ledger or in any bronze table."""
    frame = ledger_and_bronze(spark, "file_sha256").distinct()
    return {row.file_sha256 for row in frame.collect()}


@dataclass
class Ingested:
    """What the ledger and bronze hold: each content hash's first file, each file's hashes."""

    by_sha: dict[str, str] = field(default_factory=dict)
    by_path: dict[str, set[str]] = field(default_factory=dict)

    @classmethod
    def read(cls, spark: SparkSession) -> Ingested:
        frame = ledger_and_bronze(spark, "file_sha256", "source_file", "arrival_ts")
        known = cls()
        for row in frame.distinct().orderBy("arrival_ts", "source_file").collect():
            known.add(row.file_sha256, row.source_file)
        return known

    def add(self, sha256: str, source_file: str) -> None:
        self.by_sha.setdefault(sha256, source_file)
        self.by_path.setdefault(source_file, set()).add(sha256)


def append_batch(
    spark: SparkSession,
    table: BronzeTable,
    files: list[LandingFile],
    result: IngestResult,
    ingested_at: datetime,
) -> None:
    """One commit to the bronze ``table`` (whole files, all of that table), then their ledger
    entries.

    The commit is an insert-only MERGE, not a blind append: Delta's optimistic concurrency
    lets two blind appends of the same file both commit (rows twice, forever, in an
    append-only table), whereas a MERGE that read the batch's arrival partitions fails with
    ``ConcurrentAppendException`` when another writer added files there first (measured:
    docs/concurrency.md). On that conflict the files another ingest committed meanwhile are
    dropped from the batch and the rest is committed again.
    """
    for attempt in range(1, COMMIT_ATTEMPTS + 1):
        try:
            _commit(spark, table, files, result, ingested_at)
            return
        except Exception as error:
            if not _is_concurrent_append(error) or attempt == COMMIT_ATTEMPTS:
                raise
            seen = ingested_hashes(spark)
            for landing_file in (f for f in files if f.sha256 in seen):
                skip(result, landing_file)
            files = [f for f in files if f.sha256 not in seen]
            if not files:
                return


def _is_concurrent_append(error: Exception) -> bool:
    """Delta's conflict with a concurrent append: ``delta.exceptions`` rebuilds its class in a
    classic session; over Spark Connect it arrives as a generic PySpark error carrying Delta's
    error condition (``DELTA_CONCURRENT_APPEND...``) and the Java class name."""
    if isinstance(error, ConcurrentAppendException):
        return True
    condition = getattr(error, "getCondition", None)
    name = condition() if callable(condition) else None
    return bool(name and name.startswith("DELTA_CONCURRENT_APPEND")) or (
        "ConcurrentAppendException" in str(error)
    )


def _commit(
    spark: SparkSession,
    table: BronzeTable,
    files: list[LandingFile],
    result: IngestResult,
    ingested_at: datetime,
) -> None:
    read: list[tuple[LandingFile, list[tuple[object, ...]]]] = []
    for landing_file in files:
        try:
            read.append((landing_file, bronze_rows(landing_file, result.ingestion_id, ingested_at)))
        except FileRefused as refusal:  # nothing of it is written; the others are
            refuse(result, refusal)
    if not read:
        return
    rows = [row for _, file_rows in read for row in file_rows]
    schema = spark.table(table.name).schema
    # `bronze_rows` yields in the declaration's column order; the table may hold its columns
    # in another (a declaration's fields reordered): matched by name, never by position.
    declared, existing = list(table.columns), schema.fieldNames()
    if set(declared) != set(existing):
        raise IngestError(
            f"{table.name}: its declared record (sources.yaml) does not match the table's "
            f"columns: {', '.join(sorted(set(declared) - set(existing))) or 'none'} declared "
            f"only, {', '.join(sorted(set(existing) - set(declared))) or 'none'} in the table "
            "only"
        )
    frame = pd.DataFrame.from_records(rows, columns=declared)[existing]

    if rows:  # else only empty files: their ledger entries, no bronze commit
        spark.conf.set("spark.sql.execution.arrow.pyspark.enabled", "true")
        bronze = spark.createDataFrame(frame, schema=schema)
        # The key index first: a crash before the bronze commit leaves only extra index rows.
        # A view of this ingest's own: two ingests in one Spark session (threads, the warm
        # engine) must not read or drop each other's batch.
        view = f"{_BATCH_VIEW}_{result.ingestion_id}"
        bronze.createOrReplaceTempView(view)
        dates = set(frame["arrival_date"])
        try:
            if table.key_index is not None:
                table.key_index.append(spark, view)
            # SQL rather than the DeltaTable API: it also runs over Spark Connect, whose
            # server would otherwise need Delta's Connect plugins (docs/cluster.md).
            merged = spark.sql(
                f"MERGE INTO {table.name} AS b USING {view} AS s "
                f"ON {date_list('b.arrival_date', dates)} AND b.file_sha256 = s.file_sha256 "
                "AND b.line_number = s.line_number "
                "WHEN NOT MATCHED THEN INSERT *"
            ).first()
        finally:
            spark.catalog.dropTempView(view)
        inserted = _inserted_rows(merged)
        if inserted is not None and inserted < len(rows):
            # Another ingest committed some of these files between our read of bronze and
            # our MERGE, without overlapping it (no conflict): they are its files, not ours.
            ours = {
                r.file_sha256
                for r in spark.sql(
                    f"SELECT DISTINCT file_sha256 FROM {table.name} "
                    f"WHERE {date_list('arrival_date', dates)} "
                    f"AND ingestion_id = '{result.ingestion_id}'"
                ).collect()
            }
            for landing_file, file_rows in read:
                if landing_file.sha256 not in ours and file_rows:
                    skip(result, landing_file)
            read = [(f, file_rows) for f, file_rows in read if f.sha256 in ours or not file_rows]
            if not read:
                return
    ledger = [
        (
            landing_file.sha256,
            landing_file.source_system,
            landing_file.source_file,
            (landing_file.arrival_ts or ingested_at).astimezone(UTC).replace(tzinfo=None),
            len(file_rows),
            result.ingestion_id,
            ingested_at.astimezone(UTC).replace(tzinfo=None),
        )
        for landing_file, file_rows in read
    ]
    entries = spark.createDataFrame(ledger, schema=spark.table(LEDGER_TABLE).schema)
    entries.write.format("delta").mode("append").saveAsTable(LEDGER_TABLE)
    error = table.columns.index("parse_error")
    for landing_file, file_rows in read:
        result.ingested.append(
            {"source_file": landing_file.source_file, "rows": len(file_rows), "table": table.name}
        )
        result.rows += len(file_rows)
        result.rows_by_table[table.name] += len(file_rows)
        result.rows_with_parse_error += sum(1 for row in file_rows if row[error] is not None)
        result.files_ingested += 1


def _inserted_rows(merged: object) -> int | None:
    """The ``num_inserted_rows`` a Delta MERGE reports (None when it reports none)."""
    try:
        return int(merged["num_inserted_rows"])  # type: ignore[index]
    except (TypeError, KeyError, ValueError, IndexError):
        return None
