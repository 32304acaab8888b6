"""The state machine of a restatement: the steps that run a plan, and the log they write.

A restatement moves through the restatement log's actions (``tardy.engine.log``):
``staging`` → ``staged`` (or ``audit_failed``, ``breaker_tripped``, ``discarded``) →
``promoting`` → ``promoted``. Here are the forward transitions; the caller
(``tardy.engine.restate``) holds the restatement lock:

- ``stage_all``: each model of the plan (``tardy.engine.plan``), upstream first, is staged in
  one write (``stage``), audited in one query (``audit``) and diffed in one read (``diff``);
  only the days whose rows changed cascade to its children;
- ``stage_and_promote``: logs ``staging``, stages, writes the review files, trips the circuit
  breaker or logs ``staged``; then creates the environment (left staged) or promotes;
- ``promote_entry``: promotes (or finishes promoting) what a ``staged`` entry recorded:
  the changed days (``promote``), the transaction trail, the arrival watermark; then
  ``publish_versions`` (``tardy.versions``);
- ``discard_staged``: drops the stage (prod was never touched) and logs ``discarded``;
- ``advance``: an empty restatement only advances the arrival watermark.

The reverse transitions (rollback, a half-done promotion discarded) are in
``tardy.engine.undo``. Every step reads back what the log recorded, so each works from a new
process. Each step's seconds and Spark statements are measured (``meter.Meter``).
"""

from __future__ import annotations

import json
import typing as t
from dataclasses import dataclass, field
from datetime import date, datetime
from enum import StrEnum

from tardy import versions as publishing
from tardy.engine import audit, delta, environment, log, sqlmesh_api, trail
from tardy.engine import promote as promotion
from tardy.engine.closure import days_of, ranges
from tardy.engine.detect import Manifest
from tardy.engine.diff import (
    Breaker,
    Change,
    Diff,
    TableDiff,
    breaker,
    diff_table,
    diff_tables,
)
from tardy.engine.log import Action, LogEntry
from tardy.engine.meter import Meter
from tardy.engine.plan import Plan, report_dir, snapshot_versions, watermark_target
from tardy.engine.stage import (
    StagedTable,
    drop_stage,
    drop_staged,
    key_restriction,
    prepare,
    prod_table,
    rows_table,
    stage_folder,
    write,
)
from tardy.engine.watermark import advance as advance_watermark
from tardy.errors import Refused, RestatementFailed
from tardy.key_index import KeySet

if t.TYPE_CHECKING:
    from pyspark.sql import SparkSession
    from sqlmesh import Context


class RestatementError(RestatementFailed):
    """A restatement stopped; prod is unchanged unless the message says otherwise."""


class BreakerTripped(RestatementError):
    pass


class PendingRestatement(Refused, RestatementError):
    pass


class Status(StrEnum):
    NOTHING_TO_DO = "nothing_to_do"
    DRY_RUN = "dry_run"
    STAGED = "staged"
    PROMOTED = "promoted"
    ALREADY_PROMOTED = "already_promoted"


