MODEL (
  name gold.daily_store_net_revenue,
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
    not_null(columns := (event_date, store_id, revenue, refunds, refunded, net_revenue)),
    reconciles_with_refunds
  ),
  description 'Net revenue per store and day: the day''s sales revenue (gold.daily_store_revenue) minus the card refunds made that day (silver.refunds). A refund counts on its own day, not on its sale''s: the money left the store that day, and a day already reported is not reopened by every refund of its sales. A (day, store) with neither sales nor refunds has no row.',
  column_descriptions (
    event_date = 'Day (UTC): the sales'' event date, the refunds'' refund date',
    store_id = 'Store',
    revenue = 'Sales revenue of the day (gold.daily_store_revenue), 0 without sales',
    refunds = 'Number of refunds made that day',
    refunded = 'Amount refunded that day',
    net_revenue = 'revenue - refunded'
  )
);

WITH sales AS (
  SELECT event_date, store_id, revenue
  FROM gold.daily_store_revenue
  WHERE @in_intervals(event_date)
), refunded AS (
  SELECT refund_date AS event_date, store_id, COUNT(*) AS refunds, SUM(amount) AS refunded
  FROM silver.refunds
  WHERE @in_intervals(refund_date)
  GROUP BY refund_date, store_id
)
SELECT
  CAST(COALESCE(s.event_date, r.event_date) AS DATE) AS event_date,
  CAST(COALESCE(s.store_id, r.store_id) AS INT) AS store_id,
  CAST(COALESCE(s.revenue, 0) AS DECIMAL(18, 2)) AS revenue,
  CAST(COALESCE(r.refunds, 0) AS BIGINT) AS refunds,
  CAST(COALESCE(r.refunded, 0) AS DECIMAL(18, 2)) AS refunded,
  CAST(COALESCE(s.revenue, 0) - COALESCE(r.refunded, 0) AS DECIMAL(18, 2)) AS net_revenue
FROM sales AS s
FULL OUTER JOIN refunded AS r
  ON s.event_date = r.event_date AND s.store_id = r.store_id
