"""What late data did to the numbers: the facts ``tardy report`` draws, read from the lakehouse.

``gather`` reads them (one small query per chart); ``tardy.rendering.html`` turns them into one
self-contained HTML page. Every value is plain data (strings for decimals and dates), so the
page can carry it as JSON and a test can compare it with its own query.
"""

from __future__ import annotations

import json
import typing as t
from datetime import UTC, datetime

from tardy.consumers.status import ensure_status_view
from tardy.engine import log, sqlmesh_api, trail
from tardy.engine.log import PERIODS_VIEW, Action
from tardy.engine.plan import report_dir
from tardy.engine.results import measure_of
from tardy.engine.trail import standing_rows
from tardy.errors import InputError
from tardy.project.headline import Headline, headline
from tardy.project.home import activate
from tardy.quarantine.listing import counts, read
from tardy.reporting.records import (
    DailyRevision,
    IntervalChange,
    LatenessAlert,
    LatenessHour,
    ModelRow,
    QuarantineDay,
    Report,
    Restated,
    RestatedPeriod,
    RestatementReport,
    RestatementSummary,
    TrailRow,
)
from tardy.sql import literal

if t.TYPE_CHECKING:
    from pyspark.sql import SparkSession
    from sqlmesh import Context


RECENT_DAYS = 7
MAX_CHANGES = 200

PERIODS_SQL = f"""
SELECT model, period, last_restatement_id, last_restatement_reason, last_restated_at,
       last_restated_at >= current_timestamp() - INTERVAL {RECENT_DAYS} DAYS AS recent
FROM {PERIODS_VIEW}
ORDER BY last_restated_at, model, period
"""


def _iso(value: t.Any) -> str:
    return value.isoformat() if hasattr(value, "isoformat") else str(value)


# The rows of the headline model that promoted (not rolled back) restatements removed, and
# no later one added back: its status view lacks them, yet they moved their period. Per row:
# its period, revision and first published value (``{measure_type}``: the measure's).
REMOVED_ROWS_SQL = """
SELECT event_date, COUNT(DISTINCT restatement_id) AS revision,
       CAST(MIN_BY(COALESCE(before['{measure}'], '0'), promoted_at) AS {measure_type})
         AS first_published
FROM ({standing})
GROUP BY row_key, event_date
HAVING MAX_BY(change, promoted_at) = 'removed'
"""


def _daily(spark: SparkSession, lead: Headline | None, view: str | None) -> list[DailyRevision]:
    """Per period of the headline model, its measure summed over the period's rows: first
    published and today's value (its status view ``view``), and the restatements (promoted,
    not rolled back) that changed it (the change trail). None before the model exists."""
    if lead is None or lead.measure is None or view is None:
        return []
    measure, time = lead.measure, lead.time_column
    kind = spark.table(lead.model).schema[measure].dataType.simpleString()
    removed = REMOVED_ROWS_SQL.format(
        measure=measure, measure_type=kind, standing=standing_rows(lead.model)
    )
    # A period restatements emptied has no row in the view: only its removed rows, final 0
    # (a restatement removes rows of closed, i.e. final, periods only).
    days = spark.sql(
        f"""
        SELECT event_date, COALESCE(MAX(period_status), 'final') AS period_status,
               MAX(revision) AS revision, CAST(SUM(first) AS STRING) AS first,
               CAST(SUM(final) AS STRING) AS final
        FROM (
          SELECT `{time}` AS event_date, period_status, revision,
                 `first_published_{measure}` AS first, `{measure}` AS final
          FROM {view}
          UNION ALL
          SELECT event_date, NULL, revision, first_published, 0 FROM ({removed})
        )
        GROUP BY event_date ORDER BY event_date
        """
    ).collect()
    by_day: dict[str, list[Restated]] = {}
    for row in spark.sql(
        f"""
        SELECT DISTINCT event_date, restatement_id, reason, promoted_at
        FROM ({standing_rows(lead.model)})
        ORDER BY promoted_at
        """
    ).collect():
        by_day.setdefault(row.event_date.isoformat(), []).append(
            Restated(row.restatement_id, row.reason, _iso(row.promoted_at))
        )
    return [
        DailyRevision(
            event_date=row.event_date.isoformat(),
            first_published=row.first,
            final=row.final,
            revision=int(row.revision),
            period_status=row.period_status,
            restatements=by_day.get(row.event_date.isoformat(), []),
        )
        for row in days
    ]


