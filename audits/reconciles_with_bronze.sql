-- Every bronze row accounted to a day of the interval (by @report_date(), the rule
-- silver.sales_quarantine uses) ends up in exactly one place, day by day:
--   bronze rows = silver rows + superseded rows + quarantined rows
-- superseded = valid rows of the day that are not a surviving winner (duplicates,
-- superseded versions, voids and voided sales), ranked over ALL valid rows of their key with
-- the shared @version_rank. A valid row is accounted to its event date (never after its
-- arrival), a silver row to its winner's event date, so date-moving corrections balance on
-- both days.
-- When `tardy restate` writes silver by key (the variable tardy_keys: the keys that changed),
-- the valid and silver terms count those keys only (@restricted_keys, @restricted_records):
-- the write recomputed their rows and left every other key's rows as prod's, which passed
-- this audit when they were written; the invalid rows and the quarantine are still counted
-- whole (docs/key-lookups.md, "The audit").
-- The interval is read only through @this_model and the interval macros (macros/intervals.py),
-- so tardy checks all the days it restates in one query (tardy.audited_intervals).
-- Returns one row (and fails) per day where the equation does not hold.
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
  FROM @bronze_reported_in() AS b
), interval_keys AS (
  -- The keys with a valid row accounted to the interval (as in the model).
  SELECT DISTINCT @natural_key() AS k
  FROM bronze.pos_events
  WHERE arrival_date >= @intervals_start()
    AND @in_intervals_ts(event_ts)
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
), counts AS (
  -- One row per counted row, tagged with its term: one aggregate by day (cheaper than an
  -- aggregate per term joined by day: one shuffle).
  SELECT report_date AS day, 1 AS bronze, 0 AS silver, 0 AS superseded, 0 AS quarantined
  FROM bronze_rows
  WHERE @in_intervals(report_date)
    AND (NOT is_valid OR @restricted_keys(k))
  UNION ALL
  SELECT event_date, 0, 1, 0, 0
  FROM @this_model
  WHERE @restricted_keys(transaction_id)
  UNION ALL
  SELECT event_date, 0, 0, 1, 0
  FROM versions
  WHERE is_valid
    AND @in_intervals(event_date)
    AND (version_rank > 1 OR record_type = 'void')
  UNION ALL
  SELECT report_date, 0, 0, 0, 1
  FROM silver.sales_quarantine
  WHERE @in_intervals(report_date)
)
SELECT
  day AS report_date,
  SUM(bronze) AS bronze_rows,
  SUM(silver) AS silver_rows,
  SUM(superseded) AS superseded_rows,
  SUM(quarantined) AS quarantined_rows
FROM counts
GROUP BY day
HAVING SUM(bronze) <> SUM(silver) + SUM(superseded) + SUM(quarantined)
