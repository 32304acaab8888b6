MODEL (
  name silver.sales_transactions,
  kind INCREMENTAL_BY_TIME_RANGE (
    time_column event_date,
    -- = the grace window (variables.grace_days in project.yaml: `tardy grace`)
    lookback @grace_lookback()
  ),
  grain transaction_id,
  -- Its own measure: what a diff, a restatement and a release note show (tardy.project.headline).
  tags ('measure=net_amount'),
  -- Not read by the query: the reconciliation audit reads the quarantine of the interval,
  -- so it must be computed first.
  depends_on (silver.sales_quarantine),
  audits (
    unique_values(columns := (transaction_id)),
    not_null(columns := (transaction_id, event_date, store_id, net_amount)),
    non_negative_amounts(columns := (quantity, unit_price, discount, net_amount)),
    reconciles_with_bronze
  ),
  description 'One row per point-of-sale transaction: the winning version among the valid bronze.pos_events records of its natural key. Amendments (correction, void) beat sales whatever their arrival order, then the latest arrival_ts wins, then record_id DESC (@version_rank). A void winner removes the transaction. The row belongs to the winner''s event date: an interval ranks all valid records (any date) of the keys having a valid record in the interval and keeps the winners dated in it, so a date-moving correction leaves its old day and a void empties the sale''s day. A verbatim resend (the same content, arriving again) is the same version: it keeps the version''s first arrival and record and counts once, so it changes no row.',
  column_descriptions (
    transaction_id = 'Natural key: corrects_transaction_id when set, else transaction_id',
    event_date = 'Event date (UTC) of the winning record',
    event_ts = 'Event timestamp (UTC) of the winning record',
    store_id = 'Store of the winning record',
    product_id = 'Product of the winning record',
    quantity = 'Units sold (winning record)',
    unit_price = 'Unit price (winning record)',
    discount = 'Discount on the line, 0.00 when absent (winning record)',
    net_amount = 'quantity * unit_price - discount',
    record_type = 'Type of the winning record: sale or correction',
    is_corrected = 'Whether any valid correction exists for the transaction',
    version_count = 'Number of distinct valid versions of the transaction (a verbatim resend counts once)',
    arrival_ts = 'Arrival time of the winning version (its first record, a verbatim resend keeps it)',
    first_arrival_ts = 'Earliest arrival time among the valid records of the transaction',
    source_record_id = 'bronze.pos_events record_id of the winning version''s first record'
  )
);

WITH interval_keys AS (
  -- The keys with a valid record in the interval. A valid record's event date is never after
  -- its arrival date, so the arrival_date predicate only prunes bronze partitions, and the
  -- event_ts range lets Delta skip files by their statistics.
  SELECT DISTINCT @natural_key() AS transaction_id
  FROM bronze.pos_events
  WHERE arrival_date >= @intervals_start()
    AND @in_intervals_ts(event_ts)
    AND @invalid_reason() IS NULL
), versions AS (
  -- Every record of those keys, whatever its date: @records_of_keys reads the key index
  -- bronze.pos_event_keys for the arrival dates holding them and only those bronze
  -- partitions (exact: the index covers every bronze row). Records are validated only here,
  -- after the key match: a validity filter would be pushed by Spark below the key join and
  -- check every row read; invalid records instead rank last and count for nothing below.
  -- `tardy restate` may restrict this to the keys that changed (@restricted_records).
  SELECT
    record_id,
    @natural_key() AS transaction_id,
    record_type,
    event_ts,
    CAST(event_ts AS DATE) AS event_date,
    @as_int(store_id) AS store_id,
    @as_int(product_id) AS product_id,
    @as_int(quantity) AS quantity,
    @as_money(unit_price) AS unit_price,
    COALESCE(@as_money(discount), 0) AS discount,
    arrival_ts,
    @invalid_reason() IS NULL AS is_valid
  FROM bronze.pos_events
  WHERE @restricted_records(interval_keys, transaction_id)
), contents AS (
  -- A verbatim resend is the same version again: it keeps the version's first record and
  -- counts once, so it changes no row (@first_of_version).
  SELECT
    *,
    @first_of_version(
      transaction_id, is_valid, record_type, event_ts, store_id, product_id, quantity,
      unit_price, discount
    )
  FROM versions
), ranked AS (
  SELECT
    *,
    @version_rank(transaction_id, is_valid) AS version_rank,
    MAX(CASE WHEN is_valid AND record_type = 'correction' THEN 1 ELSE 0 END) OVER (
      PARTITION BY transaction_id
    ) AS has_correction,
    COUNT(CASE WHEN is_valid AND content_rank = 1 THEN 1 END) OVER (
      PARTITION BY transaction_id
    ) AS version_count,
    MIN(CASE WHEN is_valid THEN arrival_ts END) OVER (
      PARTITION BY transaction_id
    ) AS first_arrival_ts
  FROM contents
)
SELECT
  CAST(transaction_id AS STRING) AS transaction_id,
  CAST(event_date AS DATE) AS event_date,
  CAST(event_ts AS TIMESTAMP) AS event_ts,
  CAST(store_id AS INT) AS store_id,
  CAST(product_id AS INT) AS product_id,
  CAST(quantity AS INT) AS quantity,
  CAST(unit_price AS DECIMAL(12, 2)) AS unit_price,
  CAST(discount AS DECIMAL(12, 2)) AS discount,
  CAST(quantity * unit_price - discount AS DECIMAL(14, 2)) AS net_amount,
  CAST(record_type AS STRING) AS record_type,
  CAST(has_correction = 1 AS BOOLEAN) AS is_corrected,
  CAST(version_count AS INT) AS version_count,
  CAST(content_arrival_ts AS TIMESTAMP) AS arrival_ts,
  CAST(first_arrival_ts AS TIMESTAMP) AS first_arrival_ts,
  CAST(content_record_id AS STRING) AS source_record_id
FROM ranked
WHERE version_rank = 1
  AND is_valid
  AND record_type <> 'void'
  AND @in_intervals(event_date)
