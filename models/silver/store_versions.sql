MODEL (
  name silver.store_versions,
  -- A view: a pure function of bronze.store_changes (a few rows per store), always current.
  -- The facts it is joined to change only through runs (the grace window) and restatements:
  -- `tardy detect` compares this query at the arrival watermark's bronze version with the
  -- current one, and restates the days whose as-of join a late change alters.
  kind VIEW,
  grain (store_id, valid_from),
  -- Read by tardy's detection (tardy.engine.dimension): the columns bounding a version's
  -- validity, [valid_from, valid_to), valid_to NULL while current.
  tags ('validity=valid_from,valid_to'),
  audits (
    unique_combination_of_columns(columns := (store_id, valid_from)),
    not_null(columns := (store_id, valid_from, region, version, is_current)),
    no_overlapping_validity,
    no_validity_gaps
  ),
  description 'Store attributes as a slowly changing dimension (type 2), one row per version: the winning valid bronze.store_changes record of each (store_id, effective_ts): a correction beats a change whatever their arrival order, then the latest arrival_ts, then record_id DESC (@store_version_rank). A version is valid from its effective_ts to the next version''s (NULL: current), so late and out-of-order changes land where they took effect, without overlaps or gaps.',
  column_descriptions (
    store_id = 'Store',
    valid_from = 'When the version took effect (its effective_ts, UTC), inclusive',
    valid_to = 'When the next version took effect, exclusive; NULL for the current version',
    region = 'Region of the store while the version is valid',
    format = 'Store format while the version is valid',
    manager = 'Store manager while the version is valid',
    change_id = 'change_id of the winning record (may be NULL)',
    is_correction = 'Whether the winning record is a correction',
    version = '1-based number of the version among the store''s versions, by valid_from',
    is_current = 'Whether the version is the store''s latest (valid_to IS NULL)',
    record_count = 'Valid bronze records for this (store_id, effective_ts), duplicates included',
    arrival_ts = 'Arrival time of the winning record',
    source_record_id = 'bronze.store_changes record_id of the winning record'
  )
);

WITH ranked AS (
  SELECT
    @store_id_of() AS store_id,
    effective_ts,
    region,
    format,
    manager,
    change_id,
    COALESCE(is_correction, 'false') = 'true' AS is_correction,
    arrival_ts,
    record_id,
    @store_version_rank() AS version_rank,
    COUNT(*) OVER (PARTITION BY @store_id_of(), effective_ts) AS record_count
  FROM bronze.store_changes
  WHERE @store_invalid_reason() IS NULL
)
SELECT
  CAST(store_id AS INT) AS store_id,
  CAST(effective_ts AS TIMESTAMP) AS valid_from,
  CAST(LEAD(effective_ts) OVER (PARTITION BY store_id ORDER BY effective_ts) AS TIMESTAMP)
    AS valid_to,
  CAST(region AS STRING) AS region,
  CAST(format AS STRING) AS format,
  CAST(manager AS STRING) AS manager,
  CAST(change_id AS STRING) AS change_id,
  CAST(is_correction AS BOOLEAN) AS is_correction,
  CAST(ROW_NUMBER() OVER (PARTITION BY store_id ORDER BY effective_ts) AS INT) AS version,
  CAST(
    LEAD(effective_ts) OVER (PARTITION BY store_id ORDER BY effective_ts) IS NULL AS BOOLEAN
  ) AS is_current,
  CAST(record_count AS INT) AS record_count,
  CAST(arrival_ts AS TIMESTAMP) AS arrival_ts,
  CAST(record_id AS STRING) AS source_record_id
FROM ranked
WHERE version_rank = 1
