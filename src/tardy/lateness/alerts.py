"""Alerts a scheduler can act on: ``tardy status --check`` exits non-zero on any of them.

Thresholds are tiered the way freshness targets are: a real-time dashboard tolerates little
lag, a month close a lot. ``project.yaml``'s ``lateness_alert_tiers`` names each tier's
limits; each declared source names its tier (``lateness`` in ``sources.yaml``,
``tardy.project.sources``); ``pending_late_data_max_age_hours`` bounds how long late data for final
days may wait for a restatement.

* **Late ratio / p99 lag** (per source, from ``tardy.consumers.status``'s lateness): an alert
  when the source's value is *above* its tier's limit; a source without measured rows has no value
  and raises none.
* **Against each source's own history, now** (``tardy.lateness.baseline``: the hours up to now, the
  wall clock or ``--as-of`` / ``TARDY_NOW``): ``late_ratio_sustained``, the late ratio above
  the tier's limit in each of the last ``sustained_hours`` hours that had arrivals;
  ``lag_p99_vs_baseline``, the p99 lag above ``lag_p99_factor`` times the source's rolling
  baseline in each of them; ``source_silent``, no arrival for longer than the source's
  cadence times ``silence_factor``; ``restatement_frequency``, the days restated in the
  current week above the mean + ``restatement_sigmas`` σ of the weeks before.
* Every alert of a source names its ``owner`` (``sources.yaml``); the baseline alerts the
  hours they cover.
* **Open quarantine** (``quarantine_open_max_hours``): a source's oldest quarantined record
  without a steward's decision (``tardy quarantine``) has waited longer, on the feed's clock;
  the alert names the source's owner.
* **Pending age**: late bronze rows for final days that no restatement has applied yet
  (``Status.pending_final`` is not empty) have waited ``max(arrival_ts) - min(arrival_ts of
  the late rows that arrived after the arrival watermark)``. Measured in the feed's own time,
  as everything in tardy, so a replayed or simulated feed alerts the same way; a feed that
  stopped does not age its pending rows.
"""

from __future__ import annotations

import statistics
import typing as t
from dataclasses import asdict, dataclass
from enum import StrEnum

from tardy.errors import InputError

if t.TYPE_CHECKING:
    from tardy.lateness.baseline import Baseline, Recent
    from tardy.quarantine.listing import Count

TIERS_VARIABLE = "lateness_alert_tiers"
PENDING_AGE_VARIABLE = "pending_late_data_max_age_hours"
QUARANTINE_AGE_VARIABLE = "quarantine_open_max_hours"
ANY_SOURCE = "*"


class SourceLateness(t.Protocol):
    """What an alert reads of one source's lateness (``tardy.consumers.status.SourceStatus``)."""

    @property
    def source_system(self) -> str: ...
    @property
    def late_ratio(self) -> float | None: ...
    @property
    def lag_hours_p99(self) -> float | None: ...


class Observed(t.Protocol):
    """What the alerts read of a computed status (``tardy.consumers.status.Status``): a
    protocol, so that the alerts sit below the status that reports them."""

    @property
    def sources(self) -> t.Sequence[SourceLateness]: ...
    @property
    def pending_age_hours(self) -> float | None: ...
    @property
    def quarantine_review(self) -> t.Sequence[Count]: ...


class Metric(StrEnum):
    LATE_RATIO = "late_ratio"
    LAG_HOURS_P99 = "lag_hours_p99"
    PENDING_AGE_HOURS = "pending_age_hours"
    LATE_RATIO_SUSTAINED = "late_ratio_sustained"
    LAG_P99_VS_BASELINE = "lag_p99_vs_baseline"
    RESTATEMENT_FREQUENCY = "restatement_frequency"
    QUARANTINE_OPEN_AGE_HOURS = "quarantine_open_age_hours"
    SOURCE_SILENT = "source_silent"


@dataclass(frozen=True)
class Tier:
    name: str
    late_ratio: float
    lag_hours_p99: float


