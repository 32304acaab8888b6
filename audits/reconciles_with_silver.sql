-- gold.daily_store_revenue must add up to silver.sales_transactions over the audited
-- interval: same number of transactions, items, corrected transactions and revenue.
-- Returns one row (and fails) when any total differs.
AUDIT (
  name reconciles_with_silver,
  blocking TRUE
);

WITH gold_totals AS (
  SELECT
    COALESCE(SUM(transactions), 0) AS transactions,
    COALESCE(SUM(items), 0) AS items,
    COALESCE(SUM(corrected_transactions), 0) AS corrected_transactions,
    COALESCE(SUM(revenue), 0) AS revenue
  FROM @this_model
), silver_totals AS (
  SELECT
    COUNT(*) AS transactions,
    COALESCE(SUM(quantity), 0) AS items,
    COALESCE(SUM(CASE WHEN is_corrected THEN 1 ELSE 0 END), 0) AS corrected_transactions,
    COALESCE(SUM(net_amount), 0) AS revenue
  FROM silver.sales_transactions
  WHERE event_date BETWEEN @start_date AND @end_date
)
SELECT
  CAST(@start_date AS DATE) AS interval_start,
  CAST(@end_date AS DATE) AS interval_end,
  g.transactions AS gold_transactions,
  s.transactions AS silver_transactions,
  g.items AS gold_items,
  s.items AS silver_items,
  g.corrected_transactions AS gold_corrected_transactions,
  s.corrected_transactions AS silver_corrected_transactions,
  g.revenue AS gold_revenue,
  s.revenue AS silver_revenue
FROM gold_totals AS g
CROSS JOIN silver_totals AS s
WHERE g.transactions <> s.transactions
  OR g.items <> s.items
  OR g.corrected_transactions <> s.corrected_transactions
  OR g.revenue <> s.revenue
