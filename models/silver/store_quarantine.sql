MODEL (
  name silver.store_quarantine,
  -- A view, as silver.store_versions: every invalid store change, always current.
  kind VIEW,
  grain record_id,
  tags (quarantine),
  audits (
    unique_values(columns := (record_id)),
    not_null(columns := (record_id, arrival_ts, reason, raw_record)),
    accepted_values(
      column := reason,
      is_in := (
        'invalid_json', 'unknown_store', 'missing_effective_ts', 'unparseable_effective_ts',
        'missing_region', 'invalid_is_correction'
      )
    )
  ),
  description 'Every invalid bronze.store_changes row, one row per bronze record, with the first validation rule it fails (@store_invalid_reason, shared with silver.store_versions): nothing the store master sends is dropped.',
  column_descriptions (
    record_id = 'Bronze record id, <file_sha256>:<line_number>',
    source_file = 'Landing file path relative to the landing root',
    line_number = '1-based line in the landing file',
    arrival_ts = 'When the record arrived (bronze arrival_ts)',
    store_id = 'store_id as landed (may be NULL or not a number)',
    effective_ts = 'effective_ts as landed (may be NULL or unparseable)',
    reason = 'First failing validation rule',
    raw_record = 'The JSON line exactly as landed'
  )
);

SELECT
  CAST(record_id AS STRING) AS record_id,
  CAST(source_file AS STRING) AS source_file,
  CAST(line_number AS INT) AS line_number,
  CAST(arrival_ts AS TIMESTAMP) AS arrival_ts,
  CAST(store_id AS STRING) AS store_id,
  CAST(effective_ts_raw AS STRING) AS effective_ts,
  CAST(reason AS STRING) AS reason,
  CAST(raw_record AS STRING) AS raw_record
FROM (
  SELECT *, @store_invalid_reason() AS reason
  FROM bronze.store_changes
) AS checked
WHERE reason IS NOT NULL
