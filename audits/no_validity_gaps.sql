-- A slowly changing dimension: after a store's first version, every instant has a version:
-- a version that ends (valid_to set) is followed by one starting exactly then. Returns the
-- versions whose end starts nothing.
AUDIT (
  name no_validity_gaps,
  blocking TRUE
);

SELECT a.store_id, a.valid_from, a.valid_to
FROM @this_model AS a
LEFT JOIN @this_model AS b
  ON a.store_id = b.store_id
  AND b.valid_from = a.valid_to
WHERE a.valid_to IS NOT NULL
  AND b.store_id IS NULL
