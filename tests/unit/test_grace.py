"""``tardy grace``'s rules without Spark: the window's one line in project.yaml, a source's
candidates and suggestion from its late-day buckets, the table at 80 columns."""

from __future__ import annotations

import io
from datetime import datetime, timedelta
from pathlib import Path

import pytest
from rich.console import Console

from tardy.errors import InputError
from tardy.lateness.grace import Fit, bounds_of, fit_source, grace_days, write_grace_days
from tardy.lateness.series import Hour
from tardy.project.home import project_root
from tardy.rendering.grace import render_fit


def hour(buckets: dict[int, int]) -> Hour:
    n = sum(buckets.values())
    return Hour("pos", datetime(2026, 3, 2), n, n, 1.0, 2.0, 3.0, buckets)


def test_the_project_writes_its_window_once_and_apply_keeps_the_rest(tmp_path: Path) -> None:
    text = (project_root() / "project.yaml").read_text()
    assert grace_days(project_root()) == 3
    (tmp_path / "project.yaml").write_text(text)
    write_grace_days(tmp_path, 5)
    assert grace_days(tmp_path) == 5
    after = (tmp_path / "project.yaml").read_text()
    assert after.replace("grace_days: 5", "grace_days: 3") == text  # nothing else moved


def test_a_project_without_its_window_line_is_refused(tmp_path: Path) -> None:
    (tmp_path / "project.yaml").write_text("variables:\n  other: 1\n")
    with pytest.raises(InputError, match="one `grace_days: <days>` line"):
        grace_days(tmp_path)


def test_the_suggestion_is_the_smallest_window_within_the_target() -> None:
    # 1,000 measured rows: 100 one day late, 30 two days, 10 four days, 5 nine days.
    buckets = {0: 855, 1: 100, 2: 30, 4: 10, 9: 5}
    fit = fit_source("pos", [hour(buckets)], "daily", 0.05, (1, 7))
    shares = {c.days: c.late_share for c in fit.candidates}
    assert shares == pytest.approx(
        {1: 0.045, 2: 0.015, 3: 0.015, 4: 0.005, 5: 0.005, 6: 0.005, 7: 0.005}
    )
    assert (fit.suggested, fit.meets_target) == (1, True)
    assert fit_source("pos", [hour(buckets)], "daily", 0.01, (1, 7)).suggested == 4
    assert fit_source("pos", [hour(buckets)], "daily", 0.01, (2, 3)).suggested == 3
    unmet = fit_source("pos", [hour(buckets)], "daily", 0.001, (1, 7))
    assert (unmet.suggested, unmet.meets_target) == (7, False)


def test_the_days_a_window_keeps_provisional_are_counted_from_the_latest_arrival() -> None:
    """At a latest arrival of 2026-03-02 10:00, a window of g days puts the watermark at
    10:00 g days before: that day is not whole before it, so it and every day after it
    through 03-02 are provisional, g + 1 days (3 days: 02-27 .. 03-02, 4 days)."""
    latest = datetime(2026, 3, 2, 10)
    at = Hour("pos", latest, 10, 10, 1.0, 2.0, 3.0, {0: 10})
    source = fit_source("pos", [at, hour({0: 10})], "daily", 0.05, (0, 7))
    for c in source.candidates:
        first = (latest - timedelta(days=c.days)).date()
        assert c.first_provisional_day == first.isoformat(), c
        assert c.provisional_days == (latest.date() - first).days + 1 == c.days + 1, c
    three = next(c for c in source.candidates if c.days == 3)
    assert (three.provisional_days, three.first_provisional_day) == (4, "2026-02-27")


def test_tier_bounds_are_read_and_checked() -> None:
    tiers = {"lateness_alert_tiers": {"daily": {"grace": {"min": 2, "max": 5}}, "x": {}}}
    assert bounds_of(tiers, "daily") == (2, 5)
    assert bounds_of(tiers, "x") == (1, 14)
    with pytest.raises(InputError, match="0 <= min <= max"):
        bounds_of({"lateness_alert_tiers": {"d": {"grace": {"min": 5, "max": 2}}}}, "d")


def test_the_fit_fits_80_columns_and_says_what_to_run() -> None:
    source = fit_source("store_master", [hour({0: 90, 5: 10})], "month_close", 0.05, (1, 35))
    out = io.StringIO()
    console = Console(file=out, width=80, color_system=None)
    render_fit(Fit(current=3, suggested=source.suggested, sources=[source]), console)
    text = out.getvalue()
    assert max(len(line) for line in text.splitlines()) <= 80
    assert "5 d" in text and "suggested" in text and "current" in text
    lines = [line.strip() for line in text.splitlines()]
    assert ".venv/bin/tardy grace --apply" in lines and ".venv/bin/sqlmesh plan" in lines
