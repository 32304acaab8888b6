"""Lateness against each source's own history, *now*: what ``tardy status --check`` alerts on
beside the fixed per-tier limits (``tardy.alerts``).

"Now" is the feed's own clock, as everywhere in tardy: the latest arrival hour of the
lateness series (``tardy.lateness_series``) over every source. The window is the
``sustained_hours`` hours ending there; a metric must hold in *each* of them, so a one-hour
spike raises nothing and a spike that has passed raises none (the report keeps it).

Per source, over the window's hours (``Recent``):

- ``late_ratio_sustained``: its late rows (under ``grace_days``) over its measured rows,
  above its tier's ``late_ratio`` in every hour of the window;
- ``lag_p99_vs_baseline``: its p99 lag, above ``lag_p99_factor`` times its baseline in every
  hour of the window. The baseline is the median of the source's hourly p99 lags over the
  ``baseline_days`` before the window (a rolling 7-day baseline by default; the median of
  hourly values, since hourly percentiles do not add up); none without history.

And over the published models (``Baseline.restated_days``):

- ``restatement_frequency``: the days restated (distinct days of the published daily models
  that promoted, not rolled back, restatements changed: ``tardy.restated_periods``; a week's
  or a month's period is not a day, nor a rolling window's: ``day_models``) in the week of
  the feed's last final day, above the mean plus ``restatement_sigmas`` standard deviations
  of the ``restatement_weeks`` weeks before it, and at least ``restatement_min_days``. Weeks
  are those of the restated days (Monday to Sunday), so a replayed feed alerts as the live
  one did.

Settings: ``lateness_baseline`` in ``project.yaml`` (defaults below, from the seeds). Cost:
the series brought up to date (one statement when nothing is pending), one read of the
window and baseline hours, one of the restated days per week.
"""

from __future__ import annotations

import statistics
import typing as t
from dataclasses import asdict, dataclass, field, fields
from datetime import date, datetime, timedelta

from tardy.errors import InputError
from tardy.sql import literal

if t.TYPE_CHECKING:
    from pyspark.sql import SparkSession
    from sqlmesh import Context

    from tardy.lateness_series import Hour

SETTINGS_VARIABLE = "lateness_baseline"


@dataclass(frozen=True)
class Settings:
    """``lateness_baseline`` in ``project.yaml``; the defaults are the seeds'."""

    sustained_hours: int = 3
    lag_p99_factor: float = 2.0
    baseline_days: int = 7
    restatement_weeks: int = 4
    restatement_sigmas: float = 2.0
    restatement_min_days: int = 3

    @classmethod
    def of(cls, variables: t.Mapping[str, t.Any]) -> Settings:
        """The settings ``project.yaml`` names, each default (the fields') where it names none;
        a clear error for an unknown setting or a value that is no number above 0."""
        raw = variables.get(SETTINGS_VARIABLE) or {}
        unknown = sorted(set(raw) - set(DEFAULTS))
        if unknown:
            raise InputError(
                f"project.yaml: {SETTINGS_VARIABLE} has unknown settings {', '.join(unknown)} "
                f"(known: {', '.join(DEFAULTS)})"
            )
        values: dict[str, t.Any] = {}
        for name, default in DEFAULTS.items():
            value = raw.get(name, default)
            try:
                number = float(value)
            except (TypeError, ValueError) as error:
                raise InputError(
                    f"project.yaml: {SETTINGS_VARIABLE}.{name} must be a number, got {value!r}"
                ) from error
            if number <= 0 and name != "restatement_sigmas":
                raise InputError(
                    f"project.yaml: {SETTINGS_VARIABLE}.{name} must be above 0, got {value!r}"
                )
            values[name] = number if isinstance(default, float) else int(number)
        return cls(**values)


DEFAULTS: dict[str, float] = {f.name: f.default for f in fields(Settings)}  # type: ignore[misc]


@dataclass
class Recent:
    """One source's window: its hours' late ratios and p99 lags, and its baseline."""

    source_system: str
    owner: str | None
    hours: list[str]  # the window's hours (ISO, UTC), oldest first
    late_ratios: list[float | None]  # per hour; None: no measured row that hour
    lag_p99: list[float | None]
    baseline_lag_p99: float | None  # None: no hour of history before the window


@dataclass
class Baseline:
    """What the alerts against each source's history read (``measure``)."""

    now: str | None  # the feed's latest arrival hour
    grace_days: int
    settings: dict[str, float]
    recent: list[Recent] = field(default_factory=list)
    # The days restated per week, oldest first: the baseline weeks, then the current week
    # (which starts on ``current_week``).
    restated_days: list[int] = field(default_factory=list)
    current_week: str | None = None
    statements: int = 0

    def as_dict(self) -> dict[str, t.Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, raw: dict[str, t.Any]) -> Baseline:
        return cls(**{**raw, "recent": [Recent(**r) for r in raw.get("recent", [])]})


def window(now: datetime, settings: Settings) -> list[datetime]:
    """The window's hours, oldest first."""
    return [now - timedelta(hours=h) for h in range(settings.sustained_hours - 1, -1, -1)]


