"""Bronze ingestion: landing JSON-lines files -> the append-only Delta tables of bronze.

The landing contract: ``<landing>/<source_system>/arrival_ts=<YYYYMMDDTHHMMSSZ>/<name>.jsonl``.
The source system (the first folder under the landing root) picks the bronze table
(``table_of``): ``store_master`` files are store changes, appended to
``bronze.store_changes``; every other source system is sales (``pos``, ``partner``, ...),
appended to ``bronze.pos_events``. Each table is described by one ``BronzeTable`` (name,
record fields, the one field also parsed as a timestamp); both share everything below.

Each line becomes one bronze row, whatever it holds: a line that is not a JSON object is kept
with ``parse_error`` set (silver quarantines it), never dropped. Record fields are kept as
their JSON text, so ingestion never has to judge a value; only ``event_ts`` (sales) and
``effective_ts`` (store changes) are also parsed, their text kept in ``<field>_raw``.

A file is identified by the SHA-256 of its content: a file already in bronze (or in the
ledger ``bronze.ingest_ledger``, shared by both tables) is skipped, so ingesting twice is a
no-op. Each commit writes the files of one bronze table: bronze first and the ledger second;
a crash between the two leaves the file recognised as ingested through bronze's own
``file_sha256`` column. The bronze commit is an insert-only MERGE on (file, line), so two
ingests of the same files at once cannot both commit them: Delta's optimistic concurrency
refuses the second, which drops the files the first committed and retries
(``docs/concurrency.md``). Every table here is Delta ``appendOnly``: Delta itself refuses any
UPDATE or DELETE on them. The bronze tables also have Delta's change data feed on, so
``tardy detect`` reads only the rows added since its watermark (``table_changes``).

Each ``bronze.pos_events`` commit is preceded by the commit of its rows' entries in the key
index ``bronze.pos_event_keys`` (``tardy.key_index``), which lets silver read only the bronze
partitions that hold a key's records; a data home whose bronze predates the index gets it
built from bronze by the first ``tardy ingest`` (``ensure_key_index``, idempotent).

Hostile input (``docs/hostile-input.md``): a line is the bytes up to ``\\n`` (a ``\\r``
before it and a UTF-8 BOM opening the file are dropped); a line that is not UTF-8, not
RFC 8259 JSON (``NaN``, duplicate keys, unpaired surrogates, nesting too deep) or not an
object is kept with ``parse_error``. A landing file must be a regular file inside the
landing root: symbolic links, paths resolving outside the root, FIFOs and the like, files
whose content changed since they were ingested, and files with a line over
``MAX_LINE_BYTES`` are **refused**, each named with its reason; every other file is still
ingested, and ``ingest`` then raises ``FilesRefused`` (carrying the result) unless called
with ``strict=False``.
"""

from __future__ import annotations

import hashlib
import json
import os
import stat
import uuid
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass, field
from datetime import UTC, date, datetime
from pathlib import Path

import pandas as pd
from delta.exceptions import ConcurrentAppendException
from pyspark.sql import DataFrame, SparkSession

from tardy.errors import InputError
from tardy.key_index import append_key_index, ensure_key_index
from tardy.simulate import ARRIVAL_DIR_PREFIX, STORE_MASTER_SOURCE, parse_arrival_dir
from tardy.sql import date_list

BRONZE_TABLE = "bronze.pos_events"
STORE_CHANGES_TABLE = "bronze.store_changes"
ROWS_PER_COMMIT = 1_000_000
COMMIT_ATTEMPTS = 5  # per batch, against concurrent ingests (each retry drops their files)
# The longest line ingest accepts (one bronze row, held whole in the driver, Arrow and the
# JVM); a file with a longer line is refused, not truncated (docs/hostile-input.md).
MAX_LINE_BYTES = 64 * 1024 * 1024
UTF8_BOM = b"\xef\xbb\xbf"
LEDGER_TABLE = "bronze.ingest_ledger"
_BATCH_VIEW = "_tardy_ingest_batch"
# The columns every bronze table opens with (before its timestamp, raw_record, parse_error).
_META_COLUMNS = (
    "record_id STRING NOT NULL",
    "source_system STRING NOT NULL",
    "source_file STRING NOT NULL",
    "file_sha256 STRING NOT NULL",
    "line_number INT NOT NULL",
    "ingestion_id STRING NOT NULL",
    "ingested_at TIMESTAMP NOT NULL",
    "arrival_ts TIMESTAMP NOT NULL",
    "arrival_date DATE NOT NULL",
)


