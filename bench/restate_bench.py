"""`make bench`: restatement costs on a year of data, measured in one run on this machine.

Generates >= 5 M transactions over 365 days (20 stores x 700 per day), builds prod, then
times, in one process and one Spark session:
- the full build (plan of prod from empty),
- a full restatement (every day),
- a stock restatement of the hull of two late days ~350 days apart,
- `tardy restate` of the same two days, and of one day.
Each restatement gets its own fresh late rows (so none of them is a no-op). Prints a
Markdown table and writes it, with the raw seconds, to $TARDY_HOME/bench.json.
"""

from __future__ import annotations

import json
import os
import shutil
import sys
import time
from datetime import UTC, date, datetime, timedelta
from pathlib import Path

STORES, DAYS, PER_DAY = 20, 365, 700


def fresh_home() -> Path:
    """The bench's own data home, emptied: the full build must start from nothing."""
    home = Path(os.environ["TARDY_HOME"]).resolve()
    if home.name != "bench":
        raise SystemExit(f"refusing to empty {home}: the bench home must be named 'bench'")
    if home.exists():
        shutil.rmtree(home)
    home.mkdir(parents=True)
    return home


def main() -> int:
    fresh_home()
    started = time.perf_counter()
    start = date.fromisoformat(os.environ.setdefault("TARDY_START", "2025-11-01"))
    from tardy.fingerprint import fingerprints
    from tardy.ingest import ingest
    from tardy.project import open_context, spark_of
    from tardy.engine.restate import restate
    from tardy.simulate import SimulationConfig, arrival_dir_name, simulate

    context = open_context()
    spark = spark_of(context)
    spark.sql("SELECT 1").collect()
    home = Path(os.environ["TARDY_HOME"])
    startup = time.perf_counter() - started
    config = SimulationConfig(
        stores=STORES, days=DAYS, transactions_per_store_day=PER_DAY, start=start
    )
    clock = datetime.combine(config.last_day + timedelta(days=1), datetime.min.time(), UTC)
    simulate(config, home.joinpath("landing"), through=clock)
    # Prod is built through the arrival day of the last deliveries (rows without a usable
    # event_ts are accounted to it), so that nothing waits inside the grace window and the
    # arrival watermark advances, as it does after any daily run.
    built_through = clock + timedelta(days=1)
    ingest(spark, home / "landing")
    bronze_rows = spark.table("bronze.pos_events").count()
    results: dict[str, float] = {"startup (JVM, Spark, context, metastore)": startup}

    steps: dict[str, dict[str, float]] = {}

    def timed(label: str, action) -> None:  # noqa: ANN001
        t0 = time.perf_counter()
        outcome = action()
        results[label] = time.perf_counter() - t0
        print(f"{label}: {results[label]:.1f} s", flush=True)
        if getattr(outcome, "seconds", None):
            steps[label] = outcome.seconds
            print("  " + ", ".join(f"{k} {v:.1f} s" for k, v in outcome.seconds.items()))

    timed(
        "full build",
        lambda: context.plan(
            "prod", execution_time=built_through, auto_apply=True, no_prompts=True
        ),
    )
    baseline = restate(context, spark, "bench baseline")  # the watermark: prod reflects bronze
    if not baseline.advanced_watermark:
        raise SystemExit(f"the baseline left changes pending: {baseline.manifest}")
    day_a, day_b = start + timedelta(days=5), start + timedelta(days=355)
    late = iter(range(1, 1000))

    def land(*days: date) -> None:
        n = next(late)
        lines = [
            json.dumps(
                {
                    "transaction_id": f"BENCH-{n}-{d}-{i}",
                    "record_type": "sale",
                    "store_id": 1 + i,
                    "product_id": 1,
                    "quantity": 1,
                    "unit_price": 10.0,
                    "discount": 0.0,
                    "event_ts": f"{d}T12:00:00Z",
                }
            )
            for d in days
            for i in range(3)
        ]
        folder = home / "landing" / "pos" / arrival_dir_name(clock + timedelta(minutes=n))
        folder.mkdir(parents=True, exist_ok=True)
        (folder / f"bench-{n}.jsonl").write_text("\n".join(lines) + "\n")
        ingest(spark, home / "landing")

    def stock(first: date, last: date) -> None:
        context.plan(
            "prod",
            restate_models=["bronze.pos_events"],
            start=first.isoformat(),
            end=last.isoformat(),
            execution_time=built_through,
            auto_apply=True,
            no_prompts=True,
        )

    land(day_a, day_b)
    timed("tardy restate, 2 days ~350 apart", lambda: restate(context, spark, "bench"))
    land(day_a, day_b)
    # Stock equivalent: one hull, aligned to the first week/month, through the features.
    timed("stock restatement of their hull", lambda: stock(day_a.replace(day=1), config.last_day))
    restate(context, spark, "bench: watermark after stock")
    land(day_b)
    timed("tardy restate, 1 day", lambda: restate(context, spark, "bench"))
    timed("tardy restate, nothing new (fixed cost)", lambda: restate(context, spark, "bench"))
    land(day_a)
    timed("full restatement (stock, every day)", lambda: stock(start, config.last_day))
    prints = fingerprints(context, spark)

    full = results["full build"]
    two_days = results["tardy restate, 2 days ~350 apart"]
    hull = results["stock restatement of their hull"]
    one_day = results["tardy restate, 1 day"]
    full_restatement = results["full restatement (stock, every day)"]
    target = (startup + 1.3 / DAYS * full_restatement) / full_restatement
    table = [
        "| measurement | value |",
        "|---|---:|",
        *[f"| {label} | {seconds:.1f} s |" for label, seconds in results.items()],
        f"| bronze rows | {bronze_rows:,} |",
        f"| full build, rows per second | {bronze_rows / full:,.0f} |",
        f"| tardy 2 days / stock hull (target <= 0.33) | {two_days / hull:.2f} |",
        f"| tardy 1 day / full restatement (target <= {target:.2f}) | "
        f"{one_day / full_restatement:.2f} |",
    ]
    table += [
        f"| {label}: {step} | {seconds:.1f} s |"
        for label, parts in steps.items()
        for step, seconds in parts.items()
    ]
    print("\n".join(table))
    (home / "bench.json").write_text(
        json.dumps(
            {
                "seconds": results,
                "bronze_rows": bronze_rows,
                "table": table,
                "tardy_steps": steps,
                "fingerprints": {k: v.as_dict() for k, v in prints.items()},
            },
            indent=2,
        )
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
