"""The main job on the embedded default: a month of SQL Sushi Co. with its late data.

Timeline (simulated clock, never the wall clock): the first ``first_days`` days land and are
built into prod by a ``plan``; then the rest lands (late rows, corrections, voids, resends,
out-of-order batches) and a ``run`` at the end of the simulated month absorbs what falls
inside the grace window. Late data for days already outside it stays out of prod until it is
restated. Every step is idempotent, so the demo can run again on the same data home.
"""

from __future__ import annotations

import typing as t
from dataclasses import dataclass
from datetime import UTC, date, datetime, time, timedelta

from rich.console import Console

from tardy.home import DataHome
from tardy.ingest import IngestResult, ingest
from tardy.project import spark_of
from tardy.report import Summary, summarize
from tardy.simulate import SimulationConfig, SimulationResult, simulate

if t.TYPE_CHECKING:
    from sqlmesh import Context


@dataclass
class DemoResult:
    first_landing: SimulationResult
    first_ingest: IngestResult
    late_landing: SimulationResult
    late_ingest: IngestResult
    summary: Summary


def midnight(day: date) -> datetime:
    return datetime.combine(day, time(0), tzinfo=UTC)


def run_demo(
    context: Context,
    home: DataHome,
    console: Console,
    config: SimulationConfig | None = None,
    first_days: int = 14,
) -> DemoResult:
    config = config or SimulationConfig()
    spark = spark_of(context)
    first_clock = midnight(config.start + timedelta(days=first_days))
    final_clock = midnight(config.last_day + timedelta(days=1))
    grace_days = int(context.config.variables["grace_days"])

    console.rule(f"1. Land and ingest the batches delivered by {first_clock:%Y-%m-%d %H:%M}Z")
    first_landing = simulate(config, home.landing, through=first_clock)
    with console.status("Ingesting into bronze.pos_events"):
        first_ingest = ingest(spark, home.landing)
    console.print(_landed(first_landing, first_ingest))

    console.rule("2. sqlmesh plan prod")
    context.plan("prod", execution_time=first_clock, auto_apply=True, no_prompts=True)

    console.rule(f"3. Land the late and corrected batches delivered by {final_clock:%Y-%m-%d}")
    late_landing = simulate(config, home.landing, through=final_clock)
    with console.status("Ingesting into bronze.pos_events"):
        late_ingest = ingest(spark, home.landing)
    console.print(_landed(late_landing, late_ingest))

    console.rule("4. sqlmesh run (absorbs late data inside the grace window)")
    last_day = (final_clock - timedelta(days=1)).date().isoformat()  # inclusive, whole day
    context.run("prod", end=last_day, execution_time=final_clock)

    with console.status("Summarising"):
        summary = summarize(spark, grace_days)
    return DemoResult(first_landing, first_ingest, late_landing, late_ingest, summary)


def _landed(landing: SimulationResult, ingested: IngestResult) -> str:
    return (
        f"landing: {landing.files_written} new files ({landing.files_existing} already there); "
        f"bronze: {ingested.files_ingested} files / {ingested.rows:,} rows ingested, "
        f"{ingested.files_skipped} files skipped (already ingested)"
    )
