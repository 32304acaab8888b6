"""The lakehouse's story on the ``small`` template (two stores, ten days, prod planned after
the last day), in the worker's own engine: the fast tier's guards of ``test_lakehouse``, whose
fuller story (the ``timeline`` template, built day by day) is in the long tier.

The tests share one copy of the template and run in file order:

1. prod equals the oracle's recomputation of the landing files;
2. a batch voids a whole day and moves one sale to another day: with exact writes, a stock
   restatement leaves no stale row and prod equals the recomputation (the control without
   them, and a second restatement leaving every table identical, are ``test_lakehouse``'s);
3. late rows for closed days: ``detect`` finds exactly their days and the closure over the DAG;
   ``restate`` stages them away from prod as a virtual environment ``table_diff`` reads;
   promotion makes prod what the environment showed (only changed days) and the
   recomputation; a rollback restores prod and the rows are detected again;
4. a week with many restated days raises ``restatement_frequency`` against the weeks before
   it (the lateness baseline of ``status --check``), one with a single day does not.
"""

from __future__ import annotations

import json
import typing as t
from datetime import date, timedelta
from pathlib import Path

import oracle
import pytest
from children import SMALL, SMALL_CLOCK, SMALL_CONFIG
from prod_checks import (
    LATE_SALE,
    assert_prod_equals_recomputation,
    content_hashes,
    days_of_transaction,
    empty_a_day,
    restate_bronze,
    rows_on,
    sale_line,
    view_hash,
)

from tardy.ingest import ingest
from tardy.ingest.landing import arrival_dir_name

FIRST, LAST = SMALL_CONFIG.start, SMALL_CONFIG.last_day


def day(n: int) -> date:
    return FIRST + timedelta(days=n)


def spans(*days: int) -> list[list[str]]:
    """Consecutive day offsets as SQLMesh's closed intervals: (2, 3, 5) -> [[d2, d3], [d5, d5]]."""
    out: list[list[str]] = []
    for n in sorted(days):
        if out and out[-1][1] == day(n - 1).isoformat():
            out[-1][1] = day(n).isoformat()
        else:
            out.append([day(n).isoformat()] * 2)
    return out


@pytest.fixture(scope="module")
def opened(engine: t.Any, tmp_path_factory: pytest.TempPathFactory) -> t.Any:
    root = tmp_path_factory.mktemp("small-story") / "home"
    SMALL.copy_to(engine, root)
    return engine.open(root)


def prod_is_the_recomputation(spark: t.Any, landing: Path) -> None:
    assert_prod_equals_recomputation(spark, oracle.sales_files(landing), landing, FIRST, LAST)


def test_prod_equals_the_recomputation_of_the_landing_files(opened: t.Any) -> None:
    home, _, spark = opened
    prod_is_the_recomputation(spark, home.landing)


def test_a_void_of_a_whole_day_and_a_moving_correction_leave_no_stale_rows(
    opened: t.Any,
) -> None:
    """docs/facts.md, fact 2, on this stack: the stock strategy keeps the emptied day's rows.
    With exact writes none is left. The control (the stock strategy keeps them and the
    audits refuse them) and a second restatement leaving every table identical are the long
    tier's (``test_lakehouse``); the fast tier's guard of the predicate itself is
    ``test_small_rules -k interval_predicate``."""
    home, context, spark = opened
    emptied, to_day = day(2), day(4)
    assert rows_on(spark, "silver.sales_transactions", "event_date", emptied) > 0
    _, moved = empty_a_day(spark, home.landing, emptied, to_day, SMALL_CLOCK)
    assert sorted(days_of_transaction(spark, moved)) == [emptied]  # prod before the restatement

    restate_bronze(context, FIRST, SMALL_CLOCK, FIRST)
    assert rows_on(spark, "silver.sales_transactions", "event_date", emptied) == 0
    assert rows_on(spark, "gold.daily_store_revenue", "event_date", emptied) == 0
    assert days_of_transaction(spark, moved) == [to_day]
    prod_is_the_recomputation(spark, home.landing)


