-- A slowly changing dimension: no two versions of a store are valid at the same instant
-- ([valid_from, valid_to), valid_to NULL = open). Returns the overlapping pairs.
AUDIT (
  name no_overlapping_validity,
  blocking TRUE
);

SELECT a.store_id, a.valid_from, a.valid_to, b.valid_from AS overlapping_valid_from
FROM @this_model AS a
JOIN @this_model AS b
  ON a.store_id = b.store_id
  AND a.valid_from <= b.valid_from
  AND NOT (a.valid_from = b.valid_from AND a.version = b.version)
  AND (a.valid_to IS NULL OR a.valid_to > b.valid_from)
