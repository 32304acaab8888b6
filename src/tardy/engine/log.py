"""The restatement log: one Delta row per restatement and per action, never updated.

``tardy.restatement_log`` is append-only (``delta.appendOnly``). Each action of a restatement
(staged, audit_failed, breaker_tripped, promoting, promoted, rolling_back, rolled_back,
discarding, discarded, ...) appends a row carrying everything known at that point: reason,
actor, intervals per model, rows and sums before/after, input bronze version and arrival
watermark, code version, SQLMesh snapshot versions, table Delta versions before/after, every
audit's result, and for ``staged`` the staged tables, the manifest and whether a large change
was accepted. Each is a typed column (schema and migration: ``tardy.engine.log_schema``);
``message`` is human text.

``entries`` reads rows back as dicts under the keys ``tardy log --json`` has always printed
(``intervals``, ``rows_before``, ..., ``audit_results``), whichever schema wrote them: rows
logged before the typed columns existed are read from their JSON text.

``tardy.restated_periods`` (a view) explodes the promoted intervals into one row per model and
day with the restatement that last changed it, so a gold period shows when and why it was last
restated; rolled-back restatements drop out of it.
"""

from __future__ import annotations

import getpass
import json
import os
import socket
import subprocess
import typing as t
from dataclasses import dataclass, field
from datetime import UTC, date, datetime
from enum import StrEnum

from tardy.engine.log_schema import JSON_COLUMNS, current_schema, readable_log
from tardy.engine.log_schema import LOG_TABLE as LOG_TABLE  # re-exported
from tardy.engine.log_schema import PERIODS_VIEW as PERIODS_VIEW  # re-exported
from tardy.engine.log_schema import ensure_log as ensure_log  # re-exported
from tardy.project.home import project_root

if t.TYPE_CHECKING:
    from pyspark.sql import SparkSession

    from tardy.engine.audit import AuditResult
    from tardy.engine.results import Manifest
    from tardy.engine.stage import StagedTable


class Action(StrEnum):
    """What a log row records; a restatement's status is its latest action."""

    STAGING = "staging"
    STAGED = "staged"
    AUDIT_FAILED = "audit_failed"
    BREAKER_TRIPPED = "breaker_tripped"
    PROMOTING = "promoting"
    PROMOTED = "promoted"
    DISCARDING = "discarding"  # undoing a promotion that stopped half-way, then the stage
    DISCARDED = "discarded"
    ROLLING_BACK = "rolling_back"
    ROLLED_BACK = "rolled_back"


# Intents: written before a change to several tables (or the stage). A restatement whose
# latest action is one of them was interrupted; whoever takes the lock next finishes it.
INTERRUPTED = (Action.STAGING, Action.PROMOTING, Action.ROLLING_BACK, Action.DISCARDING)


Spans = list[list[str]]  # closed [first, last] day ranges, ISO dates


@dataclass
class LogEntry:
    """One row to append; structured values in the shapes the engine works with (they are
    typed into the log's columns by ``_columns``)."""

    restatement_id: str
    action: Action
    reason: str
    status: str = ""
    actor: str = field(default_factory=lambda: actor())
    logged_at: datetime = field(default_factory=lambda: datetime.now(UTC))
    intervals: dict[str, Spans] | None = None
    rows_before: dict[str, dict[str, t.Any]] | None = None  # model -> {"rows", "sums"}
    rows_after: dict[str, dict[str, t.Any]] | None = None
    bronze_version: int | None = None
    arrival_watermark: datetime | None = None
    code_version: str | None = field(default_factory=lambda: code_version())
    snapshot_versions: dict[str, str] | None = None
    table_versions_before: dict[str, int] | None = None
    table_versions_after: dict[str, int] | None = None
    audits: list[AuditResult] | None = None  # every audit, model and interval run
    staged_tables: list[StagedTable] | None = None
    manifest: Manifest | None = None
    accepted_large_change: bool | None = None
    message: str | None = None

    def columns(self) -> dict[str, object]:
        """The row, by column name, in the log's types; schema-1 JSON columns are NULL."""
        return {
            "restatement_id": self.restatement_id,
            "action": str(self.action),
            "status": self.status or str(self.action),
            "logged_at": self.logged_at,
            "reason": self.reason,
            "actor": self.actor,
            "bronze_version": self.bronze_version,
            "arrival_watermark": self.arrival_watermark,
            "code_version": self.code_version,
            "message": self.message,
            "model_intervals": _by_model(self.intervals, _spans),
            "model_rows_before": _by_model(self.rows_before, _totals),
            "model_rows_after": _by_model(self.rows_after, _totals),
            "model_snapshot_versions": self.snapshot_versions,
            "model_versions_before": self.table_versions_before,
            "model_versions_after": self.table_versions_after,
            "audits": None if self.audits is None else [_audit(a) for a in self.audits],
            "staged_tables": None
            if self.staged_tables is None
            else [_staged_table(table.as_dict()) for table in self.staged_tables],
            "manifest": None if self.manifest is None else _manifest(self.manifest.as_dict()),
            "accepted_large_change": self.accepted_large_change,
        }


