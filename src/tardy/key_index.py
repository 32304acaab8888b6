"""A bronze table's key index: where each natural key's records are.

A silver model ranks *all* records of a key, and a record of it (a late correction, a void)
may arrive on any date. To read only the bronze partitions that can hold the records of a
set of keys, ``tardy ingest`` keeps, for each bronze table a source declares
``key_index:`` for (``sources.yaml``), an index of where each key's records are:

    <index table> (key_date, natural_key, arrival_date)   partitioned by key_date

one row per (natural key, arrival date) of bronze. The natural key is the source's declared
``natural_key`` (Spark SQL over its bronze columns, ``KeyIndex.natural_key``); the index
table is the one the declaration names, by default ``<bronze table>_keys``. ``key_date`` is a
function of the key alone (``KEY_DATE_SQL``: a ``yyyyMMdd`` found in the key, else
``'00000000'``), so a lookup computes it from the keys it looks for and reads only their
index partitions, then only the bronze partitions (``arrival_date``) the index names.
Correctness depends on nothing but the index being a superset of bronze's (key, arrival
date) pairs: ingest writes a batch's index rows *before* the batch's bronze commit (a crash
in between leaves extra index rows, which only cost a read). The key format only decides
speed: keys without a date share one index partition.

The index records which rules built it (table property ``tardy.key_rules``: a digest of the
natural key and ``KEY_DATE_SQL``); when they change, or when the index is missing (a data
home whose bronze predates it), ``KeyIndex.ensure`` rebuilds it from bronze in one Delta
commit. A project's macros may read the index too (the sample's ``macros/sales_rules.py``
builds ``@key_date()`` and its lookups from ``key_date_expression``).
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
RULES_PROPERTY = "tardy.key_rules"
# The index table of a bronze table that declares ``key_index: true``.
DEFAULT_SUFFIX = "_keys"


def fill(template: str, **values: exp.Expr) -> exp.Expr:
    """Parses a Spark SQL template and fills each ``:name`` placeholder with a copy of a value."""

    def replace(node: exp.Expr) -> exp.Expr:
        if isinstance(node, exp.Placeholder) and node.name in values:
            return values[node.name].copy()
        return node

    return parse_one(template, dialect=RULES_DIALECT).transform(replace)


def key_date_expression(key: exp.Expr) -> exp.Expr:
    """The index partition of a key (a function of the key alone)."""
    return fill(KEY_DATE_SQL, key=key)


def records_of_literal_keys(
    natural_key: exp.Expr, keys: Iterable[str], arrival_dates: Iterable[str]
) -> exp.Expr:
    """A predicate on bronze: a record whose ``natural_key`` is one of ``keys``, read only in
    ``arrival_dates`` (literal lists: static partition pruning on ``arrival_date``). Exact
    when the dates hold every record of the keys (the index's dates of the keys do); FALSE
    without keys."""
    keys = sorted(set(keys))
    if not keys:
        return exp.false()
    dates = sorted(set(arrival_dates))
    return exp.and_(
        exp.column("arrival_date").isin(*(exp.cast(exp.Literal.string(d), "DATE") for d in dates))
        if dates
        else exp.false(),
        natural_key.copy().isin(*(exp.Literal.string(k) for k in keys)),
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


@dataclass(frozen=True)
class KeyIndex:
    """The key index of one bronze table."""

    table: str  # the index table (Spark name)
    natural_key: str  # Spark SQL over the bronze table's columns, no macro

    def key(self) -> exp.Expr:
        return parse_one(self.natural_key, dialect=RULES_DIALECT)

    @property
    def rules_version(self) -> str:
        """Changes whenever a rule changes: an index built with other rules is rebuilt."""
        rules = f"{self.key().sql(RULES_DIALECT)}\n{KEY_DATE_SQL}"
        return hashlib.sha256(rules.encode()).hexdigest()[:16]

    @property
    def ddl(self) -> str:
        return (
            f"CREATE TABLE IF NOT EXISTS {self.table} (key_date STRING NOT NULL, "
            "natural_key STRING NOT NULL, arrival_date DATE NOT NULL) USING delta "
            "PARTITIONED BY (key_date)"
        )

    def rows_sql(self, source: str) -> str:
        """Spark SQL: the index rows of the bronze-shaped rows of ``source`` (table or view)."""
        key = self.key().sql(RULES_DIALECT)
        key_date = key_date_expression(self.key()).sql(RULES_DIALECT)
        return (
            f"SELECT DISTINCT {key_date} AS key_date, {key} AS natural_key, arrival_date "
            f"FROM {source} WHERE {key} IS NOT NULL"
        )

    def arrival_dates_sql(self, key_dates: str, keys: str) -> str:
        """Spark SQL: per key, the arrival dates holding its records, read in the keys' own
        index partitions (``key_dates``/``keys``: predicates on ``key_date``/``natural_key``)."""
        return (
            f"SELECT DISTINCT natural_key, arrival_date FROM {self.table} "
            f"WHERE {key_dates} AND {keys}"
        )

    def rules_of(self, spark: SparkSession) -> str | None:
        """The rules version the index was built with, None when it was never completed."""
        rows = spark.sql(f"SHOW TBLPROPERTIES {self.table}").collect()
        return next((r.value for r in rows if r.key == RULES_PROPERTY), None)

    def ensure(self, spark: SparkSession, bronze: str) -> bool:
        """Creates the index and (re)builds it from all of ``bronze`` unless it was built with
        the current rules; True when it (re)built. Idempotent: the rebuild is one Delta commit
        that replaces the whole index, and the rules version is recorded only after it."""
        spark.sql(self.ddl)
        version = self.rules_version
        if self.rules_of(spark) == version:
            return False
        spark.sql(f"INSERT INTO {self.table} REPLACE WHERE TRUE {self.rows_sql(bronze)}")
        spark.sql(f"ALTER TABLE {self.table} SET TBLPROPERTIES ('{RULES_PROPERTY}' = '{version}')")
        return True

    def append(self, spark: SparkSession, source: str) -> None:
        """Appends the index rows of ``source`` (rows about to be appended to bronze)."""
        spark.sql(f"INSERT INTO {self.table} {self.rows_sql(source)}")
