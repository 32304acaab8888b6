-- gold.daily_store_revenue must add up to silver.sales_transactions on every day of the
-- audited interval: same number of transactions, items, corrected transactions and revenue.
-- Returns the days (and fails) where any total differs; a day on one side only differs in
-- transactions (a gold row counts at least one).
-- The interval is read only through @this_model and @in_intervals, so tardy checks all the
-- days it restates in one query (tardy.audited_intervals).
AUDIT (
  name reconciles_with_silver,
  blocking TRUE
);

WITH amounts AS (
  -- Each side's rows with its terms, zero elsewhere: one aggregate by day (one shuffle).
  SELECT
    event_date AS day,
    transactions AS gold_transactions,
    items AS gold_items,
    corrected_transactions AS gold_corrected_transactions,
    revenue AS gold_revenue,
    0 AS silver_transactions,
    0 AS silver_items,
    0 AS silver_corrected_transactions,
    0 AS silver_revenue
  FROM @this_model
  UNION ALL
  SELECT
    event_date,
    0,
    0,
    0,
    0,
    1,
    quantity,
    CASE WHEN is_corrected THEN 1 ELSE 0 END,
    net_amount
  FROM silver.sales_transactions
  WHERE @in_intervals(event_date)
), days AS (
  SELECT
    day AS event_date,
    SUM(gold_transactions) AS gold_transactions,
    SUM(silver_transactions) AS silver_transactions,
    SUM(gold_items) AS gold_items,
    SUM(silver_items) AS silver_items,
    SUM(gold_corrected_transactions) AS gold_corrected_transactions,
    SUM(silver_corrected_transactions) AS silver_corrected_transactions,
    SUM(gold_revenue) AS gold_revenue,
    SUM(silver_revenue) AS silver_revenue
  FROM amounts
  GROUP BY day
)
SELECT *
FROM days
WHERE gold_transactions <> silver_transactions
  OR gold_items <> silver_items
  OR gold_corrected_transactions <> silver_corrected_transactions
  OR gold_revenue <> silver_revenue
