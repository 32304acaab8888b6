"""The store part of the pandas oracle (``tests/integration/oracle.py``) on small hand-written
landing folders: every expected value below is computed by hand from the lines written."""

from __future__ import annotations

import hashlib
import importlib.util
import json
from datetime import date, datetime
from decimal import Decimal
from pathlib import Path

import pandas as pd
import pytest

_SPEC = importlib.util.spec_from_file_location(
    "store_oracle", Path(__file__).parents[1] / "integration" / "oracle.py"
)
assert _SPEC and _SPEC.loader
oracle = importlib.util.module_from_spec(_SPEC)
_SPEC.loader.exec_module(oracle)

A1, A2, A3 = "20260110T000000Z", "20260112T000000Z", "20260114T000000Z"
NaT = pd.NaT


def land(landing: Path, source: str, arrival: str, name: str, lines: list[object]) -> str:
    """Writes one landing file (dicts as JSON, str/bytes as they are); returns its sha256."""
    encoded = [
        line if isinstance(line, bytes) else (line if isinstance(line, str) else json.dumps(line))
        for line in lines
    ]
    data = b"".join((x if isinstance(x, bytes) else x.encode()) + b"\n" for x in encoded)
    folder = landing / source / f"arrival_ts={arrival}"
    folder.mkdir(parents=True, exist_ok=True)
    (folder / name).write_bytes(data)
    return hashlib.sha256(data).hexdigest()


def change(store: object, effective: object, region: object = "r", **extra: object) -> dict:
    rec = {"store_id": store, "effective_ts": effective, "region": region}
    return {**rec, "format": "mall", "manager": "m", **extra}


def ts(text: str) -> pd.Timestamp:
    return pd.Timestamp(text)


def versions(landing: Path) -> list[tuple]:
    return [
        (r.store_id, r.valid_from, None if pd.isna(r.valid_to) else r.valid_to, r.region)
        for r in oracle.store_versions(landing).itertuples(index=False)
    ]


def test_store_changes_rows(tmp_path: Path) -> None:
    sha = land(
        tmp_path,
        "store_master",
        A1,
        "stores.jsonl",
        [
            change(1, "2026-01-05T02:00:00+02:00", "north", change_id="c1", is_correction=False),
            change(2, "2026-01-06T00:00:00Z", "south", manager=None, is_correction=True),
            "not json",
        ],
    )
    got = oracle.store_changes(tmp_path)
    assert list(got.columns) == [
        "record_id", "source_file", "line_number", "arrival_ts", "store_id", "effective_ts",
        "region", "format", "manager", "change_id", "is_correction", "reason",
    ]  # fmt: skip
    rows = [
        tuple(None if v is NaT or (isinstance(v, float) and pd.isna(v)) else v for v in r)
        for r in got.itertuples(index=False)
    ]
    source = f"store_master/arrival_ts={A1}/stores.jsonl"
    arrival = datetime(2026, 1, 10)
    assert rows == [
        (f"{sha}:1", source, 1, arrival, 1, datetime(2026, 1, 5), "north", "mall", "m", "c1",
         False, None),
        (f"{sha}:2", source, 2, arrival, 2, datetime(2026, 1, 6), "south", "mall", None, None,
         True, None),
        (f"{sha}:3", source, 3, arrival, None, None, None, None, None, None, None,
         "invalid_json"),
    ]  # fmt: skip


def test_lines_bom_crlf_and_copies(tmp_path: Path) -> None:
    """A BOM is dropped, CRLF ends a line, the last line needs no line end; a copy of a file
    (same bytes) in a later folder adds no record."""
    data = b"\xef\xbb\xbf" + json.dumps(change(1, "2026-01-01T00:00:00Z")).encode() + b"\r\n"
    data += json.dumps(change(2, "2026-01-01T00:00:00Z")).encode()
    for arrival in (A1, A2):
        folder = tmp_path / "store_master" / f"arrival_ts={arrival}"
        folder.mkdir(parents=True)
        (folder / "s.jsonl").write_bytes(data)
    sha = hashlib.sha256(data).hexdigest()
    got = oracle.store_changes(tmp_path)
    assert list(got.record_id) == [f"{sha}:1", f"{sha}:2"]
    assert list(got.arrival_ts) == [ts("2026-01-10"), ts("2026-01-10")]
    assert list(got.reason) == [None, None]
    assert oracle.store_quarantine(tmp_path).empty


