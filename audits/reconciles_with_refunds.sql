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

WITH net AS (
  SELECT
    event_date,
    SUM(revenue) AS revenue,
    SUM(refunds) AS refunds,
    SUM(refunded) AS refunded,
    SUM(net_revenue) AS net_revenue
  FROM @this_model
  GROUP BY event_date
), sales AS (
  SELECT event_date, SUM(revenue) AS revenue
  FROM gold.daily_store_revenue
  WHERE @in_intervals(event_date)
  GROUP BY event_date
), refunded AS (
  SELECT refund_date AS event_date, COUNT(*) AS refunds, SUM(amount) AS refunded
  FROM silver.refunds
  WHERE @in_intervals(refund_date)
  GROUP BY refund_date
), days AS (
  SELECT event_date FROM net
  UNION
  SELECT event_date FROM sales
  UNION
  SELECT event_date FROM refunded
)
SELECT
  d.event_date,
  COALESCE(n.revenue, 0) AS net_model_revenue,
  COALESCE(s.revenue, 0) AS sales_revenue,
  COALESCE(n.refunds, 0) AS net_model_refunds,
  COALESCE(r.refunds, 0) AS silver_refunds,
  COALESCE(n.refunded, 0) AS net_model_refunded,
  COALESCE(r.refunded, 0) AS silver_refunded,
  COALESCE(n.net_revenue, 0) AS net_model_net_revenue
FROM days AS d
LEFT JOIN net AS n ON n.event_date = d.event_date
LEFT JOIN sales AS s ON s.event_date = d.event_date
LEFT JOIN refunded AS r ON r.event_date = d.event_date
WHERE COALESCE(n.revenue, 0) <> COALESCE(s.revenue, 0)
  OR COALESCE(n.refunds, 0) <> COALESCE(r.refunds, 0)
  OR COALESCE(n.refunded, 0) <> COALESCE(r.refunded, 0)
  OR COALESCE(n.net_revenue, 0) <> COALESCE(s.revenue, 0) - COALESCE(r.refunded, 0)
