"""The restatement closure comes from the project: a new gold model needs no change in tardy.

A copy of the project gets one more model, a monthly rollup written the way a data engineer
would add one (its own file, keyed by ``@period_first_day('month', event_date)``) and a
rolling model declaring its window by tag; the closure of a changed silver day must reach
both through SQLMesh's DAG and column lineage alone.
"""

from __future__ import annotations

import os
import typing as t
from datetime import date, timedelta
from pathlib import Path

from test_code_change import copy_project

NEW_ROLLUP = """
MODEL (
  name gold.monthly_store_items,
  kind INCREMENTAL_BY_TIME_RANGE (time_column first_day, lookback 33),
  grain (month_start, store_id)
);

SELECT
  CAST(@period_first_day('month', event_date) AS DATE) AS first_day,
  CAST(@period_start('month', event_date) AS DATE) AS month_start,
  CAST(store_id AS INT) AS store_id,
  CAST(SUM(items) AS BIGINT) AS items
FROM gold.daily_store_revenue
WHERE event_date BETWEEN @start_date AND @period_end('month', @end_date)
  AND @period_first_day('month', event_date) BETWEEN @start_date AND @end_date
GROUP BY 1, 2, 3
"""
NEW_WINDOW = """
MODEL (
  name gold.store_items_7d,
  kind INCREMENTAL_BY_TIME_RANGE (time_column event_date, lookback 3),
  grain (event_date, store_id),
  tags ('restate_window=7')
);

SELECT
  CAST(d.event_date AS DATE) AS event_date,
  CAST(d.store_id AS INT) AS store_id,
  CAST(SUM(w.items) AS BIGINT) AS items_7d
FROM gold.daily_store_revenue AS d
JOIN gold.daily_store_revenue AS w
  ON w.store_id = d.store_id AND w.event_date BETWEEN d.event_date - 6 AND d.event_date
WHERE d.event_date BETWEEN @start_date AND @end_date
GROUP BY 1, 2
"""


def test_a_new_period_model_and_a_windowed_model_need_no_change_in_tardy(
    tmp_path: Path, spark
) -> None:
    from sqlmesh import Context

    from tardy.engine.closure import Closure

    project = copy_project(tmp_path / "project")
    (project / "models/gold/monthly_store_items.sql").write_text(NEW_ROLLUP)
    (project / "models/gold/store_items_7d.sql").write_text(NEW_WINDOW)
    home = os.environ["TARDY_HOME"]
    (tmp_path / "home").mkdir()
    os.environ["TARDY_HOME"] = str(tmp_path / "home")  # its own SQLMesh state
    try:
        context = Context(paths=str(project))
        snapshots = {s.name: s for s in context.snapshots.values() if s.is_model}
        ordered = [snapshots[fqn] for fqn in context.dag if fqn in snapshots]
        closure = Closure(context, [s for s in ordered if not s.is_external])
        day = date(2026, 1, 7)  # a Wednesday
        reached = closure.downstream({"silver.sales_transactions": {day}})
    finally:
        os.environ["TARDY_HOME"] = home
    assert reached["gold.daily_store_revenue"] == {day}
    assert reached["gold.weekly_store_revenue"] == {date(2026, 1, 5)}
    assert reached["gold.monthly_store_revenue"] == {date(2026, 1, 1)}
    assert reached["gold.monthly_store_items"] == {date(2026, 1, 1)}
    assert reached["gold.store_items_7d"] == {day + timedelta(days=i) for i in range(7)}
    assert reached["gold.store_features"] == {day + timedelta(days=i) for i in range(28)}
    assert reached["silver.sales_quarantine"] == set()
    # The period's last day, for finality, from the same lineage: a week ends on Sunday.
    assert closure.last_day("gold.weekly_store_revenue", date(2026, 1, 5)) == date(2026, 1, 11)
    assert closure.last_day("gold.monthly_store_items", date(2026, 1, 1)) == date(2026, 1, 31)
    assert closure.last_day("gold.daily_store_revenue", day) == day


