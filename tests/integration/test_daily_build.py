"""The daily build on real Spark + Delta, in the fast tier: a copy of the ``small`` template
(prod planned at midnight after ten days) lives two more nights, each that day's batches
ingested (late, duplicated and corrected records among them: ``tardy.simulate``) and a daily
``sqlmesh run`` at midnight (``timeline.run_nightly``). Then each day of prod equals a
recomputation of the files that had landed when it was last built, and prod lacks exactly
the records that landed after the run that last built their day. The same checks run on
the 14-day ``timeline`` template in the long tier (``test_lakehouse``).
"""

from __future__ import annotations

import typing as t

import pytest
from children import SMALL, SMALL_CLOCK, SMALL_CONFIG
from timeline import (
    Build,
    Timeline,
    assert_each_day_as_landed,
    assert_stale_days_arrived_late,
    run_nightly,
)

NIGHTS = 2


@pytest.fixture(scope="module")
def built(engine: t.Any, tmp_path_factory: pytest.TempPathFactory) -> tuple[t.Any, Timeline]:
    """The copy after its nights, and its timeline: the template's plan (every file landed by
    then), then each night's run."""
    root = tmp_path_factory.mktemp("daily-build") / "home"
    SMALL.copy_to(engine, root)
    home, context, spark = engine.open(root)
    planned = frozenset(home.landing.rglob("*.jsonl"))
    timeline = Timeline(
        builds=[Build(SMALL_CLOCK, SMALL_CONFIG.start, SMALL_CONFIG.last_day, planned)],
        files=set(planned),
    )
    run_nightly(context, spark, home.landing, SMALL_CONFIG, timeline, NIGHTS)
    assert len(timeline.files) > len(planned), "the nights landed files"
    return (home, spark), timeline


def test_each_day_equals_recomputation_of_what_had_landed_when_last_built(
    built: tuple[t.Any, Timeline],
) -> None:
    (home, spark), timeline = built
    checked = assert_each_day_as_landed(timeline, spark, home.landing)
    assert checked >= SMALL_CONFIG.stores * SMALL_CONFIG.days * 0.9


def test_late_data_beyond_grace_is_exactly_what_prod_lacks(
    built: tuple[t.Any, Timeline],
) -> None:
    (home, spark), timeline = built
    stale = assert_stale_days_arrived_late(timeline, spark, home.landing, SMALL_CLOCK.date())
    assert stale, "the nights must land late data beyond the grace window"
