"""A staged restatement's lifecycle: every transition after staging, as one table over the
log's actions; the caller holds the restatement lock.

A restatement's status is its latest logged action (``tardy.engine.log``). ``TRANSITIONS``
says, for each command (``Verb``) and status, the intent logged before the first change (so
that a kill leaves a status the next command finishes) and the step that runs; a status the
table does not name refuses the command. ``RECOVERY`` says which command finishes each
interrupted intent (``log.INTERRUPTED``), for whoever takes the lock next.

=========  ==============  ============  ============  =====================================
command    from            intent        to            step
=========  ==============  ============  ============  =====================================
promote    staged          promoting     promoted      the changed days, one commit a table;
                                                       the change trail; the watermark
promote    promoting       –             promoted      resumed: committed tables skipped
promote    promoted        –             –             already promoted
discard    staging/staged  –             discarded     the stage dropped, prod never touched
discard    promoting       discarding    discarded     its commits restored, the stage dropped
discard    discarding      –             discarded     resumed: restored tables skipped
rollback   promoted        rolling_back  rolled_back   every changed table restored
rollback   rolling_back    –             rolled_back   resumed: restored tables skipped
rollback   rolled_back     –             –             the versions restored before
=========  ==============  ============  ============  =====================================

Staging (``staging`` → ``staged``, ``audit_failed``, ``breaker_tripped``) is
``tardy.engine.machine``'s, which hands a restatement promoted at once to ``promote``. A
completed promotion returns what it committed in its ``Outcome``; the command's caller
publishes it (``outcome.Publish``) under the same lock: the engine never imports
``tardy.consumers.versions``.
"""

from __future__ import annotations

import typing as t
from dataclasses import dataclass, field
from enum import StrEnum

from tardy.engine import delta, log, sqlmesh_api, trail
from tardy.engine import promote as promotion
from tardy.engine.log import Action, LogEntry, Record
from tardy.engine.outcome import Outcome, Publish, RestatementError, Status
from tardy.engine.plan import moves_watermark, report_dir, watermark_target
from tardy.engine.results import Change
from tardy.engine.stage import StagedTable, drop_stage
from tardy.engine.watermark import WATERMARK_TABLE
from tardy.engine.watermark import advance as advance_watermark

if t.TYPE_CHECKING:
    from pyspark.sql import SparkSession
    from sqlmesh import Context


class Verb(StrEnum):
    """A command that moves a staged restatement on."""

    PROMOTE = "promote"
    DISCARD = "discard"
    ROLLBACK = "rollback"


@dataclass
class Request:
    """What a step works from: the restatement's log (oldest first) and the command's input."""

    context: Context
    spark: SparkSession
    restatement_id: str
    rows: list[Record]
    intent: Action | None = None  # the table's intent for this status, logged by the step
    reason: str = ""  # a rollback's
    why: str = "discarded by request"  # a discard's log message
    # A restatement this process has just staged and not yet logged (``tardy restate``): its
    # ``staged`` entry is appended in the promotion intent's commit, so a kill leaves it
    # either staging (the next command discards the stage) or promoting (the next command
    # finishes it), never staged with nobody to promote it.
    staging: LogEntry | None = None
    changes: dict[str, list[Change]] = field(default_factory=dict)  # ``Staging.changes``


@dataclass
class Done:
    """What a transition did: its message, and a promotion's outcome or the versions a
    rollback or discard restored."""

    message: str
    outcome: Outcome | None = None
    versions: dict[str, int] = field(default_factory=dict)


@dataclass(frozen=True)
class Step:
    intent: Action | None
    run: t.Callable[[Request], Done]


def staged_entry(rows: list[Record], restatement_id: str) -> Record:
    """The latest ``staged`` entry of a restatement's log."""
    if not rows:
        raise RestatementError(f"no restatement {restatement_id} in {log.LOG_TABLE}")
    staged = [row for row in rows if row.action == Action.STAGED]
    if not staged:
        raise RestatementError(f"restatement {restatement_id} was never staged ({rows[-1].status})")
    return staged[-1]


def _tables(entry: Record) -> list[StagedTable]:
    return list(entry.staged_tables or [])


# -- promote ----------------------------------------------------------------------------------


