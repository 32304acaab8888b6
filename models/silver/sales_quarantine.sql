MODEL (
  name silver.sales_quarantine,
  kind INCREMENTAL_BY_TIME_RANGE (
    time_column report_date,
    -- = the grace window (variables.grace_days in project.yaml: `tardy grace`)
    lookback @grace_lookback()
  ),
  grain record_id,
  -- The invalid rows of the source it reads: detection compares them with bronze's.
  tags (quarantine),
  audits (
    unique_values(columns := (record_id)),
    not_null(columns := (report_date, record_id, arrival_ts, reason, raw_record)),
    accepted_values(
      column := reason,
      is_in := (
        'invalid_json', 'missing_transaction_id', 'invalid_record_type', 'missing_event_ts',
        'unparseable_event_ts', 'event_after_arrival', 'invalid_store_id', 'invalid_product_id',
        'invalid_quantity', 'negative_quantity', 'invalid_unit_price', 'negative_unit_price',
        'invalid_discount', 'negative_discount', 'discount_exceeds_gross'
      )
    )
  ),
  description 'Every invalid bronze.pos_events row, one row per bronze record, with the first validation rule it fails (@invalid_reason, shared with silver.sales_transactions). A row is accounted to its event date when event_ts is known and not after arrival_ts, else to its arrival date, so rows with missing, unparseable or future timestamps are never lost.',
  column_descriptions (
    report_date = 'Day the row is accounted to: event date when event_ts is present and not after arrival_ts, else arrival_date',
    record_id = 'Bronze record id, <file_sha256>:<line_number>',
    source_system = 'Source system the landing file came from',
    source_file = 'Landing file path relative to the landing root',
    line_number = '1-based line in the landing file',
    arrival_ts = 'When the record arrived (bronze arrival_ts)',
    event_ts = 'Parsed event timestamp (UTC), NULL when missing or unparseable',
    transaction_id = 'Transaction id as landed (may be NULL or blank)',
    record_type = 'Record type as landed (may be invalid)',
    reason = 'First failing validation rule',
    raw_record = 'The JSON line exactly as landed'
  )
);

WITH checked AS (
  SELECT
    @report_date() AS report_date,
    @invalid_reason() AS reason,
    record_id,
    source_system,
    source_file,
    line_number,
    arrival_ts,
    event_ts,
    transaction_id,
    record_type,
    raw_record
  -- Only the rows that can be accounted to the interval: an old day does not read every
  -- later arrival partition.
  FROM @bronze_reported_in() AS b
)
SELECT
  CAST(report_date AS DATE) AS report_date,
  CAST(record_id AS STRING) AS record_id,
  CAST(source_system AS STRING) AS source_system,
  CAST(source_file AS STRING) AS source_file,
  CAST(line_number AS INT) AS line_number,
  CAST(arrival_ts AS TIMESTAMP) AS arrival_ts,
  CAST(event_ts AS TIMESTAMP) AS event_ts,
  CAST(transaction_id AS STRING) AS transaction_id,
  CAST(record_type AS STRING) AS record_type,
  CAST(reason AS STRING) AS reason,
  CAST(raw_record AS STRING) AS raw_record
FROM checked
WHERE reason IS NOT NULL
  AND @in_intervals(report_date)
