"""The records ``tardy report`` draws: what ``tardy.reporting.gather`` reads from the lakehouse and
``tardy.rendering.html`` turns into pages (plain dataclasses, values as text or numbers).
"""

from __future__ import annotations

import typing as t
from dataclasses import asdict, dataclass, field

from tardy.quarantine.listing import Count

if t.TYPE_CHECKING:
    from tardy.consumers.card import Card


@dataclass(frozen=True)
class Restated:
    """One restatement that changed a period (hover text on the charts)."""

    restatement_id: str
    reason: str
    promoted_at: str  # ISO-8601, UTC


@dataclass
class DailyRevision:
    """One period of the headline model (``tardy.project.headline``), its measure summed over
    the period's rows: first published vs today."""

    event_date: str  # the period (the model's time column)
    first_published: str  # decimal text: the measure before any restatement changed the day
    final: str  # decimal text: today's
    revision: int  # restatements (not rolled back) that changed the day; 0 = never restated
    period_status: str  # final / provisional
    restatements: list[Restated] = field(default_factory=list)  # oldest first


@dataclass
class RestatedPeriod:
    """A period (day, week start, month start) of a model that a promoted restatement changed."""

    model: str
    period: str
    restatement_id: str
    reason: str
    promoted_at: str
    recent: bool  # promoted in the last 7 days


@dataclass
class LatenessHour:
    """Lateness of one source's bronze rows that arrived in one hour (the lateness series)."""

    source_system: str
    arrival_hour: str  # ISO, UTC
    rows: int
    late_rows: int
    late_ratio: float | None
    lag_hours_p50: float | None
    lag_hours_p95: float | None
    lag_hours_p99: float | None


@dataclass
class LatenessAlert:
    """An alert against a source's own history, now (``tardy status --check``'s baseline
    alerts): drawn over the hours it covers."""

    source_system: str
    metric: str
    hours: list[str]  # ISO, UTC, oldest first
    text: str


@dataclass
class QuarantineDay:
    day: str  # the quarantined row's day (silver.sales_quarantine's time column)
    reason: str
    rows: int


@dataclass
class IntervalChange:
    """One restated interval of one model, before and after (from the restatement's diff)."""

    model: str
    start: str
    end: str
    measure: str | None  # the DECIMAL column shown (the model's own measure), None if none
    before: str | None
    after: str | None
    rows_before: int
    rows_after: int
    keys_added: int
    keys_removed: int
    keys_changed: int


@dataclass
class RestatementSummary:
    restatement_id: str
    reason: str
    status: str  # the log's latest action: promoted, rolled_back, staged, ...
    logged_at: str
    actor: str
    intervals: list[IntervalChange] = field(default_factory=list)


@dataclass
class TrailRow:
    """One row of ``tardy.transaction_changes`` (values as text)."""

    model: str
    row_key: str
    event_date: str
    change: str
    action: str
    before: dict[str, str] | None
    after: dict[str, str] | None


@dataclass(frozen=True)
class ModelRow:
    """One registered model version (``tardy.training``): what it read, how it scored,
    which later publications changed days it read."""

    version: int
    champion: bool
    trained_on: list[str]  # "<table>@v<N> <first>..<last>" per input
    trained_after: str  # the restatement it was retrained after, or ""
    holdout_mae: float | None
    decision: str
    stale_by: list[str]  # "<table>@v<N> (<produced by>): k days" per later publication
    artifacts: str  # a file: URI


@dataclass
class Report:
    """Everything ``tardy report`` draws."""

    generated_at: str
    home: str
    grace_days: int
    daily: list[DailyRevision]  # the headline model's periods
    periods: list[RestatedPeriod]
    lateness: list[LatenessHour]
    quarantine: list[QuarantineDay]
    restatements: list[RestatementSummary]
    models: list[ModelRow] = field(default_factory=list)
    cards: list[Card] = field(default_factory=list)  # the published models' (``tardy card``)
    lateness_alerts: list[LatenessAlert] = field(default_factory=list)
    # Per source: the p99 lag above which ``lag_p99_vs_baseline`` fires (k × its baseline).
    lag_limits: dict[str, float] = field(default_factory=dict)
    # Quarantined records open and reviewed per source and reason (``tardy quarantine``).
    quarantine_review: list[Count] = field(default_factory=list)
    # The model and measure ``daily`` is of (``tardy.project.headline``); "" when none.
    headline_model: str = ""
    headline_measure: str = ""

    def as_dict(self) -> dict[str, object]:
        return asdict(self)


@dataclass
class RestatementReport:
    """Everything ``tardy report --restatement ID`` draws: one restatement, for reviewers."""

    generated_at: str
    summary: RestatementSummary
    manifest: dict[str, object]  # detect's manifest (roots, impacted, reasons, stock commands)
    audits: list[dict[str, object]]  # model, audit, interval_start, interval_end, blocking,
    # failing_rows
    breaker: list[dict[str, object]]  # day, measure, before, after, change
    changes: list[TrailRow]  # the change trail's rows of this restatement (first 200)
    changes_total: int
    how_to: list[str]  # the commands that promote, discard or roll it back
    # What the circuit breaker watched ("<model>: a closed day moving by
    # more than 25%"); None when this home holds no diff of the restatement.
    breaker_rule: str | None = None

    def as_dict(self) -> dict[str, object]:
        return asdict(self)


# -- reading the lakehouse ----------------------------------------------------------------------
