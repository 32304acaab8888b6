"""The natural key rule and bronze's key index, ``bronze.pos_event_keys``.

Silver ranks *all* records of a transaction, and a record of it (a late correction, a void)
may arrive on any date. To read only the bronze partitions that can hold the records of a
set of keys, ``tardy ingest`` keeps an index of where each key's records are:

    bronze.pos_event_keys (key_date, natural_key, arrival_date)   partitioned by key_date

one row per (natural key, arrival date) of bronze. ``key_date`` is a function of the key
alone (``KEY_DATE_SQL``: a ``yyyyMMdd`` found in the key, else ``'00000000'``), so a lookup
computes it from the keys it looks for and reads only their index partitions, then only the
bronze partitions (``arrival_date``) the index names. Correctness depends on nothing but
the index being a superset of bronze's (key, arrival date) pairs: ingest writes a batch's
index rows *before* the batch's bronze commit (a crash in between leaves extra index rows,
which only cost a read). The key format only decides speed: keys without a date share one
index partition.

The SQL templates here are the one copy of the rules: ``macros/sales_rules.py`` builds
``@natural_key()`` and ``@key_date()`` from them, and ingest computes the index rows with
them in Spark SQL. The index records which rules built it (table property
``tardy.key_rules``); when they change, or when the index is missing (a data home whose bronze
predates it), ``ensure_key_index`` rebuilds it from bronze in one Delta commit.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import date
from typing import TYPE_CHECKING

from sqlglot import exp, parse_one

if TYPE_CHECKING:  # the macros import this module; keep Spark out of their import
    from pyspark.sql import SparkSession

KEY_INDEX_TABLE = "bronze.pos_event_keys"

# Spark SQL over bronze.pos_events' columns.
NATURAL_KEY_SQL = "COALESCE(NULLIF(TRIM(corrects_transaction_id), ''), transaction_id)"
# The first 8-digit run of the key (between non-digits) that reads as yyyyMMdd of 1900-2099,
# else '00000000'. `:key` is the key expression. Any function of the key alone is exact;
# this one groups the keys of the simulator (S001-20260105-00001) and of most POS systems by
# day. No backslashes: Spark and DuckDB (sqlmesh test) read them differently.
KEY_DATE_PATTERN = "(^|[^0-9])((19|20)[0-9]{2}(0[1-9]|1[0-2])(0[1-9]|[12][0-9]|3[01]))([^0-9]|$)"
KEY_DATE_FALLBACK = "00000000"
KEY_DATE_SQL = (
    f"COALESCE(NULLIF(REGEXP_EXTRACT(:key, '{KEY_DATE_PATTERN}', 2), ''), '{KEY_DATE_FALLBACK}')"
)
RULES_DIALECT = "spark"
# The render variable through which ``tardy restate`` restricts a model to a set of natural
# keys (``@restricted_records``): unset in every stock ``sqlmesh plan``/``run``/``test``. Its
# value maps ``"keys"`` to the natural keys and ``"arrival_dates"`` to the arrival dates
# (ISO strings) of bronze holding all their records (from the index: ``arrival_dates_of``).
KEY_RESTRICTION_VARIABLE = "tardy_keys"
# Changes whenever a rule changes: an index built with other rules is rebuilt.
RULES_VERSION = hashlib.sha256(f"{NATURAL_KEY_SQL}\n{KEY_DATE_SQL}".encode()).hexdigest()[:16]
RULES_PROPERTY = "tardy.key_rules"

KEY_INDEX_DDL = f"""
CREATE TABLE IF NOT EXISTS {KEY_INDEX_TABLE} (
  key_date STRING NOT NULL,
  natural_key STRING NOT NULL,
  arrival_date DATE NOT NULL
) USING delta
PARTITIONED BY (key_date)
"""


def fill(template: str, **values: exp.Expr) -> exp.Expr:
    """Parses a Spark SQL template and fills each ``:name`` placeholder with a copy of a value."""

    def replace(node: exp.Expr) -> exp.Expr:
        if isinstance(node, exp.Placeholder) and node.name in values:
            return values[node.name].copy()
        return node

    return parse_one(template, dialect=RULES_DIALECT).transform(replace)


def natural_key_expression() -> exp.Expr:
    """The transaction a record belongs to: the one it corrects (or voids), else its own id."""
    return fill(NATURAL_KEY_SQL)


def key_date_expression(key: exp.Expr) -> exp.Expr:
    """The index partition of a key (a function of the key alone)."""
    return fill(KEY_DATE_SQL, key=key)


def records_of_literal_keys(keys: Iterable[str], arrival_dates: Iterable[str]) -> exp.Expr:
    """A predicate on bronze: a record of one of ``keys``, read only in ``arrival_dates``
    (literal lists: static partition pruning on ``arrival_date``). Exact when the dates hold
    every record of the keys (the index's dates of the keys do); FALSE without keys."""
    keys = sorted(set(keys))
    if not keys:
        return exp.false()
    dates = sorted(set(arrival_dates))
    return exp.and_(
        exp.column("arrival_date").isin(*(exp.cast(exp.Literal.string(d), "DATE") for d in dates))
        if dates
        else exp.false(),
        natural_key_expression().isin(*(exp.Literal.string(k) for k in keys)),
    )


@dataclass(frozen=True)
class KeySet:
    """The natural keys whose rows changed in a model, and the arrival dates of bronze that
    hold every record of them (from the key index): what ``tardy restate`` restricts a model
    that reads ``KEY_RESTRICTION_VARIABLE`` to (``tardy.engine.stage``)."""

    keys: frozenset[str]
    arrival_dates: frozenset[date]

    def variable(self) -> dict[str, list[str]]:
        """The value of the render variable ``KEY_RESTRICTION_VARIABLE``."""
        return {
            "keys": sorted(self.keys),
            "arrival_dates": sorted(d.isoformat() for d in self.arrival_dates),
        }


def index_rows_sql(source: str) -> str:
    """Spark SQL: the index rows of the bronze-shaped rows of ``source`` (table or view)."""
    key = natural_key_expression()
    return (
        f"SELECT DISTINCT {key_date_expression(key).sql(RULES_DIALECT)} AS key_date, "
        f"{key.sql(RULES_DIALECT)} AS natural_key, arrival_date "
        f"FROM {source} WHERE {key.sql(RULES_DIALECT)} IS NOT NULL"
    )


def rules_of_index(spark: SparkSession) -> str | None:
    """The rules version the index was built with, None when it was never completed."""
    rows = spark.sql(f"SHOW TBLPROPERTIES {KEY_INDEX_TABLE}").collect()
    return next((r.value for r in rows if r.key == RULES_PROPERTY), None)


def ensure_key_index(spark: SparkSession, bronze: str) -> bool:
    """Creates the index and (re)builds it from all of ``bronze`` unless it was built with the
    current rules; True when it (re)built. Idempotent: the rebuild is one Delta commit that
    replaces the whole index, and the rules version is recorded only after it."""
    spark.sql(KEY_INDEX_DDL)
    if rules_of_index(spark) == RULES_VERSION:
        return False
    spark.sql(f"INSERT INTO {KEY_INDEX_TABLE} REPLACE WHERE TRUE {index_rows_sql(bronze)}")
    spark.sql(
        f"ALTER TABLE {KEY_INDEX_TABLE} SET TBLPROPERTIES ('{RULES_PROPERTY}' = '{RULES_VERSION}')"
    )
    return True


def append_key_index(spark: SparkSession, source: str) -> None:
    """Appends the index rows of ``source`` (rows about to be appended to bronze)."""
    spark.sql(f"INSERT INTO {KEY_INDEX_TABLE} {index_rows_sql(source)}")