MONTHLY = "gold.monthly_store_revenue"


MONTH_END = "@period_end('month', month_start) AS month_end"
CHANGED = "CAST(DATE_ADD(month_start, 27) AS DATE) AS month_end"


def _changed_month_end(context: t.Any) -> None:
    """A changed rule of a column no audit reconciles (a changed revenue would fail the
    blocking reconciliation with daily revenue, as it should): the month's end as its 28th
    day, upserted into the context as a data engineer's edit of the model's file would be."""
    from sqlmesh.core.model.common import ParsableSql

    model = context.get_model(MONTHLY)
    text = model.query_.sql
    assert text.count(MONTH_END) == 1, "the monthly model's month_end moved"
    context.upsert_model(model, query_=ParsableSql(sql=text.replace(MONTH_END, CHANGED)))


def test_a_model_change_goes_dev_then_table_diff_then_a_virtual_update(
    engine, tmp_path: Path
) -> None:
    """The stock SQLMesh way on a tardy home, in the worker's engine (the fast tier's guard
    of ``test_code_change``, whose child process fixes silver on a home of its own): a leaf
    gold model's rule changes, on a copy of the ``small`` template. ``plan dev`` backfills
    only that model in its own table, prod untouched; ``table_diff prod:dev`` finds every
    row changed in that column alone (the changed rule applied here to prod's rows); ``plan
    prod`` is a virtual update: nothing evaluated, prod's view repointed at the table dev
    built, no commit to it."""
    from children import SMALL, SMALL_CLOCK
    from test_code_change import delta_version, dev_view, plan_facts, recording, view_target

    home = tmp_path / "home"
    SMALL.copy_to(engine, home)
    plan = {"execution_time": SMALL_CLOCK, "auto_apply": True, "no_prompts": True}

    def rows(view: str) -> dict[tuple[date, int], dict[str, t.Any]]:
        return {
            (r.month_start, r.store_id): r.asDict()
            for r in spark.sql(f"SELECT * FROM {view}").collect()
        }

    _, context, spark = engine.open(home)
    try:
        prod_before, prod_table = rows(MONTHLY), view_target(spark, MONTHLY)
        _changed_month_end(context)
        with recording({}) as dev_log:
            dev = plan_facts(context.plan("dev", skip_tests=True, **plan))
        prod_after_dev, dev_rows = rows(MONTHLY), rows(dev_view(MONTHLY))
        dev_table = view_target(spark, dev_view(MONTHLY))
        (diff,) = context.table_diff("prod", "dev", select_models=[MONTHLY], show=False)
        row_diff = diff.row_diff()
        commits = delta_version(spark, dev_table)
        with recording({}) as prod_log:
            promoted = plan_facts(context.plan("prod", skip_tests=True, **plan))
        prod_after, prod_view = rows(MONTHLY), view_target(spark, MONTHLY)
        commits_after = delta_version(spark, dev_table)
    finally:
        engine.release()
    assert dev["directly_modified"] == [MONTHLY] and dev["indirectly_modified"] == []
    assert dev_log["evaluated"] == [MONTHLY]  # only the changed model, in its own table
    assert dev_table != prod_table and prod_after_dev == prod_before  # prod untouched
    # The oracle: prod's rows with the changed rule applied here, every other column kept.
    changed = {k: {**v, "month_end": k[0] + timedelta(days=27)} for k, v in prod_before.items()}
    assert prod_before and dev_rows == changed
    assert all(v["month_end"] != changed[k]["month_end"] for k, v in prod_before.items())
    assert row_diff.join_count == len(prod_before)
    assert row_diff.s_only_count == row_diff.t_only_count == 0
    assert row_diff.full_match_count == 0 and row_diff.partial_match_count == len(prod_before)
    assert promoted["requires_backfill"] is False and prod_log["evaluated"] == []
    assert prod_view == dev_table and commits_after == commits  # repointed, nothing written
    assert prod_after == dev_rows
