"""detect's literal key lists: every value quoted, none silently dropped."""

from __future__ import annotations

from sqlglot import exp, parse_one

from tardy.engine.detect import _in_list


def test_in_list_quotes_each_value_and_parses_back_to_the_same_values() -> None:
    values = ["S001-20260101-00001", "it's", "back\\slash", " padded "]
    sql = _in_list("k", values)
    parsed = parse_one(sql, dialect="spark")
    assert isinstance(parsed, exp.In)
    assert sorted(e.this for e in parsed.expressions) == sorted(values)


def test_in_list_of_nothing_matches_nothing() -> None:
    assert _in_list("k", []) == "FALSE"
