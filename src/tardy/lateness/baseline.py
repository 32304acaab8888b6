"""Lateness against each source's own history, *now*: what ``tardy status --check`` alerts on
beside the fixed per-tier limits (``tardy.lateness.alerts``).

"Now" (``clock``) is the wall clock, or the time ``--as-of`` / ``TARDY_NOW`` names for
replaying a feed; ``TARDY_NOW=feed`` is the feed's own clock (the latest arrival hour of the
lateness series over every source; a replayed home such as the demo's says so in its
``clock`` file). The window is the ``sustained_hours`` hours ending at now's hour; a metric
must hold in *each* of its hours that had arrivals (an hour without arrivals is an hour of
the window, not a break), so a one-hour spike raises nothing and a spike that has passed
raises none (the report keeps it).

- ``source_silent``: a source whose latest arrival is older than its expected cadence
  times ``silence_factor``. The cadence is the source's ``cadence_hours`` (``sources.yaml``),
  else fitted from its series: the 95th percentile of the gaps between its arrival hours over
  the ``baseline_days`` before its latest arrival (at least an hour); a source with too few
  hours to fit is silent once its silence outlasts the whole baseline span. Silence is
  measured from the end of the latest hour with arrivals (the series is hourly), so it never
  over-states; a source that never arrived has no series and raises none.

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
window and baseline hours with each source's latest hour, one of the restated days per week.
"""

from __future__ import annotations

import itertools
import math
import os
import statistics
import typing as t
from dataclasses import asdict, dataclass, field, fields
from datetime import UTC, date, datetime, timedelta
from pathlib import Path

from tardy.errors import InputError
from tardy.sql import literal

if t.TYPE_CHECKING:
    from pyspark.sql import SparkSession
    from sqlmesh import Context

    from tardy.lateness.series import Hour

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
    silence_factor: float = 3.0

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


FEED = "feed"  # TARDY_NOW=feed: now is the feed's latest arrival hour
NOW_VARIABLE = "TARDY_NOW"
CLOCK_FILE = "clock"  # in a data home: what TARDY_NOW is for it when unset (the demo: feed)


def clock(as_of: str | None = None, home: Path | None = None) -> datetime | None:
    """Now, for the alerts: ``as_of`` (``--as-of``), else ``TARDY_NOW``, else the data home's
    ``clock`` file, else the wall clock; None: the feed's own clock (``feed``). A clear error
    names the setting whose time does not parse."""
    named, setting = as_of, "--as-of"
    if not named:
        named, setting = os.environ.get(NOW_VARIABLE, "").strip(), NOW_VARIABLE
    if not named and home is not None and (home / CLOCK_FILE).is_file():
        named, setting = (home / CLOCK_FILE).read_text().strip(), str(home / CLOCK_FILE)
    if not named:
        return datetime.now(UTC).replace(tzinfo=None)
    if named.lower() == FEED:
        return None
    try:
        at = datetime.fromisoformat(named.replace("Z", "+00:00"))
    except ValueError as error:
        raise InputError(
            f"{setting}: {named!r} is not an ISO-8601 time (e.g. 2026-01-31T12:00:00Z) or {FEED!r}"
        ) from error
    return at.astimezone(UTC).replace(tzinfo=None) if at.tzinfo else at


@dataclass
class Silence:
    """One source's latest arrival against its expected cadence."""

    source_system: str
    owner: str | None
    last_arrival: str  # the end of its latest hour with arrivals (ISO, UTC)
    silent_hours: float  # from then to now
    cadence_hours: float | None  # declared or fitted; None: too few hours to fit
    declared: bool
    limit_hours: float  # cadence x silence_factor (the baseline span without a cadence)


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
    clock: str | None = None  # now for the window and silence (ISO hour, UTC)
    silent: list[Silence] = field(default_factory=list)  # every source with a series

    def as_dict(self) -> dict[str, t.Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, raw: dict[str, t.Any]) -> Baseline:
        return cls(
            **{
                **raw,
                "recent": [Recent(**r) for r in raw.get("recent", [])],
                "silent": [Silence(**r) for r in raw.get("silent", [])],
            }
        )


def window(now: datetime, settings: Settings) -> list[datetime]:
    """The window's hours, oldest first."""
    return [now - timedelta(hours=h) for h in range(settings.sustained_hours - 1, -1, -1)]


def recent_of(
    hours: list[Hour],
    now: datetime,
    settings: Settings,
    grace_days: int,
    owner: str | None,
    source: str | None = None,
) -> Recent:
    """One source's ``Recent`` from its series rows (any order; ``source``: its name, when
    it may have none in the window)."""
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
        source_system=source or (hours[0].source_system if hours else ""),
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
    from tardy.engine import sqlmesh_api
    from tardy.engine.closure import Closure, window
    from tardy.engine.sqlmesh_api import published_snapshots

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
    now: datetime | None = None,
    cadences: t.Mapping[str, float] | None = None,
) -> Baseline:
    """The windows of every source with a series, their silences and the restated days per
    week (``owners``: each declared source's owner; ``published``: the published daily
    models, ``day_models``; ``now``: ``clock()``'s, None for the feed's own clock;
    ``cadences``: the sources' declared ``cadence_hours``)."""
    from tardy.engine.meter import Meter
    from tardy.lateness.series import HOUR_COLUMNS, SERIES_TABLE, extend, hours_from

    settings = Settings.of(variables)
    meter = Meter(spark)
    with meter.step("baseline"):
        extend(spark)
        span = settings.baseline_days * 24 + settings.sustained_hours
        at = (
            f"(SELECT MAX(arrival_hour) FROM {SERIES_TABLE})"
            if now is None
            else f"TIMESTAMP {literal(_hour(now).isoformat(sep=' '))}"
        )
        window = LATEST_AND_SPAN_SQL.format(
            columns=HOUR_COLUMNS, series=SERIES_TABLE, at=at, span=span
        )
        rows = hours_from(spark, window)
        out = _measured(
            spark, settings, int(variables["grace_days"]), rows, owners, published, now, cadences
        )
    out.statements = meter.statements["baseline"]
    return out