@dataclass
class Outcome:
    restatement_id: str | None
    status: Status
    manifest: Manifest | None = None
    diff: Diff | None = None
    evaluated: dict[str, list[list[str]]] = field(default_factory=dict)  # staged intervals
    promoted: dict[str, list[list[str]]] = field(default_factory=dict)  # changed days committed
    recovered: str | None = None  # what happened to an interrupted restatement
    report_dir: str | None = None
    advanced_watermark: bool = False
    # While staged: the environment's name and each model's view in it (``environment``).
    environment: str | None = None
    views: dict[str, str] = field(default_factory=dict)
    audits: list[audit.AuditResult] = field(default_factory=list)  # every audit run, staged
    seconds: dict[str, float] = field(default_factory=dict)  # per step: detect, stage, ...
    statements: dict[str, int] = field(default_factory=dict)  # Spark statements per step
    executions: dict[str, int] = field(default_factory=dict)  # and with nested executions
    statement_seconds: dict[str, float] = field(default_factory=dict)  # statements' own share
    slowest: list[dict[str, object]] = field(default_factory=list)  # (``meter.Meter``)
    # Promoted: the Delta version committed per model, and what that published
    # (``tardy.versions``: the published models' new versions).
    table_versions: dict[str, int] = field(default_factory=dict)
    versions_before: dict[str, int] = field(default_factory=dict)  # before the promotion
    published: list[dict[str, object]] = field(default_factory=list)

    def as_dict(self) -> dict[str, object]:
        return {
            **(self.manifest.as_dict() if self.manifest else {}),
            "restatement_id": self.restatement_id,
            "status": str(self.status),
            "evaluated": self.evaluated,
            "promoted": self.promoted,
            "diff": self.diff.as_dict() if self.diff else None,
            "recovered": self.recovered,
            "report_dir": self.report_dir,
            "advanced_watermark": self.advanced_watermark,
            "environment": self.environment,
            "views": self.views,
            "audits": [result.as_dict() for result in self.audits],
            "seconds": {k: round(v, 3) for k, v in self.seconds.items()},
            "statements": self.statements,
            "executions": self.executions,
            "statement_seconds": {k: round(v, 3) for k, v in self.statement_seconds.items()},
            "slowest": self.slowest,
            "published": self.published,
        }


def advance(context: Context, spark: SparkSession, manifest: Manifest, reason: str) -> bool:
    """Advance the arrival watermark as far as the manifest allows (``watermark_target``)."""
    target = watermark_target(context, manifest.as_dict())
    if target is None:
        return False
    advance_watermark(spark, target.version, target.stamp, reason, target.sources, target.pending)
    return True


class _Staging(t.TypedDict):
    """The fields every log entry of a staging carries."""

    restatement_id: str
    reason: str
    intervals: dict[str, log.Spans]
    bronze_version: int
    arrival_watermark: datetime | None
    snapshot_versions: dict[str, str]


class _Staged(t.TypedDict):
    """What the diff and the audits add to the log entries once staged."""

    rows_before: dict[str, dict[str, t.Any]]
    rows_after: dict[str, dict[str, t.Any]]
    table_versions_before: dict[str, int]
    audits: list[audit.AuditResult]


@dataclass
class Staging:
    tables: list[StagedTable]
    diff: Diff
    audits: list[audit.AuditResult]
    # The changed keys the diffs found, per model with changed days, for the change trail
    # (a model whose diff kept none: ``diff.TableDiff.changes``).
    changes: dict[str, list[Change]] = field(default_factory=dict)


