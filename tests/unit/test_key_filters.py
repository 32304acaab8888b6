"""detect's literal key lists: every value quoted, none silently dropped."""

from __future__ import annotations

from sqlglot import exp, parse_one

from tardy.sql import date_list, in_list


def test_in_list_quotes_each_value_and_parses_back_to_the_same_values() -> None:
    values = ["S001-20260101-00001", "it's", "back\\slash", " padded "]
    sql = in_list("k", values)
    parsed = parse_one(sql, dialect="spark")
    assert isinstance(parsed, exp.In)
    assert sorted(e.this for e in parsed.expressions) == sorted(values)


def test_in_list_of_nothing_matches_nothing() -> None:
    assert in_list("k", []) == "FALSE"


def test_date_list_is_a_list_of_date_literals_and_of_nothing_matches_nothing() -> None:
    from datetime import date

    parsed = parse_one(date_list("d", [date(2026, 1, 2), date(2025, 12, 31)]), dialect="spark")
    assert isinstance(parsed, exp.In)
    assert [e.sql("spark") for e in parsed.expressions] == [
        "CAST('2025-12-31' AS DATE)",
        "CAST('2026-01-02' AS DATE)",
    ]
    assert date_list("d", []) == "FALSE"