def test_only_newline_ends_a_line(tmp_path: Path) -> None:
    """A lone CR or a U+2028 inside a line does not split it (line numbers = record ids)."""
    one = json.dumps(change(1, "2026-01-01T00:00:00Z")).encode()
    two = json.dumps(change(2, "2026-01-01T00:00:00Z", "north\u2028east"), ensure_ascii=False)
    data = one + b"\r" + one + b"\n" + two.encode() + b"\n"
    folder = tmp_path / "store_master" / f"arrival_ts={A1}"
    folder.mkdir(parents=True)
    (folder / "s.jsonl").write_bytes(data)
    sha = hashlib.sha256(data).hexdigest()
    assert oracle.store_quarantine(tmp_path).values.tolist() == [[f"{sha}:1", "invalid_json"]]
    assert versions(tmp_path) == [(2, ts("2026-01-01"), None, "north\u2028east")]


INVALID = [
    ("not json", "invalid_json"),
    ("[1, 2]", "invalid_json"),
    ('"a string"', "invalid_json"),
    ("", "invalid_json"),
    (b'{"store_id": 1, "region": "\xff"}', "invalid_json"),
    ('{"store_id": 1, "store_id": 2, "effective_ts": "2026-01-01", "region": "r"}', "invalid_json"),
    ('{"store_id": NaN, "effective_ts": "2026-01-01", "region": "r"}', "invalid_json"),
    (change(None, "2026-01-01T00:00:00Z"), "unknown_store"),
    ({"effective_ts": "2026-01-01T00:00:00Z", "region": "r"}, "unknown_store"),
    (change("abc", "2026-01-01T00:00:00Z"), "unknown_store"),
    (change(1.5, "2026-01-01T00:00:00Z"), "unknown_store"),
    (change(0, "2026-01-01T00:00:00Z"), "unknown_store"),
    (change(-3, "2026-01-01T00:00:00Z"), "unknown_store"),
    (change(True, "2026-01-01T00:00:00Z"), "unknown_store"),
    (change(0, None, None), "unknown_store"),  # the first failing rule
    ({"store_id": 1, "region": "r"}, "missing_effective_ts"),
    (change(1, None), "missing_effective_ts"),
    (change(1, "   "), "missing_effective_ts"),
    (change(1, "", None), "missing_effective_ts"),  # before missing_region
    (change(1, "yesterday"), "unparseable_effective_ts"),
    (change(1, "2026-13-01T00:00:00Z"), "unparseable_effective_ts"),
    (change(1, True), "unparseable_effective_ts"),
    (change(1, "nope", None), "unparseable_effective_ts"),  # before missing_region
    ({"store_id": 1, "effective_ts": "2026-01-01T00:00:00Z"}, "missing_region"),
    (change(1, "2026-01-01T00:00:00Z", None), "missing_region"),
    (change(1, "2026-01-01T00:00:00Z", ""), "missing_region"),
    (change(1, "2026-01-01T00:00:00Z", "  "), "missing_region"),
    (change(1, "2026-01-01T00:00:00Z", None, is_correction="yes"), "missing_region"),
    (change(1, "2026-01-01T00:00:00Z", is_correction="yes"), "invalid_is_correction"),
    (change(1, "2026-01-01T00:00:00Z", is_correction=1), "invalid_is_correction"),
    (change(1, "2026-01-01T00:00:00Z", is_correction="TRUE"), "invalid_is_correction"),
]


@pytest.mark.parametrize(("line", "reason"), INVALID)
def test_invalid_reason(tmp_path: Path, line: object, reason: str) -> None:
    sha = land(tmp_path, "store_master", A1, "s.jsonl", [line])
    quarantine = oracle.store_quarantine(tmp_path)
    assert list(quarantine.columns) == ["record_id", "reason"]
    assert quarantine.values.tolist() == [[f"{sha}:1", reason]]
    assert oracle.store_versions(tmp_path).empty


