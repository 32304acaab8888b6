"""The ``timeline`` template: a lakehouse built the way it lives, day by day.

Three stores over 14 days: the first seven days' batches ingested and prod planned at midnight
after day 7, then each night that day's batches ingested (late, duplicated and corrected
records among them: ``tardy.simulate``) and a daily ``sqlmesh run`` (``Context.run``) at
midnight. ``test_lakehouse.py`` (long tier) starts from a copy. The template's facts record
each build: its clock, the days it (re)computed and the landing files bronze held then
(relative to the landing folder). The nightly runs and the checks of a home built day by day
are shared with the fast tier's ``test_daily_build.py`` (two nights on the ``small``
template).
"""

from __future__ import annotations

import typing as t
from dataclasses import dataclass, field
from datetime import UTC, date, datetime, time, timedelta
from pathlib import Path

from homes import Engine, Template

from tardy.simulate import SimulationConfig

CONFIG = SimulationConfig(seed=11, stores=3, days=14, transactions_per_store_day=40)
PLAN_AFTER_DAYS = 7
GRACE_DAYS = 3


def midnight(day: date) -> datetime:
    return datetime.combine(day, time(0), tzinfo=UTC)


def last_complete_day(clock: datetime) -> str:
    """SQLMesh reads a date-only `end` as inclusive of that whole day."""
    return (clock - timedelta(days=1)).date().isoformat()


@dataclass
class Build:
    """One plan or run: the clock, the days it (re)computed and the files bronze held."""

    clock: datetime
    first_day: date
    last_day: date
    files: frozenset[Path]


@dataclass
class Timeline:
    builds: list[Build] = field(default_factory=list)
    files: set[Path] = field(default_factory=set)

    def cutoff_files(self, day: date) -> frozenset[Path]:
        """The files bronze held when `day` was last computed."""
        last = [b for b in self.builds if b.first_day <= day <= b.last_day][-1]
        return last.files

    def as_facts(self, landing: Path) -> dict[str, t.Any]:
        def names(files: t.Iterable[Path]) -> list[str]:
            return sorted(str(f.relative_to(landing)) for f in files)

        return {
            "builds": [
                {
                    "clock": b.clock.isoformat(),
                    "first_day": b.first_day.isoformat(),
                    "last_day": b.last_day.isoformat(),
                    "files": names(b.files),
                }
                for b in self.builds
            ],
            "files": names(self.files),
        }

    @classmethod
    def from_facts(cls, facts: dict[str, t.Any], landing: Path) -> Timeline:
        return cls(
            builds=[
                Build(
                    datetime.fromisoformat(b["clock"]),
                    date.fromisoformat(b["first_day"]),
                    date.fromisoformat(b["last_day"]),
                    frozenset(landing / f for f in b["files"]),
                )
                for b in facts["builds"]
            ],
            files={landing / f for f in facts["files"]},
        )


def land_and_ingest(
    spark: t.Any, landing: Path, config: SimulationConfig, clock: datetime, timeline: Timeline
) -> None:
    from tardy.ingest import ingest
    from tardy.simulate import simulate

    simulate(config, landing, through=clock)
    ingest(spark, landing)
    # The oracle's files come from the landing folder (the landing contract: every
    # ``*.jsonl`` under it), never from ingest's own report of what it took.
    timeline.files |= set(landing.rglob("*.jsonl"))


def run_nightly(
    context: t.Any,
    spark: t.Any,
    landing: Path,
    config: SimulationConfig,
    timeline: Timeline,
    nights: int,
) -> None:
    """After the last build: ``nights`` times, that day's batches ingested and a daily
    `sqlmesh run` (``Context.run``) at midnight, each recorded in ``timeline``."""
    clock = timeline.builds[-1].clock
    for _ in range(nights):
        previous, clock = clock, clock + timedelta(days=1)
        land_and_ingest(spark, landing, config, clock, timeline)
        context.run("prod", end=last_complete_day(clock), execution_time=clock)
        first = previous.date() - timedelta(days=GRACE_DAYS)
        timeline.builds.append(
            Build(clock, first, clock.date() - timedelta(days=1), frozenset(timeline.files))
        )


def build_timeline(engine: Engine, root: Path) -> dict[str, t.Any]:
    home, context, spark = engine.open(root)
    timeline = Timeline()
    clock = midnight(CONFIG.start + timedelta(days=PLAN_AFTER_DAYS))
    land_and_ingest(spark, home.landing, CONFIG, clock, timeline)
    context.plan("prod", execution_time=clock, auto_apply=True, no_prompts=True)
    timeline.builds.append(
        Build(clock, CONFIG.start, clock.date() - timedelta(days=1), frozenset(timeline.files))
    )
    run_nightly(
        context, spark, home.landing, CONFIG, timeline, (CONFIG.last_day - clock.date()).days + 1
    )
    return timeline.as_facts(home.landing)


TIMELINE = Template("timeline", build_timeline)


# -- the checks of a home built day by day (fast: test_daily_build; long: test_lakehouse) ----


def _days_of(table: dict) -> set[date]:
    return {day for day, _ in table}


def assert_each_day_as_landed(timeline: Timeline, spark: t.Any, landing: Path) -> int:
    """Each day of prod's daily revenue equals a recomputation (the pandas oracle) from the
    files bronze held when that day was last built; the number of (day, store) rows checked."""
    from prod_checks import actual_daily, expected_daily

    actual = actual_daily(spark)
    checked = 0
    for cutoff in {timeline.cutoff_files(d) for d in _days_of(actual)}:
        expected = expected_daily(cutoff, landing)
        days = {
            d for d in _days_of(actual) | _days_of(expected) if timeline.cutoff_files(d) == cutoff
        }
        for key in sorted(k for k in set(actual) | set(expected) if k[0] in days):
            assert actual.get(key) == expected.get(key), key
            checked += 1
    return checked


def assert_stale_days_arrived_late(
    timeline: Timeline, spark: t.Any, landing: Path, first_plan: date
) -> set[date]:
    """The days where prod differs from a recomputation of every file: none inside the last
    run's grace window, and each has a record that arrived after the run that last built it
    (independently of the timeline's bookkeeping: a day is last built by the run at midnight
    grace + 1 days after it, or by the first plan). The stale days."""
    import oracle
    from prod_checks import actual_daily, expected_daily

    actual = actual_daily(spark)
    everything = expected_daily(timeline.files, landing)

    def on(table: dict, day: date) -> dict:
        return {k: v for k, v in table.items() if k[0] == day}

    stale = {
        d for d in _days_of(actual) | _days_of(everything) if on(actual, d) != on(everything, d)
    }
    assert not stale or max(stale) < timeline.builds[-1].first_day
    recs = oracle.records(sorted(timeline.files), landing)
    valid = recs[recs["valid"]]
    for day in stale:
        last_day = max(day + timedelta(days=GRACE_DAYS + 1), first_plan)
        last_built = datetime.combine(last_day, time(0))  # the oracle's arrivals are naive UTC
        keys = set(valid[valid["event_date"] == day]["transaction_id"])
        late = valid[valid["transaction_id"].isin(keys) & (valid["arrival_ts"] > last_built)]
        assert not late.empty, f"{day} is stale but none of its records arrived after {last_built}"
    return stale
