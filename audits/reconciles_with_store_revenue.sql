-- gold.daily_region_revenue must add up to gold.daily_store_revenue on every day of the
-- audited interval: same transactions and revenue (the as-of join neither drops nor
-- duplicates a sale). Returns the days that differ.
-- The interval is read only through @this_model and @in_intervals, so tardy checks all the
-- days it restates in one query (tardy.audited_intervals).
AUDIT (
  name reconciles_with_store_revenue,
  blocking TRUE
);

WITH regions AS (
  SELECT event_date, SUM(transactions) AS transactions, SUM(revenue) AS revenue
  FROM @this_model
  GROUP BY event_date
), stores AS (
  SELECT event_date, SUM(transactions) AS transactions, SUM(revenue) AS revenue
  FROM gold.daily_store_revenue
  WHERE @in_intervals(event_date)
  GROUP BY event_date
)
SELECT
  COALESCE(r.event_date, s.event_date) AS event_date,
  r.transactions AS region_transactions,
  s.transactions AS store_transactions,
  r.revenue AS region_revenue,
  s.revenue AS store_revenue
FROM regions AS r
FULL OUTER JOIN stores AS s
  ON r.event_date = s.event_date
WHERE r.transactions IS DISTINCT FROM s.transactions
  OR r.revenue IS DISTINCT FROM s.revenue
