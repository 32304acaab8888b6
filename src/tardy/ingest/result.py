"""What one ingest did (``IngestResult``: files ingested, skipped and refused, rows per table;
``refuse`` and ``skip`` record a file), and ``FilesRefused``, raised with it when files were
refused.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field

from tardy.ingest.discovery import LandingFile
from tardy.ingest.errors import FileRefused, IngestError
from tardy.ingest.tables import bronze_tables


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
        default_factory=lambda: {table.name: 0 for table in bronze_tables()}
    )

    def as_dict(self) -> dict[str, object]:
        return asdict(self)


def refuse(result: IngestResult, refusal: FileRefused) -> None:
    if any(r["path"] == refusal.path for r in result.refused):
        return  # refused again by a commit retry
    result.files_refused += 1
    result.refused.append({"path": refusal.path, "reason": refusal.reason})


def skip(result: IngestResult, landing_file: LandingFile, duplicate_of: str = "") -> None:
    result.files_skipped += 1
    entry = {"source_file": landing_file.source_file, "reason": "content already ingested"}
    if duplicate_of and duplicate_of != landing_file.source_file:
        entry["reason"] = f"content already ingested as {duplicate_of}"
        entry["duplicate_of"] = duplicate_of
    result.skipped.append(entry)
