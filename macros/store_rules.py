"""Validation and precedence rules for store changes, shared by the store models.

Every macro here reads the columns of ``bronze.store_changes`` (``external_models.yaml``),
unqualified, and returns a SQLGlot expression (Spark SQL templates, transpiled to DuckDB for
``sqlmesh test``), as ``macros/sales_rules.py`` does for sales.

- ``@store_invalid_reason()``: the first rule a store change fails, or NULL when it is valid.
  ``silver.store_quarantine`` keeps the rows where it is not NULL, ``silver.store_versions``
  builds its versions from the rows where it is NULL.
- ``@store_version_rank()``: 1 for the record that wins among the valid records of one
  ``(store_id, effective_ts)``.
"""

from __future__ import annotations

from sqlglot import exp
from sqlmesh import macro
from sqlmesh.core.macros import MacroEvaluator

from tardy.key_index import fill

# Whole numbers only (see macros/sales_rules.py: TRY_CAST alone rounds or truncates).
_INTEGER_PATTERN = "^-?[0-9]+$"


def _store_id() -> exp.Expr:
    return fill(
        f"CASE WHEN TRIM(store_id) RLIKE '{_INTEGER_PATTERN}' "
        "THEN TRY_CAST(TRIM(store_id) AS INT) END"
    )


@macro()
def store_id_of(evaluator: MacroEvaluator) -> exp.Expr:
    """``store_id`` as INT: NULL unless it is a whole number that fits an INT."""
    return _store_id()


@macro()
def store_invalid_reason(evaluator: MacroEvaluator) -> exp.Expr:
    """The first validation rule a store change fails, in this order, or NULL when valid.

    invalid_json, unknown_store (store_id missing, not a whole number, or < 1: it names no
    store), missing_effective_ts, unparseable_effective_ts, missing_region,
    invalid_is_correction (present and neither true nor false).
    """
    return fill(
        """
        CASE
          WHEN parse_error IS NOT NULL THEN 'invalid_json'
          WHEN :store_id IS NULL OR :store_id < 1 THEN 'unknown_store'
          WHEN effective_ts_raw IS NULL OR TRIM(effective_ts_raw) = '' THEN 'missing_effective_ts'
          WHEN effective_ts IS NULL THEN 'unparseable_effective_ts'
          WHEN region IS NULL OR TRIM(region) = '' THEN 'missing_region'
          WHEN is_correction IS NOT NULL AND is_correction NOT IN ('true', 'false')
            THEN 'invalid_is_correction'
        END
        """,
        store_id=_store_id(),
    )


@macro()
def store_version_rank(evaluator: MacroEvaluator) -> exp.Expr:
    """ROW_NUMBER() of a valid store change among those of its ``(store_id, effective_ts)``,
    1 = the winner: a correction beats a change whatever their arrival order, then the latest
    arrival_ts wins, then record_id DESC (an exact duplicate changes nothing)."""
    return fill(
        """
        ROW_NUMBER() OVER (
          PARTITION BY :store_id, effective_ts
          ORDER BY
            CASE WHEN is_correction = 'true' THEN 1 ELSE 0 END DESC,
            arrival_ts DESC,
            record_id DESC
        )
        """,
        store_id=_store_id(),
    )
