"""The restatement log: one Delta row per restatement and per action, never updated.

``tardy.restatement_log`` is append-only (``delta.appendOnly``). Each action of a restatement
(staged, audit_failed, breaker_tripped, promoting, promoted, rolling_back, rolled_back,
discarding, discarded, ...)
appends a row carrying everything known at that point: reason, actor, intervals per model,
rows and sums before/after, input bronze version and arrival watermark, code version, SQLMesh
snapshot versions, table Delta versions before/after and audit results. Structured values are
JSON text, so the schema never has to change when a detail is added.

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
from datetime import UTC, datetime
from enum import StrEnum

from tardy.home import project_root

if t.TYPE_CHECKING:
    from pyspark.sql import SparkSession


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


LOG_TABLE = "tardy.restatement_log"
PERIODS_VIEW = "tardy.restated_periods"
LOG_DDL = f"""
CREATE TABLE IF NOT EXISTS {LOG_TABLE} (
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
  message STRING
) USING delta
TBLPROPERTIES ('delta.appendOnly' = 'true')
"""
# One row per model and day of every promoted restatement that was not rolled back; the latest
# promotion of a day wins.
PERIODS_VIEW_SQL = f"""
CREATE OR REPLACE VIEW {PERIODS_VIEW} AS
WITH promoted AS (
  SELECT restatement_id, reason, actor, logged_at AS promoted_at,
         from_json(intervals, 'map<string, array<array<string>>>') AS intervals
  FROM {LOG_TABLE}
  WHERE action = 'promoted'
    AND restatement_id NOT IN (
      SELECT restatement_id FROM {LOG_TABLE} WHERE action = 'rolled_back'
    )
), days AS (
  SELECT restatement_id, reason, actor, promoted_at, model,
         explode(sequence(to_date(span[0]), to_date(span[1]))) AS period
  FROM promoted
  LATERAL VIEW explode(intervals) AS model, spans
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


@dataclass
class LogEntry:
    restatement_id: str
    action: Action
    reason: str
    status: str = ""
    actor: str = field(default_factory=lambda: actor())
    logged_at: datetime = field(default_factory=lambda: datetime.now(UTC))
    intervals: dict[str, list[list[str]]] | None = None
    rows_before: dict[str, object] | None = None
    rows_after: dict[str, object] | None = None
    bronze_version: int | None = None
    arrival_watermark: datetime | None = None
    code_version: str | None = field(default_factory=lambda: code_version())
    snapshot_versions: dict[str, str] | None = None
    table_versions_before: dict[str, int] | None = None
    table_versions_after: dict[str, int] | None = None
    audit_results: list[dict[str, object]] | None = None
    message: str | None = None

    def row(self) -> tuple[object, ...]:
        def js(value: object) -> str | None:
            return None if value is None else json.dumps(value, sort_keys=True, default=str)

        return (
            self.restatement_id,
            str(self.action),
            self.status or str(self.action),
            self.logged_at,
            self.reason,
            self.actor,
            js(self.intervals),
            js(self.rows_before),
            js(self.rows_after),
            self.bronze_version,
            self.arrival_watermark,
            self.code_version,
            js(self.snapshot_versions),
            js(self.table_versions_before),
            js(self.table_versions_after),
            js(self.audit_results),
            self.message,
        )


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


def ensure_log(spark: SparkSession) -> None:
    """Create the log table and its view where they are missing (two catalog lookups when
    both exist: every append calls this)."""
    if spark.catalog.tableExists(LOG_TABLE) and spark.catalog.tableExists(PERIODS_VIEW):
        return
    spark.sql("CREATE SCHEMA IF NOT EXISTS tardy")
    spark.sql(LOG_DDL)
    spark.sql(PERIODS_VIEW_SQL)


def append(spark: SparkSession, entry: LogEntry) -> None:
    ensure_log(spark)
    schema = spark.table(LOG_TABLE).schema
    spark.createDataFrame([entry.row()], schema=schema).write.format("delta").mode(
        "append"
    ).saveAsTable(LOG_TABLE)


def entries(spark: SparkSession, restatement_id: str | None = None) -> list[dict[str, t.Any]]:
    """Log rows (oldest first), JSON columns decoded."""
    ensure_log(spark)
    frame = spark.table(LOG_TABLE)
    if restatement_id is not None:
        frame = frame.where(frame.restatement_id == restatement_id)
    rows = [row.asDict() for row in frame.orderBy("logged_at").collect()]
    json_columns = (
        "intervals",
        "rows_before",
        "rows_after",
        "snapshot_versions",
        "table_versions_before",
        "table_versions_after",
        "audit_results",
    )
    for row in rows:
        for column in json_columns:
            if row[column] is not None:
                row[column] = json.loads(row[column])
    return rows


def latest(spark: SparkSession) -> dict[str, dict[str, t.Any]]:
    """The latest entry of every restatement, by id."""
    out: dict[str, dict[str, t.Any]] = {}
    for row in entries(spark):
        out[row["restatement_id"]] = row
    return out


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
