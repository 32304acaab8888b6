"""Validation and precedence rules for card refunds, shared by the refund models.

Every macro here reads the columns of ``bronze.payment_refunds`` (``external_models.yaml``),
unqualified, and returns a SQLGlot expression (Spark SQL templates, transpiled to DuckDB for
``sqlmesh test``), as ``macros/sales_rules.py`` does for sales.

- ``@refund_key()``: the refund a record belongs to: the one it corrects, else its own id
  (``sources.yaml`` names it as the source's natural key).
- ``@refund_invalid_reason()``: the first rule a refund record fails, or NULL when it is
  valid. ``silver.refund_quarantine`` keeps the rows where it is not NULL,
  ``silver.refunds`` ranks the rows where it is NULL.
- ``@refund_version_rank()``: 1 for the record that wins among the valid records of a
  refund: a correction beats the original whatever the arrival order, then the latest
  ``arrival_ts``, then ``record_id``.
- ``@refund_amount()``: the refunded amount, DECIMAL(12, 2).
- ``@refund_report_date()``: the day a record is accounted to (its refund date when known
  and not after its arrival, else its arrival date).
"""

from __future__ import annotations

from sqlglot import exp
from sqlmesh import macro
from sqlmesh.core.macros import MacroEvaluator

from tardy.key_index import fill

# Whole numbers only (see macros/sales_rules.py: TRY_CAST alone rounds or truncates).
_INTEGER_PATTERN = "^-?[0-9]+$"
_MONEY_TYPE = "DECIMAL(12, 2)"


def _amount() -> exp.Expr:
    return fill(f"TRY_CAST(TRIM(amount) AS {_MONEY_TYPE})")


@macro()
def refund_key(evaluator: MacroEvaluator) -> exp.Expr:
    """The refund a record belongs to."""
    return fill("COALESCE(NULLIF(TRIM(corrects_refund_id), ''), refund_id)")


@macro()
def refund_amount(evaluator: MacroEvaluator) -> exp.Expr:
    """The refunded amount, NULL when it is not a decimal."""
    return _amount()


@macro()
def refund_invalid_reason(evaluator: MacroEvaluator) -> exp.Expr:
    """invalid_json, missing_refund_id, missing_transaction_id, missing_refund_ts,
    unparseable_refund_ts, refund_after_arrival, invalid_store_id, invalid_amount,
    non_positive_amount: the first a record fails, in this order; NULL when valid."""
    return fill(
        f"""
        CASE
          WHEN parse_error IS NOT NULL THEN 'invalid_json'
          WHEN refund_id IS NULL OR TRIM(refund_id) = '' THEN 'missing_refund_id'
          WHEN transaction_id IS NULL OR TRIM(transaction_id) = '' THEN 'missing_transaction_id'
          WHEN refund_ts_raw IS NULL THEN 'missing_refund_ts'
          WHEN refund_ts IS NULL THEN 'unparseable_refund_ts'
          WHEN refund_ts > arrival_ts THEN 'refund_after_arrival'
          WHEN NOT COALESCE(TRIM(store_id) RLIKE '{_INTEGER_PATTERN}', FALSE)
            THEN 'invalid_store_id'
          WHEN :amount IS NULL THEN 'invalid_amount'
          WHEN :amount <= 0 THEN 'non_positive_amount'
        END
        """,
        amount=_amount(),
    )


@macro()
def refund_version_rank(evaluator: MacroEvaluator, key: exp.Expr, is_valid: exp.Expr) -> exp.Expr:
    """1 for the winning record of its refund: valid first, a correction before the
    original, then the latest arrival, then the greatest record_id."""
    return fill(
        """
        ROW_NUMBER() OVER (
          PARTITION BY :key
          ORDER BY
            CASE WHEN :is_valid THEN 0 ELSE 1 END,
            CASE WHEN NULLIF(TRIM(corrects_refund_id), '') IS NOT NULL THEN 0 ELSE 1 END,
            arrival_ts DESC,
            record_id DESC
        )
        """,
        key=key,
        is_valid=is_valid,
    )


@macro()
def refund_report_date(evaluator: MacroEvaluator) -> exp.Expr:
    """The day a refund record is accounted to (its arrival date when the refund time is
    unknown or after the arrival, so no record is lost)."""
    return fill(
        "CASE WHEN refund_ts IS NOT NULL AND refund_ts <= arrival_ts"
        " THEN CAST(refund_ts AS DATE) ELSE arrival_date END"
    )
