"""End to end on real Spark + Delta: simulate -> ingest -> plan prod -> daily late batches -> run,
then a stock restatement, exact interval writes, tardy's restatements, and (last) a full
rebuild in a second data home.

The tests of this module share one data home, a copy of the ``timeline`` template
(``timeline.py``), and run in file order. The whole module is in the long tier (``make
test-long``); the fast tier guards its rules on the ``small`` template: the day-by-day build
(``test_daily_build``), the restatements (``test_small_story``, ``test_small_rules``), the
audits, named selections and the request file (``test_small_checks``).
"""

from __future__ import annotations

import json
from datetime import date, datetime, time, timedelta
from decimal import Decimal
from pathlib import Path

import oracle
import prod_checks as checks
import pytest
from children import cli_in_process, in_own_home
from prod_checks import (
    LATE_SALE,
    actual_daily,
    content_hashes,
    days_of_transaction,
    empty_a_day,
    expected_daily,
    physical_table,
    rows_on,
    sale_line,
    view_hash,
)
from timeline import (
    CONFIG,
    PLAN_AFTER_DAYS,
    TIMELINE,
    Timeline,
    assert_each_day_as_landed,
    assert_stale_days_arrived_late,
    last_complete_day,
)

from tardy.engine.watermark import Watermark
from tardy.engine.watermark import read as read_watermark
from tardy.ingest import ingest
from tardy.ingest.landing import arrival_dir_name
from tardy.project import exact_writes

pytestmark = pytest.mark.long