@dataclass(frozen=True)
class BronzeTable:
    """One append-only bronze table and the landing records it holds.

    Its columns: ``_META_COLUMNS``, then ``<ts_field> TIMESTAMP`` (the record's ``ts_field``
    parsed by ``parse_event_ts``), ``raw_record``, ``parse_error``, then one STRING column per
    record field in ``fields`` order, holding the field's JSON text; the ``ts_field`` column
    of that list is named ``<ts_field>_raw``. ``key_index``: its rows are indexed in
    ``bronze.pos_event_keys`` (``tardy.key_index``) before each commit.
    """

    name: str
    fields: tuple[str, ...]
    ts_field: str
    key_index: bool = False

    def column(self, field_name: str) -> str:
        return f"{field_name}_raw" if field_name == self.ts_field else field_name

    @property
    def columns(self) -> tuple[str, ...]:
        """Column names in DDL order (``_rows`` yields its tuples in this order)."""
        meta = tuple(c.split(" ", 1)[0] for c in _META_COLUMNS)
        return (*meta, self.ts_field, "raw_record", "parse_error", *map(self.column, self.fields))

    @property
    def ddl(self) -> str:
        columns = [
            *_META_COLUMNS,
            f"{self.ts_field} TIMESTAMP",
            "raw_record STRING NOT NULL",
            "parse_error STRING",
            *(f"{self.column(name)} STRING" for name in self.fields),
        ]
        body = ",\n".join(f"  {column}" for column in columns)
        return (
            f"\nCREATE TABLE IF NOT EXISTS {self.name} (\n{body}\n) USING delta\n"
            "PARTITIONED BY (arrival_date)\n"
            "TBLPROPERTIES ('delta.appendOnly' = 'true', 'delta.enableChangeDataFeed' = 'true')\n"
        )


POS_EVENTS = BronzeTable(
    BRONZE_TABLE,
    (
        "transaction_id",
        "record_type",
        "store_id",
        "product_id",
        "quantity",
        "unit_price",
        "discount",
        "event_ts",
        "corrects_transaction_id",
    ),
    ts_field="event_ts",
    key_index=True,
)
STORE_CHANGES = BronzeTable(
    STORE_CHANGES_TABLE,
    (
        "store_id",
        "effective_ts",
        "region",
        "format",
        "manager",
        "change_id",
        "is_correction",
    ),
    ts_field="effective_ts",
)
BRONZE_TABLES = (POS_EVENTS, STORE_CHANGES)
FIELDS = POS_EVENTS.fields
BRONZE_DDL = POS_EVENTS.ddl
STORE_CHANGES_DDL = STORE_CHANGES.ddl


def table_of(source_system: str) -> BronzeTable:
    """The bronze table of a source system: ``store_master`` files are store changes, every
    other source system is sales."""
    return STORE_CHANGES if source_system == STORE_MASTER_SOURCE else POS_EVENTS


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
    """Bad landing input that cannot be ingested (nothing of it was written)."""


class FileRefused(IngestError):
    """One landing file refused: nothing of it is written (the other files are not affected)."""

    def __init__(self, path: Path | str, reason: str) -> None:
        super().__init__(f"{path}: {reason}")
        self.path = str(path)
        self.reason = reason


class FilesRefused(IngestError):
    """Some landing files were refused; every other file *was* ingested (``result``)."""

    def __init__(self, result: IngestResult) -> None:
        self.result = result
        lines = "\n".join(f"  {r['path']}: {r['reason']}" for r in result.refused)
        super().__init__(
            f"{result.files_refused} landing file(s) refused, nothing of them written "
            f"(the other files were: {result.files_ingested} ingested, {result.rows:,} rows; "
            f"{result.files_skipped} skipped as already ingested):\n{lines}"
        )