# The series' hours of the span ending at ``{at}`` and each source's latest hour up to it.
LATEST_AND_SPAN_SQL = """
SELECT * FROM (
  SELECT {columns}, MAX(arrival_hour) OVER (PARTITION BY source_system) AS latest_hour
  FROM {series} WHERE arrival_hour <= {at}
) WHERE arrival_hour >= {at} - MAKE_DT_INTERVAL(0, {span}) OR arrival_hour = latest_hour
ORDER BY source_system, arrival_hour
"""


def _hour(at: datetime) -> datetime:
    return at.replace(minute=0, second=0, microsecond=0)


def fitted_cadence(hours: t.Sequence[datetime]) -> float | None:
    """The 95th percentile (nearest rank) of the gaps between consecutive arrival hours, in
    hours, at least 1; None with fewer than two hours."""
    ordered = sorted(set(hours))
    gaps = sorted((b - a).total_seconds() / 3600 for a, b in itertools.pairwise(ordered))
    if not gaps:
        return None
    return max(1.0, gaps[max(0, math.ceil(0.95 * len(gaps)) - 1)])


def silence_of(
    source: str,
    hours: t.Sequence[datetime],
    now: datetime,
    settings: Settings,
    owner: str | None,
    declared: float | None = None,
) -> Silence:
    """``source``'s silence at ``now`` from its arrival hours (its latest among them)."""
    latest = max(hours)
    since = latest - timedelta(days=settings.baseline_days)
    cadence = declared if declared is not None else fitted_cadence([h for h in hours if h >= since])
    span = settings.baseline_days * 24 + settings.sustained_hours
    end = latest + timedelta(hours=1)
    return Silence(
        source_system=source,
        owner=owner,
        last_arrival=end.isoformat(),
        silent_hours=max(0.0, (now - end).total_seconds() / 3600),
        cadence_hours=cadence,
        declared=declared is not None,
        limit_hours=float(span) if cadence is None else cadence * settings.silence_factor,
    )


def _measured(
    spark: SparkSession,
    settings: Settings,
    grace: int,
    rows: list[Hour],
    owners: t.Mapping[str, str | None],
    published: t.Collection[str],
    clock_at: datetime | None = None,
    cadences: t.Mapping[str, float] | None = None,
) -> Baseline:
    from tardy.engine.log import PERIODS_VIEW

    feed = max((h.arrival_hour for h in rows), default=None)
    now = _hour(clock_at) if clock_at is not None else feed
    out = Baseline(
        now=feed.isoformat() if feed else None,
        grace_days=grace,
        settings=asdict(settings),
        clock=now.isoformat() if now else None,
    )
    if feed is None or now is None:
        return out
    by_source: dict[str, list[Hour]] = {}
    for row in rows:
        by_source.setdefault(row.source_system, []).append(row)
    span = settings.baseline_days * 24 + settings.sustained_hours
    first = now - timedelta(hours=span)
    out.recent = [
        recent_of(
            [h for h in mine if h.arrival_hour >= first],
            now,
            settings,
            grace,
            owners.get(name),
            name,
        )
        for name, mine in sorted(by_source.items())
    ]
    out.silent = [
        silence_of(
            name,
            [h.arrival_hour for h in mine],
            clock_at if clock_at is not None else now + timedelta(hours=1),
            settings,
            owners.get(name),
            (cadences or {}).get(name),
        )
        for name, mine in sorted(by_source.items())
    ]
    # The week of the feed's last final day (its data watermark's day - 1).
    last_final = (feed - timedelta(days=grace)).date() - timedelta(days=1)
    current = last_final - timedelta(days=last_final.weekday())
    first_week = current - timedelta(weeks=settings.restatement_weeks)
    weeks = [first_week + timedelta(weeks=w) for w in range(settings.restatement_weeks + 1)]
    counts: dict[date, int] = {}
    if published and spark.catalog.tableExists(PERIODS_VIEW):
        sql = RESTATED_WEEKS_SQL.format(
            view=PERIODS_VIEW,
            models=", ".join(literal(m) for m in sorted(published)),
            first=first_week.isoformat(),
            end=(current + timedelta(weeks=1)).isoformat(),
        )
        counts = {r.week.date(): int(r.days) for r in spark.sql(sql).collect()}
    out.restated_days = [counts.get(week, 0) for week in weeks]
    out.current_week = current.isoformat()
    return out