def stage_all(
    context: Context,
    spark: SparkSession,
    restatement_id: str,
    roots: dict[str, set[date]],
    meter: Meter,
    watch: Breaker,
    keys: dict[str, KeySet] | None = None,
) -> Staging:
    """Stage and diff every model the roots reach, upstream first, cascading only the days
    whose rows changed, then audit them all (each model's audits rendered when it is staged,
    run together in one statement). A model with known changed ``keys`` that takes the key
    restriction is written by key (``stage.key_restriction``); the others, and its children,
    by interval. Raises ``audit.AuditFailed`` (after staging everything) when a blocking
    audit fails."""
    plan = Plan(context, roots)
    renderer = sqlmesh_api.Renderer.for_prod(context, execution_day=plan.last_day())
    changed: dict[str, set[date]] = {}
    tables: list[StagedTable] = []
    intervals = []
    planned: list[audit.PlannedAudit] = []
    trips = []
    with meter.step("stage"):  # what a killed restatement left (its rows come first)
        if stage_folder().exists():
            drop_staged(context, spark)
        history = delta.History.of(spark, [prod_table(s) for s in plan.models()])
    # A model no other staged model reads has no days to cascade: its diff waits, and the
    # diffs of all such models are one statement after the loop.
    parents = {p for s in plan.models() for p in plan.closure.parents(s.model.name)}
    diffs: dict[str, TableDiff] = {}
    leaves: list[tuple[StagedTable, list[str]]] = []
    for snapshot in plan.models():
        name = snapshot.model.name
        days = plan.days(name, changed)
        if not days:
            continue
        renderer.stage(snapshot)  # it and its children now read its staged table
        with meter.step("stage"):
            restriction = key_restriction(snapshot, (keys or {}).get(name))
            rows = rows_table(restatement_id, snapshot)
            table = prepare(spark, history, snapshot, ranges(days), rows, restriction)
            viewed = name in parents or snapshot.model.depends_on_self
            write(spark, renderer, snapshot, table, rows, restriction, viewed=viewed)
        with meter.step("audit"):
            variables = restriction.variables() if restriction else None
            planned += audit.plan(
                renderer, snapshot, table.intervals, variables, table.staged_table
            )
        tables.append(table)
        if name in parents:
            with meter.step("diff"):
                diffs[name] = diff_table(spark, table, sqlmesh_api.grain(snapshot))
            changed[name] = diffs[name].changed_days
        else:
            leaves.append((table, sqlmesh_api.grain(snapshot)))
        promotion.failpoint("stage", len(tables))
    with meter.step("diff"):
        for (table, _), table_diff in zip(leaves, diff_tables(spark, leaves), strict=True):
            diffs[table.model] = table_diff
    for table in tables:
        table.changed = ranges(diffs[table.model].changed_days)
        intervals += diffs[table.model].intervals
        if table.model == watch.model:
            trips = breaker(diffs[table.model], watch)
    review = Diff(restatement_id, intervals, watch.threshold, trips, watch.model)
    with meter.step("audit"):  # every model's audits, in one statement
        results = audit.count(spark, planned)
    if any(r.failed and r.blocking for r in results):
        raise audit.AuditFailed(results)
    changes = {
        table.model: found
        for table in tables
        if table.changed and (found := diffs[table.model].changes) is not None
    }
    return Staging(tables, review, results, changes)