@dataclass(frozen=True)
class LandingFile:
    path: Path  # the real path, inside the landing root
    source_system: str
    source_file: str  # relative to the landing root, POSIX separators
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
    files_refused: int = 0
    refused: list[dict[str, str]] = field(default_factory=list)
    # Rows appended per bronze table (every table, 0 when none): ``rows`` is their sum.
    rows_by_table: dict[str, int] = field(
        default_factory=lambda: {table.name: 0 for table in BRONZE_TABLES}
    )

    def as_dict(self) -> dict[str, object]:
        return asdict(self)


def ensure_tables(spark: SparkSession) -> None:
    spark.sql("CREATE SCHEMA IF NOT EXISTS bronze")
    for table in BRONZE_TABLES:
        spark.sql(table.ddl)
    spark.sql(LEDGER_DDL)
    ensure_key_index(spark, BRONZE_TABLE)  # before any append: it must cover all of bronze


def discover(landing: Path, paths: Sequence[Path] = ()) -> list[Path]:
    """The candidate landing files named (files, or folders searched recursively), sorted.

    Candidates are the ``*.jsonl`` entries that are not folders (regular files, but also
    symbolic links, FIFOs, ...) and every symbolic link to a folder: ``describe`` refuses all
    but regular files, so nothing that looks like landing data is passed over in silence.
    Links to folders are not followed. Paths are absolute but not resolved (``..`` kept).
    """
    roots = [Path(p).absolute() for p in paths] or [landing.resolve()]
    landing_root = landing.resolve()
    found: set[Path] = set()
    for root in roots:
        if root.is_symlink() and root.resolve() != landing_root:
            found.add(root)  # named explicitly: refused by `describe`
        elif root.is_dir():
            found.update(_walk(root))
        elif os.path.lexists(root):
            found.add(root)
        elif paths:
            raise IngestError(f"no such file or folder: {root}")
    return sorted(found)


def _walk(folder: Path) -> Iterable[Path]:
    for parent, folders, files in os.walk(folder, followlinks=False):
        base = Path(parent)
        yield from (base / name for name in folders if (base / name).is_symlink())
        yield from (base / name for name in files if name.endswith(".jsonl"))


def describe(path: Path, landing: Path) -> LandingFile:
    """Source system, arrival time and content hash of one landing file.

    Raises ``FileRefused`` for anything but a regular file inside the landing root: a
    symbolic link, a path that resolves outside the root (``..``, a linked folder), a FIFO,
    a file that cannot be read, a malformed arrival folder, no source system folder.
    """
    path = Path(path).absolute()  # not normalised: the error names the path as given
    if path.is_symlink():
        raise FileRefused(
            path,
            f"a symbolic link (to {os.readlink(path)}); landing files must be regular files "
            "inside the landing root: land a copy of the file instead",
        )
    root = landing.resolve()
    real = path.resolve()
    if not real.is_relative_to(root):
        raise FileRefused(
            path,
            f"resolves to {real}, outside the landing root {root}; copy it to "
            "<landing>/<source_system>/arrival_ts=<YYYYMMDDTHHMMSSZ>/<name>.jsonl",
        )
    relative = real.relative_to(root)
    arrival_dirs = [p for p in reversed(relative.parents) if p.name.startswith(ARRIVAL_DIR_PREFIX)]
    arrival_ts = None
    if arrival_dirs:
        try:
            arrival_ts = parse_arrival_dir(arrival_dirs[-1].name)
        except ValueError as exc:
            raise FileRefused(path, str(exc)) from exc
    source_system = relative.parts[0] if len(relative.parts) > 1 else ""
    if not source_system or source_system.startswith(ARRIVAL_DIR_PREFIX):
        raise FileRefused(
            path,
            "cannot tell its source system; land it as "
            "<landing>/<source_system>/arrival_ts=<YYYYMMDDTHHMMSSZ>/<name>.jsonl",
        )
    digest = hashlib.sha256(read_landing_file(real)).hexdigest()
    return LandingFile(real, source_system, relative.as_posix(), arrival_ts, digest)


