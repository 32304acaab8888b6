"""Alerts a scheduler can act on: ``tardy status --check`` exits non-zero on any of them.

Thresholds are tiered the way freshness targets are: a real-time dashboard tolerates little
lag, a month close a lot. ``project.yaml``'s ``lateness_alert_tiers`` names each tier's
limits; each declared source names its tier (``lateness`` in ``sources.yaml``,
``tardy.sources``); ``pending_late_data_max_age_hours`` bounds how long late data for final
days may wait for a restatement.

* **Late ratio / p99 lag** (per source, from ``tardy.consumers.status``'s lateness): an alert
  when the source's value is *above* its tier's limit; a source without measured rows has no value
  and raises none.
* **Pending age**: late bronze rows for final days that no restatement has applied yet
  (``Status.pending_final`` is not empty) have waited ``max(arrival_ts) - min(arrival_ts of
  the late rows that arrived after the arrival watermark)``. Measured in the feed's own time,
  as everything in tardy, so a replayed or simulated feed alerts the same way; a feed that
  stopped does not age its pending rows.
"""

from __future__ import annotations

import typing as t
from dataclasses import asdict, dataclass
from enum import StrEnum

from tardy.errors import InputError

if t.TYPE_CHECKING:
    from tardy.consumers.status import SourceStatus, Status

TIERS_VARIABLE = "lateness_alert_tiers"
PENDING_AGE_VARIABLE = "pending_late_data_max_age_hours"
ANY_SOURCE = "*"


class Metric(StrEnum):
    LATE_RATIO = "late_ratio"
    LAG_HOURS_P99 = "lag_hours_p99"
    PENDING_AGE_HOURS = "pending_age_hours"


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

    def as_dict(self) -> dict[str, object]:
        return asdict(self)

    @property
    def message(self) -> str:
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
        return f"source {self.source}: {self.metric} {shown} (tier {self.tier})"


@dataclass(frozen=True)
class Thresholds:
    tiers: dict[str, Tier]
    sources: dict[str, str]  # source -> tier name
    pending_age_hours: float | None

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
    return Thresholds(tiers, sources, None if age is None else float(age))


def _source_alerts(source: SourceStatus, tier: Tier) -> list[Alert]:
    out = []
    for metric, value, limit in (
        (Metric.LATE_RATIO, source.late_ratio, tier.late_ratio),
        (Metric.LAG_HOURS_P99, source.lag_hours_p99, tier.lag_hours_p99),
    ):
        if value is not None and value > limit:
            out.append(Alert(source.source_system, metric, float(value), limit, tier.name))
    return out


def check(status: Status, limits: Thresholds) -> list[Alert]:
    """Every exceeded threshold of a ``Status``."""
    alerts = []
    for source in status.sources:
        tier = limits.tier_of(source.source_system)
        if tier is not None:
            alerts += _source_alerts(source, tier)
    age, limit = status.pending_age_hours, limits.pending_age_hours
    if age is not None and limit is not None and age > limit:
        alerts.append(Alert(ANY_SOURCE, Metric.PENDING_AGE_HOURS, age, limit, "pending"))
    return alerts