@pytest.fixture(scope="module")
def lake_root(engine, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """This module's data home: a copy of the ``timeline`` template."""
    root = tmp_path_factory.mktemp("lakehouse") / "home"
    (root.parent / "facts.json").write_text(json.dumps(TIMELINE.copy_to(engine, root)))
    return root


# The module's home, opened in the worker's warm engine (conftest's ``context`` and
# ``spark`` are its).
@pytest.fixture(scope="module")
def data_home(engine, lake_root: Path):
    return engine.open(lake_root)[0]


@pytest.fixture(scope="module")
def timeline(lake_root: Path, data_home) -> Timeline:
    facts = json.loads((lake_root.parent / "facts.json").read_text())
    return Timeline.from_facts(facts, data_home.landing)


def test_each_day_equals_recomputation_of_what_had_landed_when_last_built(
    timeline: Timeline, spark, data_home
) -> None:
    checked = assert_each_day_as_landed(timeline, spark, data_home.landing)
    assert checked >= CONFIG.stores * CONFIG.days * 0.9


def test_late_data_beyond_grace_is_exactly_what_prod_lacks(
    timeline: Timeline, spark, data_home
) -> None:
    # The previous test showed each day equals a recomputation from the files that had landed
    # when it was last built; so prod lacks exactly the data of the files that landed later.
    first_plan = CONFIG.start + timedelta(days=PLAN_AFTER_DAYS)
    stale = assert_stale_days_arrived_late(timeline, spark, data_home.landing, first_plan)
    assert stale, "the scenario must leave late data beyond the grace window"


# --- after a stock restatement, prod equals the recomputation and a full rebuild -------------


def restate_bronze(context, first_day: date, clock: datetime) -> None:
    checks.restate_bronze(context, first_day, clock, CONFIG.start)


def assert_prod_equals_recomputation(
    spark, files, landing: Path, through: date = CONFIG.last_day
) -> None:
    checks.assert_prod_equals_recomputation(spark, files, landing, CONFIG.start, through)


@pytest.fixture(scope="module")
def restated(timeline: Timeline, context, spark, data_home) -> dict:
    actual = actual_daily(spark)
    everything = expected_daily(timeline.files, data_home.landing)
    stale = [k[0] for k in set(actual) | set(everything) if actual.get(k) != everything.get(k)]
    restate_bronze(context, min(stale), timeline.builds[-1].clock)
    return content_hashes(context, spark)


# fast guard: test_small_story
def test_stock_restatement_makes_prod_equal_the_recomputation(
    restated: dict, timeline: Timeline, spark, data_home
) -> None:
    assert_prod_equals_recomputation(spark, timeline.files, data_home.landing)


# fast guard: test_small_story
def test_restating_again_leaves_every_table_identical(
    restated: dict, timeline: Timeline, context, spark
) -> None:
    restate_bronze(context, CONFIG.start, timeline.builds[-1].clock)
    again = content_hashes(context, spark)
    assert again == restated
    # The timeline simulates no card refunds (off by default): their models alone are empty.
    unfed = {"silver.refunds", "silver.refund_quarantine"}
    assert {name for name, fp in restated.items() if fp["rows"] == 0} == unfed


# --- exact interval writes: a void that empties a day, a correction that moves a day ---------


# fast guard: test_small_story
def test_void_emptying_a_day_and_date_moving_correction_leave_no_stale_rows(
    restated: dict, timeline: Timeline, context, spark, data_home
) -> None:
    clock = timeline.builds[-1].clock
    day, to_day = CONFIG.start + timedelta(days=2), CONFIG.start + timedelta(days=4)
    path, moved = empty_a_day(spark, data_home.landing, day, to_day, clock)
    timeline.files.add(path)
    restate_bronze(context, CONFIG.start, clock)

    assert rows_on(spark, "silver.sales_transactions", "event_date", day) == 0
    assert rows_on(spark, "gold.daily_store_revenue", "event_date", day) == 0
    assert days_of_transaction(spark, moved) == [to_day]
    assert_prod_equals_recomputation(spark, timeline.files, data_home.landing)


# fast guard: test_small_story
def test_control_the_stock_spark_strategy_keeps_stale_rows_and_the_audits_catch_them(
    restated: dict, timeline: Timeline, context, spark, data_home
) -> None:
    """docs/facts.md, fact 2, on this stack: without exact writes the emptied day keeps its old rows
    (so the test above can fail), and the blocking reconciliation audit refuses them."""
    from sqlmesh.core.engine_adapter.shared import InsertOverwriteStrategy
    from sqlmesh.core.engine_adapter.spark import SparkEngineAdapter
    from sqlmesh.utils.errors import PlanError

    clock = timeline.builds[-1].clock
    day, to_day = CONFIG.start + timedelta(days=3), CONFIG.start + timedelta(days=5)
    before = rows_on(spark, "silver.sales_transactions", "event_date", day)
    path, moved = empty_a_day(spark, data_home.landing, day, to_day, clock)
    timeline.files.add(path)
    SparkEngineAdapter.INSERT_OVERWRITE_STRATEGY = InsertOverwriteStrategy.INSERT_OVERWRITE
    # project.yaml's `before_all` switches exact writes on at the start of every plan (its
    # macro calls `tardy.project.exact_writes.enable`): stubbed here, or the control would not run.
    switch_on = exact_writes.enable
    exact_writes.enable = lambda: None
    try:
        with pytest.raises(PlanError):
            restate_bronze(context, CONFIG.start, clock)
    finally:
        exact_writes.enable = switch_on
        exact_writes.enable()
    assert rows_on(spark, "silver.sales_transactions", "event_date", day) == before
    assert sorted(days_of_transaction(spark, moved)) == [day, to_day]

    restate_bronze(context, CONFIG.start, clock)
    assert rows_on(spark, "silver.sales_transactions", "event_date", day) == 0
    assert_prod_equals_recomputation(spark, timeline.files, data_home.landing)


# --- tardy detect / restate: exactly the closed intervals late data touched ------------------
# restate stages them away from prod, audits, diffs, then promotes; rollback undoes it.


def land_late(spark, data_home, timeline: Timeline, at: datetime, name: str, lines: list[str]):
    batch = data_home.landing / "pos" / arrival_dir_name(at)
    batch.mkdir(parents=True, exist_ok=True)
    (batch / name).write_text("\n".join(lines) + "\n")
    timeline.files.add(batch / name)
    assert ingest(spark, data_home.landing).files_ingested == 1


# fast guard: test_small_story
def test_detect_and_restate_recompute_exactly_the_impacted_closed_intervals(
    restated: dict, timeline: Timeline, context, spark, data_home, monkeypatch
) -> None:
    from tardy.engine import facts
    from tardy.engine.detect import detect
    from tardy.requests.restatements import promote_staged, restate

    clock = timeline.builds[-1].clock
    last = CONFIG.last_day
    before = content_hashes(context, spark)
    baseline = restate(context, spark, "baseline: prod reflects bronze")
    # The stock restatement made prod reflect bronze. Sales detection compares with prod's
    # rows: nothing. The store dimension's watermark was never recorded, so its detection
    # compares from the version when region revenue's table was created (docs/stores.md,
    # bootstrap): the store changes ingested since are staged again, equal to prod, and
    # nothing is promoted; either way prod is untouched and the watermark is set.
    assert baseline.status in ("nothing_to_do", "promoted") and baseline.advanced_watermark
    assert baseline.promoted == {}
    assert content_hashes(context, spark) == before

    day = CONFIG.start + timedelta(days=1)  # voided entirely
    sales = spark.sql(
        f"SELECT * FROM silver.sales_transactions WHERE event_date = DATE'{day}'"
    ).collect()
    moved = spark.sql(
        "SELECT * FROM silver.sales_transactions "
        f"WHERE event_date = DATE'{CONFIG.start + timedelta(days=6)}' ORDER BY transaction_id"
    ).first()
    # A late duplicate: the original of a closed day's sale, sent again.
    duplicated = spark.sql(
        "SELECT * FROM silver.sales_transactions "
        f"WHERE event_date = DATE'{CONFIG.start + timedelta(days=9)}' AND record_type = 'sale' "
        "ORDER BY transaction_id"
    ).first()
    lines = [sale_line(r, "void", r.event_ts) for r in sales]
    lines.append(
        sale_line(
            moved, "correction", datetime.combine(moved.event_date, time(9)) + timedelta(days=2)
        )
    )
    lines.append(sale_line(duplicated, "sale", duplicated.event_ts))
    lines.append(
        json.dumps({**LATE_SALE, "event_ts": f"{CONFIG.start + timedelta(days=9)}T10:00:00Z"})
    )
    lines.append(
        json.dumps({**LATE_SALE, "transaction_id": "LATE-2", "event_ts": f"{last}T10:00:00Z"})
    )
    lines.append(
        json.dumps(
            {
                **LATE_SALE,
                "transaction_id": "LATE-X",
                "quantity": -1,
                "event_ts": f"{CONFIG.start + timedelta(days=2)}T10:00:00Z",
            }
        )
    )
    land_late(spark, data_home, timeline, clock + timedelta(hours=2), "late.jsonl", lines)

    manifest = detect(context, spark)
    d = lambda n: (CONFIG.start + timedelta(days=n)).isoformat()  # noqa: E731
    assert manifest.roots == {
        "silver.sales_quarantine": [[d(2), d(2)]],
        "silver.sales_transactions": [[d(1), d(1)], [d(6), d(6)], [d(8), d(9)]],
        # The readers of the other fact source, the refunds: nothing new arrived for them.
        "silver.refund_quarantine": [],
        "silver.refunds": [],
    }
    # The closure over the DAG, if every reached day changed: silver also re-audits the
    # quarantine's day (its reconciliation reads the quarantine: `depends_on`).
    assert manifest.impacted == {
        "silver.sales_quarantine": [[d(2), d(2)]],
        "silver.sales_transactions": [[d(1), d(2)], [d(6), d(6)], [d(8), d(9)]],
        "gold.daily_store_revenue": [[d(1), d(2)], [d(6), d(6)], [d(8), d(9)]],
        "gold.daily_region_revenue": [[d(1), d(2)], [d(6), d(6)], [d(8), d(9)]],
        "gold.daily_store_net_revenue": [[d(1), d(2)], [d(6), d(6)], [d(8), d(9)]],
        "gold.weekly_store_revenue": [[d(0), d(0)], [d(4), d(4)]],
        "gold.monthly_store_revenue": [[d(0), d(0)]],
        "gold.store_features": [[d(1), last.isoformat()]],
        "silver.refund_quarantine": [],
        "silver.refunds": [],
    }
    assert manifest.absorbed_by_next_run["silver.sales_transactions"] == [[last.isoformat()] * 2]
    # The changed keys, known as literals (few new rows), with the arrival dates holding
    # every record of them: the moved key spans two arrival partitions. The duplicate is a
    # verbatim resend: it changes no silver row (its version's first record stays), so its
    # key is not among them.
    changed_keys = {r.transaction_id for r in sales} | {moved.transaction_id, "LATE-1", "LATE-2"}
    key_set = manifest.keys["silver.sales_transactions"]
    assert key_set.keys == changed_keys
    assert duplicated.transaction_id not in key_set.keys
    late_arrival = (clock + timedelta(hours=2)).date()
    assert {moved.arrival_ts.date(), late_arrival} <= set(key_set.arrival_dates)
    assert moved.arrival_ts.date() != late_arrival
    assert manifest.stock_commands and all("--restate-model" in c for c in manifest.stock_commands)
    # Beyond MAX_INLINED_ROWS new rows, detect reads the same rows through semi-joins.
    with monkeypatch.context() as patched:
        patched.setattr(facts, "MAX_INLINED_ROWS", 0)
        assert detect(context, spark).as_dict() == manifest.as_dict()
    # Without a watermark every record is new: the readers compared whole with prod (no key
    # restriction, aggregates only) find the same changes, prod reflecting the rest.
    # (The dimensions' versions stay: their detection has rules of its own.)
    kept = Watermark(sources=read_watermark(spark).sources)
    with monkeypatch.context() as patched:
        patched.setattr("tardy.engine.detect.read_watermark", lambda spark: kept)
        whole = detect(context, spark)
    assert whole.since_bronze_version is None
    assert (whole.roots, whole.impacted, whole.late_rows) == (
        manifest.roots,
        manifest.impacted,
        manifest.late_rows,
    )

    # Stage only: every prod view and physical table returns what it returned before.
    before = content_hashes(context, spark)
    physical_before = physical_hashes(context, spark)
    # Voiding a whole day is a large change: the circuit breaker names it, and it is accepted.
    staged = restate(context, spark, "late January data", promote=False, accept_large_change=True)
    assert staged.status == "staged"
    assert {(t.day, t.measure, Decimal(t.after)) for t in staged.diff.breaker} == {
        (d(1), "rows", 0),
        (d(1), "revenue", 0),
    }
    assert content_hashes(context, spark) == before
    assert physical_hashes(context, spark) == physical_before
    # One pass per model: each staged model's rows are one write (for all its intervals);
    # silver's 4 scattered ranges included.
    expected_evaluated = {
        "silver.sales_quarantine": [[d(2), d(2)]],
        "silver.sales_transactions": [[d(1), d(2)], [d(6), d(6)], [d(8), d(9)]],
        # Only silver's changed days cascade: d(2) only re-audits silver.
        "gold.daily_store_revenue": [[d(1), d(1)], [d(6), d(6)], [d(8), d(9)]],
        "gold.daily_region_revenue": [[d(1), d(1)], [d(6), d(6)], [d(8), d(9)]],
        "gold.daily_store_net_revenue": [[d(1), d(1)], [d(6), d(6)], [d(8), d(9)]],
        "gold.weekly_store_revenue": [[d(0), d(0)], [d(4), d(4)]],
        "gold.monthly_store_revenue": [[d(0), d(0)]],
        "gold.store_features": [[d(1), last.isoformat()]],
    }
    assert staged.evaluated == expected_evaluated
    writes = writes_per_staged_table(context, spark, staged.restatement_id)
    assert writes == {model: 1 for model in expected_evaluated}
    assert_silver_was_written_by_key(context, spark, key_set, staged.restatement_id)
    assert set(staged.statements) >= {"detect", "stage", "audit", "diff"}
    assert staged.statements["stage"] > 0
    # Every staged model's audits in one statement; the diffs: one for each model another
    # staged model reads (from the models' own dependencies), one for all the others.
    models = {name: context.get_model(name) for name in expected_evaluated}
    read = {
        name
        for name, model in models.items()
        if any(model.fqn in other.depends_on for other in models.values() if other is not model)
    }
    assert 0 < len(read) < len(models)
    assert (staged.statements["audit"], staged.statements["diff"]) == (1, len(read) + 1)
    by_interval = {(i.model, tuple(i.interval)): i for i in staged.diff.intervals}
    voided = by_interval[("silver.sales_transactions", (d(1), d(2)))]
    day_two = rows_on(spark, "silver.sales_transactions", "event_date", day + timedelta(days=1))
    assert (voided.rows_before, voided.rows_after) == (len(sales) + day_two, day_two)
    assert voided.keys_removed == len(sales) and voided.keys_added == 0
    assert voided.keys_changed == 0  # d(2)'s rows are recomputed identical
    moved_from = by_interval[("silver.sales_transactions", (d(6), d(6)))]
    assert moved_from.keys_removed == 1
    # Before and after, each silver interval adds up to its daily gold interval.
    for (model, span), item in by_interval.items():
        if model == "silver.sales_transactions" and span != (d(1), d(2)):
            daily = by_interval[("gold.daily_store_revenue", span)]
            assert item.sums_before["net_amount"] == daily.sums_before["revenue"]
            assert item.sums_after["net_amount"] == daily.sums_after["revenue"]
    report = Path(staged.report_dir)
    assert (
        "| `silver.sales_transactions` | " + f"{d(1)}..{d(2)}" in (report / "diff.md").read_text()
    )
    assert json.loads((report / "diff.json").read_text())["restatement_id"] == staged.restatement_id

    # While staged, the restatement is a virtual environment: every model under
    # <schema>__<env>.<table>, reading its staged rows on the restated days and prod's
    # elsewhere; sqlmesh's table_diff works on it.
    env = staged.environment
    assert env == "r_" + staged.restatement_id.lower().replace("-", "_")
    assert set(staged.views) == set(content_hashes(context, spark))
    assert staged.views["silver.sales_transactions"] == f"silver__{env}.sales_transactions"
    as_staged = {model: view_hash(spark, view) for model, view in staged.views.items()}
    assert as_staged["silver.sales_transactions"] != view_hash(spark, "silver.sales_transactions")
    assert as_staged["gold.weekly_store_revenue"] != view_hash(spark, "gold.weekly_store_revenue")
    row_diff = context.table_diff(
        "silver.sales_transactions",
        staged.views["silver.sales_transactions"],
        on=["transaction_id"],
        show=False,
    )[0].row_diff()
    assert (row_diff.s_only_count, row_diff.t_only_count) == (len(sales), 1)  # voids; LATE-1
    assert content_hashes(context, spark) == before
    # The change trail's oracle, read before promotion: prod's rows and the environment's
    # (the staged ones) over the evaluated intervals, by the trail's row key and day.
    prod_rows = {
        model: keyed_rows(spark, model, expected_evaluated[model], key)
        for model, key in TRAIL_KEYS.items()
    }
    staged_rows = {
        model: keyed_rows(spark, staged.views[model], expected_evaluated[model], key)
        for model, key in TRAIL_KEYS.items()
    }

    # A second restatement is refused while this one waits for review.
    with pytest.raises(Exception, match="awaiting review"):
        restate(context, spark, "a second one")

    done = promote_staged(context, spark, staged.restatement_id)
    assert done.status == "promoted"
    # Prod is now what the environment showed, and the environment is gone.
    assert {model: view_hash(spark, model) for model in as_staged} == as_staged
    assert not spark.catalog.databaseExists(f"silver__{env}")
    assert done.evaluated == expected_evaluated
    # Only days whose rows changed are promoted: silver's d(2) was recomputed unchanged.
    assert done.promoted == {
        **expected_evaluated,
        "silver.sales_transactions": [[d(1), d(1)], [d(6), d(6)], [d(8), d(9)]],
    }
    assert rows_on(spark, "silver.sales_transactions", "event_date", day) == 0
    assert days_of_transaction(spark, moved.transaction_id) == [
        moved.event_date + timedelta(days=2)
    ]
    assert_trail_matches(spark, staged, prod_rows, staged_rows)
    assert_history_of_a_moved_transaction(context, spark, moved, staged.restatement_id)
    assert_report_shows_the_emptied_day(context, spark, staged, prod_rows, d(1))
    # The row inside the grace window is not in prod yet, but the next run recomputes its day
    # (lookback = grace): the watermark advances past it and keeps its day as pending, so
    # detection does not read these records again and still reports the day.
    silver = "silver.sales_transactions"
    assert done.advanced_watermark
    mark = read_watermark(spark)
    assert mark.version == manifest.bronze_version
    assert mark.pending[silver].days == {last}
    again = restate(context, spark, "no new arrivals")
    assert again.status == "nothing_to_do" and again.manifest.is_empty
    assert again.manifest.since_bronze_version == manifest.bronze_version
    assert again.manifest.absorbed_by_next_run[silver] == [[last.isoformat()] * 2]
    assert promote_staged(context, spark, staged.restatement_id).status == "already_promoted"

    # The next daily run absorbs the row inside the grace window; then prod equals the
    # independent recomputation and a stock full restatement changes nothing.
    next_clock = clock + timedelta(days=1)
    context.run("prod", end=last_complete_day(next_clock), execution_time=next_clock)
    through = next_clock.date() - timedelta(days=1)
    assert_prod_equals_recomputation(spark, timeline.files, data_home.landing, through)
    settled = restate(context, spark, "after the run")
    # The run moved silver's last computed day: the pending day is absorbed, none remains.
    assert settled.status == "nothing_to_do"
    assert not any(settled.manifest.absorbed_by_next_run.values())
    promoted = content_hashes(context, spark)
    restate_bronze(context, CONFIG.start, next_clock)
    assert content_hashes(context, spark) == promoted

    # sqlmesh stays consistent: nothing to plan, and a run recomputes nothing restated.
    plan = context.plan_builder("prod", execution_time=next_clock).build()
    assert not plan.has_changes and not plan.requires_backfill

    # The log holds every step, and the restated periods show when and why.
    from tardy.engine import log as restatement_log

    entries = restatement_log.entries(spark, staged.restatement_id)
    actions = [e["action"] for e in entries]
    assert actions == ["staging", "staged", "promoting", "promoted"]
    audits = entries[1]["audit_results"][0]
    assert audits["blocking_failures"] == 0 and audits["failed"] == []
    assert audits["audits_run"] == sum(
        oracle.audit_runs(context.get_model(model), len(spans))
        for model, spans in expected_evaluated.items()
    )
    periods = spark.sql(
        f"SELECT period FROM tardy.restated_periods WHERE model = 'gold.daily_store_revenue' "
        f"AND last_restatement_id = '{staged.restatement_id}'"
    ).collect()
    assert sorted(r.period.isoformat() for r in periods) == [d(1), d(6), d(8), d(9)]
    from tardy.consumers.status import ensure_status_view

    view = ensure_status_view(context, spark)
    shown = spark.sql(
        f"SELECT DISTINCT last_restatement_id, last_restatement_reason FROM {view} "
        f"WHERE event_date = DATE'{d(6)}'"
    ).collect()
    assert [tuple(r) for r in shown] == [(staged.restatement_id, "late January data")]


# The change trail's row key of each model the tests read back: silver's transaction id,
# daily gold's "<event_date>|<store_id>" (its grain's values joined by "|").
TRAIL_KEYS = {
    "silver.sales_transactions": lambda r: r.transaction_id,
    "gold.daily_store_revenue": lambda r: f"{r.event_date}|{r.store_id}",
}


def keyed_rows(spark, table: str, spans: list[list[str]], key) -> dict[tuple[str, str], dict]:
    where = " OR ".join(f"event_date BETWEEN DATE'{a}' AND DATE'{b}'" for a, b in spans)
    rows = spark.sql(f"SELECT * FROM {table} WHERE {where}").collect()
    out = {(key(r), r.event_date.isoformat()): r.asDict() for r in rows}
    assert len(out) == len(rows)  # the key and day identify a row
    return out


def same_values(shown: dict[str, str] | None, row: dict | None) -> bool:
    """A trail row's text map holds exactly ``row``'s values (compared by type)."""
    if shown is None or row is None:
        return shown is None and row is None
    if set(shown) != set(row):
        return False
    for column, value in row.items():
        text = shown[column]
        if value is None:
            ok = text is None
        elif isinstance(value, bool):
            ok = text == str(value).lower()
        elif isinstance(value, Decimal | int | float):
            ok = Decimal(text) == Decimal(str(value))
        elif isinstance(value, datetime):
            ok = datetime.fromisoformat(text) == value
        else:
            ok = text == str(value)
        if not ok:
            return False
    return True


def assert_trail_matches(spark, staged, prod_rows: dict, staged_rows: dict) -> None:
    """The promotion appended one trail row per key and day it added, removed or changed:
    the same keys as an independent comparison of prod before and the staged rows, with their
    values before and after, and as many of each kind as the restatement's diff counted."""
    from tardy.engine.trail import changes

    trail = changes(spark, restatement_id=staged.restatement_id)
    assert trail and {r["action"] for r in trail} == {"promoted"}
    assert {r["reason"] for r in trail} == {"late January data"}
    for model, before in prod_rows.items():
        after = staged_rows[model]
        expected = {
            k: "added" if k not in before else "removed" if k not in after else "changed"
            for k in before.keys() | after.keys()
            if before.get(k) != after.get(k)
        }
        mine = [r for r in trail if r["model"] == model]
        got = {(r["row_key"], r["event_date"].isoformat()): r for r in mine}
        assert len(got) == len(mine), model  # every changed key once
        assert {k: r["change"] for k, r in got.items()} == expected, model
        for k, r in got.items():
            assert same_values(r["before"], before.get(k)), (model, k, r["before"])
            assert same_values(r["after"], after.get(k)), (model, k, r["after"])
    for model in staged.evaluated:
        counted = {
            kind: sum(getattr(i, f"keys_{kind}") for i in staged.diff.intervals if i.model == model)
            for kind in ("added", "removed", "changed")
        }
        kinds = [r["change"] for r in trail if r["model"] == model]
        assert {kind: kinds.count(kind) for kind in counted} == counted, model


def assert_history_of_a_moved_transaction(context, spark, moved, restatement_id: str) -> None:
    """`tardy history` of a sale whose late correction moved it two days: its bronze records
    by arrival (as bronze holds them), and the restatement that removed it from its old day
    and added it on the new one."""
    from children import cli_in_process

    from tardy.consumers.history import history

    tid = moved.transaction_id
    story = history(context, spark, tid)
    bronze = spark.sql(
        "SELECT arrival_ts, record_type FROM bronze.pos_events "
        f"WHERE transaction_id = '{tid}' OR corrects_transaction_id = '{tid}'"
    ).collect()
    assert sorted((str(r.arrival_ts), r.record_type) for r in bronze) == sorted(
        (str(datetime.fromisoformat(r["arrival_ts"])), r["record_type"]) for r in story.records
    )
    assert [r["record_type"] for r in story.records][-1] == "correction"
    arrivals = [r["arrival_ts"] for r in story.records]
    assert arrivals == sorted(arrivals)
    new_day = (moved.event_date + timedelta(days=2)).isoformat()
    assert sorted((c["event_date"], c["change"], c["restatement_id"]) for c in story.changes) == [
        (moved.event_date.isoformat(), "removed", restatement_id),
        (new_day, "added", restatement_id),
    ]
    assert [r["event_date"] for r in story.current["silver.sales_transactions"]] == [new_day]
    code, out, err = cli_in_process("history", tid)
    assert code == 0, err
    assert restatement_id in out and "correction" in out and tid in out
    code, _, _ = cli_in_process("history", "NO-SUCH-TRANSACTION")
    assert code == 1


def assert_report_shows_the_emptied_day(context, spark, staged, prod_rows, day: str) -> None:
    """The report's first published against final revenue of the day the restatement voided
    whole: what prod held before (read before promotion) against 0, revision 1, with the
    restatement's id and reason; the status summary counts those removed rows too."""
    from tardy.consumers.revisions import revisions
    from tardy.engine.sqlmesh_api import published_snapshots
    from tardy.reporting.gather import gather

    report = gather(context, spark)
    shown = {d.event_date: d for d in report.daily}[day]
    before = [r for (_, on), r in prod_rows["gold.daily_store_revenue"].items() if on == day]
    first = sum(r["revenue"] for r in before)
    assert first > 0
    assert (Decimal(shown.first_published), Decimal(shown.final), shown.revision) == (first, 0, 1)
    assert [(r.restatement_id, r.reason) for r in shown.restatements] == [
        (staged.restatement_id, "late January data")
    ]
    assert {(p.model, p.period) for p in report.periods} >= {("gold.daily_store_revenue", day)}
    moved = revisions(context, spark, published_snapshots(context))["gold.daily_store_revenue"]
    assert moved.days == len([d for d in report.daily if d.revision]) and moved.rows >= len(before)
    assert Decimal(moved.now) - Decimal(moved.first_published) == Decimal(moved.net_change)


def assert_silver_was_written_by_key(context, spark, key_set, restatement_id) -> None:
    """Silver (and only silver: the model that reads the key restriction) was staged by key:
    its rows table holds one write of the changed keys' rows only, though prod has other
    keys on those days; its staged view shows prod's rows for every other key."""
    from tardy.engine.sqlmesh_api import model_snapshots, spark_name
    from tardy.engine.stage import key_restriction, rows_table, staged_view

    snapshots = {s.model.name: s for s in model_snapshots(context)}
    restricted = {n for n, s in snapshots.items() if key_restriction(s, key_set) is not None}
    assert restricted == {"silver.sales_transactions"}
    silver = snapshots["silver.sales_transactions"]
    staged = staged_view(silver)
    rows = rows_table(restatement_id, silver)
    prod = spark_name(silver.table_name(is_deployable=True))
    assert len(spark.sql(f"DESCRIBE HISTORY {rows}").collect()) == 1
    others = "transaction_id NOT IN (SELECT * FROM VALUES {})".format(
        ", ".join(f"('{k}')" for k in sorted(key_set.keys))
    )
    assert spark.sql(f"SELECT COUNT(*) FROM {rows}").first()[0] > 0
    assert spark.sql(f"SELECT COUNT(*) FROM {rows} WHERE {others}").first()[0] == 0
    on_its_days = f"event_date IN (SELECT event_date FROM {rows}) AND {others}"
    assert spark.sql(f"SELECT COUNT(*) FROM {prod} WHERE {on_its_days}").first()[0] > 0
    for a, b in ((staged, prod), (prod, staged)):
        extra = spark.sql(
            f"SELECT * FROM {a} WHERE {others} EXCEPT ALL SELECT * FROM {b} WHERE {others}"
        )
        assert extra.count() == 0
    assert spark.sql(f"SELECT COUNT(*) FROM {staged} WHERE {others}").first()[0] > 0


def writes_per_staged_table(context, spark, restatement_id) -> dict[str, int]:
    """Per staged model: how many commits its rows table (at a path of the data home)
    holds. Its staged name, when it has one, is a view (prod overlaid with those rows),
    never a copy of prod."""
    from tardy.engine.sqlmesh_api import model_snapshots
    from tardy.engine.stage import rows_table, staged_view

    out = {}
    for snapshot in model_snapshots(context):
        staged = staged_view(snapshot)
        if spark.catalog.tableExists(staged):
            assert spark.catalog.getTable(staged).tableType == "VIEW", staged
        rows = rows_table(restatement_id, snapshot)
        if Path(rows.removeprefix("delta.`").removesuffix("`")).is_dir():
            history = spark.sql(f"DESCRIBE HISTORY {rows}").collect()
            out[snapshot.model.name] = len(history)
    return out


def physical_hashes(context, spark) -> dict[str, int]:
    """Content hash of every model's prod physical table (not only the views)."""
    from tardy.engine.sqlmesh_api import prod_snapshots, spark_name

    out = {}
    for snapshot in prod_snapshots(context).values():
        if snapshot.is_model and not snapshot.is_external:
            table = spark_name(snapshot.table_name())
            total = f"SELECT COUNT(*), SUM(CAST(xxhash64(*) AS DECIMAL(38, 0))) FROM {table}"
            out[table] = spark.sql(total).first()[:]
    return out


# fast guard: test_small_rules
def test_breaker_and_failed_audit_leave_prod_identical_then_rollback_restores(
    restated: dict, timeline: Timeline, context, spark, data_home
) -> None:
    from tardy.engine import log as restatement_log
    from tardy.engine.outcome import BreakerTripped, RestatementError
    from tardy.requests.restatements import restate, rollback

    # Prod reflects bronze (``restated``) and the arrival watermark is set: only the rows
    # landed below are new. Without a watermark every record would count as new, and the
    # quarantine damaged below would be restated, repaired, with them.
    assert restate(context, spark, "baseline").status in ("nothing_to_do", "promoted")
    clock = timeline.builds[-1].clock + timedelta(days=1)
    day = CONFIG.start + timedelta(days=3)
    late = [
        json.dumps(
            {
                **LATE_SALE,
                "transaction_id": f"BIG-{i}",
                "quantity": 50,
                "event_ts": f"{day}T11:00:00Z",
            }
        )
        for i in range(3)
    ]
    land_late(spark, data_home, timeline, clock + timedelta(hours=3), "big.jsonl", late)
    before = content_hashes(context, spark)
    physical_before = physical_hashes(context, spark)

    # Circuit breaker: the day's revenue moves by more than 0.1 %.
    with pytest.raises(BreakerTripped, match="closed day"):
        restate(context, spark, "big late batch", threshold=0.001)
    assert content_hashes(context, spark) == before
    assert physical_hashes(context, spark) == physical_before

    # A blocking audit failing on the staged data: damage the prod quarantine of the day so
    # that silver's reconciliation with bronze cannot hold for it.
    quarantine = physical_table(context, "silver.sales_quarantine")
    q_day = (
        spark.sql(
            f"SELECT report_date FROM {quarantine} WHERE report_date <= DATE'{day}' "
            "ORDER BY report_date DESC LIMIT 1"
        )
        .first()
        .report_date
    )
    late_on_q_day = json.dumps(
        {**LATE_SALE, "transaction_id": "AUDIT-1", "event_ts": f"{q_day}T11:00:00Z"}
    )
    land_late(
        spark, data_home, timeline, clock + timedelta(hours=4), "audit.jsonl", [late_on_q_day]
    )
    version = spark.sql(f"DESCRIBE HISTORY {quarantine} LIMIT 1").first().version
    spark.sql(f"DELETE FROM {quarantine} WHERE report_date = DATE'{q_day}'")
    damaged = content_hashes(context, spark)
    with pytest.raises(
        RestatementError, match=f"reconciles_with_bronze on silver.sales_transactions for {q_day}"
    ):
        restate(context, spark, "audit gate", accept_large_change=True)
    assert content_hashes(context, spark) == damaged
    failed = [e for e in restatement_log.entries(spark) if e["action"] == "audit_failed"][-1]
    failures = failed["audit_results"][0]
    assert failures["blocking_failures"] >= 1
    assert {(f["audit"], f["model"]) for f in failures["failed"]} == {
        ("reconciles_with_bronze", "silver.sales_transactions")
    }
    spark.sql(f"RESTORE TABLE {quarantine} TO VERSION AS OF {version}")
    assert content_hashes(context, spark) == before

    # Accepted large change: promoted; then rolled back to exactly the previous content.
    done = restate(
        context, spark, "big late batch, reviewed", threshold=0.001, accept_large_change=True
    )
    assert done.status == "promoted" and done.diff.breaker
    assert content_hashes(context, spark) != before
    rollback(context, spark, done.restatement_id, "wrong batch")
    assert content_hashes(context, spark) == before
    assert physical_hashes(context, spark) == physical_before
    statuses = {s["restatement_id"]: s["status"] for s in restatement_log.summary(spark)}
    assert statuses[done.restatement_id] == "rolled_back"
    assert sorted(statuses.values()).count("breaker_tripped") == 1
    assert sorted(statuses.values()).count("audit_failed") == 1
    # The rolled-back rows are detected again.
    from tardy.engine.detect import detect

    assert detect(context, spark).impacted["silver.sales_transactions"]


# --- every blocking audit fails on a table damaged the way it guards against -----------------


# --- named restatements: the models a user names, over a range they choose -------------------


def revision_of(context, spark, day: date, store: int) -> tuple[int, Decimal, Decimal]:
    """(revision, first published revenue, revenue now) of one row of the status view."""
    from tardy.consumers.status import ensure_status_view

    view = ensure_status_view(context, spark)
    row = spark.sql(
        f"SELECT revision, first_published_revenue, revenue, revenue_change_since_first_published"
        f" FROM {view} WHERE event_date = DATE'{day}' AND store_id = {store}"
    ).first()
    assert row.revenue_change_since_first_published == row.revenue - row.first_published_revenue
    return row.revision, row.first_published_revenue, row.revenue


# fast guards: test_readme_tour, the request test below
def test_named_restatement_restates_the_range_cascades_what_changed_and_rolls_back(
    context, spark, timeline
) -> None:
    """A partner says one day of daily revenue is wrong (here: prod's daily table edited
    outside SQLMesh). `--model gold.daily_store_revenue` over that day recomputes it, stages
    the closure (its week, month and features window), promotes only what changed, leaves
    the arrival watermark alone, and rolls back to exactly the edited state. Over a range
    where nothing is wrong it promotes nothing and says so."""
    from tardy.engine import log as restatement_log
    from tardy.engine.named import Selection
    from tardy.requests.restatements import restate, rollback

    daily = physical_table(context, "gold.daily_store_revenue")
    day = CONFIG.start + timedelta(days=9)
    clean = content_hashes(context, spark)
    clean_version = spark.sql(f"DESCRIBE HISTORY {daily} LIMIT 1").first().version
    # The detected restatement above changed this row once: it added LATE-1 (2 x 5.00).
    first_revision, first_published, revenue = revision_of(context, spark, day, 1)
    assert (first_revision, revenue - first_published) == (1, Decimal("10.00"))
    spark.sql(
        f"UPDATE {daily} SET revenue = revenue + 100 WHERE event_date = DATE'{day}' "
        "AND store_id = 1"
    )
    edited = content_hashes(context, spark)
    assert edited != clean
    mark = read_watermark(spark)
    try:
        selection = Selection(("gold.daily_store_revenue",), day, day)
        done = restate(context, spark, "partner: store 1 revenue wrong", selection=selection)
        d = day.isoformat()
        assert done.manifest.roots == {"gold.daily_store_revenue": [[d, d]]}
        assert done.manifest.named == {"models": ["gold.daily_store_revenue"], "start": d, "end": d}
        # Net revenue reads the daily model; region revenue's reconciliation audit does
        # (depends_on).
        assert set(done.evaluated) == {
            "gold.daily_store_revenue",
            "gold.daily_region_revenue",
            "gold.daily_store_net_revenue",
            "gold.weekly_store_revenue",
            "gold.monthly_store_revenue",
            "gold.store_features",
        }
        assert done.evaluated["gold.daily_store_revenue"] == [[d, d]]
        assert done.status == "promoted"
        # The recomputed week, month and features equal prod's (computed before the edit).
        assert done.promoted == {"gold.daily_store_revenue": [[d, d]]}
        assert content_hashes(context, spark) == clean
        assert read_watermark(spark) == mark and not done.advanced_watermark
        entries = restatement_log.entries(spark, done.restatement_id)
        assert [e["action"] for e in entries] == ["staging", "staged", "promoting", "promoted"]
        assert entries[1]["manifest"]["reasons"]["gold.daily_store_revenue"].startswith("named:")

        # The status view counts the restatement as the row's second revision; what was
        # first published stays.
        row_key = f"{day}|1"
        assert revision_of(context, spark, day, 1) == (2, first_published, revenue)

        rollback(context, spark, done.restatement_id, "check the rollback")
        assert content_hashes(context, spark) == edited
        assert read_watermark(spark) == mark
        # The rollback appended the promotion's trail rows reversed; the row is unrevised.
        from tardy.engine.trail import changes

        rows = changes(spark, restatement_id=done.restatement_id)
        promoted = [r for r in rows if r["action"] == "promoted"]
        reversed_ = [r for r in rows if r["action"] == "rolled_back"]
        assert [r["row_key"] for r in promoted] == [row_key]
        flip = {"added": "removed", "removed": "added", "changed": "changed"}
        assert sorted(
            (r["model"], r["row_key"], r["event_date"], flip[r["change"]], r["after"], r["before"])
            for r in promoted
        ) == sorted(
            (r["model"], r["row_key"], r["event_date"], r["change"], r["before"], r["after"])
            for r in reversed_
        )
        assert {r["reason"] for r in reversed_} == {"rollback: check the rollback"}
        assert revision_of(context, spark, day, 1) == (1, first_published, revenue + 100)

    finally:
        spark.sql(f"RESTORE TABLE {daily} TO VERSION AS OF {clean_version}")
    assert content_hashes(context, spark) == clean

    # Nothing wrong in the range: every staged interval equals prod, nothing is promoted.
    quiet_day = CONFIG.start + timedelta(days=11)
    quiet = restate(
        context,
        spark,
        "nothing wrong here",
        selection=Selection(("gold.daily_store_revenue",), quiet_day, quiet_day),
    )
    q = quiet_day.isoformat()
    assert quiet.evaluated["gold.daily_store_revenue"] == [[q, q]]
    assert quiet.status == "promoted" and quiet.promoted == {}
    assert content_hashes(context, spark) == clean


# --- last: a full rebuild in a second data home (the module's home is closed after it) -------


def rebuild_from_files(engine, home: Path, clock: datetime) -> dict:
    """A fresh data home built from files alone: `tardy simulate` and `tardy ingest` (the CLI,
    in-process), then the plan `sqlmesh plan --auto-apply --execution-time` makes (SQLMesh's
    API: the stock CLI's own process is `test_cli`'s and the reference's subject) and
    `tardy fingerprint`."""
    for argv in (
        (
            "simulate",
            f"--seed={CONFIG.seed}",
            f"--stores={CONFIG.stores}",
            f"--days={CONFIG.days}",
            f"--transactions-per-store-day={CONFIG.transactions_per_store_day}",
            f"--through={clock.isoformat()}",
        ),
        ("ingest",),
    ):
        code, out, err = cli_in_process(*argv)
        assert code == 0, (argv, out[-2000:], err[-2000:])
    engine.open(home)[1].plan(  # the home's context, already open
        "prod",
        execution_time=clock.date().isoformat(),
        auto_apply=True,
        no_prompts=True,
        skip_tests=True,
    )
    code, out, err = cli_in_process("fingerprint", "--json")
    assert code == 0, (out[-2000:], err[-2000:])
    return json.loads(out)


# fast guard: test_small_story
def test_full_rebuild_in_a_second_home_has_the_same_content(
    restated: dict, timeline: Timeline, engine, tmp_path_factory: pytest.TempPathFactory
) -> None:
    """Simulate, ingest and plan prod in one go in a fresh home: the same content as the
    home built day by day, restated. Last in the module: it opens another home."""
    home = tmp_path_factory.mktemp("second_home") / "home"
    clock = timeline.builds[-1].clock
    rebuilt = in_own_home(engine, home, rebuild_from_files, engine, home, clock)
    assert rebuilt == restated
    assert (home / "state.duckdb").is_file() and (home / "warehouse").is_dir()