def read_landing_file(path: Path) -> bytes:
    """The bytes of a regular file, never following a symbolic link nor blocking on a FIFO."""
    try:
        # O_NONBLOCK: opening a FIFO for reading would otherwise wait for a writer forever.
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    except OSError as exc:
        raise FileRefused(path, f"cannot be opened: {exc.strerror}") from exc
    with os.fdopen(fd, "rb") as handle:
        mode = os.fstat(handle.fileno()).st_mode
        if not stat.S_ISREG(mode):
            raise FileRefused(path, f"not a regular file ({_file_kind(mode)})")
        try:
            return handle.read()
        except OSError as exc:
            raise FileRefused(path, f"cannot be read: {exc.strerror}") from exc


def _file_kind(mode: int) -> str:
    kinds = {
        stat.S_ISFIFO: "a FIFO",
        stat.S_ISSOCK: "a socket",
        stat.S_ISCHR: "a character device",
        stat.S_ISBLK: "a block device",
        stat.S_ISDIR: "a folder",
    }
    return next((name for test, name in kinds.items() if test(mode)), f"mode {mode:o}")


def split_lines(data: bytes, max_line_bytes: int = MAX_LINE_BYTES) -> list[bytes]:
    """A file's lines: the bytes up to each ``\\n`` (and after the last one, if any).

    A ``\\r`` before the ``\\n`` (CRLF) is dropped, and so is a UTF-8 BOM opening the file;
    nothing else ends a line (``\\r`` alone, U+2028, U+0085 may sit inside a JSON string).
    An empty file has no line. Raises ``ValueError`` for a line over ``max_line_bytes``.
    """
    if data.startswith(UTF8_BOM):
        data = data[len(UTF8_BOM) :]
    if not data:
        return []
    lines = data.split(b"\n")
    if lines[-1] == b"":
        lines.pop()  # the final line end
    lines = [line[:-1] if line.endswith(b"\r") else line for line in lines]
    for number, line in enumerate(lines, start=1):
        if len(line) > max_line_bytes:
            raise ValueError(
                f"line {number} is {len(line):,} bytes, over the {max_line_bytes:,}-byte limit "
                "of one bronze row"
            )
    return lines


def decode_line(line: bytes) -> tuple[str, str | None]:
    """The line as text, and an error when it is not UTF-8 (its bad bytes then appear as
    ``\\xNN`` escapes in the text, so the raw record stays exact and readable)."""
    try:
        return line.decode("utf-8"), None
    except UnicodeDecodeError as exc:
        text = line.decode("utf-8", errors="backslashreplace")
        return text, f"not UTF-8: byte 0x{line[exc.start]:02x} at byte {exc.start + 1}"


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


class _NotJson(ValueError):
    """Text Python's ``json`` accepts but RFC 8259 JSON does not (or leaves ambiguous)."""


def _no_constant(name: str) -> object:
    raise _NotJson(f"{name} is not a JSON value")


def _unique_keys(pairs: list[tuple[str, object]]) -> dict[str, object]:
    record = dict(pairs)
    if len(record) != len(pairs):
        seen: set[str] = set()
        for key, _ in pairs:
            if key in seen:
                raise _NotJson(f"duplicate key {key!r}")
            seen.add(key)
    return record


def parse_line(
    line: str, fields: Sequence[str] = FIELDS
) -> tuple[dict[str, str | None], str | None]:
    """The record's ``fields`` as text, and a parse error (None when the line is a JSON object).

    Strict RFC 8259: ``NaN``/``Infinity``, duplicate keys (which value counts differs
    between parsers) and unpaired surrogates (no UTF-8 text holds them) are errors, and so
    is nesting too deep for the parser. Numbers keep their text (``1e400``, 2**64).
    """
    try:
        record = json.loads(
            line,
            parse_float=str,
            parse_int=str,
            parse_constant=_no_constant,
            object_pairs_hook=_unique_keys,
        )
    except json.JSONDecodeError as exc:
        return {}, f"invalid JSON: {exc.msg} at column {exc.colno}"
    except _NotJson as exc:
        return {}, f"invalid JSON: {exc}"
    except RecursionError:
        return {}, "invalid JSON: nested too deeply"
    if not isinstance(record, dict):
        return {}, f"not a JSON object: {type(record).__name__}"
    texts = {name: _text(record.get(name)) for name in fields}
    for name, value in texts.items():
        if value is not None and not _is_utf8(value):
            return {}, f"invalid JSON: {name} holds an unpaired surrogate escape"
    return texts, None


