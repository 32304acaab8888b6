-- gold.daily_store_revenue must add up to silver.sales_transactions on every day of the
-- audited interval: same number of transactions, items, corrected transactions and revenue.
-- Returns the days (and fails) where any total differs, a day missing on either side
-- included.
-- The interval is read only through @this_model and @in_intervals, so tardy checks all the
-- days it restates in one query (tardy.audited_intervals).
AUDIT (
  name reconciles_with_silver,
  blocking TRUE
);

WITH gold_totals AS (
  SELECT
    event_date,
    SUM(transactions) AS transactions,
    SUM(items) AS items,
    SUM(corrected_transactions) AS corrected_transactions,
    SUM(revenue) AS revenue
  FROM @this_model
  GROUP BY event_date
), silver_totals AS (
  SELECT
    event_date,
    COUNT(*) AS transactions,
    SUM(quantity) AS items,
    SUM(CASE WHEN is_corrected THEN 1 ELSE 0 END) AS corrected_transactions,
    SUM(net_amount) AS revenue
  FROM silver.sales_transactions
  WHERE @in_intervals(event_date)
  GROUP BY event_date
)
SELECT
  COALESCE(g.event_date, s.event_date) AS event_date,
  g.transactions AS gold_transactions,
  s.transactions AS silver_transactions,
  g.items AS gold_items,
  s.items AS silver_items,
  g.corrected_transactions AS gold_corrected_transactions,
  s.corrected_transactions AS silver_corrected_transactions,
  g.revenue AS gold_revenue,
  s.revenue AS silver_revenue
FROM gold_totals AS g
FULL OUTER JOIN silver_totals AS s
  ON g.event_date = s.event_date
WHERE COALESCE(g.transactions, 0) <> COALESCE(s.transactions, 0)
  OR COALESCE(g.items, 0) <> COALESCE(s.items, 0)
  OR COALESCE(g.corrected_transactions, 0) <> COALESCE(s.corrected_transactions, 0)
  OR COALESCE(g.revenue, 0) <> COALESCE(s.revenue, 0)
