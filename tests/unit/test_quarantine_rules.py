"""The steward's rules without Spark: short ids and their resolution, ``--set`` values typed
by the source's declaration, the steward record (the original's text kept, its provenance),
where it lands, an interrupted fix found again, and the counts per source and reason."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path

import pytest

from tardy.errors import InputError
from tardy.project.sources import Source
from tardy.quarantine import fixes
from tardy.quarantine.listing import Listing, Quarantined, counts, resolve, short_ids
from tardy.quarantine.reviews import Decision, Review

SHA_A = "ab12cd" + "0" * 58
SHA_B = "ab12ce" + "1" * 58
SHA_C = "ab12cd" + "2" * 58  # shares SHA_A's first six characters
SOURCE = Source(
    name="pos",
    bronze="bronze.pos_events",
    record={
        "transaction_id": "string",
        "store_id": "integer",
        "unit_price": "number",
        "event_ts": "timestamp",
        "is_test": "boolean",
    },
    event_time="event_ts",
    key=("transaction_id",),
    key_index=False,
    rules="invalid_reason",
    lateness="daily",
)
RAW = '{"transaction_id":"t-1","store_id":"x","unit_price":1.50,"event_ts":"2026-01-02T10:00:00Z"}'


def record(sha: str, line: int, review: Review | None = None, **more: object) -> Quarantined:
    decision = (
        Decision("rv-1", f"{sha}:{line}", "pos", review, "why", "ana", datetime(2026, 1, 3))
        if review
        else None
    )
    fields: dict[str, object] = {
        "source": "pos",
        "model": "silver.sales_quarantine",
        "reason": "invalid_store_id",
        "day": "2026-01-02",
        "arrival_ts": "2026-01-02T12:00:00",
        "age_hours": 10.0,
        "raw_record": RAW,
        "source_file": "pos/arrival_ts=20260102T120000Z/pos-batch.jsonl",
    } | more
    return Quarantined(record_id=f"{sha}:{line}", decision=decision, **fields)  # type: ignore[arg-type]


def test_short_ids_are_the_shortest_unique_prefix_and_resolve_back() -> None:
    found = [record(SHA_A, 7), record(SHA_B, 7), record(SHA_C, 7), record(SHA_C, 8)]
    ids = short_ids(found)
    assert ids[f"{SHA_A}:7"] == "ab12cd0:7" and ids[f"{SHA_C}:7"] == "ab12cd2:7"
    assert ids[f"{SHA_B}:7"] == "ab12ce:7" and ids[f"{SHA_C}:8"] == "ab12cd:8"
    for record_id, short in ids.items():
        assert resolve(found, short).record_id == record_id
        assert resolve(found, record_id).record_id == record_id
    with pytest.raises(InputError, match="names 2 records"):
        resolve(found, "ab12cd:7")
    with pytest.raises(InputError, match="no quarantined record"):
        resolve(found, "ab12cd:9")
    for bad in ("ab12:7", "ab12cd", "ab12cd:x", ""):
        with pytest.raises(InputError, match="not a record id"):
            resolve(found, bad)


def test_set_values_are_typed_by_the_declaration() -> None:
    values = fixes.parse_sets(
        SOURCE, ["store_id= 12", "unit_price=2.50", "is_test=false", "transaction_id=t 9"]
    )
    assert values == {
        "store_id": "12",
        "unit_price": "2.50",
        "is_test": False,
        "transaction_id": "t 9",
    }
    assert isinstance(values["store_id"], fixes._Number)
    for bad, problem in (
        ("store_id=1.5", "not an integer"),
        ("store_id=twelve", "not an integer"),
        ("unit_price=1,50", "not a JSON number"),
        ("is_test=yes", "not true or false"),
        ("colour=red", "has no field 'colour'"),
        ("store_id", "expected FIELD=VALUE"),
    ):
        with pytest.raises(InputError, match=problem):
            fixes.parse_sets(SOURCE, [bad])
    with pytest.raises(InputError, match="at least one"):
        fixes.parse_sets(SOURCE, [])


def test_the_steward_record_keeps_the_original_and_says_where_it_comes_from() -> None:
    original = record(SHA_A, 7)
    provenance = {"steward": "ana", "original": original.record_id, "reason": "typo"}
    line = fixes.fixed_line(original, fixes.parse_sets(SOURCE, ["store_id=12"]), provenance)
    assert "\n" not in line
    assert '"unit_price":1.50' in line  # the original's number text, not 1.5
    assert '"store_id":12' in line  # an integer now, no longer the string "x"
    parsed = json.loads(line)
    assert parsed["transaction_id"] == "t-1" and parsed["event_ts"] == "2026-01-02T10:00:00Z"
    assert parsed[fixes.PROVENANCE] == provenance
    # Fixing the fix replaces its provenance; an unparseable original keeps only what is set.
    again = record(SHA_A, 7, raw_record=line)
    second = json.loads(fixes.fixed_line(again, {"store_id": fixes._Number("13")}, {"n": 2}))
    assert second["store_id"] == 13 and second[fixes.PROVENANCE] == {"n": 2}
    broken = record(SHA_A, 7, raw_record='{"transaction_id": "t-1", store')
    assert json.loads(fixes.fixed_line(broken, {"transaction_id": "t-1"}, {})) == {
        "transaction_id": "t-1",
        fixes.PROVENANCE: {},
    }


def test_a_fix_lands_in_its_source_folder_at_the_feeds_clock(tmp_path: Path) -> None:
    original = record(SHA_A, 7)
    clock = datetime(2026, 1, 31, 18, 0, 5)  # naive UTC, as Spark returns it
    planned = fixes.plan_fix(tmp_path, original, '{"a":1}', clock)
    assert planned.arrival == clock.replace(tzinfo=UTC)
    folder, name = planned.source_file.rsplit("/", 1)
    assert folder == "pos/arrival_ts=20260131T180005Z"
    assert name.startswith(f"steward-{SHA_A[:20]}-7-") and name.endswith(".jsonl")
    assert planned.path == tmp_path / planned.source_file
    assert fixes.pending(tmp_path, original, set()) is None
    fixes.write(planned)
    assert planned.path.read_text() == '{"a":1}\n'
    assert [p.name for p in planned.path.parent.iterdir()] == [name]  # no temporary left
    # A landed file no decision names is pending; once a decision names it, it is not.
    assert fixes.pending(tmp_path, original, set()) == planned.path
    assert fixes.pending(tmp_path, original, {planned.source_file}) is None
    assert fixes.pending(tmp_path, record(SHA_A, 8), set()) is None  # another line


def test_counts_per_source_and_reason_and_the_listings_filters() -> None:
    found = [
        record(SHA_A, 1, age_hours=5.0),
        record(SHA_A, 2, age_hours=80.0),
        record(SHA_A, 3, Review.REJECTED, age_hours=900.0),
        record(SHA_A, 4, Review.FIXED, reason="negative_quantity"),
        record(SHA_B, 1, source="partner", age_hours=None),
    ]
    assert [
        (c.source, c.reason, c.open, c.reviewed, c.oldest_open_hours) for c in counts(found)
    ] == [
        ("partner", "invalid_store_id", 1, 0, None),
        ("pos", "invalid_store_id", 2, 1, 80.0),
        ("pos", "negative_quantity", 0, 1, None),
    ]
    listing = Listing(found, datetime(2026, 1, 4))
    assert len(listing.select()) == 5
    assert [r.record_id for r in listing.select(open_only=True, source="pos")] == [
        f"{SHA_A}:1",
        f"{SHA_A}:2",
    ]
    assert [r.line for r in listing.select(reason="negative_quantity")] == [4]
