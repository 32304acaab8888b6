"""Validation and precedence rules for point-of-sale records, shared by the silver models.

Every macro here reads the columns of ``bronze.pos_events`` (see ``external_models.yaml``),
unqualified, and returns a SQLGlot expression. The SQL templates are written in Spark SQL,
the project's dialect; SQLGlot transpiles them to DuckDB for ``sqlmesh test``.

- ``@invalid_reason()``: the first rule a bronze row fails, or NULL when the row is valid.
  ``silver.sales_quarantine`` keeps the rows where it is not NULL, ``silver.sales_transactions``
  the rows where it is NULL, and the reconciliation audit counts both.
- ``@report_date()``: the day a bronze row is accounted to.
- ``@natural_key()``: the transaction a record belongs to.
- ``@bronze_reported_in()``: the bronze rows that can be accounted to the interval, read only
  where they can be.
- ``@key_date(key)``: the partition of ``bronze.pos_event_keys`` that indexes a key.
- ``@records_of_keys(keys, column)``: the predicate on ``bronze.pos_events`` selecting every
  record of the keys in ``keys.column``, reading only the bronze partitions that hold them.
- ``@restricted_records(keys, column)``: ``@records_of_keys``, or, when ``tardy restate`` sets
  the variable ``tardy_keys``, the records of those (changed) keys only, from literal lists.
- ``@restricted_keys(key)``: TRUE, or, when ``tardy restate`` sets ``tardy_keys``, whether
  ``key`` is one of those (changed) keys: how an audit checks only the rows it recomputed.
- ``@version_rank(key[, is_valid])``: 1 for the record that wins among the valid records of a
  key.
- ``@as_int(value)`` / ``@as_money(value)``: the typed value of a bronze text field, or NULL.
"""

from __future__ import annotations

from sqlglot import exp
from sqlmesh import macro
from sqlmesh.core.macros import MacroEvaluator

# Plain names, not aliases nor a submodule: SQLMesh serializes a macro's globals, restores an
# aliased name imported from a package outside the project as its original name (a
# NameError, measured in a copied project) and refuses `import tardy.key_index`.
from tardy.audited_intervals import INTERVALS_VARIABLE, interval_values, within
from tardy.key_index import (
    KEY_RESTRICTION_VARIABLE,
    fill,
    key_date_expression,
    records_of_literal_keys,
)

# The templates below are Spark SQL, whatever the dialect of the calling model.
_RULES_DIALECT = "spark"

# The sales sources' key index and natural key, as sources.yaml declares them (its
# `key_index:` and `natural_key:`; ingest indexes bronze with that SQL, and
# tests/unit/test_key_index.py checks the two copies are one rule).
KEY_INDEX_TABLE = "bronze.pos_event_keys"
NATURAL_KEY_SQL = "COALESCE(NULLIF(TRIM(corrects_transaction_id), ''), transaction_id)"

RECORD_TYPES = ("sale", "correction", "void")
AMENDMENT_TYPES = ("correction", "void")

# Whole numbers only: TRY_CAST alone does not do, since DuckDB rounds '2.5' to 3 and Spark
# (non-ANSI) truncates it to 2. No backslashes: Spark and DuckDB read them differently.
_INTEGER_PATTERN = "^-?[0-9]+$"
_MONEY_TYPE = "DECIMAL(12, 2)"


def _in_list(values: tuple[str, ...]) -> str:
    return ", ".join(f"'{value}'" for value in values)


def _as_int(value: exp.Expr) -> exp.Expr:
    return fill(
        f"CASE WHEN TRIM(:v) RLIKE '{_INTEGER_PATTERN}' THEN TRY_CAST(TRIM(:v) AS INT) END",
        v=value,
    )


