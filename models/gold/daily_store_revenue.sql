MODEL (
  name gold.daily_store_revenue,
  owner finance_analytics,
  kind INCREMENTAL_BY_TIME_RANGE (
    time_column event_date,
    -- = the grace window (variables.grace_days in project.yaml: `tardy grace`)
    lookback @grace_lookback()
  ),
  grain (event_date, store_id),
  -- Published: consumers read its versions by number (tardy publish, tardy versions).
  tags (published),
  audits (
    unique_combination_of_columns(columns := (event_date, store_id)),
    not_null(columns := (event_date, store_id, transactions, items, revenue)),
    non_negative_amounts(columns := (transactions, items, revenue)),
    reconciles_with_silver
  ),
  description 'Revenue per store and event day, from silver.sales_transactions (winning, non-voided versions of each transaction). A (day, store) with no transaction has no row.',
  column_descriptions (
    event_date = 'Event date (UTC)',
    store_id = 'Store',
    transactions = 'Number of transactions',
    items = 'Units sold (sum of quantity)',
    revenue = 'Sum of net_amount',
    corrected_transactions = 'Number of transactions with at least one correction'
  )
);

SELECT
  CAST(event_date AS DATE) AS event_date,
  CAST(store_id AS INT) AS store_id,
  CAST(COUNT(*) AS BIGINT) AS transactions,
  CAST(SUM(quantity) AS BIGINT) AS items,
  CAST(SUM(net_amount) AS DECIMAL(18, 2)) AS revenue,
  CAST(SUM(CASE WHEN is_corrected THEN 1 ELSE 0 END) AS BIGINT) AS corrected_transactions
FROM silver.sales_transactions
WHERE @in_intervals(event_date)
GROUP BY event_date, store_id
