MODEL (
  name silver.refund_quarantine,
  kind INCREMENTAL_BY_TIME_RANGE (
    time_column report_date,
    -- = the grace window (variables.grace_days in project.yaml: `tardy grace`)
    lookback @grace_lookback()
  ),
  grain record_id,
  tags (quarantine),
  audits (
    unique_values(columns := (record_id)),
    not_null(columns := (report_date, record_id, arrival_ts, reason, raw_record)),
    accepted_values(
      column := reason,
      is_in := (
        'invalid_json', 'missing_refund_id', 'missing_transaction_id', 'missing_refund_ts',
        'unparseable_refund_ts', 'refund_after_arrival', 'invalid_store_id', 'invalid_amount',
        'non_positive_amount'
      )
    )
  ),
  description 'Every invalid bronze.payment_refunds row, one row per bronze record, with the first validation rule it fails (@refund_invalid_reason, shared with silver.refunds), on its refund date (its arrival date when that is unknown or later): nothing the payment provider sends is dropped.',
  column_descriptions (
    report_date = 'Day the row is accounted to (@refund_report_date)',
    record_id = 'Bronze record id, <file_sha256>:<line_number>',
    source_file = 'Landing file path relative to the landing root',
    line_number = '1-based line in the landing file',
    arrival_ts = 'When the record arrived (bronze arrival_ts)',
    refund_id = 'Refund id as landed (may be NULL or blank)',
    reason = 'First failing validation rule',
    raw_record = 'The JSON line exactly as landed'
  )
);

SELECT
  CAST(report_date AS DATE) AS report_date,
  CAST(record_id AS STRING) AS record_id,
  CAST(source_file AS STRING) AS source_file,
  CAST(line_number AS INT) AS line_number,
  CAST(arrival_ts AS TIMESTAMP) AS arrival_ts,
  CAST(refund_id AS STRING) AS refund_id,
  CAST(reason AS STRING) AS reason,
  CAST(raw_record AS STRING) AS raw_record
FROM (
  SELECT
    @refund_report_date() AS report_date,
    @refund_invalid_reason() AS reason,
    record_id,
    source_file,
    line_number,
    arrival_ts,
    refund_id,
    raw_record
  FROM bronze.payment_refunds
  -- A record accounted to the interval arrived in it or later.
  WHERE arrival_date >= @intervals_start()
)
WHERE reason IS NOT NULL
  AND @in_intervals(report_date)
