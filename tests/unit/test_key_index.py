"""The key index (tardy.key_index): built with the source's declared natural key, exact for
any key format, rebuilt when missing or built with other rules; the sample's macros read it
with the rule sources.yaml declares."""

from __future__ import annotations

import importlib.util
from datetime import date
from pathlib import Path
from types import SimpleNamespace

import duckdb
import pytest
from sqlglot import exp, transpile

from tardy import key_index
from tardy.key_index import KEY_DATE_FALLBACK, RULES_PROPERTY, KeyIndex
from tardy.project.sources import load

ROOT = Path(__file__).resolve().parents[2]
# The sample's sales sources, as sources.yaml declares them.
SALES = load(ROOT / "sources.yaml").get("pos")
INDEX = SALES.index


def _duck(sql_spark: str) -> str:
    return transpile(sql_spark, read="spark", write="duckdb")[0]


BRONZE = """
CREATE TABLE bronze AS SELECT * FROM (VALUES
  ('S001-20260105-00001', NULL, DATE '2026-01-05'),
  ('S001-20260105-00001', NULL, DATE '2026-01-05'),
  ('S001-20260302-C0001', ' S001-20260105-00001 ', DATE '2026-03-02'),
  ('POS-A7F3', NULL, DATE '2026-01-05'),
  ('V-1', 'POS-A7F3', DATE '2026-02-16'),
  ('12026010512', NULL, DATE '2026-01-06'),
  ('X-20261301-1', '', DATE '2026-01-06'),
  ('A-19991231', NULL, DATE '2026-01-07'),
  (NULL, '   ', DATE '2026-01-07'),
  (NULL, NULL, DATE '2026-01-07')
) AS t(transaction_id, corrects_transaction_id, arrival_date)
"""


def _index_rows() -> list[tuple[str, str, date]]:
    con = duckdb.connect()
    con.execute(BRONZE)
    return sorted(con.execute(_duck(INDEX.rows_sql("bronze"))).fetchall())


def test_index_rows_one_per_key_and_arrival_date_in_the_partition_of_the_key() -> None:
    assert _index_rows() == [
        (KEY_DATE_FALLBACK, "12026010512", date(2026, 1, 6)),  # a longer digit run: no date
        (KEY_DATE_FALLBACK, "POS-A7F3", date(2026, 1, 5)),  # no date in the key
        (KEY_DATE_FALLBACK, "POS-A7F3", date(2026, 2, 16)),  # the void names it
        (KEY_DATE_FALLBACK, "X-20261301-1", date(2026, 1, 6)),  # month 13: not a date
        ("19991231", "A-19991231", date(2026, 1, 7)),
        ("20260105", "S001-20260105-00001", date(2026, 1, 5)),  # duplicates collapse
        ("20260105", "S001-20260105-00001", date(2026, 3, 2)),  # trimmed correction
    ]  # rows without a key (invalid whatever the rules) are not indexed


def test_key_date_is_a_function_of_the_key_alone() -> None:
    sql = key_index.key_date_expression(exp.column("k")).sql("spark")
    con = duckdb.connect()
    keys = ["S020-20261031-00700", "S020-20261031-00700", "opaque", ""]
    got = [
        con.execute(f"SELECT {_duck(sql)} FROM (SELECT ? AS k)", [k]).fetchone()[0] for k in keys
    ]
    assert got == ["20261031", "20261031", KEY_DATE_FALLBACK, KEY_DATE_FALLBACK]


