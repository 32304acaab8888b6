-- gold.daily_store_net_revenue must add up over the audited interval: its revenue to
-- gold.daily_store_revenue's, its refunds and amount refunded to silver.refunds', and its net
-- revenue to their difference. Returns one row (and fails) when any total differs.
AUDIT (
  name reconciles_with_refunds,
  blocking TRUE
);

WITH net AS (
  SELECT
    COALESCE(SUM(revenue), 0) AS revenue,
    COALESCE(SUM(refunds), 0) AS refunds,
    COALESCE(SUM(refunded), 0) AS refunded,
    COALESCE(SUM(net_revenue), 0) AS net_revenue
  FROM @this_model
), sales AS (
  SELECT COALESCE(SUM(revenue), 0) AS revenue
  FROM gold.daily_store_revenue
  WHERE event_date BETWEEN @start_date AND @end_date
), refunded AS (
  SELECT COUNT(*) AS refunds, COALESCE(SUM(amount), 0) AS refunded
  FROM silver.refunds
  WHERE refund_date BETWEEN @start_date AND @end_date
)
SELECT
  CAST(@start_date AS DATE) AS interval_start,
  CAST(@end_date AS DATE) AS interval_end,
  n.revenue AS net_model_revenue,
  s.revenue AS sales_revenue,
  n.refunds AS net_model_refunds,
  r.refunds AS silver_refunds,
  n.refunded AS net_model_refunded,
  r.refunded AS silver_refunded,
  n.net_revenue AS net_model_net_revenue
FROM net AS n
CROSS JOIN sales AS s
CROSS JOIN refunded AS r
WHERE n.revenue <> s.revenue
  OR n.refunds <> r.refunds
  OR n.refunded <> r.refunded
  OR n.net_revenue <> s.revenue - r.refunded
