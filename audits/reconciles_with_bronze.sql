-- Every bronze row accounted to the interval (by @report_date(), the rule
-- silver.sales_quarantine uses) ends up in exactly one place:
--   bronze rows = silver rows + superseded rows + quarantined rows
-- superseded = valid rows of the interval that are not a surviving winner (duplicates,
-- superseded versions, voids and voided sales), ranked over ALL valid rows of their key with
-- the shared @version_rank. A valid row is accounted to its event date, a silver row to its
-- winner's event date, so date-moving corrections balance on both days.
-- When `tardy restate` writes silver by key (the variable tardy_keys: the keys that changed),
-- the valid and silver terms count those keys only (@restricted_keys, @restricted_records):
-- the write recomputed their rows and left every other key's rows as prod's, which passed
-- this audit when they were written; the invalid rows and the quarantine are still counted
-- whole (docs/key-lookups.md, "The audit").
-- Returns one row (and fails) when the equation does not hold for the interval.
-- Reads silver.sales_quarantine: the model lists it in depends_on so that it is computed first.
AUDIT (
  name reconciles_with_bronze,
  blocking TRUE
);

WITH bronze_rows AS (
  SELECT
    @report_date() AS report_date,
    @invalid_reason() IS NULL AS is_valid,
    @natural_key() AS k
  FROM @bronze_reported_in(@start_date, @end_date, @start_ts, @end_ts) AS b
), bronze_counts AS (
  SELECT COUNT(*) AS bronze_rows
  FROM bronze_rows
  WHERE report_date BETWEEN @start_date AND @end_date
    AND (NOT is_valid OR @restricted_keys(k))
), interval_keys AS (
  -- The keys with a valid row accounted to the interval (as in the model).
  SELECT DISTINCT @natural_key() AS k
  FROM bronze.pos_events
  WHERE arrival_date >= @start_date
    AND event_ts BETWEEN @start_ts AND @end_ts
    AND @invalid_reason() IS NULL
), versions AS (
  -- Every row of those keys, read through the key index and validated after the key match
  -- (see the model); or of the changed keys only, when tardy restricts the write.
  SELECT
    CAST(event_ts AS DATE) AS event_date,
    record_type,
    @invalid_reason() IS NULL AS is_valid,
    @version_rank(@natural_key(), @invalid_reason() IS NULL) AS version_rank
  FROM bronze.pos_events
  WHERE @restricted_records(interval_keys, k)
), superseded_counts AS (
  SELECT COUNT(*) AS superseded_rows
  FROM versions
  WHERE is_valid
    AND event_date BETWEEN @start_date AND @end_date
    AND (version_rank > 1 OR record_type = 'void')
), silver_counts AS (
  SELECT COUNT(*) AS silver_rows
  FROM @this_model
  WHERE @restricted_keys(transaction_id)
), quarantine_counts AS (
  SELECT COUNT(*) AS quarantined_rows
  FROM silver.sales_quarantine
  WHERE report_date BETWEEN @start_date AND @end_date
)
SELECT
  CAST(@start_date AS DATE) AS interval_start,
  CAST(@end_date AS DATE) AS interval_end,
  b.bronze_rows,
  s.silver_rows,
  x.superseded_rows,
  q.quarantined_rows
FROM bronze_counts AS b
CROSS JOIN silver_counts AS s
CROSS JOIN superseded_counts AS x
CROSS JOIN quarantine_counts AS q
WHERE b.bronze_rows <> s.silver_rows + x.superseded_rows + q.quarantined_rows