def _promote(req: Request) -> Done:
    spark, restatement_id = req.spark, req.restatement_id
    fresh = req.staging is not None  # staged by this process, promoted at once: no environment
    if req.staging is not None:
        entry = Record.of(log.as_read(req.staging))
    else:
        entry = staged_entry(req.rows, restatement_id)
    staged = _tables(entry)
    prod = [s for s in sqlmesh_api.prod_snapshots(req.context).values() if s.is_model]
    current = {s.model.name: s.version for s in prod}
    recorded = entry.row["snapshot_versions"]
    changed = sorted(m for m, v in recorded.items() if current.get(m) != v)
    if changed:
        raise promotion.ProdChangedError(
            f"prod's model versions changed since staging ({', '.join(changed)}): discard "
            f"restatement {restatement_id} and restate again"
        )
    base = {
        key: entry.row[key]
        for key in (
            "restatement_id",
            "reason",
            "intervals",
            "bronze_version",
            "arrival_watermark",
            "snapshot_versions",
            "table_versions_before",
            "rows_before",
            "rows_after",
        )
    }
    # The log's restated periods are the days promotion commits, not every evaluated one.
    base["intervals"] = {table.model: table.changed for table in staged if table.changed}
    # Every table is checked before the intent: a refusal (prod changed since staging) leaves
    # the restatement staged and prod untouched, to be discarded and restated.
    history = delta.History.of(spark, [table.prod_table for table in staged if table.changed])
    checked = promotion.check(history, restatement_id, staged)
    promotion.failpoint("intent", 0)
    if req.intent is not None:  # no trail row of it can exist before its intent
        unlogged = [req.staging] if req.staging else []
        log.append(spark, *unlogged, LogEntry(action=req.intent, **base))
        req.staging = None
    # The change trail before the first commit: prod's version before is still current then
    # (a cached snapshot; time travel to it after the commit costs ~1 s a table).
    trail.record_promotion(
        spark,
        restatement_id,
        entry.reason,
        log.actor(),
        staged,
        {s.model.name: sqlmesh_api.grain(s) for s in prod},
        req.changes,
        first=req.intent is not None,
    )
    promotion.failpoint("trail", 1)
    versions, committed = promotion.promote(spark, history, restatement_id, staged, checked)
    manifest = entry.manifest or {}
    target = watermark_target(req.context, manifest)
    if target is not None:
        advance_watermark(
            spark,
            target.version,
            target.stamp,
            f"restatement {restatement_id}: {entry.reason}",
            target.sources,
            target.pending,
        )
    log.append(
        spark,
        LogEntry(
            action=Action.PROMOTED,
            table_versions_after=versions,
            message=f"committed {', '.join(committed) or 'nothing new'} in this call; "
            f"{len(versions)} of {len(staged)} staged tables had changed days",
            **base,
        ),
    )
    drop_stage(req.context, spark, environments=not fresh)
    outcome = Outcome(
        restatement_id,
        Status.PROMOTED,
        evaluated={table.model: table.intervals for table in staged},
        promoted={table.model: table.changed for table in staged if table.changed},
        report_dir=str(report_dir(restatement_id)),
        advanced_watermark=target is not None,
        table_versions=versions,
        versions_before={table.model: table.version_before for table in staged},
        producer=(entry.reason, log.actor()),
    )
    return Done(f"promoted restatement {restatement_id}", outcome=outcome)


def _already_promoted(req: Request) -> Done:
    outcome = Outcome(
        req.restatement_id,
        Status.ALREADY_PROMOTED,
        report_dir=str(report_dir(req.restatement_id)),
    )
    return Done(f"restatement {req.restatement_id} is promoted already", outcome=outcome)


# -- discard ----------------------------------------------------------------------------------


def discard_stage(
    context: Context, spark: SparkSession, restatement_id: str, reason: str, why: str
) -> None:
    """Drop the stage and log the discard (prod was never touched)."""
    drop_stage(context, spark)
    log.append(
        spark,
        LogEntry(
            restatement_id=restatement_id, action=Action.DISCARDED, reason=reason, message=why
        ),
    )


def _discard_stage(req: Request) -> Done:
    discard_stage(req.context, req.spark, req.restatement_id, req.rows[-1].reason, req.why)
    return Done(f"discarded restatement {req.restatement_id}; prod was never touched")


