"""The diffs of several staged tables in one statement: each table's counts, sums and keys.

Two small prod / staged pairs, one with a DECIMAL measure and one without; the expected
numbers are counted by hand from the rows below (the oracle), not by the engine's SQL.
"""

from __future__ import annotations

import typing as t
from datetime import date
from decimal import Decimal

SCHEMA = "diff_tables"

# (id, day, amount): prod, then staged; the interval is 2025-01-01..2025-01-02.
SALES_PROD = [(1, "2025-01-01", "10.00"), (2, "2025-01-01", "5.00"), (3, "2025-01-02", "7.00")]
SALES_STAGED = [(1, "2025-01-01", "10.00"), (2, "2025-01-01", "6.00"), (5, "2025-01-02", "3.00")]
# (id, day, n): no DECIMAL column; two one-day intervals, the second unchanged.
COUNTS_PROD = [(1, "2025-01-01", 1), (2, "2025-01-03", 4)]
COUNTS_STAGED = [(1, "2025-01-01", 2), (2, "2025-01-03", 4)]


def _table(spark: t.Any, name: str, rows: list[tuple[t.Any, ...]], measure: str) -> str:
    values = ", ".join(f"({i}, DATE'{d}', {v})" for i, d, v in rows)
    full = f"{SCHEMA}.{name}"
    spark.sql(
        f"CREATE OR REPLACE TABLE {full} USING delta AS SELECT id, d, {measure} "
        f"FROM VALUES {values} AS v(id, d, {measure.split()[-1]})"
    )
    return full


def test_diffs_in_one_statement_count_each_table_as_alone(spark: t.Any) -> None:
    from tardy.engine.diff import diff_table, diff_tables
    from tardy.engine.stage import StagedTable

    spark.sql(f"CREATE SCHEMA IF NOT EXISTS {SCHEMA}")
    try:
        amount = "CAST(amount AS DECIMAL(10,2)) AS amount"
        sales = StagedTable(
            model="m.sales",
            prod_table=_table(spark, "sales", SALES_PROD, amount),
            staged_table=_table(spark, "sales_staged", SALES_STAGED, amount),
            time_column="d",
            version_before=0,
            intervals=[["2025-01-01", "2025-01-02"]],
            snapshot_version="1",
        )
        counts = StagedTable(
            model="m.counts",
            prod_table=_table(spark, "counts", COUNTS_PROD, "n"),
            staged_table=_table(spark, "counts_staged", COUNTS_STAGED, "n"),
            time_column="d",
            version_before=0,
            intervals=[["2025-01-01", "2025-01-01"], ["2025-01-03", "2025-01-03"]],
            snapshot_version="1",
        )
        pairs = [(sales, ["id"]), (counts, ["id"])]
        both = diff_tables(spark, pairs)

        (one,) = both[0].intervals
        assert (one.rows_before, one.rows_after) == (3, 3)
        assert (one.keys_added, one.keys_removed, one.keys_changed) == (1, 1, 1)
        assert one.sums_before == {"amount": "22.00"} and one.sums_after == {"amount": "19.00"}
        assert one.examples == {
            "added": ["5|2025-01-02"],
            "removed": ["3|2025-01-02"],
            "changed": ["2|2025-01-01"],
        }
        assert both[0].changed_days == {date(2025, 1, 1), date(2025, 1, 2)}
        by_day = {d.day: d for d in both[0].days}
        assert Decimal(by_day[date(2025, 1, 2)].sums_after["amount"]) == Decimal("3.00")

        first, second = both[1].intervals
        assert (first.keys_changed, first.sums_before, first.sums_after) == (1, {}, {})
        assert second.unchanged and (second.rows_before, second.rows_after) == (1, 1)
        assert both[1].changed_days == {date(2025, 1, 1)}

        assert both == [diff_table(spark, table, grain) for table, grain in pairs]
        assert diff_tables(spark, []) == []
    finally:
        spark.sql(f"DROP SCHEMA IF EXISTS {SCHEMA} CASCADE")
