-- gold.daily_store_net_revenue must add up on every day of the audited interval: its revenue
-- to gold.daily_store_revenue's, its refunds and amount refunded to silver.refunds' (by
-- refund date), and its net revenue to their difference. Returns the days (and fails) where
-- any total differs, a day missing on either side included.
-- The interval is read only through @this_model and @in_intervals, so tardy checks all the
-- days it restates in one query (tardy.audited_intervals).
AUDIT (
  name reconciles_with_refunds,
  blocking TRUE
);

WITH amounts AS (
  -- Each source's rows with its terms, zero elsewhere: one aggregate by day (one shuffle).
  SELECT
    event_date AS day,
    revenue AS net_model_revenue,
    refunds AS net_model_refunds,
    refunded AS net_model_refunded,
    net_revenue AS net_model_net_revenue,
    0 AS sales_revenue,
    0 AS silver_refunds,
    0 AS silver_refunded
  FROM @this_model
  UNION ALL
  SELECT event_date, 0, 0, 0, 0, revenue, 0, 0
  FROM gold.daily_store_revenue
  WHERE @in_intervals(event_date)
  UNION ALL
  SELECT refund_date, 0, 0, 0, 0, 0, 1, amount
  FROM silver.refunds
  WHERE @in_intervals(refund_date)
), days AS (
  SELECT
    day AS event_date,
    SUM(net_model_revenue) AS net_model_revenue,
    SUM(sales_revenue) AS sales_revenue,
    SUM(net_model_refunds) AS net_model_refunds,
    SUM(silver_refunds) AS silver_refunds,
    SUM(net_model_refunded) AS net_model_refunded,
    SUM(silver_refunded) AS silver_refunded,
    SUM(net_model_net_revenue) AS net_model_net_revenue
  FROM amounts
  GROUP BY day
)
SELECT *
FROM days
WHERE net_model_revenue <> sales_revenue
  OR net_model_refunds <> silver_refunds
  OR net_model_refunded <> silver_refunded
  OR net_model_net_revenue <> sales_revenue - silver_refunded