def stage_and_promote(
    context: Context,
    spark: SparkSession,
    restatement_id: str,
    reason: str,
    manifest: Manifest,
    meter: Meter,
    *,
    promote: bool,
    accept_large_change: bool,
    watch: Breaker,
    environment_name: str,
) -> Outcome:
    base = _Staging(
        restatement_id=restatement_id,
        reason=reason,
        intervals={m: spans for m, spans in manifest.impacted.items() if spans},
        bronze_version=manifest.bronze_version,
        arrival_watermark=_ts(manifest.arrival_watermark),
        snapshot_versions=snapshot_versions(context),
    )
    with meter.step("log"):
        log.append(spark, LogEntry(action=Action.STAGING, **base))
    folder = report_dir(restatement_id)
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "manifest.json").write_text(json.dumps(manifest.as_dict(), indent=2, default=str))
    roots = {model: days_of(spans) for model, spans in manifest.roots.items()}
    try:
        staging = stage_all(context, spark, restatement_id, roots, meter, watch, manifest.keys)
    except audit.AuditFailed as failure:
        drop_stage(context, spark)
        failed = LogEntry(
            action=Action.AUDIT_FAILED,
            audits=failure.results,
            **base,
        )
        failed.message = str(failure)
        log.append(spark, failed)
        raise RestatementError(
            f"{failure}; prod is unchanged (restatement {restatement_id})"
        ) from failure
    except Exception as error:
        discard_staged(context, spark, restatement_id, reason, f"failed while staging: {error}")
        raise
    review, staged = staging.diff, staging.tables
    (folder / "diff.md").write_text(review.markdown())
    (folder / "diff.json").write_text(json.dumps(review.as_dict(), indent=2, default=str))
    totals = review.totals()
    base["intervals"] = {table.model: table.intervals for table in staged}
    details = _Staged(
        rows_before={
            m: {"rows": v["rows_before"], "sums": v["sums_before"]} for m, v in totals.items()
        },
        rows_after={
            m: {"rows": v["rows_after"], "sums": v["sums_after"]} for m, v in totals.items()
        },
        table_versions_before={table.model: table.version_before for table in staged},
        audits=staging.audits,
    )
    if review.breaker and not accept_large_change:
        drop_stage(context, spark)
        message = (
            f"circuit breaker: {len(review.breaker)} closed day(s) change by more than "
            f"{watch.threshold:.0%} (see {folder / 'diff.md'}); rerun with "
            "--accept-large-change to promote anyway"
        )
        log.append(
            spark,
            LogEntry(action=Action.BREAKER_TRIPPED, message=message, **base, **details),
        )
        raise BreakerTripped(f"{message}; prod is unchanged (restatement {restatement_id})")
    entry = LogEntry(
        action=Action.STAGED,
        staged_tables=staged,
        manifest=manifest,
        accepted_large_change=bool(review.breaker),
        message=f"staged {len(staged)} table(s), "
        f"{sum(1 for table in staged if table.changed)} with changed days",
        **base,
        **details,
    )
    if not promote:
        with meter.step("log"):
            log.append(spark, entry)
    outcome = Outcome(
        restatement_id,
        Status.STAGED,
        manifest,
        review,
        evaluated={table.model: table.intervals for table in staged},
        report_dir=str(folder),
        audits=staging.audits,
    )
    if not promote:
        with meter.step("environment"):
            outcome.views = environment.create(
                context, spark, restatement_id, environment_name, staged
            )
        outcome.environment = environment_name
    if promote:
        with meter.step("promote"):
            promoted = promote_entry(
                context,
                spark,
                restatement_id,
                publish=False,
                staging=entry,
                changes=staging.changes,
            )
        outcome.status = promoted.status
        outcome.promoted = promoted.promoted
        outcome.advanced_watermark = promoted.advanced_watermark
        with meter.step("publish"):
            outcome.published = publish_versions(context, spark, restatement_id, promoted)
    measured = meter.as_dict()
    outcome.seconds, outcome.statements = measured["seconds"], measured["statements"]
    outcome.executions, outcome.slowest = measured["executions"], measured["slowest"]
    outcome.statement_seconds = measured["statement_seconds"]
    return outcome


def staged_entry(
    spark: SparkSession, restatement_id: str
) -> tuple[dict[str, t.Any], list[dict[str, t.Any]]]:
    rows = log.entries(spark, restatement_id)
    if not rows:
        raise RestatementError(f"no restatement {restatement_id} in {log.LOG_TABLE}")
    staged = [row for row in rows if row["action"] == Action.STAGED]
    if not staged:
        raise RestatementError(
            f"restatement {restatement_id} was never staged ({rows[-1]['status']})"
        )
    return staged[-1], rows


def staged_tables(entry: dict[str, t.Any]) -> list[StagedTable]:
    """The staged tables a ``staged`` log entry recorded."""
    return [StagedTable(**table) for table in entry["staged_tables"]]


def publish_versions(
    context: Context, spark: SparkSession, restatement_id: str, promoted: Outcome
) -> list[dict[str, object]]:
    """Publish the new versions of the published models (``tardy.versions``) after a
    promotion; nothing after a no-op one."""
    if promoted.status != Status.PROMOTED:
        return []
    commits = {
        model: publishing.Commit(
            before=promoted.versions_before[model],
            after=version,
            days=sorted(day.isoformat() for day in days_of(promoted.promoted.get(model, []))),
        )
        for model, version in promoted.table_versions.items()
    }
    published = publishing.publish(context, spark, restatement_id=restatement_id, commits=commits)
    return [p.as_dict() for p in published.publications]


