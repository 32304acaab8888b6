-- Refunds of a transaction no point-of-sale record names (not landed yet, or never sent):
-- they are counted (the money left the store that day); this warns, listing them, so the
-- payment provider or the POS feed can be chased. It reads the sales key index
-- (bronze.pos_event_keys: every natural key with a bronze record), not a model, so the
-- refunds never wait on sales.
AUDIT (
  name refunds_known_sales,
  blocking FALSE
);

SELECT r.refund_id, r.refund_date, r.transaction_id, r.store_id, r.amount
FROM @this_model AS r
WHERE NOT EXISTS (
  SELECT 1 FROM bronze.pos_event_keys AS k WHERE k.natural_key = r.transaction_id
)