def test_late_rows_are_detected_staged_promoted_and_rolled_back_exactly(opened: t.Any) -> None:
    from tardy.engine.detect import detect
    from tardy.requests.restatements import promote_staged, restate, rollback

    home, context, spark = opened
    baseline = restate(context, spark, "baseline: prod reflects bronze")
    assert baseline.status in ("nothing_to_do", "promoted") and baseline.promoted == {}

    voided = spark.sql(
        f"SELECT * FROM silver.sales_transactions WHERE event_date = DATE'{day(5)}' "
        "ORDER BY transaction_id"
    ).first()
    new_sale = {**LATE_SALE, "event_ts": f"{day(1)}T10:00:00Z"}
    invalid = {**new_sale, "transaction_id": "LATE-X", "quantity": -1}
    invalid["event_ts"] = f"{day(3)}T10:00:00Z"
    batch = home.landing / "pos" / arrival_dir_name(SMALL_CLOCK + timedelta(hours=2))
    batch.mkdir(parents=True)
    lines = [json.dumps(new_sale), sale_line(voided, "void", voided.event_ts), json.dumps(invalid)]
    (batch / "late.jsonl").write_text("\n".join(lines) + "\n")
    assert ingest(spark, home.landing).files_ingested == 1

    manifest = detect(context, spark)
    assert {m: s for m, s in manifest.roots.items() if s} == {
        "silver.sales_quarantine": spans(3),
        "silver.sales_transactions": spans(1, 5),
    }
    # The closure: silver re-audits the quarantine's day (its reconciliation reads it), gold
    # reads silver; a week and a month are restated from their first day (never before the
    # data's first day), the features from the first changed day through the last.
    weeks = {max(FIRST, day(n) - timedelta(days=day(n).weekday())) for n in (1, 3, 5)}
    months = {max(FIRST, day(n).replace(day=1)) for n in (1, 3, 5)}
    daily = spans(1, 3, 5)
    assert {m: s for m, s in manifest.impacted.items() if s} == {
        "silver.sales_quarantine": spans(3),
        "silver.sales_transactions": daily,
        "gold.daily_store_revenue": daily,
        "gold.daily_region_revenue": daily,
        "gold.daily_store_net_revenue": daily,
        "gold.weekly_store_revenue": [[w.isoformat()] * 2 for w in sorted(weeks)],
        "gold.monthly_store_revenue": [[m.isoformat()] * 2 for m in sorted(months)],
        "gold.store_features": [[day(1).isoformat(), LAST.isoformat()]],
    }

    before = content_hashes(context, spark)
    staged = restate(context, spark, "late rows", promote=False, accept_large_change=True)
    assert staged.status == "staged"
    assert content_hashes(context, spark) == before  # prod untouched while staged
    env = staged.environment
    assert staged.views["silver.sales_transactions"] == f"silver__{env}.sales_transactions"
    as_staged = {model: view_hash(spark, view) for model, view in staged.views.items()}
    row_diff = context.table_diff(
        "silver.sales_transactions",
        staged.views["silver.sales_transactions"],
        on=["transaction_id"],
        show=False,
    )[0].row_diff()
    assert (row_diff.s_only_count, row_diff.t_only_count) == (1, 1)  # the void; LATE-1

    done = promote_staged(context, spark, staged.restatement_id)
    assert done.status == "promoted"
    assert {model: view_hash(spark, model) for model in as_staged} == as_staged
    assert not spark.catalog.databaseExists(f"silver__{env}")
    # Only days whose rows changed are promoted: silver's day 3 was re-audited, unchanged.
    assert done.promoted["silver.sales_transactions"] == spans(1, 5)
    assert done.promoted["gold.daily_store_revenue"] == spans(1, 5)
    assert done.promoted["silver.sales_quarantine"] == spans(3)
    assert days_of_transaction(spark, "LATE-1") == [day(1)]
    assert days_of_transaction(spark, voided.transaction_id) == []
    prod_is_the_recomputation(spark, home.landing)

    rollback(context, spark, done.restatement_id, "check the rollback")
    assert content_hashes(context, spark) == before
    again = detect(context, spark)
    assert again.roots["silver.sales_transactions"] == spans(1, 5)

    # Restated again in one call, the change trail comes from the diff (not a second
    # comparison at promotion, as for ``done``, staged first): the same keys, days, kinds and
    # values as the rows ``done`` recorded.
    redone = restate(context, spark, "late rows again", accept_large_change=True)
    assert redone.promoted == done.promoted
    assert trail_of(spark, redone.restatement_id) == trail_of(spark, done.restatement_id)
    prod_is_the_recomputation(spark, home.landing)