def _lateness(
    context: Context, spark: SparkSession, grace_days: int
) -> tuple[list[LatenessHour], list[LatenessAlert], dict[str, float]]:
    """The lateness series (brought up to date), the alerts against each source's history
    now, and each source's lag limit (k × its baseline p99): about four statements."""
    from tardy.lateness.alerts import check_baseline, thresholds
    from tardy.lateness.baseline import clock, day_models, measure
    from tardy.lateness.series import hours_of
    from tardy.project.sources import declared

    variables = context.config.variables
    found = declared()
    now = clock(None, activate().root)
    baseline = measure(spark, variables, found.owners(), day_models(context), now, found.cadences())
    alerts = check_baseline(baseline, thresholds(variables, declared().tiers()))
    factor = float(baseline.settings["lag_p99_factor"])
    hours = [
        LatenessHour(
            source_system=h.source_system,
            arrival_hour=h.arrival_hour.isoformat(),
            rows=h.rows,
            late_rows=h.late_rows(grace_days),
            late_ratio=h.late_rows(grace_days) / h.measured_rows if h.measured_rows else None,
            lag_hours_p50=h.lag_hours_p50,
            lag_hours_p95=h.lag_hours_p95,
            lag_hours_p99=h.lag_hours_p99,
        )
        for h in hours_of(spark)
    ]
    return (
        hours,
        [
            LatenessAlert(a.source, str(a.metric), list(a.hours), a.message)
            for a in alerts
            if a.hours and a.source in found.sources
        ],
        {
            r.source_system: factor * r.baseline_lag_p99
            for r in baseline.recent
            if r.baseline_lag_p99 is not None
        },
    )


def _quarantine(context: Context, spark: SparkSession) -> list[QuarantineDay]:
    """Quarantined rows per day and reason, from the models that carry a ``reason`` column
    and read bronze (the quarantine), each by its time column."""
    out = []
    for model, column in quarantine_models(context).items():
        rows = spark.sql(
            f"SELECT `{column}` AS day, reason, COUNT(*) AS n FROM {model} "
            "GROUP BY 1, 2 ORDER BY 1, 2"
        ).collect()
        out += [QuarantineDay(row.day.isoformat(), row.reason, int(row.n)) for row in rows]
    return out


def quarantine_models(context: Context) -> dict[str, str]:
    """Prod's models with a ``reason`` column (the quarantine): model -> time column."""
    out = {}
    for snapshot in sqlmesh_api.prod_snapshots(context).values():
        model = snapshot.model if snapshot.is_model else None
        if model is None or model.time_column is None:
            continue
        if "reason" in (model.columns_to_types or {}):
            out[model.name] = model.time_column.column.name
    return out


def _breaker_rule(restatement_id: str) -> str | None:
    path = report_dir(restatement_id) / "diff.json"
    if not path.exists():
        return None
    diff = json.loads(path.read_text())
    return (
        f"{diff.get('breaker_model')}: a closed day whose rows or measure move by more than "
        f"{float(diff['threshold']):.0%}"
    )


def _intervals(restatement_id: str) -> tuple[list[IntervalChange], list[dict[str, object]]]:
    """The restatement's per-interval diff and breaker trips, from its report folder's
    ``diff.json`` (written when it was staged; empty when this home does not hold it)."""
    path = report_dir(restatement_id) / "diff.json"
    if not path.exists():
        return [], []
    diff = json.loads(path.read_text())
    out = []
    for item in diff["intervals"]:
        measure = measure_of(item["sums_before"])
        out.append(
            IntervalChange(
                model=item["model"],
                start=item["interval"][0],
                end=item["interval"][1],
                measure=measure,
                before=item["sums_before"].get(measure) if measure else None,
                after=item["sums_after"].get(measure) if measure else None,
                rows_before=int(item["rows_before"]),
                rows_after=int(item["rows_after"]),
                keys_added=int(item["keys_added"]),
                keys_removed=int(item["keys_removed"]),
                keys_changed=int(item["keys_changed"]),
            )
        )
    return out, list(diff.get("breaker") or [])


def _summaries(spark: SparkSession) -> list[RestatementSummary]:
    out = []
    for item in log.summary(spark):
        intervals, _ = _intervals(item["restatement_id"])
        out.append(
            RestatementSummary(
                restatement_id=item["restatement_id"],
                reason=item["reason"],
                status=str(item["status"]),
                logged_at=_iso(item["created_at"]),
                actor=item["actor"],
                intervals=intervals,
            )
        )
    return out