def _restore_promoting(req: Request) -> Done:
    """Undo a promotion that stopped half-way, then drop the stage.

    The tables the promotion committed (its tagged commits) are restored to their version
    before it, downstream first, each by one tagged ``RESTORE`` (as a rollback does); every
    one is checked first, and the intent (``discarding``) is logged before the first restore,
    so a discard killed half-way is finished by the next command that takes the lock. The
    arrival watermark goes back if the promotion had advanced it.
    """
    spark, restatement_id = req.spark, req.restatement_id
    entry = staged_entry(req.rows, restatement_id)
    status = req.rows[-1].status
    staged = _tables(entry)
    tables = {table.model: table.prod_table for table in staged}
    before = {table.model: table.version_before for table in staged}
    history = delta.History.of(spark, tables.values())
    after = promotion.promoted_versions(history, restatement_id, staged)
    manifest = entry.manifest or {}
    pending = promotion.check_rollback(
        history,
        restatement_id,
        tables,
        after,
        undo=f"Restatement {restatement_id} stays {status}, prod holding its rows in "
        f"{', '.join(after)} only. To make prod whole again, recompute its days from bronze "
        "with the stock restatement: "
        + "; ".join(f"`{command}`" for command in manifest["stock_commands"])
        + " (closing such a restatement in the log is not built yet: docs/concurrency.md)",
    )
    common: dict[str, t.Any] = dict(
        restatement_id=restatement_id,
        reason=entry.reason,
        intervals=entry.intervals,
        table_versions_before=after,
    )
    if req.intent is not None:
        log.append(
            spark,
            LogEntry(
                action=req.intent,
                message="restoring the tables its promotion committed: "
                + (", ".join(after) or "none"),
                **common,
            ),
        )
    versions = promotion.rollback(spark, history, restatement_id, tables, before, after, pending)
    trail.record_rollback(spark, restatement_id, "discard of a half-done promotion", log.actor())
    if _advanced_by(spark, restatement_id):
        since = manifest["since_bronze_version"]
        advance_watermark(
            spark,
            -1 if since is None else since,
            manifest["previous_watermark"],
            f"discard of restatement {restatement_id}",
            manifest["since_source_versions"],
        )
    drop_stage(req.context, spark)
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
    return Done(
        f"discarded restatement {restatement_id}, whose promotion had stopped half-way: "
        f"restored {restored or 'nothing (no table was committed)'}; the stage is dropped",
        versions=versions,
    )


def _advanced_by(spark: SparkSession, restatement_id: str) -> bool:
    """Whether the latest arrival watermark was recorded by ``restatement_id``'s promotion."""
    row = spark.sql(
        f"SELECT reason FROM {WATERMARK_TABLE} "
        "ORDER BY advanced_at DESC, bronze_version DESC LIMIT 1"
    ).first()
    return row is not None and row.reason.startswith(f"restatement {restatement_id}:")


# -- rollback ---------------------------------------------------------------------------------


def _rollback(req: Request) -> Done:
    """Every table the promotion changed back to its version before it.

    Checks every table first (a table that changed after the promotion refuses the whole
    rollback: the log stays ``promoted``), then logs the intent before the first ``RESTORE``:
    a rollback killed between two tables is finished by the next command that takes the lock
    (each table's restore is tagged, so a restored table is not restored twice).
    """
    spark, restatement_id, rows = req.spark, req.restatement_id, req.rows
    promoted = [row for row in rows if row.action == Action.PROMOTED][-1]
    entry = staged_entry(rows, restatement_id)
    tables = {table.model: table.prod_table for table in _tables(entry)}
    before = promoted.table_versions_before or {}
    after = promoted.table_versions_after or {}
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
    # Resuming: keep the reason the rollback was given.
    reason = req.reason if req.intent is not None else (rows[-1].message or req.reason)
    common: dict[str, t.Any] = dict(
        restatement_id=restatement_id,
        reason=entry.reason,
        intervals=promoted.intervals,
        table_versions_before=after,
        message=reason,
    )
    if req.intent is not None:
        log.append(spark, LogEntry(action=req.intent, **common))
    versions = promotion.rollback(spark, history, restatement_id, tables, before, after, pending)
    trail.record_rollback(spark, restatement_id, f"rollback: {reason}", log.actor())
    # Prod no longer reflects the restated rows: put the watermark back before them (a named
    # restatement never moved it).
    manifest = entry.manifest or {}
    if moves_watermark(manifest):
        since = manifest["since_bronze_version"]
        advance_watermark(
            spark,
            -1 if since is None else since,
            manifest["previous_watermark"],
            f"rollback of restatement {restatement_id}: {reason}",
            manifest["since_source_versions"],
        )
    log.append(spark, LogEntry(action=Action.ROLLED_BACK, table_versions_after=versions, **common))
    return Done(f"rolled back restatement {restatement_id}", versions=versions)