def _is_utf8(text: str) -> bool:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def parse_landing_line(
    line: bytes, fields: Sequence[str] = FIELDS
) -> tuple[str, dict[str, str | None], str | None]:
    """One line of a landing file: its text, its ``fields`` and its parse error (``_rows``)."""
    text, error = decode_line(line)
    if error is not None:
        return text, {}, error
    if not text.strip():
        return text, {}, "blank line"
    texts, error = parse_line(text, fields)
    return text, texts, error


def _rows(
    landing_file: LandingFile, ingestion_id: str, ingested_at: datetime
) -> list[tuple[object, ...]]:
    """The file's rows of its bronze table (``table_of``), in the table's column order;
    ``FileRefused`` when it changed since it was hashed or has a line too long (then nothing
    of it is written)."""
    data = read_landing_file(landing_file.path)
    digest = hashlib.sha256(data).hexdigest()
    if digest != landing_file.sha256:
        raise FileRefused(
            landing_file.path,
            f"changed while being ingested (sha256 {landing_file.sha256[:12]}... when found, "
            f"{digest[:12]}... when read); nothing of it was written, the next ingest takes it",
        )
    try:
        lines = split_lines(data)
    except ValueError as exc:
        raise FileRefused(landing_file.path, str(exc)) from exc
    arrival = landing_file.arrival_ts or ingested_at
    arrival = arrival.astimezone(UTC).replace(tzinfo=None) if arrival.tzinfo else arrival
    arrival_date: date = arrival.date()
    ingested = ingested_at.astimezone(UTC).replace(tzinfo=None)
    table = table_of(landing_file.source_system)
    rows: list[tuple[object, ...]] = []
    for number, line in enumerate(lines, start=1):
        text, fields, error = parse_landing_line(line, table.fields)
        rows.append(
            (
                f"{landing_file.sha256}:{number}",
                landing_file.source_system,
                landing_file.source_file,
                landing_file.sha256,
                number,
                ingestion_id,
                ingested,
                arrival,
                arrival_date,
                parse_event_ts(fields.get(table.ts_field)),
                text,
                error,
                *(fields.get(name) for name in table.fields),
            )
        )
    return rows


def _ledger_and_bronze(spark: SparkSession, *columns: str) -> DataFrame:
    """``columns`` of the ledger and of every bronze table, one union (duplicates kept)."""
    union = spark.table(LEDGER_TABLE).select(*columns)
    for table in BRONZE_TABLES:
        union = union.union(spark.table(table.name).select(*columns))
    return union


def ingested_hashes(spark: SparkSession) -> set[str]:
    """The content hashes of every file in the ledger or in any bronze table."""
    frame = _ledger_and_bronze(spark, "file_sha256").distinct()
    return {row.file_sha256 for row in frame.collect()}


@dataclass
class _Ingested:
    """What the ledger and bronze hold: each content hash's first file, each file's hashes."""

    by_sha: dict[str, str] = field(default_factory=dict)
    by_path: dict[str, set[str]] = field(default_factory=dict)

    @classmethod
    def read(cls, spark: SparkSession) -> _Ingested:
        frame = _ledger_and_bronze(spark, "file_sha256", "source_file", "arrival_ts")
        known = cls()
        for row in frame.distinct().orderBy("arrival_ts", "source_file").collect():
            known.add(row.file_sha256, row.source_file)
        return known

    def add(self, sha256: str, source_file: str) -> None:
        self.by_sha.setdefault(sha256, source_file)
        self.by_path.setdefault(source_file, set()).add(sha256)


