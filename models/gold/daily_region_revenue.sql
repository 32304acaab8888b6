MODEL (
  name gold.daily_region_revenue,
  owner finance_analytics,
  kind INCREMENTAL_BY_TIME_RANGE (
    time_column event_date,
    -- = the grace window (variables.grace_days in project.yaml: `tardy grace`)
    lookback @grace_lookback()
  ),
  grain (event_date, region),
  -- Published: consumers read its versions by number (tardy publish, tardy versions).
  tags (published),
  -- Not read by the query: the reconciliation audit reads the store revenue of the interval.
  depends_on (gold.daily_store_revenue),
  audits (
    unique_combination_of_columns(columns := (event_date, region)),
    not_null(columns := (event_date, region, stores, transactions, revenue)),
    non_negative_amounts(columns := (stores, transactions, revenue)),
    reconciles_with_store_revenue
  ),
  description 'Revenue per region and event day: every transaction of silver.sales_transactions joined to its store''s version valid at its event_ts (silver.store_versions, valid_from inclusive, valid_to exclusive). A sale before its store''s first known version counts in region ''unknown'', never dropped. A late store change restates exactly the days whose join it alters (tardy detect).',
  column_descriptions (
    event_date = 'Event date (UTC)',
    region = 'Region of the store at the sale''s event_ts; unknown before its first version',
    stores = 'Number of stores with a transaction in the region that day',
    transactions = 'Number of transactions',
    revenue = 'Sum of net_amount'
  )
);

SELECT
  CAST(s.event_date AS DATE) AS event_date,
  CAST(COALESCE(v.region, 'unknown') AS STRING) AS region,
  CAST(COUNT(DISTINCT s.store_id) AS BIGINT) AS stores,
  CAST(COUNT(*) AS BIGINT) AS transactions,
  CAST(SUM(s.net_amount) AS DECIMAL(18, 2)) AS revenue
FROM silver.sales_transactions AS s
LEFT JOIN silver.store_versions AS v
  ON v.store_id = s.store_id
  AND s.event_ts >= v.valid_from
  AND (v.valid_to IS NULL OR s.event_ts < v.valid_to)
WHERE @in_intervals(s.event_date)
GROUP BY s.event_date, COALESCE(v.region, 'unknown')
