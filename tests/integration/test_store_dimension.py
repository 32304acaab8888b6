"""A late store change restates exactly the days whose as-of join it alters (Spark + Delta).

In a data home of its own, opened in the worker's warm engine (``children.in_own_home``), it
simulates three stores over 40 days with their store-master feed, ingests everything and
builds prod with a plan. Then a change of store 1's region lands, effective 20 days before
the last day and arriving after it, and it runs `tardy detect` and `tardy restate`
(in-process CLI); then the same change is delivered again (a duplicate), which must restate
nothing. Then prod is rebuilt in a second data home from the same landing files with one
plan.

The parent checks, against ``oracle.py`` (pandas, sharing no code with the models or ingest):
the restated days of ``gold.daily_region_revenue`` are exactly the days from the change's
effective date to the next version's, and nothing else was promoted; prod's region revenue
equals the oracle's on every day; days outside the window are the rows they were; and the
rebuilt home has the same content hashes for every model.
"""

from __future__ import annotations

import json
import shutil
from datetime import UTC, date, datetime, time, timedelta
from pathlib import Path

import oracle
import pandas as pd
import pytest
from children import cli_in_process, in_own_home

from tardy.engine.results import ranges

# Long tier: a 40-day home of its own planned twice (the second a rebuild). Its fast guards:
# unit/test_dimension_windows (the validity windows a late change alters, day by day) and
# test_demo_story (a late store change restates region revenue through the demo's steps).
pytestmark = pytest.mark.long

START = date(2026, 1, 1)
DAYS = 40
LAST = START + timedelta(days=DAYS - 1)
CLOCK = datetime.combine(LAST + timedelta(days=1), time(0), tzinfo=UTC)
EFFECTIVE = datetime.combine(LAST - timedelta(days=20), time(10, 30))  # naive UTC
LATE_REGION = "islands"  # a region the simulation never uses
GRACE_DAYS = 3


# An on-time change of store 1, landed with the simulation, that bounds the late change's
# window inside the closed days (the simulation's own changes may bound it earlier).
NEXT_EFFECTIVE = datetime.combine(LAST - timedelta(days=10), time(12))
NEXT_REGION = "highlands"


def store_change(
    name: str, arrival: str, effective: datetime, region: str, change_id: str
) -> tuple[str, str]:
    """A store change file of store 1: its landing path (relative) and line."""
    line = json.dumps(
        {
            "store_id": 1,
            "effective_ts": effective.strftime("%Y-%m-%dT%H:%M:%SZ"),
            "region": region,
            "format": "standard",
            "manager": "Lee",
            "change_id": change_id,
        },
        separators=(",", ":"),
    )
    return f"store_master/arrival_ts={arrival}/{name}.jsonl", line + "\n"


def land(landing: Path, change: tuple[str, str]) -> None:
    path, line = change
    (landing / path).parent.mkdir(parents=True, exist_ok=True)
    (landing / path).write_text(line)


def late_change(arrival: str) -> tuple[str, str]:
    return store_change("late-region", arrival, EFFECTIVE, LATE_REGION, "LATE-1")


def region_rows(spark) -> list[list[str]]:
    rows = spark.sql(
        "SELECT event_date, region, stores, transactions, revenue FROM gold.daily_region_revenue"
    ).collect()
    return sorted([str(v) for v in r] for r in rows)


def child_build() -> dict:
    from tardy.consumers.fingerprint import fingerprints
    from tardy.engine.detect import detect
    from tardy.ingest import ingest
    from tardy.project.context import open_context, spark_of
    from tardy.project.home import activate
    from tardy.simulate import SimulationConfig, simulate

    home = activate()
    context = open_context()
    spark = spark_of(context)
    simulate(SimulationConfig(stores=3, days=DAYS, start=START), home.landing)
    arrival = f"{NEXT_EFFECTIVE:%Y%m%d}T180000Z"
    land(home.landing, store_change("next", arrival, NEXT_EFFECTIVE, NEXT_REGION, "NEXT-1"))
    ingest(spark, home.landing)
    context.plan("prod", execution_time=CLOCK, auto_apply=True, no_prompts=True)
    out: dict[str, object] = {"before": region_rows(spark)}
    # Nothing late yet: detection finds nothing (and records the watermark).
    code, stdout, _ = cli_in_process("restate", "--reason", "baseline", "--json")
    out["baseline"] = {"code": code, **json.loads(stdout)}

    land(home.landing, late_change("20260210T060000Z"))
    ingest(spark, home.landing)
    out["detect"] = detect(context, spark).as_dict()
    code, stdout, _ = cli_in_process("restate", "--reason", "late region change", "--json")
    out["restate"] = {"code": code, **json.loads(stdout)}
    out["after"] = region_rows(spark)

    # The same change delivered again (a resend): it alters nothing.
    land(home.landing, late_change("20260211T060000Z"))
    ingest(spark, home.landing)
    code, stdout, _ = cli_in_process("restate", "--reason", "duplicate", "--json")
    out["duplicate"] = {"code": code, **json.loads(stdout)}
    out["fingerprints"] = {m: f.as_dict() for m, f in fingerprints(context, spark).items()}
    out["landing"] = str(home.landing)
    return out