@dataclass(frozen=True)
class Record:
    """A logged row as the lifecycle reads it back (``records``): its action and status typed,
    the staged tables as ``StagedTable``; ``row`` is the whole row as ``entries`` reads it."""

    restatement_id: str
    action: Action
    status: Action
    reason: str
    message: str | None
    intervals: dict[str, Spans] | None
    table_versions_before: dict[str, int] | None
    table_versions_after: dict[str, int] | None
    staged_tables: list[StagedTable] | None
    manifest: dict[str, t.Any] | None
    row: dict[str, t.Any]

    @classmethod
    def of(cls, row: dict[str, t.Any]) -> Record:
        from tardy.engine.stage import StagedTable

        tables = row.get("staged_tables")
        return cls(
            restatement_id=row["restatement_id"],
            action=Action(row["action"]),
            status=Action(row["status"]),
            reason=row["reason"],
            message=row["message"],
            intervals=row["intervals"],
            table_versions_before=row["table_versions_before"],
            table_versions_after=row["table_versions_after"],
            staged_tables=None if tables is None else [StagedTable(**table) for table in tables],
            manifest=row.get("manifest"),
            row=row,
        )


# -- writing: engine shapes -> typed columns ---------------------------------------------------


def _by_model(
    value: dict[str, t.Any] | None, convert: t.Callable[[t.Any], t.Any]
) -> dict[str, t.Any] | None:
    return None if value is None else {model: convert(item) for model, item in value.items()}


def _spans(spans: Spans) -> list[dict[str, date]]:
    return [{"start": date.fromisoformat(a), "end": date.fromisoformat(b)} for a, b in spans]


def _totals(total: dict[str, t.Any]) -> dict[str, object]:
    return {"rows": int(total["rows"]), "sums": {k: str(v) for k, v in total["sums"].items()}}


def _audit(result: AuditResult) -> dict[str, object]:
    first, last = result.interval
    return {
        "model": result.model,
        "audit": result.audit,
        "interval_start": date.fromisoformat(first),
        "interval_end": date.fromisoformat(last),
        "blocking": result.blocking,
        "failing_rows": result.rows,
    }


def _staged_table(table: dict[str, t.Any]) -> dict[str, object]:
    return {**table, "intervals": _spans(table["intervals"]), "changed": _spans(table["changed"])}


def _manifest(manifest: dict[str, t.Any]) -> dict[str, object]:
    def stamp(value: str | None) -> datetime | None:
        return datetime.fromisoformat(value) if value else None

    # ``named`` and ``altered`` are in ``reasons`` instead
    manifest = {k: v for k, v in manifest.items() if k not in ("named", "altered")}
    return {
        **manifest,
        "arrival_watermark": stamp(manifest["arrival_watermark"]),
        "previous_watermark": stamp(manifest["previous_watermark"]),
        **{
            key: _by_model(manifest[key], _spans)
            for key in ("impacted", "absorbed_by_next_run", "roots")
        },
    }


# -- reading: either schema -> the engine shapes (``tardy log --json``'s keys) -----------------


def _read(row: dict[str, t.Any]) -> dict[str, t.Any]:
    """A log row as ``entries`` returns it: typed columns for rows written since schema 2,
    the JSON text columns for older ones (for which the staged detail is the JSON in
    ``message``)."""
    legacy = {
        column: None if row.get(column) is None else json.loads(row[column])
        for column in JSON_COLUMNS
    }
    typed = {
        "intervals": _by_model(row["model_intervals"], _iso_spans),
        "rows_before": row["model_rows_before"],
        "rows_after": row["model_rows_after"],
        "snapshot_versions": row["model_snapshot_versions"],
        "table_versions_before": row["model_versions_before"],
        "table_versions_after": row["model_versions_after"],
        "audit_results": None if row["audits"] is None else _audit_results(row["audits"]),
    }
    out: dict[str, t.Any] = {
        "restatement_id": row["restatement_id"],
        "action": row["action"],
        "status": row["status"],
        "logged_at": row["logged_at"],
        "reason": row["reason"],
        "actor": row["actor"],
        "bronze_version": row["bronze_version"],
        "arrival_watermark": row["arrival_watermark"],
        "code_version": row["code_version"],
        "message": row["message"],
    }
    for key in JSON_COLUMNS:
        out[key] = typed[key] if typed[key] is not None else legacy[key]
    staged: dict[str, t.Any] = {
        "staged_tables": None
        if row["staged_tables"] is None
        else [_read_staged_table(table) for table in row["staged_tables"]],
        "manifest": None if row["manifest"] is None else _read_manifest(row["manifest"]),
        "accepted_large_change": row["accepted_large_change"],
    }
    if staged["staged_tables"] is None and row["action"] == Action.STAGED and row["message"]:
        staged = {**staged, **json.loads(row["message"])}  # schema 1: the detail was JSON
    return {**out, **staged}


