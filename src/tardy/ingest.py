"""Bronze ingestion: landing JSON-lines files -> the append-only Delta table ``bronze.pos_events``.

The landing contract: ``<landing>/<source_system>/arrival_ts=<YYYYMMDDTHHMMSSZ>/<name>.jsonl``.
Each line becomes one bronze row, whatever it holds: a line that is not a JSON object is kept
with ``parse_error`` set (silver quarantines it), never dropped. Record fields are kept as
their JSON text, so ingestion never has to judge a value; only ``event_ts`` is also parsed.

A file is identified by the SHA-256 of its content: a file already in bronze (or in the
ledger ``bronze.ingest_ledger``) is skipped, so ingesting twice is a no-op. Bronze is written
first and the ledger second; a crash between the two leaves the file recognised as ingested
through bronze's own ``file_sha256`` column. The bronze commit is an insert-only MERGE on
(file, line), so two ingests of the same files at once cannot both commit them: Delta's
optimistic concurrency refuses the second, which drops the files the first committed and
retries (``docs/concurrency.md``). Both tables are Delta ``appendOnly``: Delta
itself refuses any UPDATE or DELETE on them. Bronze also has Delta's change data feed on, so
``tardy detect`` reads only the rows added since its watermark (``table_changes``).

Each bronze commit is preceded by the commit of its rows' entries in the key index
``bronze.pos_event_keys`` (``tardy.key_index``), which lets silver read only the bronze
partitions that hold a key's records; a data home whose bronze predates the index gets it
built from bronze by the first ``tardy ingest`` (``ensure_key_index``, idempotent).
"""

from __future__ import annotations

import hashlib
import json
import uuid
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass, field
from datetime import UTC, date, datetime
from pathlib import Path

import pandas as pd
from delta.exceptions import ConcurrentAppendException
from delta.tables import DeltaTable
from pyspark.sql import SparkSession

from tardy.errors import InputError
from tardy.key_index import append_key_index, ensure_key_index
from tardy.simulate import ARRIVAL_DIR_PREFIX, parse_arrival_dir
from tardy.sql import date_list

BRONZE_TABLE = "bronze.pos_events"
ROWS_PER_COMMIT = 1_000_000
COMMIT_ATTEMPTS = 5  # per batch, against concurrent ingests (each retry drops their files)
LEDGER_TABLE = "bronze.ingest_ledger"
_BATCH_VIEW = "_tardy_ingest_batch"
FIELDS = (
    "transaction_id",
    "record_type",
    "store_id",
    "product_id",
    "quantity",
    "unit_price",
    "discount",
    "event_ts",
    "corrects_transaction_id",
)
BRONZE_DDL = f"""
CREATE TABLE IF NOT EXISTS {BRONZE_TABLE} (
  record_id STRING NOT NULL,
  source_system STRING NOT NULL,
  source_file STRING NOT NULL,
  file_sha256 STRING NOT NULL,
  line_number INT NOT NULL,
  ingestion_id STRING NOT NULL,
  ingested_at TIMESTAMP NOT NULL,
  arrival_ts TIMESTAMP NOT NULL,
  arrival_date DATE NOT NULL,
  event_ts TIMESTAMP,
  raw_record STRING NOT NULL,
  parse_error STRING,
  transaction_id STRING,
  record_type STRING,
  store_id STRING,
  product_id STRING,
  quantity STRING,
  unit_price STRING,
  discount STRING,
  event_ts_raw STRING,
  corrects_transaction_id STRING
) USING delta
PARTITIONED BY (arrival_date)
TBLPROPERTIES ('delta.appendOnly' = 'true', 'delta.enableChangeDataFeed' = 'true')
"""
LEDGER_DDL = f"""
CREATE TABLE IF NOT EXISTS {LEDGER_TABLE} (
  file_sha256 STRING NOT NULL,
  source_system STRING NOT NULL,
  source_file STRING NOT NULL,
  arrival_ts TIMESTAMP NOT NULL,
  rows BIGINT NOT NULL,
  ingestion_id STRING NOT NULL,
  ingested_at TIMESTAMP NOT NULL
) USING delta
TBLPROPERTIES ('delta.appendOnly' = 'true')
"""


class IngestError(InputError):
    """Bad landing input that cannot be ingested (nothing was written)."""


@dataclass(frozen=True)
class LandingFile:
    path: Path
    source_system: str
    source_file: str
    arrival_ts: datetime | None  # None: arrives at ingestion time
    sha256: str


@dataclass
class IngestResult:
    ingestion_id: str
    files_ingested: int = 0
    files_skipped: int = 0
    rows: int = 0
    rows_with_parse_error: int = 0
    skipped: list[dict[str, str]] = field(default_factory=list)
    ingested: list[dict[str, object]] = field(default_factory=list)

    def as_dict(self) -> dict[str, object]:
        return asdict(self)


