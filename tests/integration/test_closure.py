"""The restatement closure comes from the project: a new gold model needs no change in tardy.

A copy of the project gets one more model, a monthly rollup written the way a data engineer
would add one (its own file, keyed by ``@period_first_day('month', event_date)``) and a
rolling model declaring its window by tag; the closure of a changed silver day must reach
both through SQLMesh's DAG and column lineage alone.
"""

from __future__ import annotations

import os
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
