"""Provisional and final: how far the data has come, how late it is, what final days still lack.

Definitions (all times UTC; a day D is the half-open interval [D 00:00, D+1 00:00)):

* **Data watermark** ``W = max(arrival_ts) over every declared bronze table - grace_days``
  (config variable ``grace_days``), a timestamp. It is a function of bronze only, never of
  the wall clock or of what SQLMesh has run: the feeds themselves say how far they have come.
* **Final / provisional.** A day D is *final* when the whole day lies before the watermark,
  ``end(D) = D+1 00:00 <= W``, which for a timestamp W is exactly ``D < date(W)``; otherwise
  it is *provisional*. Equivalently: D is final once bronze has seen an arrival at least
  ``grace_days`` days after D ended. Boundary: with W = 2026-01-08 00:00 the day 2026-01-07
  is final (it ends at W) and 2026-01-08 is provisional; with W = 2026-01-08 12:00 still
  2026-01-07 is the last final day. Bronze empty: no watermark, every day provisional. A
  period of the rollups (a week or month, keyed by its ``first_day``) is final when its last
  day is.
* **Lateness per source** counts every declared source's bronze records since its first
  arrival, each by its own event time (``sources.yaml``'s ``event_time``), from the lateness
  series (``tardy.lateness_series``: per source and arrival hour, kept by ``tardy ingest``
  and brought up to date by every reader), the same numbers ``status --check``, ``tardy
  grace`` and the report read; no statement scans bronze for them.
* **Late arrival** (per bronze row): ``arrival_ts > end(event day) + grace_days``, i.e. the row
  arrived after its event day had become final (strictly after: a row arriving exactly
  ``grace_days`` days after its day ended is on time). ``late_ratio = late_rows /
  measured_rows``. Only rows with a *valid* ``event_ts`` are measured: rows whose ``event_ts``
  is NULL (missing, unparseable, or an unparseable line) and rows whose ``event_ts`` is after
  their ``arrival_ts`` (quarantined as ``event_after_arrival``) are excluded and counted
  separately. Every bronze row counts (duplicates, corrections, voids, rows silver
  quarantines for other reasons): this describes the feed, not silver. (``tardy summary``'s
  ``beyond_grace_share`` compares arrival *dates*, so it also counts a row arriving exactly at
  the boundary.)
* **Lag** = ``arrival_ts - event_ts`` in hours, over the measured rows; p50/p95/p99 are
  nearest-rank percentiles (the smallest lag with at least that share of the measured rows
  at or below it, numpy's ``inverted_cdf``), read from the merged KLL sketches of the
  series' hours: exact up to 1,024 measured rows per source and hour and 65,535 per source,
  within the sketch's rank error beyond.
* **Pending late data** comes from ``tardy.engine.detect.detect``: its manifest's ``impacted``
  intervals are the days (and weeks/months) detect considers closed (older than the last
  computed day minus the grace window, by SQLMesh's state) with bronze changes prod does not
  reflect. detect judges closure by what SQLMesh has *run*, finality by what bronze has
  *seen*; the two can disagree, and both views are reported: ``pending_final`` (impacted and
  final: the headline, final periods that a ``tardy restate`` would change),
  ``pending_provisional`` (detect: closed, to restate; watermark: still provisional, i.e. runs
  ran ahead of the data) and ``absorbed_but_final`` (detect: the next ``sqlmesh run``
  absorbs them; watermark: already final, i.e. the runs lag behind the data).

Every published model has a status view, ``tardy.<table>_status`` (``status_view_sql``):
the model plus ``data_watermark``, ``period_status`` and ``revision``, each measure as first
published and its change since, and when, why and by which restatement the period was last
restated (``tardy.restated_periods``), computed from bronze when it is read, so it never goes
stale; the grace window is written into it when ``ensure_status_views`` (re)creates it:
``tardy publish`` does, and every ``status`` call does for the headline model's
(``tardy.project.headline``: the project's ``headline_model``, else its first published
model), the one ``status`` points its reader to (its moved rows per model come from
``tardy.consumers.revisions``, which reads no view).

``tardy status`` prints a ``Status`` with ``tardy.rendering.status.render_status``.
"""

from __future__ import annotations