@dataclass(frozen=True)
class Alert:
    source: str  # a source system, or "*" for the pending-age check
    metric: Metric
    value: float
    threshold: float
    tier: str
    owner: str | None = None  # the source's, to page first (sources.yaml)
    hours: tuple[str, ...] = ()  # the hours it covers (the baseline alerts')
    sigmas: float | None = None  # restatement_frequency's restatement_sigmas

    def as_dict(self) -> dict[str, object]:
        return {**asdict(self), "hours": list(self.hours)}

    @property
    def message(self) -> str:
        owner = f" (owner {self.owner})" if self.owner else ""
        during = f" in each hour {self.hours[0]} .. {self.hours[-1]}" if self.hours else ""
        if self.metric == Metric.LATE_RATIO_SUSTAINED:
            return (
                f"source {self.source}{owner}: late ratio above {self.threshold:.2%}{during}, "
                f"at least {self.value:.2%} (tier {self.tier})"
            )
        if self.metric == Metric.LAG_P99_VS_BASELINE:
            return (
                f"source {self.source}{owner}: p99 lag at least {self.value:,.1f}x its "
                f"baseline{during} (limit {self.threshold:,.1f}x)"
            )
        if self.metric == Metric.RESTATEMENT_FREQUENCY:
            week = self.hours[0] if self.hours else "?"
            return (
                f"{self.value:,.0f} days restated in the week of {week}, above "
                f"{self.threshold:,.1f} (the mean + {self.sigmas:g} sigma of the weeks before)"
            )
        if self.metric == Metric.SOURCE_SILENT:
            last = self.hours[0] if self.hours else "?"
            return (
                f"source {self.source}{owner}: silent for {self.value:,.1f} h, no arrival "
                f"since {last} (limit {self.threshold:,.1f} h, tier {self.tier})"
            )
        if self.metric == Metric.QUARANTINE_OPEN_AGE_HOURS:
            return (
                f"source {self.source}{owner}: a quarantined record has waited "
                f"{self.value:,.1f} h for review (limit {self.threshold:,.1f} h): "
                "`tardy quarantine`"
            )
        if self.metric == Metric.PENDING_AGE_HOURS:
            return (
                f"late data for final days has waited {self.value:,.1f} h for a restatement "
                f"(limit {self.threshold:,.1f} h): run `tardy restate`"
            )
        shown = (
            f"{self.value:.2%} > {self.threshold:.2%}"
            if self.metric == Metric.LATE_RATIO
            else f"{self.value:,.1f} h > {self.threshold:,.1f} h"
        )
        return f"source {self.source}{owner}: {self.metric} {shown} (tier {self.tier})"


@dataclass(frozen=True)
class Thresholds:
    tiers: dict[str, Tier]
    sources: dict[str, str]  # source -> tier name
    pending_age_hours: float | None
    quarantine_open_hours: float | None = None

    def tier_of(self, source: str) -> Tier | None:
        name = self.sources.get(source, self.sources.get(ANY_SOURCE))
        return None if name is None else self.tiers[name]


def thresholds(variables: dict[str, t.Any], source_tiers: dict[str, str]) -> Thresholds:
    """The tiers configured in ``project.yaml``'s variables and each source's tier
    (``source_tiers``: ``sources.yaml``'s ``lateness``, ``"*"`` for any other); a clear error
    when a source names a tier that is not defined or a limit is not a number."""
    raw_tiers = variables.get(TIERS_VARIABLE) or {}
    tiers = {}
    for name, limits in raw_tiers.items():
        try:
            tiers[name] = Tier(
                name, float(limits[Metric.LATE_RATIO]), float(limits[Metric.LAG_HOURS_P99])
            )
        except (KeyError, TypeError, ValueError) as error:
            raise InputError(
                f"project.yaml: {TIERS_VARIABLE}.{name} needs numbers {Metric.LATE_RATIO} and "
                f"{Metric.LAG_HOURS_P99} ({error})"
            ) from error
    sources = {str(k): str(v) for k, v in source_tiers.items()}
    unknown = sorted(f"{s}: {tier}" for s, tier in sources.items() if tier not in tiers)
    if unknown:
        raise InputError(
            f"sources.yaml: lateness names tiers not in project.yaml's {TIERS_VARIABLE}: "
            + ", ".join(unknown)
        )
    age = variables.get(PENDING_AGE_VARIABLE)
    open_age = variables.get(QUARANTINE_AGE_VARIABLE)
    return Thresholds(
        tiers,
        sources,
        None if age is None else float(age),
        None if open_age is None else float(open_age),
    )


