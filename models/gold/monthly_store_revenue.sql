MODEL (
  name gold.monthly_store_revenue,
  owner finance_analytics,
  kind INCREMENTAL_BY_TIME_RANGE (
    time_column first_day,
    -- = the grace window (variables.grace_days in project.yaml: `tardy grace`) + 30
    -- days, so that every daily run recomputes each month that holds a day of the window.
    lookback @grace_lookback(30)
  ),
  grain (month_start, store_id),
  -- Published: consumers read its versions by number (tardy publish, tardy versions).
  tags (published),
  audits (
    unique_combination_of_columns(columns := (month_start, store_id)),
    not_null(columns := (month_start, month_end, store_id, transactions, items, revenue)),
    non_negative_amounts(columns := (transactions, items, revenue)),
    reconciles_with_daily(unit := 'month', period_column := month_start)
  ),
  description 'Revenue per store and calendar month, rolled up from gold.daily_store_revenue. An interval computes the months whose first_day (the 1st, or the project start for the partial first month) lies in it, reading the daily rows of those whole months (up to the end of the last one). A month is only rebuilt when its first_day is in the interval: a restatement must start on the first_day of the first impacted month.',
  column_descriptions (
    first_day = 'First day of the month that the data covers: month_start, or the project start (TARDY_START) for the month holding it. The time column: a restatement rebuilds a month when its first_day is in the range',
    month_start = 'First day of the month',
    month_end = 'Last day of the month',
    store_id = 'Store',
    days_with_sales = 'Number of days of the month with at least one transaction',
    transactions = 'Number of transactions',
    items = 'Units sold',
    revenue = 'Sum of net_amount'
  )
);

WITH daily AS (
  SELECT
    @period_start('month', event_date) AS month_start,
    @period_first_day('month', event_date) AS first_day,
    event_date,
    store_id,
    transactions,
    items,
    revenue
  FROM gold.daily_store_revenue
  -- The whole months starting in the interval: up to the last day of the last one.
  -- Over several of tardy's intervals (macros/intervals.py) this reads their hull of daily
  -- rows (a small gold table); the outer filter keeps the months starting in each.
  WHERE event_date BETWEEN @intervals_start() AND @period_end('month', @intervals_end())
)
SELECT
  CAST(first_day AS DATE) AS first_day,
  CAST(month_start AS DATE) AS month_start,
  @period_end('month', month_start) AS month_end,
  CAST(store_id AS INT) AS store_id,
  CAST(COUNT(DISTINCT CASE WHEN transactions > 0 THEN event_date END) AS INT) AS days_with_sales,
  CAST(SUM(transactions) AS BIGINT) AS transactions,
  CAST(SUM(items) AS BIGINT) AS items,
  CAST(SUM(revenue) AS DECIMAL(18, 2)) AS revenue
FROM daily
WHERE @in_intervals(first_day)
GROUP BY first_day, month_start, store_id