import typing as t
from dataclasses import asdict, dataclass, field, replace
from datetime import date, datetime, timedelta

from tardy.consumers.revisions import Revisions
from tardy.engine.delta import single_row
from tardy.engine.log import PERIODS_VIEW, ensure_log
from tardy.engine.trail import ensure_trail, standing_rows
from tardy.ingest.tables import arrivals, main_table
from tardy.lateness.grace import data_watermark, is_final
from tardy.lateness.series import LATE_SQL, MEASURED_SQL
from tardy.project.headline import headline
from tardy.quarantine.listing import Count

if t.TYPE_CHECKING:
    from pyspark.sql import SparkSession
    from sqlmesh import Context

    from tardy.engine.closure import Closure
    from tardy.engine.results import Manifest

STATUS_SCHEMA = "tardy"

# The per-period status view of a published model (``status_view_sql``): every column of the
# model, the data watermark, the status of the period (final when its last day lies before
# the watermark: ``Closure.key_of``), its revision (how many promoted, not rolled back,
# restatements changed the row, from the change trail), each measure as first published
# (before the first of them; a row a restatement added was first published as 0) and its
# change since, and the period's last restatement. To add columns, extend this statement.
STATUS_VIEW_SQL = f"""
CREATE OR REPLACE VIEW {{view}}
COMMENT 'final: the whole period lies before max(bronze arrival_ts) - grace days; revision:
the restatements that changed the row (tardy.transaction_changes)'
AS
WITH watermark AS (
  SELECT MAX(arrival_ts) - MAKE_DT_INTERVAL({{grace_days}}) AS data_watermark
  FROM ({{bronze}})
), revisions AS (
  SELECT {{revisions}}
  FROM ({{standing}})
  GROUP BY row_key
), rows AS (
  SELECT
    d.*,
    w.data_watermark,
    CASE WHEN d.`{{time}}` < {{key}} THEN 'final' ELSE 'provisional' END AS period_status,
    {{columns}},
    r.last_restated_at,
    r.last_restatement_reason,
    r.last_restatement_id
  FROM {{table}} AS d
  CROSS JOIN watermark AS w
  LEFT JOIN revisions AS v ON v.row_key = {{row_key}}
  LEFT JOIN {PERIODS_VIEW} AS r
    ON r.model = '{{table}}' AND r.period = d.`{{time}}`
)
SELECT {{changes}}
FROM rows
"""


def status_view_name(table_name: str) -> str:
    """``<schema>.<table>`` -> ``tardy.<table>_status``."""
    return f"{STATUS_SCHEMA}.{table_name.split('.', 1)[1]}_status"


def status_view_sql(closure: Closure, table_name: str, grace_days: int, bronze: str) -> str:
    """The ``CREATE OR REPLACE VIEW`` of ``table_name``'s status view: its grain, time column
    and measures (``notes.measures_of``) from the model; ``bronze``: every declared bronze
    table's arrivals."""
    from sqlglot import exp

    from tardy.consumers.notes import measures_of
    from tardy.engine import sqlmesh_api
    from tardy.engine.diff import key_sql

    snapshot = closure.snapshots[table_name]
    types = snapshot.model.columns_to_types or {}
    measures = measures_of(snapshot)
    day = exp.cast(exp.column("data_watermark", table="w"), exp.DataType.build("date"))
    first = [
        f"MIN_BY(COALESCE(before['{m}'], '0'), promoted_at) AS first_published_{m}"
        for m in measures
    ]
    columns = ["COALESCE(v.revision, 0) AS revision"] + [
        f"COALESCE(CAST(v.first_published_{m} AS {types[m].sql('spark')}), d.`{m}`)"
        f" AS first_published_{m}"
        for m in measures
    ]
    changes = ["*"] + [
        f"`{m}` - first_published_{m} AS {m}_change_since_first_published" for m in measures
    ]
    return STATUS_VIEW_SQL.format(
        view=status_view_name(table_name),
        grace_days=grace_days,
        bronze=bronze,
        revisions=", ".join(["row_key", "COUNT(DISTINCT restatement_id) AS revision", *first]),
        standing=standing_rows(table_name),
        time=sqlmesh_api.time_column(snapshot),
        key=closure.key_of(table_name, day).sql("spark"),
        columns=",\n    ".join(columns),
        table=table_name,
        row_key=key_sql(sqlmesh_api.grain(snapshot), "d", "d"),
        changes=", ".join(changes),
    )