def ensure_tables(spark: SparkSession) -> None:
    spark.sql("CREATE SCHEMA IF NOT EXISTS bronze")
    spark.sql(BRONZE_DDL)
    spark.sql(LEDGER_DDL)
    ensure_key_index(spark, BRONZE_TABLE)  # before any append: it must cover all of bronze


def discover(landing: Path, paths: Sequence[Path] = ()) -> list[Path]:
    """The ``*.jsonl`` files named (files, or folders searched recursively), sorted."""
    roots = list(paths) or [landing]
    found: set[Path] = set()
    for root in roots:
        root = root.resolve()
        if root.is_file():
            found.add(root)
        elif root.is_dir():
            found.update(p for p in root.rglob("*.jsonl") if p.is_file())
        elif paths:
            raise IngestError(f"no such file or folder: {root}")
    return sorted(found)


def describe(path: Path, landing: Path) -> LandingFile:
    """Source system, arrival time and content hash of one landing file."""
    path = path.resolve()
    arrival_dirs = [p for p in path.parents if p.name.startswith(ARRIVAL_DIR_PREFIX)]
    arrival_ts = None
    if arrival_dirs:
        try:
            arrival_ts = parse_arrival_dir(arrival_dirs[0].name)
        except ValueError as exc:
            raise IngestError(f"{path}: {exc}") from exc
    landing = landing.resolve()
    if path.is_relative_to(landing):
        source_file = str(path.relative_to(landing))
        source_system = Path(source_file).parts[0] if len(Path(source_file).parts) > 1 else ""
    else:
        source_file = str(path)
        source_system = arrival_dirs[0].parent.name if arrival_dirs else path.parent.name
    if not source_system or source_system.startswith(ARRIVAL_DIR_PREFIX):
        raise IngestError(
            f"{path}: cannot tell its source system; land it as "
            "<landing>/<source_system>/arrival_ts=<YYYYMMDDTHHMMSSZ>/<name>.jsonl"
        )
    digest = hashlib.sha256(path.read_bytes()).hexdigest()
    return LandingFile(path, source_system, source_file, arrival_ts, digest)


def _text(value: object) -> str | None:
    """A JSON value as the text it was written with (numbers are parsed as strings)."""
    if value is None:
        return None
    if isinstance(value, str):
        return value
    if isinstance(value, bool):
        return "true" if value else "false"
    return json.dumps(value, separators=(",", ":"))


def parse_event_ts(text: str | None) -> datetime | None:
    """ISO-8601 to naive UTC; None when missing or unparseable (silver quarantines it)."""
    if not text:
        return None
    try:
        parsed = datetime.fromisoformat(text)
    except ValueError:
        return None
    if parsed.tzinfo is not None:
        parsed = parsed.astimezone(UTC).replace(tzinfo=None)
    return parsed


def parse_line(line: str) -> tuple[dict[str, str | None], str | None]:
    """The record's fields as text, and a parse error (None when the line is a JSON object)."""
    try:
        record = json.loads(line, parse_float=str, parse_int=str, parse_constant=str)
    except json.JSONDecodeError as exc:
        return {}, f"invalid JSON: {exc.msg} at column {exc.colno}"
    if not isinstance(record, dict):
        return {}, f"not a JSON object: {type(record).__name__}"
    return {name: _text(record.get(name)) for name in FIELDS}, None


def _rows(
    landing_file: LandingFile, ingestion_id: str, ingested_at: datetime
) -> Iterable[tuple[object, ...]]:
    arrival = landing_file.arrival_ts or ingested_at
    arrival = arrival.astimezone(UTC).replace(tzinfo=None) if arrival.tzinfo else arrival
    arrival_date: date = arrival.date()
    ingested = ingested_at.astimezone(UTC).replace(tzinfo=None)
    text = landing_file.path.read_text(encoding="utf-8", errors="replace")
    for number, line in enumerate(text.splitlines(), start=1):
        fields, error = parse_line(line) if line.strip() else ({}, "blank line")
        event_raw = fields.get("event_ts")
        yield (
            f"{landing_file.sha256}:{number}",
            landing_file.source_system,
            landing_file.source_file,
            landing_file.sha256,
            number,
            ingestion_id,
            ingested,
            arrival,
            arrival_date,
            parse_event_ts(event_raw),
            line,
            error,
            fields.get("transaction_id"),
            fields.get("record_type"),
            fields.get("store_id"),
            fields.get("product_id"),
            fields.get("quantity"),
            fields.get("unit_price"),
            fields.get("discount"),
            event_raw,
            fields.get("corrects_transaction_id"),
        )


def ingested_hashes(spark: SparkSession) -> set[str]:
    ledger = spark.table(LEDGER_TABLE).select("file_sha256")
    bronze = spark.table(BRONZE_TABLE).select("file_sha256")
    return {row.file_sha256 for row in ledger.union(bronze).distinct().collect()}


