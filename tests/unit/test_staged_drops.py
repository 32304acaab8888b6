"""Dropping what a restatement staged: one catalog listing per schema, exact names only."""

from __future__ import annotations

import typing as t

SCHEMA = "staged_drops"


def test_drop_existing_drops_the_named_tables_and_views_and_nothing_else(spark: t.Any) -> None:
    from tardy.engine import delta

    spark.sql(f"CREATE SCHEMA IF NOT EXISTS {SCHEMA}")
    try:
        for name in ("m__dev__rows", "m__dev", "keep", "m__dev__rows_other"):  # m__dev: a clone
            spark.sql(f"CREATE OR REPLACE TABLE {SCHEMA}.{name} USING delta AS SELECT 1 AS x")
        spark.sql(f"CREATE OR REPLACE VIEW {SCHEMA}.v__dev AS SELECT 2 AS x")
        views = [f"{SCHEMA}.m__dev", f"{SCHEMA}.v__dev", f"{SCHEMA}.never__dev", "nowhere.m__dev"]
        tables = [f"`spark_catalog`.`{SCHEMA}`.`m__dev__rows`"]
        dropped = delta.drop_existing(spark, views, tables)
        assert sorted(dropped) == sorted([*views[:2], *tables])
        left = {r.tableName for r in spark.sql(f"SHOW TABLES IN {SCHEMA}").collect()}
        assert left == {"keep", "m__dev__rows_other"}
        assert delta.drop_existing(spark, views, tables) == []
    finally:
        spark.sql(f"DROP SCHEMA IF EXISTS {SCHEMA} CASCADE")
