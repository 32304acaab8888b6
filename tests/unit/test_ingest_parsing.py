"""Ingestion's line parsing and landing-path rules (pure Python; the Delta writes are covered
by the integration tests)."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import pytest

from tardy.ingest.discovery import describe, discover
from tardy.ingest.errors import IngestError
from tardy.ingest.parsing import parse_event_ts, parse_line
from tardy.ingest.tables import table_of

SALES = table_of("pos").fields  # the fields the project declares for sales (sources.yaml)


def test_fields_keep_their_json_text() -> None:
    fields, error = parse_line(
        '{"transaction_id":"T1","record_type":"sale","store_id":3,"product_id":7,'
        '"quantity":2,"unit_price":12.50,"discount":0.00,"event_ts":"2026-01-02T10:00:00Z"}',
        SALES,
    )
    assert error is None
    assert fields["unit_price"] == "12.50" and fields["discount"] == "0.00"
    assert fields["store_id"] == "3" and fields["corrects_transaction_id"] is None


@pytest.mark.parametrize(
    ("line", "expected"),
    [
        ('{"transaction_id": "T1", "quantity": ', "invalid JSON"),
        ("[1, 2]", "not a JSON object: list"),
        ('"just a string"', "not a JSON object: str"),
    ],
)
def test_bad_lines_are_kept_with_a_parse_error(line: str, expected: str) -> None:
    fields, error = parse_line(line)
    assert fields == {} and error is not None and error.startswith(expected)


def test_nested_and_boolean_values_become_text() -> None:
    fields, _ = parse_line('{"store_id": true, "product_id": {"a": 1}, "quantity": null}', SALES)
    assert fields["store_id"] == "true"
    assert fields["product_id"].startswith('{"a":')  # kept as text; silver rejects it
    assert fields["quantity"] is None


def test_event_ts_is_normalised_to_naive_utc() -> None:
    assert parse_event_ts("2026-01-02T10:00:00Z") == datetime(2026, 1, 2, 10)
    assert parse_event_ts("2026-01-02T12:00:00+02:00") == datetime(2026, 1, 2, 10)
    assert parse_event_ts("2026-01-0X 25:61") is None
    assert parse_event_ts(None) is None


def test_landing_paths_give_source_system_and_arrival(tmp_path: Path) -> None:
    landing = tmp_path / "landing"
    batch = landing / "pos" / "arrival_ts=20260102T060000Z"
    batch.mkdir(parents=True)
    (batch / "a.jsonl").write_text("{}\n")
    loose = landing / "partner"
    (loose / "b.jsonl").parent.mkdir(parents=True)
    (loose / "b.jsonl").write_text("{}\n")

    files = discover(landing)
    assert [f.name for f in files] == ["b.jsonl", "a.jsonl"]  # sorted by path
    described = {f.path.name: f for f in (describe(p, landing) for p in files)}
    assert described["a.jsonl"].source_system == "pos"
    assert described["a.jsonl"].arrival_ts == datetime(2026, 1, 2, 6, tzinfo=UTC)
    assert described["a.jsonl"].source_file == "pos/arrival_ts=20260102T060000Z/a.jsonl"
    assert described["b.jsonl"].arrival_ts is None  # arrives at ingestion time
    assert described["a.jsonl"].sha256 == described["b.jsonl"].sha256  # same content


def test_malformed_arrival_folder_is_a_clear_error(tmp_path: Path) -> None:
    bad = tmp_path / "landing" / "pos" / "arrival_ts=2026-01-02"
    bad.mkdir(parents=True)
    (bad / "a.jsonl").write_text("{}\n")
    with pytest.raises(IngestError, match="arrival"):
        describe(bad / "a.jsonl", tmp_path / "landing")


def test_missing_path_is_a_clear_error(tmp_path: Path) -> None:
    with pytest.raises(IngestError, match="no such file"):
        discover(tmp_path, [tmp_path / "nope.jsonl"])