def _source_alerts(source: SourceLateness, tier: Tier, owner: str | None) -> list[Alert]:
    out = []
    for metric, value, limit in (
        (Metric.LATE_RATIO, source.late_ratio, tier.late_ratio),
        (Metric.LAG_HOURS_P99, source.lag_hours_p99, tier.lag_hours_p99),
    ):
        if value is not None and value > limit:
            out.append(Alert(source.source_system, metric, float(value), limit, tier.name, owner))
    return out


def check(
    status: Observed, limits: Thresholds, owners: t.Mapping[str, str | None] | None = None
) -> list[Alert]:
    """Every exceeded threshold of a status (``tardy.consumers.status.Status``); ``owners``:
    each source's (sources.yaml), named by its quarantine alert."""
    alerts = []
    owners = owners or {}
    for source in status.sources:
        tier = limits.tier_of(source.source_system)
        if tier is not None:
            alerts += _source_alerts(source, tier, owners.get(source.source_system))
    age, limit = status.pending_age_hours, limits.pending_age_hours
    if age is not None and limit is not None and age > limit:
        alerts.append(Alert(ANY_SOURCE, Metric.PENDING_AGE_HOURS, age, limit, "pending"))
    return alerts + check_quarantine(status, limits, owners)


def check_quarantine(
    status: Observed, limits: Thresholds, owners: t.Mapping[str, str | None]
) -> list[Alert]:
    """A source whose oldest open quarantined record waited longer than the limit."""
    limit = limits.quarantine_open_hours
    if limit is None:
        return []
    oldest: dict[str, float] = {}
    for count in status.quarantine_review:
        if count.oldest_open_hours is not None:
            oldest[count.source] = max(oldest.get(count.source, 0.0), count.oldest_open_hours)
    return [
        Alert(
            source, Metric.QUARANTINE_OPEN_AGE_HOURS, age, limit, "quarantine", owners.get(source)
        )
        for source, age in sorted(oldest.items())
        if age > limit
    ]


def _recent_alerts(recent: Recent, tier: Tier, factor: float) -> list[Alert]:
    out = []
    hours = tuple(recent.hours)
    # An hour without arrivals (None) is an hour of the window, not a break in it.
    ratios = [r for r in recent.late_ratios if r is not None]
    if ratios and all(r > tier.late_ratio for r in ratios):
        worst = min(ratios)
        out.append(
            Alert(
                recent.source_system,
                Metric.LATE_RATIO_SUSTAINED,
                worst,
                tier.late_ratio,
                tier.name,
                recent.owner,
                hours,
            )
        )
    base, lags = recent.baseline_lag_p99, [lag for lag in recent.lag_p99 if lag is not None]
    if base and lags and all(lag > factor * base for lag in lags):
        least = min(lags)
        out.append(
            Alert(
                recent.source_system,
                Metric.LAG_P99_VS_BASELINE,
                least / base,
                factor,
                tier.name,
                recent.owner,
                hours,
            )
        )
    return out


def check_baseline(baseline: Baseline, limits: Thresholds) -> list[Alert]:
    """Every alert against the sources' own history (``tardy.lateness.baseline``), now."""
    settings = baseline.settings
    alerts = []
    for recent in baseline.recent:
        tier = limits.tier_of(recent.source_system)
        if tier is not None:
            alerts += _recent_alerts(recent, tier, float(settings["lag_p99_factor"]))
    for silence in baseline.silent:
        tier = limits.tier_of(silence.source_system)
        if silence.silent_hours > silence.limit_hours:
            alerts.append(
                Alert(
                    silence.source_system,
                    Metric.SOURCE_SILENT,
                    round(silence.silent_hours, 3),
                    silence.limit_hours,
                    tier.name if tier else "silence",
                    silence.owner,
                    (silence.last_arrival,),
                )
            )
    *before, current = baseline.restated_days or [0]
    if before:
        mean = statistics.fmean(before)
        limit = mean + float(settings["restatement_sigmas"]) * statistics.pstdev(before)
        if current > limit and current >= settings["restatement_min_days"]:
            alerts.append(
                Alert(
                    ANY_SOURCE,
                    Metric.RESTATEMENT_FREQUENCY,
                    float(current),
                    limit,
                    "restatements",
                    hours=(baseline.current_week,) if baseline.current_week else (),
                    sigmas=float(settings["restatement_sigmas"]),
                )
            )
    return alerts
