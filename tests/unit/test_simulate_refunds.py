"""Unit tests of the card refunds feed (``tardy.simulate.refunds``): pure Python, no Spark.

Each property of the module's docstring is checked on the files ``simulate`` writes, read
back as JSON lines with the arrival of their folder; nothing here calls the module's helpers.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, replace
from datetime import UTC, datetime, time, timedelta
from decimal import Decimal
from pathlib import Path

import pytest

from tardy.ingest.landing import parse_arrival_dir
from tardy.simulate import SimulationConfig, simulate
from tardy.simulate.refunds import REFUND_KINDS

# Ten refunds per store-day: enough refunds (about 1,500) for the shares to show.
CONFIG = SimulationConfig(
    stores=4, days=40, transactions_per_store_day=100, refunds=True, refund_rate=0.1
)
REFUND_ID = re.compile(r"F(\d{3})-(\d{8})-(\d{3})(-C|-X)?")
SALE_ID = re.compile(r"S(\d{3})-(\d{8})-(\d{5})")


@dataclass(frozen=True)
class Line:
    arrival: datetime
    record: dict

    @property
    def ts(self) -> datetime:
        return datetime.fromisoformat(self.record["refund_ts"].replace("Z", "+00:00"))


def landed(landing: Path) -> list[Line]:
    out = []
    for path in sorted((landing / "payments").glob("arrival_ts=*/*.jsonl")):
        arrival = parse_arrival_dir(path.parent.name)
        out += [Line(arrival, json.loads(text)) for text in path.read_text().splitlines()]
    return out


@pytest.fixture(scope="module")
def feed(tmp_path_factory: pytest.TempPathFactory):
    landing = tmp_path_factory.mktemp("refunds") / "landing"
    result = simulate(CONFIG, landing)
    return result, landed(landing), landing


def first_day() -> datetime:
    return datetime.combine(CONFIG.start, time(0), UTC)


def test_off_by_default_and_on_it_changes_no_other_source(tmp_path: Path) -> None:
    off = replace(CONFIG, refunds=False)
    assert SimulationConfig().refunds is False
    simulate(off, tmp_path / "off")
    simulate(CONFIG, tmp_path / "on")
    assert not (tmp_path / "off" / "payments").exists()
    assert (tmp_path / "on" / "payments").is_dir()
    for path in (tmp_path / "off").rglob("*.jsonl"):
        twin = tmp_path / "on" / path.relative_to(tmp_path / "off")
        assert twin.read_bytes() == path.read_bytes(), path
    on_files = {
        p.relative_to(tmp_path / "on")
        for p in (tmp_path / "on").rglob("*.jsonl")
        if "payments" not in p.parts
    }
    assert on_files == {
        p.relative_to(tmp_path / "off") for p in (tmp_path / "off").rglob("*.jsonl")
    }


def test_deterministic(feed, tmp_path: Path) -> None:
    _, lines, landing = feed
    simulate(CONFIG, tmp_path)
    assert landed(tmp_path) == lines
    files = sorted(p.relative_to(landing) for p in (landing / "payments").rglob("*"))
    assert files == sorted(p.relative_to(tmp_path) for p in (tmp_path / "payments").rglob("*"))


def test_every_kind_occurs_and_every_line_is_counted(feed) -> None:
    result, lines, _ = feed
    counts = {kind: result.counts[kind] for kind in REFUND_KINDS}
    assert all(counts.values()), counts
    sent = counts["refund_on_time"] + counts["refund_late_days"] + counts["refund_late_weeks"]
    originals = [x for x in lines if REFUND_ID.fullmatch(x.record["refund_id"]).group(4) is None]
    assert len(originals) == sent + counts["refund_duplicate"]
    assert len(lines) == (
        sent
        + counts["refund_duplicate"]
        + counts["refund_correction"]
        + counts["refund_invalid_amount"]
    )
    # Shares of the docstring's table, loosely: draws are random per refund, and a record
    # that would arrive after the last day's 18:00 slot is not sent (late weeks most often).
    assert 0.03 < counts["refund_late_weeks"] / sent < 0.15
    assert 0.13 < counts["refund_late_days"] / sent < 0.27
    assert 0.05 < counts["refund_duplicate"] / sent < 0.14
    assert 0.06 < counts["refund_correction"] / sent < 0.14
    assert counts["refund_date_move"] < counts["refund_correction"]


def test_each_refund_follows_its_sale_and_arrives_after_it(feed) -> None:
    _, lines, _ = feed
    last_day = CONFIG.start + timedelta(days=CONFIG.days - 1)
    last_arrival = datetime.combine(last_day, time(18), UTC)
    highest = int(CONFIG.transactions_per_store_day * 0.8)
    for line in lines:
        record = line.record
        ident = REFUND_ID.fullmatch(record["refund_id"])
        sale = SALE_ID.fullmatch(record["transaction_id"])
        assert ident and sale, record
        store, stamp = int(ident.group(1)), ident.group(2)
        assert record["store_id"] == store == int(sale.group(1)) and sale.group(2) == stamp
        assert 1 <= int(sale.group(3)) <= highest or sale.group(3) == "99999"
        sale_day = datetime.strptime(stamp, "%Y%m%d").date()
        assert sale_day < line.ts.date() <= last_day, record
        assert line.ts < line.arrival <= last_arrival, record
        if ident.group(4) != "-C":  # a correction may move the refund to another hour's day
            assert time(8) <= line.ts.time() < time(22)
        assert (ident.group(4) == "-C") == ("corrects_refund_id" in record)


def test_amounts_corrections_and_invalid_lines(feed) -> None:
    _, lines, _ = feed
    by_id: dict[str, Line] = {}  # each id's first arrival (a duplicate is resent later)
    for line in sorted(lines, key=lambda x: x.arrival):
        by_id.setdefault(line.record["refund_id"], line)
    for line in lines:
        record, suffix = line.record, REFUND_ID.fullmatch(line.record["refund_id"]).group(4)
        amount = record["amount"]
        if suffix == "-X":
            original = by_id[record["refund_id"][:-2]].record
            assert amount == "n/a" or Decimal(str(amount)) == -Decimal(str(original["amount"]))
            continue
        assert Decimal("0.50") <= Decimal(str(amount)) <= Decimal("2.00")
        if suffix == "-C":
            original = by_id[record["corrects_refund_id"]]
            assert record["refund_id"] == original.record["refund_id"] + "-C"
            assert record["transaction_id"] == original.record["transaction_id"]
            assert amount != original.record["amount"]
            assert original.arrival < line.arrival
            assert abs((line.ts - original.ts).days) <= 2
    moved = [
        x
        for x in lines
        if "corrects_refund_id" in x.record
        and x.ts.date() != by_id[x.record["corrects_refund_id"]].ts.date()
    ]
    assert moved  # some corrections move the refund to another day
    unknown = [x for x in lines if x.record["transaction_id"].endswith("-99999")]
    assert unknown and all(first_day() < x.ts for x in unknown)
