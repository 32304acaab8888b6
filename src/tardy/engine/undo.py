"""Undoing a promotion: the state machine's reverse transitions; the caller holds the lock.

- ``rollback``: every table a promotion changed back to its version before it, one tagged
  ``RESTORE`` per table (``promote.rollback``), and the arrival watermark back before the
  restated rows (``promoted`` → ``rolling_back`` → ``rolled_back``);
- ``discard_promoting``: the same restores for a promotion that stopped half-way, then the
  stage dropped (``promoting`` → ``discarding`` → ``discarded``).

Both check every table before the first restore and log their intent before it, so that one
killed half-way is finished by the next command that takes the lock (``tardy.engine.restate``).
"""

from __future__ import annotations

import typing as t

from tardy.engine import delta, log, trail
from tardy.engine import promote as promotion
from tardy.engine.log import Action, LogEntry
from tardy.engine.machine import RestatementError, staged_entry, staged_tables
from tardy.engine.plan import moves_watermark
from tardy.engine.stage import drop_stage
from tardy.engine.watermark import WATERMARK_TABLE
from tardy.engine.watermark import advance as advance_watermark

if t.TYPE_CHECKING:
    from pyspark.sql import SparkSession
    from sqlmesh import Context


def discard_promoting(context: Context, spark: SparkSession, restatement_id: str) -> str:
    """Undo a promotion that stopped half-way, then drop the stage; the caller holds the lock.

    The tables the promotion committed (its tagged commits) are restored to their version
    before it, downstream first, each by one tagged ``RESTORE`` (as a rollback does); every
    one is checked first, and the intent (``discarding``) is logged before the first restore,
    so a discard killed half-way is finished by the next command that takes the lock. The
    arrival watermark goes back if the promotion had advanced it.
    """
    entry, rows = staged_entry(spark, restatement_id)
    status = rows[-1]["status"]
    staged = staged_tables(entry)
    tables = {table.model: table.prod_table for table in staged}
    before = {table.model: table.version_before for table in staged}
    history = delta.History.of(spark, tables.values())
    after = promotion.promoted_versions(history, restatement_id, staged)
    pending = promotion.check_rollback(
        history,
        restatement_id,
        tables,
        after,
        undo=f"Restatement {restatement_id} stays {status}, prod holding its rows in "
        f"{', '.join(after)} only. To make prod whole again, recompute its days from bronze "
        "with the stock restatement: "
        + "; ".join(f"`{command}`" for command in entry["manifest"]["stock_commands"])
        + " (closing such a restatement in the log is not built yet: docs/concurrency.md)",
    )
    common = dict(
        restatement_id=restatement_id,
        reason=entry["reason"],
        intervals=entry["intervals"],
        table_versions_before=after,
    )
    if status == Action.PROMOTING:
        log.append(
            spark,
            LogEntry(
                action=Action.DISCARDING,
                message="restoring the tables its promotion committed: "
                + (", ".join(after) or "none"),
                **common,
            ),
        )
    versions = promotion.rollback(spark, history, restatement_id, tables, before, after, pending)
    trail.record_rollback(spark, restatement_id, "discard of a half-done promotion", log.actor())
    manifest = entry["manifest"]
    if _advanced_by(spark, restatement_id):
        since = manifest["since_bronze_version"]
        advance_watermark(
            spark,
            -1 if since is None else since,
            manifest["previous_watermark"],
            f"discard of restatement {restatement_id}",
            manifest["since_source_versions"],
        )
    drop_stage(context, spark)
    restored = ", ".join(f"{model} to version {before[model]}" for model in after)
    log.append(
        spark,
        LogEntry(
            action=Action.DISCARDED,
            table_versions_after=versions,
            message=f"discarded by request after a partial promotion; restored "
            f"{restored or 'nothing (no table was committed)'}",
            **common,
        ),
    )
    return (
        f"discarded restatement {restatement_id}, whose promotion had stopped half-way: "
        f"restored {restored or 'nothing (no table was committed)'}; the stage is dropped"
    )


def _advanced_by(spark: SparkSession, restatement_id: str) -> bool:
    """Whether the latest arrival watermark was recorded by ``restatement_id``'s promotion."""
    row = spark.sql(
        f"SELECT reason FROM {WATERMARK_TABLE} "
        "ORDER BY advanced_at DESC, bronze_version DESC LIMIT 1"
    ).first()
    return row is not None and row.reason.startswith(f"restatement {restatement_id}:")


def rollback(spark: SparkSession, restatement_id: str, reason: str) -> dict[str, int]:
    """Roll back a promoted restatement; the caller holds the lock.

    Checks every table first (a table that changed after the promotion refuses the whole
    rollback: the log stays ``promoted``), then writes the intent (``rolling_back``) before
    the first ``RESTORE``: a rollback killed between two tables is finished by the next
    command that takes the lock (each table's restore is tagged, so a restored table is not
    restored twice).
    """
    rows = log.entries(spark, restatement_id)
    promoted = [row for row in rows if row["action"] == Action.PROMOTED]
    if not promoted:
        raise RestatementError(f"restatement {restatement_id} was never promoted")
    status = rows[-1]["status"]
    if status == Action.ROLLED_BACK:
        done: dict[str, int] = rows[-1]["table_versions_after"]
        return done
    if status not in (Action.PROMOTED, Action.ROLLING_BACK):
        raise RestatementError(f"restatement {restatement_id} is {status}: nothing to roll back")
    entry, _ = staged_entry(spark, restatement_id)
    tables = {table.model: table.prod_table for table in staged_tables(entry)}
    before = promoted[-1]["table_versions_before"]
    after = promoted[-1]["table_versions_after"]
    history = delta.History.of(spark, tables.values())
    pending = promotion.check_rollback(
        history,
        restatement_id,
        tables,
        after,
        undo="To undo the restatement now, undo its cause: land records that void or "
        "correct the late rows it read, then run `tardy ingest` and `tardy restate --reason "
        f'"undo {restatement_id}"` (prod follows bronze again); a rollback is possible only '
        "until the next write to a restated table",
    )
    if status == Action.ROLLING_BACK:  # resuming: keep the reason the rollback was given
        reason = rows[-1]["message"] or reason
    common = dict(
        restatement_id=restatement_id,
        reason=entry["reason"],
        intervals=promoted[-1]["intervals"],
        table_versions_before=after,
        message=reason,
    )
    if status == Action.PROMOTED:
        log.append(spark, LogEntry(action=Action.ROLLING_BACK, **common))
    versions = promotion.rollback(spark, history, restatement_id, tables, before, after, pending)
    trail.record_rollback(spark, restatement_id, f"rollback: {reason}", log.actor())
    # Prod no longer reflects the restated rows: put the watermark back before them (a named
    # restatement never moved it).
    since = entry["manifest"]["since_bronze_version"]
    if moves_watermark(entry["manifest"]):
        advance_watermark(
            spark,
            -1 if since is None else since,
            entry["manifest"]["previous_watermark"],
            f"rollback of restatement {restatement_id}: {reason}",
            entry["manifest"]["since_source_versions"],
        )
    log.append(
        spark,
        LogEntry(action=Action.ROLLED_BACK, table_versions_after=versions, **common),
    )
    return versions