@dataclass
class SourceStatus:
    """Lateness of one source system's bronze rows (or of all of them: ``source_system='*'``)."""

    source_system: str
    rows: int
    measured_rows: int
    rows_without_event_ts: int
    rows_event_after_arrival: int
    late_rows: int
    late_ratio: float | None
    lag_hours_p50: float | None
    lag_hours_p95: float | None
    lag_hours_p99: float | None
    max_arrival_ts: str | None


@dataclass(frozen=True)
class RestatedDay:
    """A period of a published model that promoted restatements changed, with the latest."""

    model: str
    event_date: str  # the period's key: a day, or a week's or month's first day
    period_status: str  # final / provisional
    restatement_id: str
    reason: str
    restated_at: str


RESTATED_SQL = f"""
SELECT model, period, last_restatement_id, last_restatement_reason, last_restated_at
FROM {PERIODS_VIEW}
WHERE model IN ({{models}})
ORDER BY model, period
"""


def restated_days(
    spark: SparkSession, models: t.Collection[str], closure: Closure, watermark: datetime | None
) -> list[RestatedDay]:
    """The periods of ``models`` that promoted restatements changed (``tardy.restated_periods``,
    one statement), each final or provisional by its last day (``closure.last_day``)."""
    from tardy.sql import literal

    if not models:
        return []
    rows = spark.sql(RESTATED_SQL.format(models=", ".join(map(literal, sorted(models)))))
    return [
        RestatedDay(
            r.model,
            r.period.isoformat(),
            "final" if is_final(closure.last_day(r.model, r.period), watermark) else "provisional",
            r.last_restatement_id,
            r.last_restatement_reason,
            f"{r.last_restated_at:%Y-%m-%d %H:%M:%S}",
        )
        for r in rows.collect()
    ]


@dataclass
class Status:
    max_arrival_ts: str | None
    data_watermark: str | None
    grace_days: int
    last_final_day: str | None
    first_provisional_day: str | None
    sources: list[SourceStatus]
    overall: SourceStatus
    pending_final: dict[str, list[list[str]]]
    pending_provisional: dict[str, list[list[str]]]
    absorbed_but_final: dict[str, list[list[str]]]
    detect: dict[str, object] = field(default_factory=dict)
    # The headline's status view (``tardy.project.headline``); None before its first plan.
    view: str | None = None
    # The periods of every published model that a promoted restatement changed, with the
    # latest one.
    restated: list[RestatedDay] = field(default_factory=list)
    # How much restated days moved since first published.
    revisions: Revisions = field(default_factory=Revisions)  # the headline model's
    # Every published model's that restatements moved (``tardy.consumers.revisions``).
    revisions_by_model: dict[str, Revisions] = field(default_factory=dict)
    # How long the oldest pending late row for a final day has waited (None: none pending).
    pending_age_hours: float | None = None
    # Quarantined records per source and reason: open and reviewed (``tardy quarantine``).
    quarantine_review: list[Count] = field(default_factory=list)
    # The detect manifest the pending periods come from; not in ``as_dict`` (``detect`` holds
    # its summary): ``tardy status`` records it as ``tardy detect``'s answer.
    manifest: Manifest | None = field(default=None, repr=False, compare=False)

    def as_dict(self) -> dict[str, object]:
        out = asdict(replace(self, manifest=None))
        del out["manifest"]
        return out

    @classmethod
    def from_dict(cls, raw: dict[str, t.Any]) -> Status:
        """The inverse of ``as_dict`` (a recorded status: ``tardy.cli.recorded``)."""
        return cls(
            **{
                **raw,
                "sources": [SourceStatus(**s) for s in raw["sources"]],
                "overall": SourceStatus(**raw["overall"]),
                "restated": [RestatedDay(**d) for d in raw["restated"]],
                "revisions": Revisions(**raw["revisions"]),
                "revisions_by_model": {
                    model: Revisions(**moved)
                    for model, moved in raw.get("revisions_by_model", {}).items()
                },
                "quarantine_review": [Count(**c) for c in raw.get("quarantine_review", [])],
            }
        )