def _iso_spans(spans: list[dict[str, date]]) -> Spans:
    return [[span["start"].isoformat(), span["end"].isoformat()] for span in spans]


def _audit_results(audits: list[dict[str, t.Any]]) -> list[dict[str, object]]:
    """The audits as ``tardy log --json`` has shown them: how many ran, how many blocking
    ones failed, and each that returned rows."""
    failed = [
        {
            "audit": a["audit"],
            "model": a["model"],
            "interval": [a["interval_start"].isoformat(), a["interval_end"].isoformat()],
            "rows": a["failing_rows"],
            "blocking": a["blocking"],
        }
        for a in audits
        if a["failing_rows"] > 0
    ]
    return [
        {
            "audits_run": len(audits),
            "blocking_failures": sum(1 for a in failed if a["blocking"]),
            "failed": failed,
        }
    ]


def _read_staged_table(table: dict[str, t.Any]) -> dict[str, t.Any]:
    return {
        **table,
        "intervals": _iso_spans(table["intervals"]),
        "changed": _iso_spans(table["changed"]),
    }


def _read_manifest(manifest: dict[str, t.Any]) -> dict[str, t.Any]:
    def stamp(value: datetime | None) -> str | None:
        return value.isoformat() if value else None

    manifest = {k: v for k, v in manifest.items() if k != "named"}  # in ``reasons`` instead
    return {
        **manifest,
        "arrival_watermark": stamp(manifest["arrival_watermark"]),
        "previous_watermark": stamp(manifest["previous_watermark"]),
        # Rows logged before the dimensions' versions were: none recorded.
        "source_versions": dict(manifest.get("source_versions") or {}),
        "since_source_versions": dict(manifest.get("since_source_versions") or {}),
        **{
            key: _by_model(manifest[key], _iso_spans) or {}
            for key in ("impacted", "absorbed_by_next_run", "roots")
        },
    }


def actor() -> str:
    """Who ran the command: $TARDY_ACTOR (e.g. a CI job), else user@host."""
    return os.environ.get("TARDY_ACTOR") or f"{getpass.getuser()}@{socket.gethostname()}"


def code_version() -> str | None:
    """The project's git commit, with ``-dirty`` when the work tree has changes."""
    try:
        commit = subprocess.run(
            ["git", "rev-parse", "HEAD"],
            cwd=project_root(),
            capture_output=True,
            text=True,
            check=True,
        ).stdout.strip()
        dirty = subprocess.run(
            ["git", "status", "--porcelain", "--untracked-files=no"],
            cwd=project_root(),
            capture_output=True,
            text=True,
            check=True,
        ).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return None
    return f"{commit}-dirty" if dirty else commit


def append(spark: SparkSession, *entries: LogEntry) -> None:
    """Append ``entries`` in one Delta commit: a kill leaves all of them or none."""
    schema = current_schema(spark)
    rows = []
    for entry in entries:
        columns = entry.columns()
        rows.append(tuple(columns.get(name) for name in schema.fieldNames()))
    spark.createDataFrame(rows, schema=schema).write.format("delta").mode("append").saveAsTable(
        LOG_TABLE
    )


def as_read(entry: LogEntry) -> dict[str, t.Any]:
    """``entry`` in the shape ``entries`` reads it back in, without a round trip."""
    return _read(entry.columns())


def entries(spark: SparkSession, restatement_id: str | None = None) -> list[dict[str, t.Any]]:
    """Log rows (oldest first) as dicts: the columns of ``tardy log --json`` (structured
    values in the engine's shapes, ``_read``) and the staged detail."""
    frame = readable_log(spark)
    if restatement_id is not None:
        frame = frame.where(frame.restatement_id == restatement_id)
    return [_read(row.asDict(recursive=True)) for row in frame.orderBy("logged_at").collect()]


def records(spark: SparkSession, restatement_id: str | None = None) -> list[Record]:
    """``entries`` typed for the lifecycle (``Record``), oldest first."""
    return [Record.of(row) for row in entries(spark, restatement_id)]


def latest(spark: SparkSession) -> dict[str, Record]:
    """The latest entry of every restatement, by id."""
    return {row.restatement_id: row for row in records(spark)}


def summary(spark: SparkSession) -> list[dict[str, t.Any]]:
    """One line per restatement: its times per action, latest status, intervals and reason."""
    by_id: dict[str, dict[str, t.Any]] = {}
    for row in entries(spark):
        item = by_id.setdefault(
            row["restatement_id"],
            {
                "restatement_id": row["restatement_id"],
                "reason": row["reason"],
                "actor": row["actor"],
                "created_at": row["logged_at"],
                "actions": [],
            },
        )
        item["status"] = row["status"]
        item[f"{row['action']}_at"] = row["logged_at"]
        item["actions"].append({"action": row["action"], "at": row["logged_at"]})
        if row["intervals"] is not None:
            item["intervals"] = row["intervals"]
        if row["message"]:
            item["message"] = row["message"]
    return list(by_id.values())
