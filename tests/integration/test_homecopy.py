"""A copied data home is a valid data home (``tardy.project.homecopy``, the templates' copies).

A copy of the ``small`` template, opened in the worker's warm engine: every database and
table of its metastore lives under the copy, its SQLMesh state knows prod, bronze holds one
row per landing line (an independent pandas count of the files), and a write to the copy
leaves the template's files as they were. A home holding a shallow clone is refused, and so is
a target that exists.
"""

from __future__ import annotations

import json
from pathlib import Path

import oracle
import pytest
from children import SMALL

from tardy.project.homecopy import HomeCopyError, copy_home


def _commits(table_dir: Path) -> list[str]:
    return sorted(p.name for p in (table_dir / "_delta_log").glob("*.json"))


def test_a_copied_home_reads_and_writes_its_own_files(engine, tmp_path: Path) -> None:
    template = SMALL.ensure(engine)
    copy = tmp_path / "copy"
    SMALL.copy_to(engine, copy)
    bronze_before = _commits(template / "warehouse" / "bronze.db" / "pos_events")
    home, context, spark = engine.open(copy)

    databases = [r.namespace for r in spark.sql("SHOW DATABASES").collect()]
    locations = [
        r.info_value
        for db in databases
        for r in spark.sql(f"DESCRIBE DATABASE {db}").collect()
        if r.info_name == "Location"
    ]
    tables = []
    for db in databases:
        views = {r.viewName for r in spark.sql(f"SHOW VIEWS IN {db}").collect()}
        for r in spark.sql(f"SHOW TABLES IN {db}").collect():
            if r.tableName not in views and not r.isTemporary:
                tables.append(spark.sql(f"DESCRIBE DETAIL {db}.{r.tableName}").first().location)
    assert len(tables) >= 8, tables  # bronze, the ledger, the models' physical tables
    assert len(locations) == len(databases) >= 4, locations
    for location in locations + tables:
        assert location.startswith(f"file:{copy}"), location

    assert context.state_sync.get_environment("prod") is not None
    records = oracle.records(oracle.sales_files(home.landing), home.landing)
    assert spark.table("bronze.pos_events").count() == len(records) > 0

    spark.sql(
        "INSERT INTO bronze.pos_events SELECT * FROM bronze.pos_events LIMIT 1"
    )  # the copy's bronze grows ...
    assert len(_commits(copy / "warehouse" / "bronze.db" / "pos_events")) == len(bronze_before) + 1
    # ... the template's does not
    assert _commits(template / "warehouse" / "bronze.db" / "pos_events") == bronze_before

    engine.release()
    assert json.loads((copy / "template-facts.json").read_text())["files"] > 0
    with pytest.raises(HomeCopyError, match="exists: a data home is copied to a new path"):
        copy_home(template, copy)


def test_a_home_holding_a_shallow_clone_is_refused(engine, tmp_path: Path) -> None:
    root = tmp_path / "home"
    _, _, spark = engine.open(root)
    spark.sql("CREATE SCHEMA IF NOT EXISTS s")
    spark.sql("CREATE TABLE s.t (k BIGINT) USING delta")
    spark.sql("INSERT INTO s.t VALUES (1)")
    spark.sql("CREATE TABLE s.c SHALLOW CLONE s.t")
    engine.release()
    with pytest.raises(HomeCopyError, match=r"shallow clones \(c\)"):
        copy_home(root, tmp_path / "copy")
    assert not (tmp_path / "copy").exists()


def test_a_home_holding_a_staged_restatement_is_refused(tmp_path: Path) -> None:
    """Its log names the staged rows by their path in this home: a copy would point at them."""
    root = tmp_path / "home"
    (root / "stage" / "20261128T000000Z-abcdef").mkdir(parents=True)
    with pytest.raises(HomeCopyError, match=r"staged restatement \(stage/\)"):
        copy_home(root, tmp_path / "copy")
    assert not (tmp_path / "copy").exists()


def test_the_fingerprints_in_one_statement_equal_each_tables_own(engine, tmp_path: Path) -> None:
    """``fingerprints`` hashes every model in one ``UNION ALL`` with ``xxhash64(*)``; each
    equals ``table_fingerprint`` of the table alone (its columns named in order), so
    fingerprints recorded before stay comparable."""
    from tardy.consumers.fingerprint import fingerprints, model_tables, table_fingerprint
    from tardy.engine.meter import Meter

    home = tmp_path / "home"
    SMALL.copy_to(engine, home)
    _, context, spark = engine.open(home)
    try:
        meter = Meter(spark)
        with meter.step("fingerprints"):
            together = fingerprints(context, spark)
        alone = {table: table_fingerprint(spark, table) for table in model_tables(context)}
    finally:
        engine.release()
    assert len(together) >= 10 and any(f.rows > 0 for f in together.values())
    assert together == alone
    assert meter.statements == {"fingerprints": 1}, meter.statements
