"""The ``timeline`` template: a lakehouse built the way it lives, day by day.

Three stores over 14 days: the first seven days' batches ingested and prod planned at midnight
after day 7, then each night that day's batches ingested (late, duplicated and corrected
records among them: ``tardy.simulate``) and a daily ``sqlmesh run`` (``Context.run``) at
midnight. ``test_lakehouse.py`` starts from a copy; ``test_status.py`` takes another.
The template's facts record each build: its clock, the days it (re)computed and the landing
files bronze held then (relative to the landing folder).
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


def build_timeline(engine: Engine, root: Path) -> dict[str, t.Any]:
    from tardy.ingest import ingest
    from tardy.simulate import simulate

    home, context, spark = engine.open(root)
    timeline = Timeline()

    def land_and_ingest(clock: datetime) -> None:
        simulate(CONFIG, home.landing, through=clock)
        ingest(spark, home.landing)
        # The oracle's files come from the landing folder (the landing contract: every
        # ``*.jsonl`` under it), never from ingest's own report of what it took.
        timeline.files |= set(home.landing.rglob("*.jsonl"))

    clock = midnight(CONFIG.start + timedelta(days=PLAN_AFTER_DAYS))
    land_and_ingest(clock)
    context.plan("prod", execution_time=clock, auto_apply=True, no_prompts=True)
    timeline.builds.append(
        Build(clock, CONFIG.start, clock.date() - timedelta(days=1), frozenset(timeline.files))
    )
    # A daily `sqlmesh run` at midnight, each after that day's batches were ingested.
    while clock.date() <= CONFIG.last_day:
        previous, clock = clock, clock + timedelta(days=1)
        land_and_ingest(clock)
        context.run("prod", end=last_complete_day(clock), execution_time=clock)
        first = previous.date() - timedelta(days=GRACE_DAYS)
        timeline.builds.append(
            Build(clock, first, clock.date() - timedelta(days=1), frozenset(timeline.files))
        )
    return timeline.as_facts(home.landing)


TIMELINE = Template("timeline", build_timeline)
