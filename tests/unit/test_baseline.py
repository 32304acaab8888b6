"""The alerts against each source's own history (``tardy.lateness.baseline``,
``tardy.lateness.alerts``) on series rows built by hand: what makes each fire, and what does not."""

from __future__ import annotations

from dataclasses import asdict
from datetime import UTC, datetime, timedelta

import pytest

from tardy.errors import InputError
from tardy.lateness.alerts import Metric, check_baseline, thresholds
from tardy.lateness.baseline import Baseline, Settings, clock, fitted_cadence, recent_of, silence_of
from tardy.lateness.series import Hour

NOW = datetime(2026, 3, 9, 23)
SETTINGS = Settings()
VARIABLES = {
    "lateness_alert_tiers": {"daily": {"late_ratio": 0.05, "lag_hours_p99": 120}},
}
LIMITS = thresholds(VARIABLES, {"pos": "daily"})


def hour(at: datetime, p99: float, late: int = 0, measured: int = 100) -> Hour:
    """An hour of ``pos``: ``late`` of its measured rows 9 days late, the rest on time."""
    return Hour("pos", at, measured, measured, 1.0, 2.0, p99, {0: measured - late, 9: late})


def history(base: float = 5.0, **last: float) -> list[Hour]:
    """Eight days of hours with a p99 lag of ``base``; the last ``n`` hours at
    ``last["p99"]`` and with ``last["late"]`` late rows (``n = last["hours"]``)."""
    n = int(last.get("hours", 0))
    out = []
    for h in range(8 * 24):
        at = NOW - timedelta(hours=h)
        if h < n:
            out.append(hour(at, last.get("p99", base), int(last.get("late", 0))))
        else:
            out.append(hour(at, base))
    return out


def alerts_of(hours: list[Hour], restated: list[int] | None = None) -> list:
    recent = recent_of(hours, NOW, SETTINGS, 3, "store-systems@example.com")
    baseline = Baseline(
        now=NOW.isoformat(),
        grace_days=3,
        settings=asdict(SETTINGS),
        recent=[recent],
        restated_days=restated or [0, 0, 0, 0, 0],
        current_week="2026-03-02",
    )
    return check_baseline(baseline, LIMITS)


def test_a_lag_above_twice_the_baseline_in_each_window_hour_alerts_naming_the_owner() -> None:
    (alert,) = alerts_of(history(hours=3, p99=11.0))
    assert (alert.source, alert.metric) == ("pos", Metric.LAG_P99_VS_BASELINE)
    assert alert.owner == "store-systems@example.com"
    assert alert.value == pytest.approx(11.0 / 5.0) and alert.threshold == 2.0
    assert alert.hours == tuple((NOW - timedelta(hours=h)).isoformat() for h in (2, 1, 0))
    assert "store-systems@example.com" in alert.message


@pytest.mark.parametrize("hours", [1, 2])  # spikes shorter than the window
def test_a_spike_shorter_than_the_window_raises_nothing(hours: int) -> None:
    assert alerts_of(history(hours=hours, p99=50.0, late=50)) == []


def test_a_lag_at_twice_the_baseline_is_not_above_it() -> None:
    assert alerts_of(history(hours=3, p99=10.0)) == []


def test_a_spike_that_has_passed_raises_nothing() -> None:
    hours = history()
    for h in hours:
        if timedelta(hours=5) <= NOW - h.arrival_hour <= timedelta(hours=10):
            object.__setattr__(h, "lag_hours_p99", 80.0)
    assert alerts_of(hours) == []


def test_a_late_ratio_above_the_tier_in_each_window_hour_alerts() -> None:
    (alert,) = alerts_of(history(hours=3, late=6))
    assert alert.metric == Metric.LATE_RATIO_SUSTAINED
    assert alert.value == pytest.approx(0.06) and alert.threshold == 0.05


def test_an_hour_without_arrivals_is_an_hour_of_the_window_not_a_break() -> None:
    """The window's last hour had no arrivals: the two hours before it still hold the rule
    (a feed that slows down is not thereby forgiven); a window without any arrival raises no
    window alert (its silence is ``source_silent``'s)."""
    hours = [h for h in history(hours=3, p99=40.0, late=40) if h.arrival_hour != NOW]
    fired = {a.metric for a in alerts_of(hours)}
    assert fired == {Metric.LATE_RATIO_SUSTAINED, Metric.LAG_P99_VS_BASELINE}
    quiet = [
        h for h in history(hours=3, p99=40.0, late=40) if h.arrival_hour < NOW - timedelta(hours=2)
    ]
    assert alerts_of(quiet) == []
    # One hour of the window under the limit still breaks it.
    mixed = history(hours=3, p99=40.0, late=40)
    mixed[1] = hour(mixed[1].arrival_hour, 5.0)
    assert alerts_of(mixed) == []


def test_no_history_no_baseline_alert() -> None:
    recent = recent_of(history()[:3], NOW, SETTINGS, 3, None)
    assert recent.baseline_lag_p99 is None