@pytest.fixture
def macros():
    """The project's macro module, imported on its own; SQLMesh's global macro registry is
    restored afterwards (left registered from this module, the project's macros would later
    be serialized from it, and every model using them would fail to load in this process)."""
    from sqlmesh.core.macros import macro

    registry = macro.registry()
    saved = dict(registry)
    spec = importlib.util.spec_from_file_location("sales_rules", ROOT / "macros/sales_rules.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    try:
        spec.loader.exec_module(module)
        yield module
    finally:
        registry.clear()
        registry.update(saved)


def test_the_sales_index_is_the_declared_one_and_the_macros_read_it_with_its_rule(
    macros,
) -> None:
    assert KeyIndex("bronze.pos_event_keys", SALES.natural_key) == INDEX
    assert INDEX.table == macros.KEY_INDEX_TABLE
    # SQLMesh's @macro() keeps the function callable with an evaluator as first argument.
    assert macros.natural_key(None).sql("spark") == INDEX.key().sql("spark")
    key = exp.column("transaction_id")
    assert macros.key_date(None, key).sql("spark") == key_index.key_date_expression(key).sql(
        "spark"
    )
    lookup = macros.records_of_keys(None, exp.to_identifier("ks"), exp.column("k")).sql("spark")
    assert INDEX.table in lookup
    assert key_index.key_date_expression(exp.column("k")).sql("spark") in lookup
    assert INDEX.key().sql("spark") in lookup


def test_key_index_true_is_the_bronze_tables_own_and_a_macro_key_is_refused(tmp_path) -> None:
    from tardy.project.sources import SourcesError

    text = (ROOT / "sources.yaml").read_text()
    declared = "key_index: bronze.pos_event_keys"
    assert declared in text
    path = tmp_path / "sources.yaml"
    path.write_text(text.replace(declared, "key_index: true"))
    assert load(path).get("partner").index.table == "bronze.pos_events_keys"
    path.write_text(
        text.replace(
            "natural_key: \"COALESCE(NULLIF(TRIM(corrects_transaction_id), ''), transaction_id)\"",
            'natural_key: "@natural_key()"',
        )
    )
    with pytest.raises(SourcesError, match="field 'natural_key'.*expands no macro"):
        load(path)


def test_restricted_records_is_the_index_lookup_unless_tardy_sets_the_keys(macros) -> None:
    from sqlmesh.core import constants
    from sqlmesh.core.macros import MacroEvaluator

    keys, column = exp.to_identifier("interval_keys"), exp.column("transaction_id")
    stock = MacroEvaluator(dialect="spark")
    assert macros.restricted_records(stock, keys, column).sql("spark") == macros.records_of_keys(
        stock, keys, column
    ).sql("spark")
    restricted = MacroEvaluator(dialect="spark")
    value = {"keys": ["S001-20260105-00001"], "arrival_dates": ["2026-01-05", "2026-03-02"]}
    restricted.locals[constants.SQLMESH_VARS] = {key_index.KEY_RESTRICTION_VARIABLE: value}
    literal = macros.restricted_records(restricted, keys, column).sql("spark")
    assert literal == key_index.records_of_literal_keys(INDEX.key(), **value).sql("spark")
    assert INDEX.table not in literal and "interval_keys" not in literal


def test_records_of_literal_keys_selects_every_record_of_the_keys_in_the_indexed_dates() -> None:
    con = duckdb.connect()
    con.execute(BRONZE)
    keys = {"S001-20260105-00001", "POS-A7F3"}
    dates = {d.isoformat() for _, k, d in _index_rows() if k in keys}
    where = _duck(key_index.records_of_literal_keys(INDEX.key(), keys, dates).sql("spark"))
    rows = con.execute(f"SELECT transaction_id, arrival_date FROM bronze WHERE {where}").fetchall()
    assert sorted(rows) == [
        ("POS-A7F3", date(2026, 1, 5)),
        ("S001-20260105-00001", date(2026, 1, 5)),
        ("S001-20260105-00001", date(2026, 1, 5)),
        ("S001-20260302-C0001", date(2026, 3, 2)),  # the correction names the key
        ("V-1", date(2026, 2, 16)),  # the void names it
    ]
    # Without the dates holding them, records are not read: the dates must come from the index.
    partial = key_index.records_of_literal_keys(INDEX.key(), keys, {"2026-01-05"})
    partial = _duck(partial.sql("spark"))
    assert len(con.execute(f"SELECT * FROM bronze WHERE {partial}").fetchall()) == 3
    assert key_index.records_of_literal_keys(INDEX.key(), [], dates).sql("spark") == "FALSE"


class FakeSpark:
    """Records SQL; SHOW TBLPROPERTIES answers with ``properties``."""

    def __init__(self, properties: dict[str, str]) -> None:
        self.properties = properties
        self.statements: list[str] = []

    def sql(self, statement: str) -> SimpleNamespace:
        self.statements.append(" ".join(statement.split()))
        rows = [SimpleNamespace(key=k, value=v) for k, v in self.properties.items()]
        return SimpleNamespace(collect=lambda: rows if statement.startswith("SHOW") else [])


@pytest.mark.parametrize("recorded", [None, "0123456789abcdef"])
def test_missing_or_other_rules_rebuild_from_all_of_bronze_then_record_the_rules(
    recorded: str | None,
) -> None:
    spark = FakeSpark({} if recorded is None else {RULES_PROPERTY: recorded})
    assert INDEX.ensure(spark, "bronze.pos_events")  # type: ignore[arg-type]
    create, show, rebuild, record = spark.statements
    assert create.startswith(f"CREATE TABLE IF NOT EXISTS {INDEX.table}")
    assert show.startswith("SHOW TBLPROPERTIES")
    # One commit replaces the whole index (no window with a partial index).
    assert rebuild.startswith(f"INSERT INTO {INDEX.table} REPLACE WHERE TRUE SELECT")
    assert "FROM bronze.pos_events" in rebuild
    assert INDEX.rules_version in record and record.startswith(f"ALTER TABLE {INDEX.table}")


def test_index_built_with_the_current_rules_is_left_alone() -> None:
    # The version of the rules the sample's homes were built with before the key index
    # became the source's own: they are not rebuilt.
    assert INDEX.rules_version == "c6b34e840e7e8062"
    spark = FakeSpark({RULES_PROPERTY: INDEX.rules_version})
    assert not INDEX.ensure(spark, "bronze.pos_events")  # type: ignore[arg-type]
    assert len(spark.statements) == 2
