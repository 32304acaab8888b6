-- A weekly or monthly rollup must add up to gold.daily_store_revenue over the periods it
-- holds for the audited interval: the days whose period (@period_start(@unit, event_date))
-- starts in the interval. Compared per (period, store) in both directions, so a missing,
-- extra or wrong rollup row fails. Returns the mismatching (period, store) rows.
-- The interval is read only through @this_model and the interval macros, so tardy checks
-- all the periods it restates in one query (tardy.audited_intervals).
-- Usage: reconciles_with_daily(unit := 'week', period_column := week_start)
AUDIT (
  name reconciles_with_daily,
  blocking TRUE
);

WITH rollup AS (
  SELECT
    @period_column AS period_start,
    store_id,
    transactions,
    items,
    revenue
  FROM @this_model
), daily AS (
  SELECT
    @period_start(@unit, event_date) AS period_start,
    store_id,
    SUM(transactions) AS transactions,
    SUM(items) AS items,
    SUM(revenue) AS revenue
  FROM gold.daily_store_revenue
  WHERE event_date BETWEEN @intervals_start() AND @period_end(@unit, @intervals_end())
    AND @in_intervals(@period_first_day(@unit, event_date))
  GROUP BY @period_start(@unit, event_date), store_id
)
SELECT
  COALESCE(r.period_start, d.period_start) AS period_start,
  COALESCE(r.store_id, d.store_id) AS store_id,
  r.transactions AS rollup_transactions,
  d.transactions AS daily_transactions,
  r.items AS rollup_items,
  d.items AS daily_items,
  r.revenue AS rollup_revenue,
  d.revenue AS daily_revenue
FROM rollup AS r
FULL OUTER JOIN daily AS d
  ON r.period_start = d.period_start AND r.store_id = d.store_id
WHERE r.period_start IS NULL
  OR d.period_start IS NULL
  OR r.transactions <> d.transactions
  OR r.items <> d.items
  OR r.revenue <> d.revenue