def _as_money(value: exp.Expr) -> exp.Expr:
    return fill(f"TRY_CAST(TRIM(:v) AS {_MONEY_TYPE})", v=value)


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
    return fill(
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
    return fill(
        "CASE WHEN event_ts IS NOT NULL AND event_ts <= arrival_ts"
        " THEN CAST(event_ts AS DATE) ELSE arrival_date END"
    )


@macro()
def bronze_reported_in(evaluator: MacroEvaluator) -> exp.Expr:
    """The ``bronze.pos_events`` rows whose ``@report_date()`` can fall in the interval (or in
    any of tardy's audited intervals, ``macros/intervals.py``), as a subquery: those that
    arrived in it (partition pruning), and those that arrived later with an event time in it
    (file skipping on ``event_ts``). A row is accounted to its event date only when that is
    not after its arrival, else to its arrival date, so no other row can be accounted to the
    interval. One filter ``arrival_date >= start AND (arrival_date <= end OR event_ts BETWEEN
    ...)`` would be equivalent, but Delta cannot skip files with it: an old day would read
    every later partition (909 files against 52, measured on a year). Over several intervals
    the later arrivals are those after the first interval's end and in none of them.
    """
    intervals = interval_values(evaluator.locals, evaluator.var(INTERVALS_VARIABLE))
    arrival, event = exp.column("arrival_date"), exp.column("event_ts")
    arrived_in = within(arrival, intervals, "start_date", "end_date")
    later = [
        exp.GT(this=arrival.copy(), expression=exp.convert(min(i["end_date"] for i in intervals)))
    ]
    later += [exp.not_(arrived_in.copy())] if len(intervals) > 1 else []
    later += [within(event, intervals, "start_ts", "end_ts")]
    return fill(
        """
        (
          SELECT * FROM bronze.pos_events
          WHERE :arrived_in
          UNION ALL
          SELECT * FROM bronze.pos_events
          WHERE :later
        )
        """,
        arrived_in=arrived_in,
        later=exp.and_(*later),
    )


@macro()
def natural_key(evaluator: MacroEvaluator) -> exp.Expr:
    """The transaction a record belongs to: the one it corrects (or voids), else its own id
    (``NATURAL_KEY_SQL``, the sales sources' declared natural key)."""
    return fill(NATURAL_KEY_SQL)


@macro()
def key_date(evaluator: MacroEvaluator, key: exp.Expr) -> exp.Expr:
    """The ``bronze.pos_event_keys`` partition of a key: a yyyyMMdd found in it, else
    '00000000' (``tardy.key_index``). A function of the key alone, so exact for any key."""
    return key_date_expression(key)


@macro()
def records_of_keys(evaluator: MacroEvaluator, keys: exp.Expr, column: exp.Expr) -> exp.Expr:
    """A predicate on ``bronze.pos_events``: the row is a record of a key in ``keys.column``.

    ``keys`` is a CTE (or table) of natural keys. The key index ``bronze.pos_event_keys``
    names the arrival dates that hold the keys' records (read in the index partitions of
    the keys' ``@key_date``), so bronze is read only in those partitions (Spark's dynamic
    partition pruning) instead of over its whole history. Exact for any data: the index is
    a superset of bronze's (key, arrival_date) pairs (``tardy ingest`` writes it first).
    """
    keys_sql = keys.sql(_RULES_DIALECT)
    key = exp.column(column.name)
    return fill(
        f"""
        arrival_date IN (
          SELECT key_index.arrival_date
          FROM {KEY_INDEX_TABLE} AS key_index
          WHERE key_index.key_date IN (SELECT :key_date FROM {keys_sql})
            AND key_index.natural_key IN (SELECT :key FROM {keys_sql})
        )
        AND :natural_key IN (SELECT :key FROM {keys_sql})
        """,
        key=key,
        key_date=key_date_expression(key),
        natural_key=fill(NATURAL_KEY_SQL),
    )


@macro()
def restricted_records(evaluator: MacroEvaluator, keys: exp.Expr, column: exp.Expr) -> exp.Expr:
    """``@records_of_keys(keys, column)``, unless ``tardy restate`` restricts the model to the
    natural keys that changed (the variable ``tardy_keys``, set only in tardy's rendering):
    then the records of those keys, as literal lists of keys and of the arrival dates holding
    their records (static partition pruning; a literal key CTE through the index would read
    all of bronze, docs/key-lookups.md). Stock runs never set it: the interval path stays.
    """
    restriction = evaluator.var(KEY_RESTRICTION_VARIABLE)
    if restriction is None:
        return records_of_keys(evaluator, keys, column)
    return records_of_literal_keys(
        fill(NATURAL_KEY_SQL), restriction["keys"], restriction["arrival_dates"]
    )


@macro()
def restricted_keys(evaluator: MacroEvaluator, key: exp.Expr) -> exp.Expr:
    """TRUE in every stock run; when ``tardy restate`` restricts the model to the natural keys
    that changed (the variable ``tardy_keys``), the predicate ``key IN (<those keys>)``. An
    audit uses it to check only the rows a key-restricted write recomputed (the other keys'
    rows are prod's, byte for byte)."""
    restriction = evaluator.var(KEY_RESTRICTION_VARIABLE)
    if restriction is None:
        return exp.true()
    keys = sorted(set(restriction["keys"]))
    return key.isin(*(exp.Literal.string(k) for k in keys)) if keys else exp.false()


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
    return fill(
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
