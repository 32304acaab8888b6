"""Bronze ingestion: landing JSON-lines files -> the append-only Delta tables of bronze.

The landing contract: ``<landing>/<source_system>/arrival_ts=<YYYYMMDDTHHMMSSZ>/<name>.jsonl``.
The source system (the first folder under the landing root) picks the bronze table
(``table_of``) from the declared sources (``sources.yaml``, ``tardy.project.sources``); a file of a
folder no source declares is refused, left untouched. Each table is described by one
``BronzeTable`` (name, record fields, the one field also parsed as a timestamp) built from
its sources' declaration; all share everything below.

Each line becomes one bronze row, whatever it holds: a line that is not a JSON object is kept
with ``parse_error`` set (silver quarantines it), never dropped. Record fields are kept as
their JSON text, so ingestion never has to judge a value; only the declared ``event_time``
field is also parsed, its text kept in ``<field>_raw``.

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

Each commit to the bronze table a source declares ``key_index: true`` for is preceded by the
commit of its rows' entries in the key index (``tardy.key_index``), which lets silver read
only the bronze partitions that hold a key's records; a data home whose bronze predates the
index gets it built from bronze by the first ``tardy ingest`` (``KeyIndex.ensure``,
idempotent).

Hostile input (``docs/hostile-input.md``): a line is the bytes up to ``\\n`` (a ``\\r``
before it and a UTF-8 BOM opening the file are dropped); a line that is not UTF-8, not
RFC 8259 JSON (``NaN``, duplicate keys, unpaired surrogates, nesting too deep) or not an
object is kept with ``parse_error``. A landing file must be a regular file inside the
landing root: symbolic links, paths resolving outside the root, FIFOs and the like, files
whose content changed since they were ingested, and files with a line over
``MAX_LINE_BYTES`` are **refused**, each named with its reason; every other file is still
ingested, and ``ingest`` then raises ``FilesRefused`` (carrying the result) unless called
with ``strict=False``.

The modules: ``tables`` (bronze tables, ledger), ``discovery`` (landing files found and
checked), ``parsing`` (lines to bronze rows), ``commit`` (the bronze commit and the ledger),
``errors``, ``result`` (``IngestResult``); here ``ingest``, which runs them.
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from datetime import UTC, datetime
from pathlib import Path

from pyspark.sql import SparkSession

from tardy.ingest.commit import Ingested, append_batch
from tardy.ingest.discovery import LandingFile, describe, discover
from tardy.ingest.errors import FileRefused
from tardy.ingest.result import FilesRefused, IngestResult, refuse, skip
from tardy.ingest.tables import bronze_tables, ensure_tables, table_of, undeclared

__all__ = ["ingest"]

# A commit's rows travel as one local relation, held whole by the driver while it is indexed
# and merged: over Spark Connect (the warm engine, 4 GiB) a year's backlog committed ~850,000
# rows at a time ran its server out of heap (docs/concurrency.md); 200,000 stays well inside.
ROWS_PER_COMMIT = 200_000
BYTES_PER_ROW = 150  # a landing line's size, at least (a sale ~175 bytes): rows estimated


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
    known = Ingested.read(spark)
    todo: list[LandingFile] = []
    for path in discover(landing, paths):
        try:
            candidate = describe(path, landing)
        except FileRefused as refusal:
            refuse(result, refusal)
            continue
        if table_of(candidate.source_system) is None:
            refuse(result, FileRefused(candidate.path, undeclared(candidate.source_system)))
            continue
        earlier = known.by_path.get(candidate.source_file, set())
        if earlier and candidate.sha256 not in earlier:
            refuse(
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
            skip(result, candidate, known.by_sha[candidate.sha256])
        else:
            known.add(candidate.sha256, candidate.source_file)
            todo.append(candidate)

    for table in bronze_tables():  # each commit writes one table: its files, then their ledger
        batch: list[LandingFile] = []
        batch_rows = 0
        mine = [f for f in todo if getattr(table_of(f.source_system), "name", None) == table.name]
        for landing_file in mine:
            batch.append(landing_file)
            batch_rows += landing_file.path.stat().st_size // BYTES_PER_ROW
            if batch_rows >= ROWS_PER_COMMIT:
                append_batch(spark, table, batch, result, ingested_at)
                batch, batch_rows = [], 0
        if batch:
            append_batch(spark, table, batch, result, ingested_at)
    if result.refused and strict:
        raise FilesRefused(result)
    return result
