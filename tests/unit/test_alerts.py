"""`tardy status --check`'s rules on hand-made statuses: tiers, the "*" source, the limits
as strict upper bounds, the pending age, and clear errors for a bad configuration."""

from __future__ import annotations

import pytest

from tardy.consumers.status import SourceStatus, Status
from tardy.errors import InputError
from tardy.lateness.alerts import ANY_SOURCE, Metric, check, thresholds

VARIABLES = {
    "lateness_alert_tiers": {
        "realtime": {"late_ratio": 0.01, "lag_hours_p99": 6},
        "month_close": {"late_ratio": 1.0, "lag_hours_p99": 744},
    },
    "pending_late_data_max_age_hours": 72,
}
TIERS = {"pos": "realtime", "*": "month_close"}  # sources.yaml's `lateness`, per source


def source(name: str, late_ratio: float | None, p99: float | None) -> SourceStatus:
    return SourceStatus(name, 10, 10, 0, 0, 1, late_ratio, 1.0, 2.0, p99, None)


def status(*sources: SourceStatus, pending: bool = False, age: float | None = None) -> Status:
    return Status(
        max_arrival_ts=None,
        data_watermark=None,
        grace_days=3,
        last_final_day=None,
        first_provisional_day=None,
        sources=list(sources),
        overall=source("*", None, None),
        pending_final={"m": [["2026-01-01", "2026-01-01"]]} if pending else {},
        pending_provisional={},
        absorbed_but_final={},
        pending_age_hours=age,
    )


def found(result: Status) -> set[tuple[str, str]]:
    return {(a.source, str(a.metric)) for a in check(result, thresholds(VARIABLES, TIERS))}


def test_each_source_against_its_tier_and_the_star_for_the_others() -> None:
    result = status(
        source("pos", 0.02, 5.0),  # realtime: late ratio above 1 %
        source("partner", 1.0, 745.0),  # "*" = month close: 100 % is the limit, p99 above
        source("other", 0.5, 700.0),  # month close: within
    )
    assert found(result) == {("pos", "late_ratio"), ("partner", "lag_hours_p99")}


def test_limits_are_upper_bounds_and_unmeasured_sources_raise_nothing() -> None:
    assert found(status(source("pos", 0.01, 6.0))) == set()
    assert found(status(source("pos", 0.0100001, 6.0001))) == {
        ("pos", "late_ratio"),
        ("pos", "lag_hours_p99"),
    }
    assert found(status(source("pos", None, None))) == set()


def test_pending_age_over_the_limit_alerts() -> None:
    assert found(status(age=72.0)) == set()
    alerts = check(status(age=72.5), thresholds(VARIABLES, TIERS))
    assert [(a.source, a.metric, a.value) for a in alerts] == [
        (ANY_SOURCE, Metric.PENDING_AGE_HOURS, 72.5)
    ]
    assert "waited 72.5 h for a restatement (limit 72.0 h)" in alerts[0].message


def test_no_thresholds_configured_checks_nothing() -> None:
    assert check(status(source("pos", 1.0, 1e9), age=1e9), thresholds({}, {})) == []


def test_bad_configuration_is_a_clear_error() -> None:
    with pytest.raises(
        InputError, match="names tiers not in project.yaml's lateness_alert_tiers: pos: hourly"
    ):
        thresholds(VARIABLES, {"pos": "hourly"})
    with pytest.raises(InputError, match="lateness_alert_tiers.realtime needs numbers"):
        thresholds({**VARIABLES, "lateness_alert_tiers": {"realtime": {"late_ratio": "x"}}}, TIERS)


def test_open_quarantine_older_than_the_limit_alerts_its_source_naming_the_owner() -> None:
    """A source's oldest open quarantined record past ``quarantine_open_max_hours`` alerts
    that source, naming its owner; reviewed records and younger open ones raise nothing."""
    from tardy.quarantine.listing import Count

    result = status()
    result.quarantine_review = [
        Count("pos", "invalid_store_id", 1, 0, 72.5),  # past 72 h
        Count("pos", "negative_quantity", 2, 0, 10.0),
        Count("partner", "invalid_quantity", 0, 3, None),  # every record reviewed
        Count("payments", "missing_refund_id", 1, 0, 72.0),  # at the limit: within
    ]
    limits = thresholds({**VARIABLES, "quarantine_open_max_hours": 72}, TIERS)
    (alert,) = check(result, limits, {"pos": "store-systems@example.com"})
    assert (alert.source, alert.metric, alert.value) == (
        "pos",
        Metric.QUARANTINE_OPEN_AGE_HOURS,
        72.5,
    )
    assert "(owner store-systems@example.com)" in alert.message
    assert check(result, thresholds(VARIABLES, TIERS)) == []  # no limit configured