def promote_entry(
    context: Context,
    spark: SparkSession,
    restatement_id: str,
    *,
    publish: bool = True,
    staging: LogEntry | None = None,
    changes: dict[str, list[Change]] | None = None,
) -> Outcome:
    """Promote (or finish promoting) a staged restatement, then publish (unless the caller
    meters publishing itself); the caller holds the lock. ``changes``: what the staging's
    diffs found for the change trail (``Staging.changes``), when this process staged it.

    ``staging``: the ``staged`` entry of a restatement this process has just staged and not
    yet logged (``tardy restate``). It is appended in the promotion intent's commit, so a
    kill leaves the restatement either staging (the next command discards the stage) or
    promoting (the next command finishes it), never staged with nobody to promote it; a
    refusal appends it alone, leaving the restatement staged for review."""
    if staging is None:
        entry, rows = staged_entry(spark, restatement_id)
        status = rows[-1]["status"]
    else:
        entry, status = log.as_read(staging), Action.STAGED
    unlogged = [staging] if staging else []  # emptied once the intent's commit holds it
    try:
        return _promote(
            context, spark, restatement_id, entry, status, unlogged, publish, changes or {}
        )
    except Exception:
        if unlogged:
            log.append(spark, *unlogged)
        raise


def _promote(
    context: Context,
    spark: SparkSession,
    restatement_id: str,
    entry: dict[str, t.Any],
    status: str,
    unlogged: list[LogEntry],
    publish: bool,
    changes: dict[str, list[Change]],
) -> Outcome:
    if status == Action.PROMOTED:
        return Outcome(
            restatement_id, Status.ALREADY_PROMOTED, report_dir=str(report_dir(restatement_id))
        )
    if status not in (Action.STAGED, Action.PROMOTING):
        raise RestatementError(f"restatement {restatement_id} is {status}: nothing to promote")
    staged = staged_tables(entry)
    prod = [s for s in sqlmesh_api.prod_snapshots(context).values() if s.is_model]
    current = {s.model.name: s.version for s in prod}
    changed = sorted(m for m, v in entry["snapshot_versions"].items() if current.get(m) != v)
    if changed:
        raise promotion.ProdChangedError(
            f"prod's model versions changed since staging ({', '.join(changed)}): discard "
            f"restatement {restatement_id} and restate again"
        )
    base = {
        key: entry[key]
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
    first = status == Action.STAGED  # no trail row of it can exist before its intent
    fresh = bool(unlogged)  # staged by this process, promoted at once: no environment
    if first:
        log.append(spark, *unlogged, LogEntry(action=Action.PROMOTING, **base))
        unlogged.clear()
    # The change trail before the first commit: prod's version before is still current then
    # (a cached snapshot; time travel to it after the commit costs ~1 s a table).
    trail.record_promotion(
        spark,
        restatement_id,
        entry["reason"],
        log.actor(),
        staged,
        {s.model.name: sqlmesh_api.grain(s) for s in prod},
        changes,
        first=first,
    )
    promotion.failpoint("trail", 1)
    versions, committed = promotion.promote(spark, history, restatement_id, staged, checked)
    manifest = entry["manifest"]
    target = watermark_target(context, manifest)
    advanced = target is not None
    if target is not None:
        advance_watermark(
            spark,
            target.version,
            target.stamp,
            f"restatement {restatement_id}: {entry['reason']}",
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
    drop_stage(context, spark, environments=not fresh)
    outcome = Outcome(
        restatement_id,
        Status.PROMOTED,
        evaluated={table.model: table.intervals for table in staged},
        promoted={table.model: table.changed for table in staged if table.changed},
        report_dir=str(report_dir(restatement_id)),
        advanced_watermark=advanced,
        table_versions=versions,
        versions_before={table.model: table.version_before for table in staged},
    )
    if publish:
        outcome.published = publish_versions(context, spark, restatement_id, outcome)
    return outcome


def discard_staged(
    context: Context, spark: SparkSession, restatement_id: str, reason: str | None, why: str
) -> None:
    """Drop the stage and log the discard (prod was never touched)."""
    drop_stage(context, spark)
    if reason is not None:
        log.append(
            spark,
            LogEntry(
                restatement_id=restatement_id, action=Action.DISCARDED, reason=reason, message=why
            ),
        )


def _ts(value: str | None) -> datetime | None:
    return datetime.fromisoformat(value) if value else None
