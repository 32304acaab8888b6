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
), bronze_counts AS (
  SELECT report_date AS day, COUNT(*) AS bronze_rows
  FROM bronze_rows
  WHERE @in_intervals(report_date)
    AND (NOT is_valid OR @restricted_keys(k))
  GROUP BY report_date
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
), superseded_counts AS (
  SELECT event_date AS day, COUNT(*) AS superseded_rows
  FROM versions
  WHERE is_valid
    AND @in_intervals(event_date)
    AND (version_rank > 1 OR record_type = 'void')
  GROUP BY event_date
), silver_counts AS (
  SELECT event_date AS day, COUNT(*) AS silver_rows
  FROM @this_model
  WHERE @restricted_keys(transaction_id)
  GROUP BY event_date
), quarantine_counts AS (
  SELECT report_date AS day, COUNT(*) AS quarantined_rows
  FROM silver.sales_quarantine
  WHERE @in_intervals(report_date)
  GROUP BY report_date
), days AS (
  SELECT day FROM bronze_counts
  UNION
  SELECT day FROM silver_counts
  UNION
  SELECT day FROM superseded_counts
  UNION
  SELECT day FROM quarantine_counts
)
SELECT
  d.day AS report_date,
  COALESCE(b.bronze_rows, 0) AS bronze_rows,
  COALESCE(s.silver_rows, 0) AS silver_rows,
  COALESCE(x.superseded_rows, 0) AS superseded_rows,
  COALESCE(q.quarantined_rows, 0) AS quarantined_rows
FROM days AS d
LEFT JOIN bronze_counts AS b ON b.day = d.day
LEFT JOIN silver_counts AS s ON s.day = d.day
LEFT JOIN superseded_counts AS x ON x.day = d.day
LEFT JOIN quarantine_counts AS q ON q.day = d.day
WHERE COALESCE(b.bronze_rows, 0)
  <> COALESCE(s.silver_rows, 0) + COALESCE(x.superseded_rows, 0) + COALESCE(q.quarantined_rows, 0)
