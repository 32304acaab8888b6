"""The forward transitions of a restatement: staging, and the log it writes.

A restatement moves through the restatement log's actions (``tardy.engine.log``):
``staging`` → ``staged`` (or ``audit_failed``, ``breaker_tripped``, ``discarded``), then
through ``tardy.engine.lifecycle``'s table (``promoting`` → ``promoted``, discarded, rolled
back). The caller (``tardy.engine.restate``) holds the restatement lock:

- ``stage_all``: each model of the plan (``tardy.engine.plan``), upstream first, is staged in
  one write (``stage``), audited in one query (``audit``) and diffed in one read (``diff``);
  only the days whose rows changed cascade to its children;
- ``stage_and_promote``: logs ``staging``, stages, writes the review files, trips the circuit
  breaker or logs ``staged``; then creates the environment (left staged) or hands the staged
  entry, unlogged, to the lifecycle's promotion and the caller's publisher;
- ``advance``: an empty restatement only advances the arrival watermark.

Every step reads back what the log recorded, so each works from a new process. Each step's
seconds and Spark statements are measured (``meter.Meter``).
"""

from __future__ import annotations

import json
import typing as t
from dataclasses import dataclass, field
from datetime import date, datetime

from tardy.engine import audit, delta, environment, lifecycle, log, sqlmesh_api
from tardy.engine import promote as promotion
from tardy.engine.diff import breaker, diff_table, diff_tables
from tardy.engine.log import Action, LogEntry
from tardy.engine.meter import Meter
from tardy.engine.outcome import BreakerTripped, Outcome, Publish, RestatementError, Status
from tardy.engine.plan import Plan, report_dir, snapshot_versions, watermark_target
from tardy.engine.results import (
    Breaker,
    Change,
    DayChange,
    Diff,
    Manifest,
    TableDiff,
    days_of,
    ranges,
)
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
from tardy.key_index import KeySet
from tardy.project import headline

if t.TYPE_CHECKING:
    from pyspark.sql import SparkSession
    from sqlmesh import Context


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
    # (a model whose diff kept none: ``results.TableDiff.changes``).
    changes: dict[str, list[Change]] = field(default_factory=dict)
    # Per model with changed days: those days as its diff compared them, with the sums of
    # the measures its release notes show and its rows after when it is published
    # (``outcome.day_changes``).
    days: dict[str, list[DayChange]] = field(default_factory=dict)


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
    # A published model's diff also sums its release notes' measures per day and keeps its
    # changed days' rows after: the note and the day digests of the version a promotion
    # commits read them (no comparison or read of their own: ``outcome.day_changes``).
    measures = {
        s.model.name: headline.measures_of(s.model)
        for s in plan.models()
        if headline.PUBLISHED_TAG in s.model.tags
    }
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
                diffs[name] = diff_table(
                    spark,
                    table,
                    sqlmesh_api.grain(snapshot),
                    measures.get(name, ()),
                    published=name in measures,
                )
            changed[name] = diffs[name].changed_days
        else:
            leaves.append((table, sqlmesh_api.grain(snapshot)))
        promotion.failpoint("stage", len(tables))
    with meter.step("diff"):
        diffed = diff_tables(spark, leaves, measures, published=set(measures))
        for (table, _), table_diff in zip(leaves, diffed, strict=True):
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
    compared = {s.model: diffs[s.model].changed() for s in tables if s.changed}
    return Staging(tables, review, results, changes, compared)


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
    publish: Publish | None,
) -> Outcome:
    """Stage the manifest's plan and leave it staged as ``environment_name``, or promote it
    and publish what it committed (``publish``, the caller's; None: nothing is published)."""
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
        lifecycle.discard_stage(
            context, spark, restatement_id, reason, f"failed while staging: {error}"
        )
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
            request = lifecycle.Request(
                context, spark, restatement_id, [], staging=entry, changes=staging.changes
            )
            promoted = lifecycle.apply(lifecycle.Verb.PROMOTE, request).outcome
        assert promoted is not None  # a promotion's step returns its outcome
        promoted.day_changes = staging.days
        outcome.status = promoted.status
        outcome.promoted = promoted.promoted
        outcome.advanced_watermark = promoted.advanced_watermark
        with meter.step("publish"):
            outcome.published = lifecycle.publish_promoted(publish, context, spark, promoted)
    measured = meter.as_dict()
    outcome.seconds, outcome.statements = measured["seconds"], measured["statements"]
    outcome.executions, outcome.slowest = measured["executions"], measured["slowest"]
    outcome.statement_seconds = measured["statement_seconds"]
    return outcome


def _ts(value: str | None) -> datetime | None:
    return datetime.fromisoformat(value) if value else None
