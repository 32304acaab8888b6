MODEL (
  name gold.weekly_store_revenue,
  owner finance_analytics,
  kind INCREMENTAL_BY_TIME_RANGE (
    time_column first_day,
    -- = the grace window (variables.grace_days in project.yaml: `tardy grace`) + 6
    -- days, so that every daily run recomputes each week that holds a day of the window.
    lookback @grace_lookback(6)
  ),
  grain (week_start, store_id),
  -- Published: consumers read its versions by number (tardy publish, tardy versions).
  tags (published),
  audits (
    unique_combination_of_columns(columns := (week_start, store_id)),
    not_null(columns := (week_start, week_end, store_id, transactions, items, revenue)),
    non_negative_amounts(columns := (transactions, items, revenue)),
    reconciles_with_daily(unit := 'week', period_column := week_start)
  ),
  description 'Revenue per store and ISO week (Monday to Sunday), rolled up from gold.daily_store_revenue. An interval computes the weeks whose first_day (the Monday, or the project start for the partial first week) lies in it, reading the daily rows of those whole weeks (up to 6 days past the interval end). A week is only rebuilt when its first_day is in the interval: a restatement must start on the first_day of the first impacted week.',
  column_descriptions (
    first_day = 'First day of the week that the data covers: week_start, or the project start (TARDY_START) for the week holding it. The time column: a restatement rebuilds a week when its first_day is in the range',
    week_start = 'Monday of the week',
    week_end = 'Sunday of the week',
    store_id = 'Store',
    days_with_sales = 'Number of days of the week with at least one transaction',
    transactions = 'Number of transactions',
    items = 'Units sold',
    revenue = 'Sum of net_amount'
  )
);

WITH daily AS (
  SELECT
    @period_start('week', event_date) AS week_start,
    @period_first_day('week', event_date) AS first_day,
    event_date,
    store_id,
    transactions,
    items,
    revenue
  FROM gold.daily_store_revenue
  -- The whole weeks starting in the interval: up to the Sunday of the last one.
  -- Over several of tardy's intervals (macros/intervals.py) this reads their hull of daily
  -- rows (a small gold table); the outer filter keeps the weeks starting in each.
  WHERE event_date BETWEEN @intervals_start() AND @period_end('week', @intervals_end())
)
SELECT
  CAST(first_day AS DATE) AS first_day,
  CAST(week_start AS DATE) AS week_start,
  @period_end('week', week_start) AS week_end,
  CAST(store_id AS INT) AS store_id,
  CAST(COUNT(DISTINCT CASE WHEN transactions > 0 THEN event_date END) AS INT) AS days_with_sales,
  CAST(SUM(transactions) AS BIGINT) AS transactions,
  CAST(SUM(items) AS BIGINT) AS items,
  CAST(SUM(revenue) AS DECIMAL(18, 2)) AS revenue
FROM daily
WHERE @in_intervals(first_day)
GROUP BY first_day, week_start, store_id