def _rolled_back(req: Request) -> Done:
    return Done(
        f"restatement {req.restatement_id} is rolled back already",
        versions=dict(req.rows[-1].table_versions_after or {}),
    )


# -- the table --------------------------------------------------------------------------------

TRANSITIONS: dict[Verb, dict[Action, Step]] = {
    Verb.PROMOTE: {
        Action.STAGED: Step(Action.PROMOTING, _promote),
        Action.PROMOTING: Step(None, _promote),
        Action.PROMOTED: Step(None, _already_promoted),
    },
    Verb.DISCARD: {
        Action.STAGING: Step(None, _discard_stage),
        Action.STAGED: Step(None, _discard_stage),
        Action.PROMOTING: Step(Action.DISCARDING, _restore_promoting),
        Action.DISCARDING: Step(None, _restore_promoting),
    },
    Verb.ROLLBACK: {
        Action.PROMOTED: Step(Action.ROLLING_BACK, _rollback),
        Action.ROLLING_BACK: Step(None, _rollback),
        Action.ROLLED_BACK: Step(None, _rolled_back),
    },
}

# The command that finishes each interrupted intent, and what recovery then says it did.
RECOVERY: dict[Action, tuple[Verb, str]] = {
    Action.STAGING: (Verb.DISCARD, "discarded restatement {}, interrupted while staging"),
    Action.PROMOTING: (Verb.PROMOTE, "completed the interrupted promotion of restatement {}"),
    Action.ROLLING_BACK: (Verb.ROLLBACK, "completed the interrupted rollback of restatement {}"),
    Action.DISCARDING: (Verb.DISCARD, "completed the interrupted discard of restatement {}"),
}

_NOTHING = {
    Verb.PROMOTE: "nothing to promote",
    Verb.DISCARD: "nothing to discard",
    Verb.ROLLBACK: "nothing to roll back",
}


def apply(verb: Verb, req: Request) -> Done:
    """Run ``verb`` on the restatement from the status its log records, as the table says;
    refuses a status the table does not name."""
    if req.staging is not None:  # staged by this process, not logged yet
        status = Action.STAGED
    elif not req.rows:
        raise RestatementError(f"no restatement {req.restatement_id} in {log.LOG_TABLE}")
    else:
        status = req.rows[-1].status
    step = TRANSITIONS[verb].get(status)
    if step is None:
        hint = (
            f"; to undo it, `tardy rollback {req.restatement_id} --reason ...`"
            if verb == Verb.DISCARD and status == Action.PROMOTED
            else ""
        )
        raise RestatementError(
            f"restatement {req.restatement_id} is {status}: {_NOTHING[verb]}{hint}"
        )
    req.intent = step.intent
    try:
        return step.run(req)
    except Exception:
        if req.staging is not None:  # refused before its intent: left staged for review
            log.append(req.spark, req.staging)
        raise


def publish_promoted(
    publish: Publish | None, context: Context, spark: SparkSession, promoted: Outcome | None
) -> list[dict[str, object]]:
    """What ``publish`` published of a completed promotion; nothing after any other outcome
    (already promoted, a rollback, a discard) or without a publisher."""
    if publish is None or promoted is None or promoted.status != Status.PROMOTED:
        return []
    return publish(context, spark, promoted)


def recover(context: Context, spark: SparkSession, row: Record) -> Done:
    """Finish what an interrupted intent started, as ``RECOVERY`` says; ``Done.message`` says
    what it did, and a promotion it completed is in ``Done.outcome`` (for the caller to
    publish)."""
    verb, said = RECOVERY[row.status]
    rows = log.records(spark, row.restatement_id)
    why = "interrupted while staging"
    done = apply(verb, Request(context, spark, row.restatement_id, rows, why=why))
    done.message = said.format(row.restatement_id)
    return done