def child_rebuild(landing: str) -> dict:
    from tardy.consumers.fingerprint import fingerprints
    from tardy.ingest import ingest
    from tardy.project.context import open_context, spark_of
    from tardy.project.home import activate

    home = activate()
    shutil.copytree(landing, home.landing, dirs_exist_ok=True)
    context = open_context()
    spark = spark_of(context)
    ingest(spark, home.landing)
    context.plan("prod", execution_time=CLOCK, auto_apply=True, no_prompts=True)
    return {m: f.as_dict() for m, f in fingerprints(context, spark).items()}


def window(landing: Path) -> tuple[set[date], set[date]]:
    """From the oracle: the closed calendar days from the late change's effective date to
    the next version's (what detection reports), and among them the days with a sale of
    store 1 inside ``[effective, next)`` (those whose as-of join changes: promoted)."""
    versions = oracle.store_versions(landing)
    store = versions[versions.store_id == 1].sort_values("valid_from")
    mine = store[store.valid_from == EFFECTIVE]
    assert len(mine) == 1 and mine.iloc[0].region == LATE_REGION
    following = store[store.valid_from > EFFECTIVE].valid_from
    end = following.min().to_pydatetime() if len(following) else datetime.max
    closed = LAST - timedelta(days=GRACE_DAYS)
    calendar = set()
    day = EFFECTIVE.date()
    while day <= min((end - timedelta(microseconds=1)).date(), closed):
        calendar.add(day)
        day += timedelta(days=1)
    sales = oracle.silver(oracle.records(oracle.sales_files(landing), landing))
    sold = {
        sale.event_date
        for sale in sales.itertuples()
        if int(sale.store_id) == 1
        and EFFECTIVE <= pd.Timestamp(sale.event_ts).to_pydatetime() < end
        and sale.event_date <= closed
    }
    return calendar, sold


def test_a_late_store_change_restates_exactly_the_days_it_alters(engine, tmp_path: Path) -> None:
    out = in_own_home(engine, tmp_path / "home", child_build)
    landing = Path(out["landing"])
    calendar, expected = window(landing)
    assert len(expected) >= 2, "the simulated timeline leaves the late change a short window"
    first, last = min(calendar).isoformat(), max(calendar).isoformat()
    assert ranges(calendar) == [[first, last]]

    assert out["baseline"]["code"] == 0 and out["baseline"]["status"] == "nothing_to_do"
    detected = out["detect"]
    roots = {model: spans for model, spans in detected["roots"].items() if spans}
    assert roots == {"gold.daily_region_revenue": [[first, last]]}
    impacted = {model: spans for model, spans in detected["impacted"].items() if spans}
    assert impacted == {"gold.daily_region_revenue": [[first, last]]}
    # (Late sales of the simulation arriving after the last computed day wait for the next
    # run; the store change's window is all closed.)
    assert detected["absorbed_by_next_run"]["gold.daily_region_revenue"] == []
    restated = out["restate"]
    assert restated["code"] == 0 and restated["status"] == "promoted"
    assert restated["promoted"] == {"gold.daily_region_revenue": ranges(expected)}

    # Prod equals the independent recomputation on every day.
    computed = oracle.daily_region_revenue(landing)
    want = sorted(
        [str(r.event_date), r.region, str(r.stores), str(r.transactions), f"{r.revenue:.2f}"]
        for r in computed.itertuples()
    )
    assert out["after"] == want
    # Exactly the window's days changed; every other day is the row it was.
    changed = {
        date.fromisoformat(r[0])
        for r in {tuple(r) for r in out["after"]} ^ {tuple(r) for r in out["before"]}
    }
    assert changed == expected
    islands = {date.fromisoformat(r[0]) for r in out["after"] if r[1] == LATE_REGION}
    assert islands == expected

    # The duplicate alters nothing: nothing to restate, nothing promoted.
    duplicate = out["duplicate"]
    assert duplicate["code"] == 0 and duplicate["status"] == "nothing_to_do"
    assert not any(duplicate["impacted"].values())

    # A rebuild from the same landing files in a second data home: the same content.
    rebuilt = in_own_home(engine, tmp_path / "rebuilt", child_rebuild, out["landing"])
    assert rebuilt == out["fingerprints"]
    assert out["fingerprints"]["gold.daily_region_revenue"]["rows"] > 0