def test_a_week_with_many_restated_days_raises_the_frequency_alert(opened: t.Any) -> None:
    """The current week is the one of the feed's last final day: by the late batches'
    clock (``SMALL_CLOCK`` + a few hours, a 3-day grace) Monday ``day(4)`` to Sunday. Test 3
    restated one day of it (``day(5)``, the void; its rollback's days do not count), and
    ``day(1)`` the week before: no alert. Late sales for ``day(4)`` and ``day(6)`` make three
    restated days in the week against a baseline of 0, 0, 0, 1: the alert, its value the
    days the test's own batches changed."""
    from tardy.lateness.alerts import Metric, check_baseline, thresholds
    from tardy.lateness.baseline import day_models, measure
    from tardy.project.sources import declared
    from tardy.requests.restatements import restate

    home, context, spark = opened
    variables = context.config.variables
    limits = thresholds(variables, declared().tiers())
    daily = day_models(context)
    # Days, not weeks or months, nor a rolling window's days (the features').
    assert "gold.daily_store_revenue" in daily
    assert not {"gold.weekly_store_revenue", "gold.store_features"} & set(daily)

    def frequency() -> tuple[list[int], list[t.Any]]:
        baseline = measure(spark, variables, {}, daily)
        assert baseline.current_week == day(4).isoformat()
        alerts = check_baseline(baseline, limits)
        return baseline.restated_days, [
            a for a in alerts if a.metric == Metric.RESTATEMENT_FREQUENCY
        ]

    # The oracle: the days the test's batches changed (test 3's promoted by `redone`; its
    # rolled back `done` not counted).
    weeks, alerts = frequency()
    assert (weeks, alerts) == ([0, 0, 0, 1, 1], [])

    batch = home.landing / "pos" / arrival_dir_name(SMALL_CLOCK + timedelta(hours=3))
    batch.mkdir(parents=True)
    sales = [
        {**LATE_SALE, "transaction_id": f"LATE-W{n}", "event_ts": f"{day(n)}T11:00:00Z"}
        for n in (4, 6)
    ]
    (batch / "week.jsonl").write_text("".join(json.dumps(s) + "\n" for s in sales))
    assert ingest(spark, home.landing).files_ingested == 1
    done = restate(context, spark, "a week of late sales", accept_large_change=True)
    assert done.promoted["gold.daily_store_revenue"] == spans(4, 6)

    weeks, alerts = frequency()
    assert weeks == [0, 0, 0, 1, 3]
    (alert,) = alerts
    assert (alert.value, alert.hours) == (3.0, (day(4).isoformat(),))
    assert alert.value > alert.threshold


def trail_of(spark: t.Any, restatement_id: str) -> list[tuple[t.Any, ...]]:
    """A restatement's promoted trail rows: model, row key, day, change, before, after."""
    from tardy.engine.trail import changes

    rows = [r for r in changes(spark, restatement_id) if r["action"] == "promoted"]
    assert rows
    return sorted(
        (
            r["model"],
            r["row_key"],
            r["event_date"],
            r["change"],
            *map(_text, [r["before"], r["after"]]),
        )
        for r in rows
    )


def _text(values: dict[str, str] | None) -> str:
    return json.dumps(values, sort_keys=True)