def recent_of(
    hours: list[Hour],
    now: datetime,
    settings: Settings,
    grace_days: int,
    owner: str | None,
) -> Recent:
    """One source's ``Recent`` from its series rows (any order)."""
    hours_in = window(now, settings)
    by_hour = {h.arrival_hour: h for h in hours}
    start = hours_in[0] - timedelta(days=settings.baseline_days)
    history = [
        h.lag_hours_p99
        for h in hours
        if start <= h.arrival_hour < hours_in[0] and h.lag_hours_p99 is not None
    ]
    ratios: list[float | None] = []
    lags: list[float | None] = []
    for hour in hours_in:
        row = by_hour.get(hour)
        measured = row.measured_rows if row else 0
        ratios.append(row.late_rows(grace_days) / measured if row and measured else None)
        lags.append(row.lag_hours_p99 if row else None)
    return Recent(
        source_system=hours[0].source_system if hours else "",
        owner=owner,
        hours=[h.isoformat() for h in hours_in],
        late_ratios=ratios,
        lag_p99=lags,
        baseline_lag_p99=statistics.median(history) if history else None,
    )


RESTATED_WEEKS_SQL = """
SELECT DATE_TRUNC('WEEK', period) AS week, COUNT(DISTINCT period) AS days
FROM {view}
WHERE model IN ({models}) AND period >= DATE'{first}' AND period < DATE'{end}'
GROUP BY DATE_TRUNC('WEEK', period)
"""


def day_models(context: Context) -> list[str]:
    """The published models whose periods are the days late data changed: those whose
    interval holding a day is the day itself (``Closure.key``, from the time columns'
    lineage: a weekly rollup's holds its Monday, a monthly one's its first; tried on a week
    of days) and whose day reads that day alone (a rolling feature's ``restate_window`` of
    days is restated for one late day: it would count the window, not the late data). Their
    restated periods count as restated days; none before prod exists."""
    from tardy.consumers.versions import published_snapshots
    from tardy.engine import sqlmesh_api
    from tardy.engine.closure import Closure, window

    try:
        published = published_snapshots(context)
    except sqlmesh_api.NoProdError:
        return []
    closure = Closure(context, sqlmesh_api.model_snapshots(context))
    week = [date(2026, 1, 5) + timedelta(days=i) for i in range(7)]
    return sorted(
        name
        for name, snapshot in published.items()
        if window(snapshot) == 1 and all(closure.key(name, d) == d for d in week)
    )


def measure(
    spark: SparkSession,
    variables: t.Mapping[str, t.Any],
    owners: t.Mapping[str, str | None],
    published: t.Collection[str],
) -> Baseline:
    """The windows of every source with a series and the restated days per week
    (``owners``: each declared source's owner; ``published``: the published daily models,
    ``day_models``)."""
    from tardy.engine.meter import Meter
    from tardy.lateness_series import SERIES_TABLE, extend, hours_of

    settings = Settings.of(variables)
    meter = Meter(spark)
    with meter.step("baseline"):
        extend(spark)
        span = settings.baseline_days * 24 + settings.sustained_hours
        rows = hours_of(
            spark,
            f"arrival_hour >= (SELECT MAX(arrival_hour) FROM {SERIES_TABLE}) - "
            f"MAKE_DT_INTERVAL(0, {span})",
        )
        out = _measured(spark, settings, int(variables["grace_days"]), rows, owners, published)
    out.statements = meter.statements["baseline"]
    return out


def _measured(
    spark: SparkSession,
    settings: Settings,
    grace: int,
    rows: list[Hour],
    owners: t.Mapping[str, str | None],
    published: t.Collection[str],
) -> Baseline:
    from tardy.engine.log import PERIODS_VIEW

    now = max((h.arrival_hour for h in rows), default=None)
    out = Baseline(
        now=now.isoformat() if now else None, grace_days=grace, settings=asdict(settings)
    )
    if now is None:
        return out
    by_source: dict[str, list[Hour]] = {}
    for row in rows:
        by_source.setdefault(row.source_system, []).append(row)
    out.recent = [
        recent_of(mine, now, settings, grace, owners.get(name))
        for name, mine in sorted(by_source.items())
    ]
    # The week of the feed's last final day (its data watermark's day - 1).
    last_final = (now - timedelta(days=grace)).date() - timedelta(days=1)
    current = last_final - timedelta(days=last_final.weekday())
    first = current - timedelta(weeks=settings.restatement_weeks)
    weeks = [first + timedelta(weeks=w) for w in range(settings.restatement_weeks + 1)]
    counts: dict[date, int] = {}
    if published and spark.catalog.tableExists(PERIODS_VIEW):
        sql = RESTATED_WEEKS_SQL.format(
            view=PERIODS_VIEW,
            models=", ".join(literal(m) for m in sorted(published)),
            first=first.isoformat(),
            end=(current + timedelta(weeks=1)).isoformat(),
        )
        counts = {r.week.date(): int(r.days) for r in spark.sql(sql).collect()}
    out.restated_days = [counts.get(week, 0) for week in weeks]
    out.current_week = current.isoformat()
    return out
