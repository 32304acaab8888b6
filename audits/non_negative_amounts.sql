-- Rows where any of the given amount columns is negative (NULLs are not_null's business).
-- Usage: non_negative_amounts(columns := (quantity, unit_price, discount, net_amount))
AUDIT (
  name non_negative_amounts,
  blocking TRUE
);

SELECT *
FROM @this_model
WHERE @REDUCE(@EACH(@columns, c -> c < 0), (l, r) -> l OR r)