def _models(spark: SparkSession) -> list[ModelRow]:
    """The registered model versions of this data home (none: MLflow is not even loaded),
    each with the publications since its training that changed days it read."""
    from tardy.consumers.versions import publications
    from tardy.training.lineage import stale_since_trained
    from tardy.training.pipeline import registered

    models = registered(activate().root)
    if not models:
        return []
    history = publications(spark)
    stale = stale_since_trained(history, models)
    producers = {p.name: p.produced_by for p in history}
    return [
        ModelRow(
            version=m.version,
            champion=m.champion,
            trained_on=[f"{i.name} {i.first_day}..{i.last_day}" for i in m.inputs],
            trained_after=m.trained_after,
            holdout_mae=m.metrics.get("holdout_mae"),
            decision=m.decision,
            stale_by=[
                f"{s.superseded_by} ({producers[s.superseded_by]}): {len(s.days)} days"
                for s in stale
                if s.version == m.version
            ],
            artifacts=m.artifacts,
        )
        for m in models
    ]


def gather(context: Context, spark: SparkSession) -> Report:
    """Everything ``tardy report`` draws (about eight statements)."""
    from tardy.consumers.card import cards

    grace = int(context.config.variables["grace_days"])
    view, lead = ensure_status_view(context, spark), headline(context)
    lateness, alerts, limits = _lateness(context, spark, grace)
    periods = [
        RestatedPeriod(
            model=row.model,
            period=row.period.isoformat(),
            restatement_id=row.last_restatement_id,
            reason=row.last_restatement_reason,
            promoted_at=_iso(row.last_restated_at),
            recent=bool(row.recent),
        )
        for row in spark.sql(PERIODS_SQL).collect()
    ]
    return Report(
        generated_at=datetime.now(UTC).isoformat(timespec="seconds"),
        home=str(activate().root),
        grace_days=grace,
        daily=_daily(spark, lead, view),
        headline_model=lead.model if lead else "",
        headline_measure=(lead.measure or "") if lead else "",
        periods=periods,
        lateness=lateness,
        quarantine=_quarantine(context, spark),
        quarantine_review=counts(read(context, spark).records),
        restatements=_summaries(spark),
        models=_models(spark),
        cards=cards(context, spark),
        lateness_alerts=alerts,
        lag_limits=limits,
    )


def _audits(spark: SparkSession, restatement_id: str) -> list[dict[str, object]]:
    """The audits of the restatement's latest staging (or failed audit), one row each."""
    rows = spark.sql(
        f"SELECT audits FROM {log.LOG_TABLE} WHERE restatement_id = {literal(restatement_id)} "
        "AND audits IS NOT NULL ORDER BY logged_at DESC LIMIT 1"
    ).collect()
    if not rows:
        return []
    return [
        {k: _iso(v) if k.startswith("interval") else v for k, v in a.asDict().items()}
        for a in rows[0].audits
    ]


def how_to(restatement_id: str, status: str) -> list[str]:
    """The commands that act on a restatement in ``status``."""
    if status == Action.STAGED:
        return [f"tardy promote {restatement_id}", f"tardy discard {restatement_id}"]
    if status == Action.PROMOTED:
        return [f'tardy rollback {restatement_id} --reason "..."']
    if status in log.INTERRUPTED:
        return [f"tardy promote {restatement_id}   # finishes or recovers it"]
    return []


def gather_restatement(spark: SparkSession, restatement_id: str) -> RestatementReport:
    rows = log.entries(spark, restatement_id)
    if not rows:
        raise InputError(f"no restatement {restatement_id} in {log.LOG_TABLE}")
    summary = next(s for s in _summaries(spark) if s.restatement_id == restatement_id)
    staged = [row for row in rows if row["manifest"] is not None]
    manifest = staged[-1]["manifest"] if staged else {}
    if not manifest and (report_dir(restatement_id) / "manifest.json").exists():
        manifest = json.loads((report_dir(restatement_id) / "manifest.json").read_text())
    _, breaker = _intervals(restatement_id)
    changes = trail.changes(spark, restatement_id=restatement_id)
    return RestatementReport(
        generated_at=datetime.now(UTC).isoformat(timespec="seconds"),
        summary=summary,
        manifest=manifest,
        audits=_audits(spark, restatement_id),
        breaker=breaker,
        changes=[
            TrailRow(
                model=c["model"],
                row_key=c["row_key"],
                event_date=_iso(c["event_date"]),
                change=c["change"],
                action=c["action"],
                before=c["before"],
                after=c["after"],
            )
            for c in changes[:MAX_CHANGES]
        ],
        changes_total=len(changes),
        how_to=how_to(restatement_id, summary.status),
        breaker_rule=_breaker_rule(restatement_id),
    )
