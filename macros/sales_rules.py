"""Validation and precedence rules for point-of-sale records, shared by the silver models.

Every macro here reads the columns of ``bronze.pos_events`` (see ``external_models.yaml``),
unqualified, and returns a SQLGlot expression. The SQL templates are written in Spark SQL,
the project's dialect; SQLGlot transpiles them to DuckDB for ``sqlmesh test``.

- ``@invalid_reason()``: the first rule a bronze row fails, or NULL when the row is valid.
  ``silver.sales_quarantine`` keeps the rows where it is not NULL, ``silver.sales_transactions``
  the rows where it is NULL, and the reconciliation audit counts both.
- ``@report_date()``: the day a bronze row is accounted to.
- ``@natural_key()``: the transaction a record belongs to.
- ``@version_rank(key[, is_valid])``: 1 for the record that wins among the valid records of a
  key.
- ``@as_int(value)`` / ``@as_money(value)``: the typed value of a bronze text field, or NULL.
"""

from __future__ import annotations

from sqlglot import exp, parse_one
from sqlmesh import macro
from sqlmesh.core.macros import MacroEvaluator

# The templates below are Spark SQL, whatever the dialect of the calling model.
_RULES_DIALECT = "spark"

RECORD_TYPES = ("sale", "correction", "void")
AMENDMENT_TYPES = ("correction", "void")

# Whole numbers only: TRY_CAST alone does not do, since DuckDB rounds '2.5' to 3 and Spark
# (non-ANSI) truncates it to 2. No backslashes: Spark and DuckDB read them differently.
_INTEGER_PATTERN = "^-?[0-9]+$"
_MONEY_TYPE = "DECIMAL(12, 2)"


def _sql(template: str, **values: exp.Expr) -> exp.Expr:
    """Parses a Spark SQL template and fills each ``:name`` placeholder with a copy of a value."""

    def fill(node: exp.Expr) -> exp.Expr:
        if isinstance(node, exp.Placeholder) and node.name in values:
            return values[node.name].copy()
        return node

    return parse_one(template, dialect=_RULES_DIALECT).transform(fill)


def _in_list(values: tuple[str, ...]) -> str:
    return ", ".join(f"'{value}'" for value in values)


def _as_int(value: exp.Expr) -> exp.Expr:
    return _sql(
        f"CASE WHEN TRIM(:v) RLIKE '{_INTEGER_PATTERN}' THEN TRY_CAST(TRIM(:v) AS INT) END",
        v=value,
    )


def _as_money(value: exp.Expr) -> exp.Expr:
    return _sql(f"TRY_CAST(TRIM(:v) AS {_MONEY_TYPE})", v=value)


@macro()
def as_int(evaluator: MacroEvaluator, value: exp.Expr) -> exp.Expr:
    """A bronze text field as INT: NULL unless it is a whole number that fits an INT."""
    return _as_int(value)


@macro()
def as_money(evaluator: MacroEvaluator, value: exp.Expr) -> exp.Expr:
    """A bronze text field as DECIMAL(12, 2) (rounded to cents), NULL when not a decimal."""
    return _as_money(value)


@macro()
def invalid_reason(evaluator: MacroEvaluator) -> exp.Expr:
    """The first validation rule a bronze row fails, in this order, or NULL when it is valid.

    invalid_json, missing_transaction_id, invalid_record_type, missing_event_ts,
    unparseable_event_ts, event_after_arrival, invalid_store_id, then for sales and
    corrections only (a void needs nothing else): invalid_product_id, invalid_quantity,
    negative_quantity, invalid_unit_price, negative_unit_price, invalid_discount,
    negative_discount, discount_exceeds_gross. A NULL discount counts as 0.00.
    """
    column = exp.column
    store_id = _as_int(column("store_id"))
    product_id = _as_int(column("product_id"))
    quantity = _as_int(column("quantity"))
    unit_price = _as_money(column("unit_price"))
    discount = _as_money(column("discount"))
    return _sql(
        f"""
        CASE
          WHEN parse_error IS NOT NULL THEN 'invalid_json'
          WHEN transaction_id IS NULL OR TRIM(transaction_id) = '' THEN 'missing_transaction_id'
          WHEN record_type IS NULL OR record_type NOT IN ({_in_list(RECORD_TYPES)})
            THEN 'invalid_record_type'
          WHEN event_ts_raw IS NULL THEN 'missing_event_ts'
          WHEN event_ts IS NULL THEN 'unparseable_event_ts'
          WHEN event_ts > arrival_ts THEN 'event_after_arrival'
          WHEN :store_id IS NULL THEN 'invalid_store_id'
          WHEN record_type = 'void' THEN NULL
          WHEN :product_id IS NULL THEN 'invalid_product_id'
          WHEN :quantity IS NULL THEN 'invalid_quantity'
          WHEN :quantity < 0 THEN 'negative_quantity'
          WHEN :unit_price IS NULL THEN 'invalid_unit_price'
          WHEN :unit_price < 0 THEN 'negative_unit_price'
          WHEN discount IS NOT NULL AND :discount IS NULL THEN 'invalid_discount'
          WHEN :discount < 0 THEN 'negative_discount'
          WHEN COALESCE(:discount, 0) > :quantity * :unit_price THEN 'discount_exceeds_gross'
        END
        """,
        store_id=store_id,
        product_id=product_id,
        quantity=quantity,
        unit_price=unit_price,
        discount=discount,
    )


@macro()
def report_date(evaluator: MacroEvaluator) -> exp.Expr:
    """The day a bronze row is accounted to: its event date when event_ts is known and not
    after arrival_ts, else its arrival date (so that no row is ever lost)."""
    return _sql(
        "CASE WHEN event_ts IS NOT NULL AND event_ts <= arrival_ts"
        " THEN CAST(event_ts AS DATE) ELSE arrival_date END"
    )


@macro()
def natural_key(evaluator: MacroEvaluator) -> exp.Expr:
    """The transaction a record belongs to: the one it corrects (or voids), else its own id."""
    return _sql("COALESCE(NULLIF(TRIM(corrects_transaction_id), ''), transaction_id)")


@macro()
def version_rank(
    evaluator: MacroEvaluator, key: exp.Expr, is_valid: exp.Expr | None = None
) -> exp.Expr:
    """ROW_NUMBER() of a valid record among the valid records of its key, 1 = the winner.

    Amendments (correction, void) beat sales whatever their arrival order, so a resent or
    duplicated original never undoes a correction; within the same class the latest
    arrival_ts wins, so an older arrival never overwrites a newer one; record_id DESC breaks
    ties deterministically (exact duplicates collapse to one winner).

    With ``is_valid`` (a boolean expression), the window may also hold invalid records: they
    rank after every valid one, so rank 1 is the valid winner whenever the key has one. This
    lets a query validate only the records of the keys it needs (Spark pushes a validity
    filter below a key join, validating every row; it cannot push it below a window).
    """
    validity = "CASE WHEN :is_valid THEN 0 ELSE 1 END," if is_valid is not None else ""
    return _sql(
        f"""
        ROW_NUMBER() OVER (
          PARTITION BY :key
          ORDER BY
            {validity}
            CASE WHEN record_type IN ({_in_list(AMENDMENT_TYPES)}) THEN 1 ELSE 0 END DESC,
            arrival_ts DESC,
            record_id DESC
        )
        """,
        key=key,
        is_valid=is_valid if is_valid is not None else exp.true(),
    )
