MODEL (
  name silver.refunds,
  kind INCREMENTAL_BY_TIME_RANGE (
    time_column refund_date,
    -- = the grace window (variables.grace_days in project.yaml: `tardy grace`)
    lookback @grace_lookback()
  ),
  grain refund_id,
  audits (
    unique_values(columns := (refund_id)),
    not_null(columns := (refund_id, refund_date, transaction_id, store_id, amount)),
    non_negative_amounts(columns := (amount)),
    refunds_known_sales
  ),
  description 'One row per card refund: the winning version among the valid bronze.payment_refunds records of its refund (@refund_key). A correction beats the original whatever the arrival order, then the latest arrival_ts wins, then record_id DESC (@refund_version_rank). The row belongs to the winner''s refund date: an interval ranks all valid records (any date) of the refunds having a valid record in the interval and keeps the winners dated in it, so a correction that moves a refund leaves its old day. A refund of a transaction silver.sales_transactions does not know is kept (the money left the store that day) and reported by the non-blocking audit refunds_known_sales. A verbatim resend (the same content, arriving again) is the same version: it keeps the version''s first arrival and record and counts once, so it changes no row.',
  column_descriptions (
    refund_id = 'Natural key: corrects_refund_id when set, else refund_id',
    refund_date = 'Refund date (UTC) of the winning record',
    refund_ts = 'Refund timestamp (UTC) of the winning record',
    transaction_id = 'The sale refunded (winning record)',
    store_id = 'Store of the winning record',
    amount = 'Amount refunded, positive (winning record)',
    is_corrected = 'Whether any valid correction exists for the refund',
    version_count = 'Number of distinct valid versions of the refund (a verbatim resend counts once)',
    arrival_ts = 'Arrival time of the winning version (its first record, a verbatim resend keeps it)',
    source_record_id = 'bronze.payment_refunds record_id of the winning version''s first record'
  )
);

WITH interval_keys AS (
  -- The refunds with a valid record in the interval.
  SELECT DISTINCT @refund_key() AS refund_id
  FROM bronze.payment_refunds
  WHERE @in_intervals_ts(refund_ts)
    AND @refund_invalid_reason() IS NULL
), versions AS (
  -- Every record of those refunds, whatever its date; validated after the key match.
  SELECT
    record_id,
    @refund_key() AS refund_id,
    corrects_refund_id,
    transaction_id,
    refund_ts,
    CAST(refund_ts AS DATE) AS refund_date,
    store_id,
    @refund_amount() AS amount,
    arrival_ts,
    @refund_invalid_reason() IS NULL AS is_valid
  FROM bronze.payment_refunds
  WHERE @refund_key() IN (SELECT refund_id FROM interval_keys)
), contents AS (
  -- A verbatim resend is the same version again: it keeps the version's first record and
  -- counts once, so it changes no row (@first_of_version).
  SELECT
    *,
    @first_of_version(
      refund_id, is_valid, NULLIF(TRIM(corrects_refund_id), '') IS NOT NULL,
      TRIM(transaction_id), refund_ts, TRIM(store_id), amount
    )
  FROM versions
), ranked AS (
  SELECT
    *,
    @refund_version_rank(refund_id, is_valid) AS version_rank,
    MAX(CASE WHEN is_valid AND NULLIF(TRIM(corrects_refund_id), '') IS NOT NULL THEN 1 ELSE 0 END)
      OVER (PARTITION BY refund_id) AS has_correction,
    COUNT(CASE WHEN is_valid AND content_rank = 1 THEN 1 END) OVER (
      PARTITION BY refund_id
    ) AS version_count
  FROM contents
)
SELECT
  CAST(refund_id AS STRING) AS refund_id,
  CAST(refund_date AS DATE) AS refund_date,
  CAST(refund_ts AS TIMESTAMP) AS refund_ts,
  CAST(TRIM(transaction_id) AS STRING) AS transaction_id,
  CAST(TRIM(store_id) AS INT) AS store_id,
  CAST(amount AS DECIMAL(12, 2)) AS amount,
  CAST(has_correction = 1 AS BOOLEAN) AS is_corrected,
  CAST(version_count AS INT) AS version_count,
  CAST(content_arrival_ts AS TIMESTAMP) AS arrival_ts,
  CAST(content_record_id AS STRING) AS source_record_id
FROM ranked
WHERE version_rank = 1
  AND is_valid
  AND @in_intervals(refund_date)
