MODEL (
  name gold.monthly_store_revenue,
  kind INCREMENTAL_BY_TIME_RANGE (
    time_column month_start,
    -- = the grace window (@grace_days = 3, variables.grace_days in config.yaml) + 30 days, so
    -- that every daily run recomputes each month that holds a day of the grace window. A
    -- literal here: keep it in step with the grace window.
    lookback 33
  ),
  grain (month_start, store_id),
  audits (
    unique_combination_of_columns(columns := (month_start, store_id)),
    not_null(columns := (month_start, month_end, store_id, transactions, items, revenue)),
    non_negative_amounts(columns := (transactions, items, revenue)),
    reconciles_with_daily(unit := 'month', period_column := month_start)
  ),
  description 'Revenue per store and calendar month, rolled up from gold.daily_store_revenue. An interval computes the months whose first day lies in it, reading the daily rows of those whole months (up to the end of the last one). A month is only rebuilt when its first day is in the interval: a restatement must start on the first day of the first impacted month.',
  column_descriptions (
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
    event_date,
    store_id,
    transactions,
    items,
    revenue
  FROM gold.daily_store_revenue
  -- The whole months starting in the interval: up to the last day of the last one.
  WHERE event_date BETWEEN @start_date AND @period_end('month', @end_date)
)
SELECT
  CAST(month_start AS DATE) AS month_start,
  @period_end('month', month_start) AS month_end,
  CAST(store_id AS INT) AS store_id,
  CAST(COUNT(DISTINCT CASE WHEN transactions > 0 THEN event_date END) AS INT) AS days_with_sales,
  CAST(SUM(transactions) AS BIGINT) AS transactions,
  CAST(SUM(items) AS BIGINT) AS items,
  CAST(SUM(revenue) AS DECIMAL(18, 2)) AS revenue
FROM daily
WHERE month_start BETWEEN @start_date AND @end_date
GROUP BY month_start, store_id
