"""The original ``tardy quarantine duplicate --of`` may name (``steward.original``), on
real Spark: a table of records written here, read by the same statement as a source's bronze
table. Only a parsed record of the source that is the latest record key of its natural key;
not one a later correction superseded, not an unparsed one, not another source's."""

from __future__ import annotations

import typing as t

import pytest

from tardy.errors import InputError
from tardy.quarantine.steward import original

FILE = "a" * 64
ROWS = [
    # record id, source, line, parse error, arrival, transaction, corrects
    (f"{FILE}:1", "pos", 1, None, "2026-01-02 10:00:00", "T1", None),  # corrected by T2
    (f"{FILE}:2", "pos", 2, None, "2026-01-03 10:00:00", "T2", "T1"),  # the correction
    (f"{FILE}:3", "pos", 3, None, "2026-01-02 11:00:00", "T3", None),  # resent verbatim
    (f"{FILE}:4", "pos", 4, None, "2026-01-04 11:00:00", "T3", None),  # the resend
    (f"{FILE}:5", "pos", 5, "not JSON", "2026-01-02 12:00:00", None, None),
    (f"{FILE}:6", "partner", 6, None, "2026-01-02 12:00:00", "T6", None),
]
NATURAL_KEY = "COALESCE(corrects_transaction_id, transaction_id)"


@pytest.fixture(scope="module")
def records(spark: t.Any) -> t.Iterator[str]:
    frame = spark.createDataFrame(
        ROWS,
        "record_id STRING, source_system STRING, line_number INT, parse_error STRING, "
        "arrival STRING, transaction_id STRING, corrects_transaction_id STRING",
    ).selectExpr("* EXCEPT (arrival)", "CAST(arrival AS TIMESTAMP) AS arrival_ts")
    frame.createOrReplaceTempView("duplicate_originals")
    yield "duplicate_originals"
    spark.catalog.dropTempView("duplicate_originals")  # the worker's session is shared


def named(spark: t.Any, table: str, line: int, source: str = "pos") -> str:
    row = original(spark, table, source, ("transaction_id",), NATURAL_KEY, f"{FILE[:8]}:{line}")
    return str(row.record_id)


def test_the_standing_record_and_a_resent_one_are_originals(spark: t.Any, records: str) -> None:
    assert named(spark, records, 2) == f"{FILE}:2"  # the correction stands
    assert named(spark, records, 3) == f"{FILE}:3"  # a verbatim resend keeps its key
    assert named(spark, records, 6, source="partner") == f"{FILE}:6"


@pytest.mark.parametrize(
    ("line", "source", "refusal"),
    [
        (1, "pos", "superseded by a later correction (record T2)"),
        (5, "pos", "is not a valid record of source pos (unparsed: not JSON)"),
        (6, "pos", "no record of source pos"),
        (1, "partner", "no record of source partner"),
    ],
)
def test_a_superseded_unparsed_or_other_sources_record_is_refused(
    spark: t.Any, records: str, line: int, source: str, refusal: str
) -> None:
    with pytest.raises(InputError, match=refusal.replace("(", r"\(").replace(")", r"\)")):
        named(spark, records, line, source)