def split_by_finality(
    manifest: Manifest, watermark: datetime | None, closure: Closure
) -> tuple[dict[str, list[list[str]]], dict[str, list[list[str]]], dict[str, list[list[str]]]]:
    """(pending_final, pending_provisional, absorbed_but_final) of a detect manifest. A
    period is final when its last day is (``closure.last_day``: a week's Sunday)."""
    from tardy.engine.results import days_of, ranges

    def final(model: str, key: date) -> bool:
        return is_final(closure.last_day(model, key), watermark)

    pending_final, pending_provisional, absorbed_final = {}, {}, {}
    for model, spans in manifest.impacted.items():
        keys = days_of(spans)
        pending_final[model] = ranges(k for k in keys if final(model, k))
        pending_provisional[model] = ranges(k for k in keys if not final(model, k))
    for model, spans in manifest.absorbed_by_next_run.items():
        absorbed_final[model] = ranges(k for k in days_of(spans) if final(model, k))
    return pending_final, pending_provisional, absorbed_final


def ensure_status_view(context: Context, spark: SparkSession) -> str | None:
    """(Re)create the headline model's status view (``tardy.project.headline``); returns its
    name, or None when the project publishes no model or its table does not exist yet (no
    ``sqlmesh plan`` has built it)."""
    lead = headline(context)
    if lead is None or not spark.catalog.tableExists(lead.model):
        return None
    return ensure_status_views(context, spark, [lead.model])[0]


def ensure_status_views(
    context: Context, spark: SparkSession, tables: t.Iterable[str]
) -> list[str]:
    """(Re)create the status view of each model in ``tables`` (the grace window is written
    into it); returns their names."""
    from tardy.engine import sqlmesh_api
    from tardy.engine.closure import Closure

    spark.sql(f"CREATE SCHEMA IF NOT EXISTS {STATUS_SCHEMA}")
    ensure_log(spark)  # the restatement log and its tardy.restated_periods view
    ensure_trail(spark)
    closure = Closure(context, sqlmesh_api.model_snapshots(context))
    grace, bronze = int(context.config.variables["grace_days"]), arrivals(spark)
    names = []
    for table_name in tables:
        spark.sql(status_view_sql(closure, table_name, grace, bronze))
        names.append(status_view_name(table_name))
    return names


def _iso(value: datetime | None) -> str | None:
    return value.isoformat() if value is not None else None


def _hours(values: list[float] | None, index: int) -> float | None:
    return None if values is None else float(values[index])


def lateness(spark: SparkSession, grace_days: int) -> tuple[list[SourceStatus], SourceStatus]:
    """Per-source and overall lateness since the first arrival (see the module's
    definitions): the lateness series brought up to date and summed (two statements when
    nothing is pending)."""
    from tardy.lateness.series import extend, totals

    extend(spark)
    sources, overall = [], None
    for row in totals(spark, grace_days):
        measured, without = int(row.measured_rows), int(row.rows_without_event_ts)
        item = SourceStatus(
            source_system="*" if row.is_total else row.source_system,
            rows=int(row.n_rows),
            measured_rows=measured,
            rows_without_event_ts=without,
            rows_event_after_arrival=int(row.n_rows) - measured - without,
            late_rows=int(row.late_rows),
            late_ratio=int(row.late_rows) / measured if measured else None,
            lag_hours_p50=_hours(row.lag_hours, 0),
            lag_hours_p95=_hours(row.lag_hours, 1),
            lag_hours_p99=_hours(row.lag_hours, 2),
            max_arrival_ts=_iso(row.max_arrival_ts),
        )
        if row.is_total:
            overall = item
        else:
            sources.append(item)
    sources.sort(key=lambda s: s.source_system)
    if overall is None:  # the series is empty: the grouping sets yield no row at all
        overall = SourceStatus("*", 0, 0, 0, 0, 0, None, None, None, None, None)
    return sources, overall