@pytest.mark.parametrize(
    ("line", "expected"),
    [
        (change("7", "2026-01-01T00:00:00Z"), (7, ts("2026-01-01"), None, "r")),
        (change(" 7 ", "2026-01-01"), (7, ts("2026-01-01"), None, "r")),
        (change(7, "2026-01-01T01:30:00-02:00"), (7, ts("2026-01-01 03:30"), None, "r")),
        (change(7, "2026-01-01T00:00:00", is_correction=None), (7, ts("2026-01-01"), None, "r")),
        (change(7, "2026-01-01T00:00:00Z", 5), (7, ts("2026-01-01"), None, "5")),
    ],
)
def test_valid_edges(tmp_path: Path, line: dict, expected: tuple) -> None:
    """JSON text decides (a string "7" is store 7, a number region is its text), offsets are
    converted to UTC, a naive timestamp is UTC, a JSON null flag is no flag."""
    land(tmp_path, "store_master", A1, "s.jsonl", [line])
    assert oracle.store_quarantine(tmp_path).empty
    assert versions(tmp_path) == [expected]


def test_scd2_late_and_out_of_order(tmp_path: Path) -> None:
    land(
        tmp_path,
        "store_master",
        A1,
        "a.jsonl",
        [change(1, "2026-01-08T00:00:00Z", "east"), change(2, "2026-01-01T00:00:00Z", "west")],
    )
    # Later arrival, earlier effective dates, and in reverse order within the file.
    land(
        tmp_path,
        "store_master",
        A2,
        "b.jsonl",
        [change(1, "2026-01-05T00:00:00Z", "central"), change(1, "2026-01-02T00:00:00Z", "north")],
    )
    got = oracle.store_versions(tmp_path)
    assert list(got.columns) == [
        "store_id",
        "valid_from",
        "valid_to",
        "region",
        "format",
        "manager",
    ]
    assert versions(tmp_path) == [
        (1, ts("2026-01-02"), ts("2026-01-05"), "north"),
        (1, ts("2026-01-05"), ts("2026-01-08"), "central"),
        (1, ts("2026-01-08"), None, "east"),
        (2, ts("2026-01-01"), None, "west"),
    ]


def test_scd2_winners(tmp_path: Path) -> None:
    e = "2026-01-03T00:00:00Z"
    land(
        tmp_path,
        "store_master",
        A1,
        "a.jsonl",
        [
            change(3, e, "corrected", is_correction=True),  # correction before its original
            change(4, e, "original"),
            change(5, e, "older"),
            change(6, e, "line one"),
            change(6, e, "line two"),  # same arrival: the greater record_id (line 5 > line 4)
        ],
    )
    land(
        tmp_path,
        "store_master",
        A2,
        "b.jsonl",
        [
            change(3, e, "original"),
            change(4, e, "fixed", is_correction=True),  # correction after its original
            change(5, e, "newer"),  # no correction: the latest arrival
        ],
    )
    land(tmp_path, "store_master", A3, "c.jsonl", [change(4, e, "late restatement")])
    assert versions(tmp_path) == [
        (3, ts("2026-01-03"), None, "corrected"),
        (4, ts("2026-01-03"), None, "fixed"),
        (5, ts("2026-01-03"), None, "newer"),
        (6, ts("2026-01-03"), None, "line two"),
    ]


def test_two_corrections_latest_arrival_wins(tmp_path: Path) -> None:
    e = "2026-01-03T00:00:00Z"
    land(tmp_path, "store_master", A2, "b.jsonl", [change(3, e, "second", is_correction=True)])
    land(tmp_path, "store_master", A1, "a.jsonl", [change(3, e, "first", is_correction=True)])
    assert versions(tmp_path) == [(3, ts("2026-01-03"), None, "second")]