def test_restated_days_above_the_mean_plus_two_sigma_alert() -> None:
    (alert,) = alerts_of(history(), restated=[2, 3, 2, 3, 6])
    assert alert.metric == Metric.RESTATEMENT_FREQUENCY
    assert alert.value == 6 and alert.threshold == pytest.approx(2.5 + 2 * 0.5)
    assert alert.hours == ("2026-03-02",)
    assert "the mean + 2 sigma" in alert.message


def test_the_frequency_alert_says_the_sigmas_it_was_set_to() -> None:
    recent = recent_of(history(), NOW, SETTINGS, 3, None)
    settings = {**asdict(SETTINGS), "restatement_sigmas": 1.5}
    baseline = Baseline(NOW.isoformat(), 3, settings, [recent], [2, 3, 2, 3, 6], "2026-03-02")
    (alert,) = check_baseline(baseline, LIMITS)
    assert alert.threshold == pytest.approx(2.5 + 1.5 * 0.5)
    assert "the mean + 1.5 sigma" in alert.message and "2 sigma" not in alert.message


def test_the_cadence_is_the_95th_percentile_of_the_gaps_at_least_an_hour() -> None:
    every = [NOW - timedelta(hours=h) for h in range(100)]
    assert fitted_cadence(every) == 1.0
    daily = [NOW - timedelta(days=d) for d in range(8)]
    assert fitted_cadence(daily) == 24.0
    # 19 gaps of 1 h and one of 10 h: the 95th percentile (rank 19 of 20) is 1 h.
    gappy = sorted({NOW - timedelta(hours=h) for h in range(20)} | {NOW - timedelta(hours=29)})
    assert fitted_cadence(gappy) == 1.0
    assert fitted_cadence([NOW]) is None


def test_a_source_is_silent_past_its_cadence_times_the_factor() -> None:
    hourly = [NOW - timedelta(hours=h) for h in range(48)]
    end = NOW + timedelta(hours=1)  # the end of its latest hour
    at = silence_of("pos", hourly, end + timedelta(hours=2), SETTINGS, "ops@example.com")
    assert (at.silent_hours, at.cadence_hours, at.limit_hours) == (2.0, 1.0, 3.0)
    assert at.last_arrival == end.isoformat() and not at.declared
    declared = silence_of("pos", hourly, end + timedelta(hours=30), SETTINGS, None, 24.0)
    assert (declared.limit_hours, declared.declared) == (72.0, True)

    def silent(now: datetime, declared: float | None = None) -> list:
        recent = recent_of(history(), NOW, SETTINGS, 3, None)
        found = silence_of("pos", hourly, now, SETTINGS, "ops@example.com", declared)
        baseline = Baseline(NOW.isoformat(), 3, asdict(SETTINGS), [recent], [0] * 5, None)
        baseline.silent = [found]
        return [a for a in check_baseline(baseline, LIMITS) if a.metric == Metric.SOURCE_SILENT]

    assert silent(end + timedelta(hours=3)) == []  # at the limit: not yet
    (alert,) = silent(end + timedelta(hours=30))
    assert (alert.source, alert.owner, alert.value, alert.threshold) == (
        "pos",
        "ops@example.com",
        30.0,
        3.0,
    )
    assert alert.message.startswith("source pos (owner ops@example.com): silent for 30.0 h")
    assert silent(end + timedelta(hours=30), declared=24.0) == []  # a daily feed: 72 h


def test_now_is_the_wall_clock_unless_named(tmp_path, monkeypatch) -> None:
    monkeypatch.delenv("TARDY_NOW", raising=False)
    before = datetime.now(UTC).replace(tzinfo=None)
    assert before <= clock() <= datetime.now(UTC).replace(tzinfo=None)
    assert clock("2026-01-31T12:00:00Z") == datetime(2026, 1, 31, 12)
    monkeypatch.setenv("TARDY_NOW", "2026-02-01T00:00:00+01:00")
    assert clock() == datetime(2026, 1, 31, 23)
    assert clock("feed") is None
    monkeypatch.delenv("TARDY_NOW")
    (tmp_path / "clock").write_text("feed\n")
    assert clock(None, tmp_path) is None  # a replayed home (the demo's)
    with pytest.raises(InputError, match="TARDY_NOW: 'yesterday' is not an ISO-8601 time"):
        monkeypatch.setenv("TARDY_NOW", "yesterday")
        clock()


@pytest.mark.parametrize(
    "restated",
    [
        [2, 3, 2, 3, 3],  # within the mean + 2 sigma
        [0, 0, 0, 0, 2],  # above, but below restatement_min_days
    ],
)
def test_restated_days_within_the_usual_or_few_raise_nothing(restated: list[int]) -> None:
    assert alerts_of(history(), restated=restated) == []


@pytest.mark.parametrize(
    ("raw", "message"),
    [
        ({"sustained_hours": "two"}, "must be a number"),
        ({"lag_p99_factor": 0}, "must be above 0"),
        ({"sustained": 3}, "unknown settings sustained"),
    ],
)
def test_bad_settings_are_clear_errors(raw: dict, message: str) -> None:
    with pytest.raises(InputError, match=message):
        Settings.of({"lateness_baseline": raw})