def pending_age_hours(
    spark: SparkSession, previous_watermark: str | None, grace_days: int
) -> float:
    """How long, in the feed's time, the oldest late row that arrived after the arrival
    watermark (that no restatement applied yet) has waited: ``max(arrival_ts)`` minus its
    arrival (one statement). Feed time, like everything here: a replayed feed ages alike."""
    # Bronze is append-only: the rows after the watermark are in its partitions from its day on.
    newer, since = (
        (
            f"WHERE arrival_date >= DATE'{previous_watermark[:10]}'",
            f"arrival_ts > TIMESTAMP'{previous_watermark}'",
        )
        if previous_watermark
        else ("", "TRUE")
    )
    late = LATE_SQL.format(grace_days=int(grace_days))
    row = single_row(
        spark.sql(
            f"""
        SELECT (UNIX_MICROS(MAX(arrival_ts)) - UNIX_MICROS(MIN(
                 CASE WHEN {since} AND {MEASURED_SQL} AND {late} THEN arrival_ts END
               ))) / 3600e6 AS hours
        FROM {main_table()} {newer}
        """
        )
    )
    return float(row.hours or 0.0)


def status(context: Context, spark: SparkSession) -> Status:
    """The data watermark, per-source lateness, and final periods with pending late data.

    Also (re)creates the headline model's status view (``ensure_status_view``).
    """
    from tardy.consumers.revisions import revisions
    from tardy.engine import sqlmesh_api
    from tardy.engine.closure import Closure
    from tardy.engine.detect import detect
    from tardy.engine.sqlmesh_api import published_snapshots
    from tardy.quarantine.listing import counts, read

    grace = int(context.config.variables["grace_days"])
    sources, overall = lateness(spark, grace)
    max_arrival = datetime.fromisoformat(overall.max_arrival_ts) if overall.max_arrival_ts else None
    watermark = data_watermark(max_arrival, grace)
    if context.state_sync.get_environment("prod") is None:  # no `sqlmesh plan` yet
        return _before_prod(sources, overall, grace, max_arrival, watermark)
    view = ensure_status_view(context, spark)
    lead = headline(context)
    published = published_snapshots(context)
    manifest = detect(context, spark)
    closure = Closure(context, sqlmesh_api.model_snapshots(context))
    pending_final, pending_provisional, absorbed_final = split_by_finality(
        manifest, watermark, closure
    )
    moved = revisions(context, spark, published)
    return Status(
        **_feed(grace, max_arrival, watermark),
        sources=sources,
        overall=overall,
        pending_final=pending_final,
        pending_provisional=pending_provisional,
        absorbed_but_final=absorbed_final,
        detect={
            "arrival_watermark": manifest.arrival_watermark,
            "bronze_version": manifest.bronze_version,
            "since_bronze_version": manifest.since_bronze_version,
            "late_rows": manifest.late_rows,
            "impacted": manifest.impacted,
            "absorbed_by_next_run": manifest.absorbed_by_next_run,
        },
        restated=restated_days(spark, published, closure, watermark),
        view=view,
        revisions=moved.get(lead.model, Revisions(model=lead.model)) if lead else Revisions(),
        revisions_by_model=moved,
        pending_age_hours=(
            pending_age_hours(spark, manifest.previous_watermark, grace)
            if any(pending_final.values())
            else None
        ),
        quarantine_review=counts(read(context, spark, clock=max_arrival).records),
        manifest=manifest,
    )


def _feed(grace: int, max_arrival: datetime | None, watermark: datetime | None) -> dict[str, t.Any]:
    """How far the feed has come: the latest arrival, the watermark, the final days."""
    return {
        "max_arrival_ts": _iso(max_arrival),
        "data_watermark": _iso(watermark),
        "grace_days": grace,
        "last_final_day": (watermark.date() - timedelta(days=1)).isoformat() if watermark else None,
        "first_provisional_day": watermark.date().isoformat() if watermark else None,
    }


def _before_prod(
    sources: list[SourceStatus],
    overall: SourceStatus,
    grace: int,
    max_arrival: datetime | None,
    watermark: datetime | None,
) -> Status:
    """A home no ``sqlmesh plan`` has built: the feed's lateness and watermark; no model
    to be pending, restated or quarantined yet."""
    return Status(
        **_feed(grace, max_arrival, watermark),
        sources=sources,
        overall=overall,
        pending_final={},
        pending_provisional={},
        absorbed_but_final={},
    )