def test_duplicate_line_changes_nothing(tmp_path: Path) -> None:
    line = change(1, "2026-01-02T00:00:00Z", "north", change_id="c1")
    land(tmp_path, "store_master", A1, "a.jsonl", [line, line])
    land(tmp_path, "store_master", A2, "b.jsonl", [line, change(1, "2026-01-04", "south")])
    assert len(oracle.store_changes(tmp_path)) == 4
    assert oracle.store_quarantine(tmp_path).empty
    got = oracle.store_versions(tmp_path)
    assert [(r.format, r.manager) for r in got.itertuples()] == [("mall", "m"), ("mall", "m")]
    assert versions(tmp_path) == [
        (1, ts("2026-01-02"), ts("2026-01-04"), "north"),
        (1, ts("2026-01-04"), None, "south"),
    ]


def sale(tid: str, event: str, store: int, qty: int, price: str, discount: str = "0.00") -> dict:
    return {
        "transaction_id": tid,
        "record_type": "sale",
        "event_ts": event,
        "store_id": store,
        "product_id": 1,
        "quantity": qty,
        "unit_price": price,
        "discount": discount,
    }


def test_daily_region_revenue(tmp_path: Path) -> None:
    land(
        tmp_path,
        "store_master",
        A1,
        "stores.jsonl",
        [
            change(1, "2026-01-02T00:00:00Z", "north"),
            change(1, "2026-01-05T00:00:00Z", "central"),
            change(1, "2026-01-08T00:00:00Z", "east"),
            change(2, "2026-01-01T00:00:00Z", "west"),
            change(3, "2026-01-03T00:00:00Z", "west"),
            change(9, "2026-01-01T00:00:00Z", None),  # quarantined: store 9 has no version
        ],
    )
    land(
        tmp_path,
        "pos",
        A1,
        "sales.jsonl",
        [
            sale("t1", "2026-01-01T10:00:00Z", 1, 1, "10.00"),  # before store 1's first version
            sale("t2", "2026-01-05T00:00:00Z", 1, 2, "3.50", "0.50"),  # on valid_from: central
            sale("t3", "2026-01-04T23:59:59Z", 1, 1, "4.00"),  # last second of north
            sale("t4", "2026-01-05T12:00:00Z", 9, 1, "2.25"),  # store 9: no version at all
            sale("t5", "2026-01-05T08:00:00Z", 2, 1, "5.00"),
            sale("t6", "2026-01-05T09:00:00Z", 2, 3, "1.10"),
            sale("t7", "2026-01-05T10:00:00Z", 3, 1, "7.15"),
            sale("t8", "2026-01-08T00:00:00+01:00", 1, 1, "1.00", "0.01"),  # 01-07 23:00 UTC
            sale("t9", "2026-01-05T11:00:00Z", 2, 1, "100.00"),
            {
                "transaction_id": "v9",
                "record_type": "void",
                "corrects_transaction_id": "t9",
                "event_ts": "2026-01-05T11:00:00Z",
                "store_id": 2,
            },
        ],
    )
    assert [p.relative_to(tmp_path).as_posix() for p in oracle.sales_files(tmp_path)] == [
        f"pos/arrival_ts={A1}/sales.jsonl"
    ]
    got = oracle.daily_region_revenue(tmp_path)
    assert list(got.columns) == ["event_date", "region", "stores", "transactions", "revenue"]
    assert [tuple(r) for r in got.itertuples(index=False)] == [
        (date(2026, 1, 1), "unknown", 1, 1, Decimal("10.00")),
        (date(2026, 1, 4), "north", 1, 1, Decimal("4.00")),
        (date(2026, 1, 5), "central", 1, 1, Decimal("6.50")),
        (date(2026, 1, 5), "unknown", 1, 1, Decimal("2.25")),
        (date(2026, 1, 5), "west", 2, 3, Decimal("15.45")),
        (date(2026, 1, 7), "central", 1, 1, Decimal("0.99")),
    ]
    assert [r.as_tuple().exponent for r in got.revenue] == [-2] * 6


def test_empty_landing(tmp_path: Path) -> None:
    assert oracle.store_changes(tmp_path).empty
    assert oracle.store_versions(tmp_path).empty
    assert oracle.store_quarantine(tmp_path).empty
    got = oracle.daily_region_revenue(tmp_path)
    assert got.empty
    assert list(got.columns) == ["event_date", "region", "stores", "transactions", "revenue"]