def ingest(
    spark: SparkSession,
    landing: Path,
    paths: Sequence[Path] = (),
    *,
    now: datetime | None = None,
    strict: bool = True,
) -> IngestResult:
    """Append every not-yet-ingested landing file (or just ``paths``) to bronze.

    A file ``describe`` refuses, or whose content changed since it was ingested, is refused
    (listed in ``result.refused`` with its reason) and every other file is ingested as
    usual; then, when any was refused and ``strict``, ``FilesRefused`` is raised (it carries
    the result). A file whose content was already ingested under any name is skipped.
    """
    ensure_tables(spark)
    ingested_at = now or datetime.now(UTC)
    result = IngestResult(ingestion_id=uuid.uuid4().hex)
    known = _Ingested.read(spark)
    todo: list[LandingFile] = []
    for path in discover(landing, paths):
        try:
            candidate = describe(path, landing)
        except FileRefused as refusal:
            _refuse(result, refusal)
            continue
        earlier = known.by_path.get(candidate.source_file, set())
        if earlier and candidate.sha256 not in earlier:
            _refuse(
                result,
                FileRefused(
                    candidate.path,
                    f"changed since it was ingested (sha256 {candidate.sha256[:12]}... now, "
                    f"{', '.join(sorted(s[:12] + '...' for s in earlier))} in bronze); landing "
                    "files are immutable: land the new content under a new name in a new "
                    "arrival folder",
                ),
            )
        elif candidate.sha256 in known.by_sha:
            _skip(result, candidate, known.by_sha[candidate.sha256])
        else:
            known.add(candidate.sha256, candidate.source_file)
            todo.append(candidate)

    for table in BRONZE_TABLES:  # each commit writes one table: its files, then their ledger
        batch: list[LandingFile] = []
        batch_rows = 0
        for landing_file in (f for f in todo if table_of(f.source_system) is table):
            batch.append(landing_file)
            batch_rows += landing_file.path.stat().st_size // 150  # rough line estimate
            if batch_rows >= ROWS_PER_COMMIT:
                _append(spark, table, batch, result, ingested_at)
                batch, batch_rows = [], 0
        if batch:
            _append(spark, table, batch, result, ingested_at)
    if result.refused and strict:
        raise FilesRefused(result)
    return result


def _refuse(result: IngestResult, refusal: FileRefused) -> None:
    if any(r["path"] == refusal.path for r in result.refused):
        return  # refused again by a commit retry
    result.files_refused += 1
    result.refused.append({"path": refusal.path, "reason": refusal.reason})


def _skip(result: IngestResult, landing_file: LandingFile, duplicate_of: str = "") -> None:
    result.files_skipped += 1
    entry = {"source_file": landing_file.source_file, "reason": "content already ingested"}
    if duplicate_of and duplicate_of != landing_file.source_file:
        entry["reason"] = f"content already ingested as {duplicate_of}"
        entry["duplicate_of"] = duplicate_of
    result.skipped.append(entry)


def _append(
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
                _skip(result, landing_file)
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
            read.append((landing_file, _rows(landing_file, result.ingestion_id, ingested_at)))
        except FileRefused as refusal:  # nothing of it is written; the others are
            _refuse(result, refusal)
    if not read:
        return
    rows = [row for _, file_rows in read for row in file_rows]
    schema = spark.table(table.name).schema  # `_rows` yields in the DDL's column order
    frame = pd.DataFrame.from_records(rows, columns=schema.fieldNames())

    if rows:  # else only empty files: their ledger entries, no bronze commit
        spark.conf.set("spark.sql.execution.arrow.pyspark.enabled", "true")
        bronze = spark.createDataFrame(frame, schema=schema)
        # The key index first: a crash before the bronze commit leaves only extra index rows.
        bronze.createOrReplaceTempView(_BATCH_VIEW)
        dates = set(frame["arrival_date"])
        try:
            if table.key_index:
                append_key_index(spark, _BATCH_VIEW)
            # SQL rather than the DeltaTable API: it also runs over Spark Connect, whose
            # server would otherwise need Delta's Connect plugins (docs/cluster.md).
            merged = spark.sql(
                f"MERGE INTO {table.name} AS b USING {_BATCH_VIEW} AS s "
                f"ON {date_list('b.arrival_date', dates)} AND b.file_sha256 = s.file_sha256 "
                "AND b.line_number = s.line_number "
                "WHEN NOT MATCHED THEN INSERT *"
            ).first()
        finally:
            spark.catalog.dropTempView(_BATCH_VIEW)
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
                    _skip(result, landing_file)
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
