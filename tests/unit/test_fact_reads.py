"""How fact detection restricts a reader's own query (``tardy.engine.facts``): every read of
the bronze table becomes a subquery of the touched keys' records, under the table's own name or
alias, and a key list survives ``str.format`` whatever the keys hold."""

from __future__ import annotations

from sqlglot import exp, parse_one

from tardy.engine.facts import _keyed_literal, _reading


def test_every_read_of_the_bronze_table_reads_the_records_view_instead() -> None:
    query = parse_one(
        "WITH k AS (SELECT DISTINCT `pos_events`.`id` FROM `spark_catalog`.`bronze`.`pos_events`)"
        " SELECT b.id FROM bronze.pos_events AS b JOIN k ON b.id = k.id"
        " JOIN silver.other AS o ON o.id = b.id",
        dialect="spark",
    )
    assert isinstance(query, exp.Query)
    out = _reading(query, "bronze.pos_events", "SELECT * FROM _tardy_new WHERE k IN ('a')")
    subqueries = {s.alias: s.this.sql("spark") for s in out.find_all(exp.Subquery) if s.alias}
    restricted = "SELECT * FROM _tardy_new WHERE k IN ('a')"
    assert subqueries == {"pos_events": restricted, "b": restricted}  # unaliased: own name
    tables = [(t.db, t.name) for t in out.find_all(exp.Table)]
    assert ("silver", "other") in tables
    assert ("bronze", "pos_events") not in tables


def test_a_literal_key_list_survives_format_and_fills_the_grain() -> None:
    keys = {"A{1}", "B'}{"}
    sql = _keyed_literal(keys).format(grain="`transaction_id`")
    parsed = parse_one(f"SELECT * FROM t WHERE {sql}", dialect="spark")
    found = {lit.this for lit in parsed.find_all(exp.Literal)}
    assert found == keys
    assert "`transaction_id` IN" in sql