def ingest(
    spark: SparkSession,
    landing: Path,
    paths: Sequence[Path] = (),
    *,
    now: datetime | None = None,
) -> IngestResult:
    """Append every not-yet-ingested landing file (or just ``paths``) to bronze."""
    ensure_tables(spark)
    ingested_at = now or datetime.now(UTC)
    result = IngestResult(ingestion_id=uuid.uuid4().hex)
    candidates = [describe(p, landing) for p in discover(landing, paths)]
    seen = ingested_hashes(spark)
    todo: list[LandingFile] = []
    for candidate in candidates:
        if candidate.sha256 in seen:
            _skip(result, candidate)
            continue
        seen.add(candidate.sha256)
        todo.append(candidate)
    if not todo:
        return result

    batch: list[LandingFile] = []
    batch_rows = 0
    for landing_file in todo:
        batch.append(landing_file)
        batch_rows += landing_file.path.stat().st_size // 150  # rough line estimate
        if batch_rows >= ROWS_PER_COMMIT:
            _append(spark, batch, result, ingested_at)
            batch, batch_rows = [], 0
    if batch:
        _append(spark, batch, result, ingested_at)
    return result


def _skip(result: IngestResult, landing_file: LandingFile) -> None:
    result.files_skipped += 1
    result.skipped.append(
        {"source_file": landing_file.source_file, "reason": "content already ingested"}
    )


def _append(
    spark: SparkSession, files: list[LandingFile], result: IngestResult, ingested_at: datetime
) -> None:
    """One bronze commit (whole files only), then their ledger entries.

    The commit is an insert-only MERGE, not a blind append: Delta's optimistic concurrency
    lets two blind appends of the same file both commit (rows twice, forever, in an
    append-only table), whereas a MERGE that read the batch's arrival partitions fails with
    ``ConcurrentAppendException`` when another writer added files there first (measured:
    docs/concurrency.md). On that conflict the files another ingest committed meanwhile are
    dropped from the batch and the rest is committed again.
    """
    for attempt in range(1, COMMIT_ATTEMPTS + 1):
        try:
            _commit(spark, files, result, ingested_at)
            return
        except ConcurrentAppendException:
            if attempt == COMMIT_ATTEMPTS:
                raise
            seen = ingested_hashes(spark)
            for landing_file in (f for f in files if f.sha256 in seen):
                _skip(result, landing_file)
            files = [f for f in files if f.sha256 not in seen]
            if not files:
                return


def _commit(
    spark: SparkSession, files: list[LandingFile], result: IngestResult, ingested_at: datetime
) -> None:
    rows: list[tuple[object, ...]] = []
    ledger: list[tuple[object, ...]] = []
    ingested: list[dict[str, object]] = []
    for landing_file in files:
        before = len(rows)
        rows.extend(_rows(landing_file, result.ingestion_id, ingested_at))
        count = len(rows) - before
        arrival = landing_file.arrival_ts or ingested_at
        ledger.append(
            (
                landing_file.sha256,
                landing_file.source_system,
                landing_file.source_file,
                arrival.astimezone(UTC).replace(tzinfo=None),
                count,
                result.ingestion_id,
                ingested_at.astimezone(UTC).replace(tzinfo=None),
            )
        )
        ingested.append({"source_file": landing_file.source_file, "rows": count})
    schema = spark.table(BRONZE_TABLE).schema  # `_rows` yields in the DDL's column order
    frame = pd.DataFrame.from_records(rows, columns=schema.fieldNames())

    spark.conf.set("spark.sql.execution.arrow.pyspark.enabled", "true")
    bronze = spark.createDataFrame(frame, schema=schema)
    # The key index first: a crash before the bronze commit leaves only extra index rows.
    bronze.createOrReplaceTempView(_BATCH_VIEW)
    try:
        append_key_index(spark, _BATCH_VIEW)
    finally:
        spark.catalog.dropTempView(_BATCH_VIEW)
    arrival_dates = date_list("b.arrival_date", set(frame["arrival_date"]))
    (
        DeltaTable.forName(spark, BRONZE_TABLE)
        .alias("b")
        .merge(
            bronze.alias("s"),
            f"{arrival_dates} AND b.file_sha256 = s.file_sha256 AND b.line_number = s.line_number",
        )
        .whenNotMatchedInsertAll()
        .execute()
    )
    entries = spark.createDataFrame(ledger, schema=spark.table(LEDGER_TABLE).schema)
    entries.write.format("delta").mode("append").saveAsTable(LEDGER_TABLE)
    result.ingested += ingested
    result.rows += len(frame)
    result.rows_with_parse_error += int(frame["parse_error"].notna().sum())
    result.files_ingested += len(files)
