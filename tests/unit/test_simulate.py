"""Unit tests of the point-of-sale simulator (``tardy.simulate``): pure Python, no Spark."""

from __future__ import annotations

import json
import re
from collections import Counter, defaultdict
from dataclasses import dataclass, replace
from datetime import UTC, date, datetime, timedelta, timezone
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest

from tardy.ingest.landing import arrival_dir_name, parse_arrival_dir
from tardy.simulate import SimulationConfig, SimulationResult, simulate
from tardy.simulate.config import DEFAULT_START
from tardy.simulate.refunds import REFUND_KINDS
from tardy.simulate.sales import INVALID_REASONS, KINDS, UNIT_PRICE_CENTS
from tardy.simulate.store_changes import STORE_KINDS

SMALL = SimulationConfig(stores=3, days=21, transactions_per_store_day=80)
START = datetime(2026, 1, 1, tzinfo=UTC)

PATH_RE = re.compile(r"(pos|partner|store_master)/arrival_ts=\d{8}T\d{6}Z/[A-Za-z0-9._-]+\.jsonl")
TS_RE = re.compile(r"\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}Z")
MONEY_RE = re.compile(r'"unit_price":\d+\.\d{2},"discount":\d+\.\d{2},')
KEYS = [
    "transaction_id",
    "record_type",
    "store_id",
    "product_id",
    "quantity",
    "unit_price",
    "discount",
    "event_ts",
]
SLOT = timedelta(hours=6)


@dataclass(frozen=True)
class Landed:
    """One landed line, valid or not."""

    path: str  # relative to the landing root
    source: str
    arrival: datetime
    line_number: int
    line: str
    obj: dict[str, Any] | None  # None: not a JSON object
    invalid: str | None  # the invalid-row reason, judged independently of the simulator

    @property
    def event_ts(self) -> datetime:
        assert self.obj is not None
        return _ts(self.obj["event_ts"])

    @property
    def root(self) -> str:
        """The sale's transaction id this record belongs to."""
        assert self.obj is not None
        return self.obj.get("corrects_transaction_id") or self.obj["transaction_id"]

    @property
    def net(self) -> Decimal:
        assert self.obj is not None
        return self.obj["quantity"] * self.obj["unit_price"] - self.obj["discount"]


def _ts(text: str) -> datetime:
    return datetime.strptime(text, "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=UTC)


def _invalid_reason(line: str, arrival: datetime) -> tuple[dict[str, Any] | None, str | None]:
    try:
        obj = json.loads(line, parse_float=Decimal)
    except json.JSONDecodeError:
        return None, "malformed_json"
    if obj["transaction_id"] is None:
        return obj, "null_transaction_id"
    if not TS_RE.fullmatch(obj["event_ts"]):
        return obj, "unparseable_event_ts"
    if obj["quantity"] < 1:
        return obj, "negative_quantity"
    if _ts(obj["event_ts"]) > arrival:
        return obj, "future_event"
    return obj, None


def _snapshot(root: Path) -> dict[str, bytes]:
    return {p.relative_to(root).as_posix(): p.read_bytes() for p in root.rglob("*") if p.is_file()}


def _load(root: Path) -> list[Landed]:
    """The sales lines (sources ``pos`` and ``partner``; ``store_master`` is not sales)."""
    landed = []
    for rel in sorted(_snapshot(root)):
        source, folder, _ = rel.split("/")
        if source == "store_master":
            continue
        arrival = parse_arrival_dir(folder)
        text = (root / rel).read_text(encoding="utf-8")
        for number, line in enumerate(text.split("\n")[:-1], 1):
            obj, invalid = _invalid_reason(line, arrival)
            landed.append(Landed(rel, source, arrival, number, line, obj, invalid))
    return landed


@dataclass
class Run:
    root: Path
    result: SimulationResult
    files: dict[str, bytes]
    landed: list[Landed]

    @property
    def valid(self) -> list[Landed]:
        return [r for r in self.landed if r.invalid is None]

    def of_type(self, record_type: str, source: str = "pos") -> list[Landed]:
        return [r for r in self.valid if r.source == source and r.obj["record_type"] == record_type]

    def first_sales(self) -> dict[str, Landed]:
        """Each pos sale at its first arrival."""
        first: dict[str, Landed] = {}
        for sale in sorted(self.of_type("sale"), key=lambda r: (r.arrival, r.line_number)):
            first.setdefault(sale.obj["transaction_id"], sale)
        return first


@pytest.fixture(scope="module")
def small(tmp_path_factory: pytest.TempPathFactory) -> Run:
    root = tmp_path_factory.mktemp("landing")
    result = simulate(SMALL, root)
    return Run(root, result, _snapshot(root), _load(root))


def test_same_config_gives_identical_files(small: Run, tmp_path: Path) -> None:
    again = simulate(SMALL, tmp_path / "again")
    assert _snapshot(tmp_path / "again") == small.files
    assert again == small.result
    other = simulate(replace(SMALL, seed=7), tmp_path / "other")
    assert _snapshot(tmp_path / "other") != small.files
    assert other.records != small.result.records


def test_result_totals(small: Run) -> None:
    result = small.result
    assert result.files_written == len(small.files) > 21 * 4 * 0.9
    assert result.files_existing == 0
    store_lines = sum(
        data.count(b"\n") for path, data in small.files.items() if path.startswith("store_master/")
    )
    assert store_lines > 0
    assert result.records == len(small.landed) + store_lines
    # Every feed's kinds are counted, a feed switched off (refunds, by default) at 0.
    assert set(result.counts) == set(KINDS) | set(STORE_KINDS) | set(REFUND_KINDS)
    assert not any(result.counts[k] for k in REFUND_KINDS)
    sale_kinds = ("on_time", "late_hours", "late_days", "late_weeks")
    sales = sum(result.counts[k] for k in sale_kinds)
    other = ("duplicate", "correction", "void", "partner_resend")
    invalid = sum(result.counts[f"invalid_{r}"] for r in INVALID_REASONS)
    assert len(small.landed) == sales + sum(result.counts[k] for k in other) + invalid
    # Every store record has exactly one kind, but store_out_of_order (a property).
    assert store_lines == sum(result.counts[k] for k in STORE_KINDS if k != "store_out_of_order")
    assert result.first_day == date(2026, 1, 1)
    assert result.last_day == date(2026, 1, 21)
    as_dict = json.loads(json.dumps(result.as_dict()))
    assert as_dict["first_day"] == "2026-01-01"
    assert as_dict["last_day"] == "2026-01-21"
    assert as_dict["counts"] == result.counts


def test_cutoff_then_rest_equals_single_run(small: Run, tmp_path: Path) -> None:
    through = START + timedelta(days=10, hours=12)
    first = simulate(SMALL, tmp_path, through=through)
    assert 0 < first.files_written < len(small.files)
    written = _snapshot(tmp_path)
    assert all(parse_arrival_dir(path.split("/")[1]) <= through for path in written)
    assert all(small.files[path] == data for path, data in written.items())
    assert first.records == sum(data.count(b"\n") for data in written.values())

    rest = simulate(SMALL, tmp_path)
    assert rest.files_existing == first.files_written
    assert rest.files_written == len(small.files) - first.files_written
    assert rest.records == small.result.records
    assert rest.counts == small.result.counts
    assert _snapshot(tmp_path) == small.files


def test_rerun_is_idempotent(tmp_path: Path) -> None:
    config = replace(SMALL, days=8)
    first = simulate(config, tmp_path)
    mtimes = {p: p.stat().st_mtime_ns for p in tmp_path.rglob("*.jsonl")}
    second = simulate(config, tmp_path)
    assert second.files_written == 0
    assert second.files_existing == first.files_written == len(mtimes)
    assert second.records == first.records
    assert second.counts == first.counts
    assert {p: p.stat().st_mtime_ns for p in tmp_path.rglob("*.jsonl")} == mtimes
    assert not [p for p in tmp_path.rglob("*") if p.is_file() and p.suffix != ".jsonl"]


def test_conflicting_content_raises(tmp_path: Path) -> None:
    config = replace(SMALL, days=3)
    simulate(config, tmp_path)
    victim = sorted(tmp_path.rglob("*.jsonl"))[2]
    victim.write_bytes(b"edited by hand\n")
    with pytest.raises(FileExistsError, match="already exists with different content"):
        simulate(config, tmp_path)
    assert victim.read_bytes() == b"edited by hand\n"
    with pytest.raises(FileExistsError):
        simulate(replace(config, seed=1), tmp_path)


def test_paths_and_records_follow_the_contract(small: Run) -> None:
    for path in small.files:
        assert PATH_RE.fullmatch(path), path
        assert arrival_dir_name(parse_arrival_dir(path.split("/")[1])) == path.split("/")[1]
    for data in small.files.values():
        assert data.endswith(b"\n") and b"\r" not in data and b"\n\n" not in data

    start = datetime.combine(SMALL.start, datetime.min.time(), UTC)
    invalid = Counter(r.invalid for r in small.landed if r.invalid)
    assert {f"invalid_{k}": v for k, v in invalid.items()} == {
        k: v for k, v in small.result.counts.items() if k.startswith("invalid_") and v
    }
    for rec in small.valid:
        obj = rec.obj
        assert obj is not None
        keys = [*KEYS, "corrects_transaction_id"] if "corrects_transaction_id" in obj else KEYS
        assert list(obj) == keys, rec.line
        assert MONEY_RE.search(rec.line), rec.line
        assert isinstance(obj["transaction_id"], str)
        assert obj["record_type"] in ("sale", "correction", "void")
        for key in ("store_id", "product_id", "quantity"):
            assert type(obj[key]) is int
        assert 1 <= obj["store_id"] <= SMALL.stores
        assert 1 <= obj["product_id"] <= 40
        assert 1 <= obj["quantity"] <= 5
        assert isinstance(obj["unit_price"], Decimal) and obj["unit_price"] > 0
        assert isinstance(obj["discount"], Decimal)
        assert 0 <= obj["discount"] <= obj["quantity"] * obj["unit_price"]
        assert start <= rec.event_ts <= rec.arrival
        if obj["record_type"] == "sale":
            assert "corrects_transaction_id" not in obj
            assert re.fullmatch(r"S\d{3}-\d{8}-\d{5}", obj["transaction_id"])
            assert obj["unit_price"] * 100 == UNIT_PRICE_CENTS[obj["product_id"]]
            assert obj["discount"] <= obj["quantity"] * obj["unit_price"] / 5
            assert obj["transaction_id"][5:13] == obj["event_ts"][:10].replace("-", "")
            assert 8 <= rec.event_ts.hour < 22
        else:
            assert re.fullmatch(r"S\d{3}-\d{8}-\d{5}(-C[12]|-V)?", obj["transaction_id"])
    for rec in small.landed:
        if rec.invalid in ("unparseable_event_ts", "negative_quantity", "future_event"):
            assert rec.obj is not None and rec.obj["transaction_id"].endswith("-X")
        elif rec.invalid == "malformed_json":
            assert rec.line.startswith('{"transaction')


def test_kinds_appear_at_their_documented_rates(small: Run) -> None:
    counts = small.result.counts
    first = small.first_sales()
    sales = len(first)
    assert 0.8 * 21 * 3 * 80 < sales < 1.2 * 21 * 3 * 80
    assert sales == sum(counts[k] for k in ("on_time", "late_hours", "late_days", "late_weeks"))

    # Lateness judged from the files: first arrival against the first slot after the event.
    judged: Counter[str] = Counter()
    for sale in first.values():
        event = sale.event_ts
        normal = datetime(event.year, event.month, event.day, tzinfo=UTC) + SLOT * (
            event.hour // 6 + 1
        )
        late = sale.arrival - normal
        if late == timedelta(0):
            judged["on_time"] += 1
        elif SLOT <= late <= 2 * SLOT:
            judged["late_hours"] += 1
        elif timedelta(days=1) <= late <= timedelta(days=3):
            judged["late_days"] += 1
        else:
            assert timedelta(days=7) <= late <= timedelta(days=28), sale.line
            judged["late_weeks"] += 1
    for kind in ("late_hours", "late_days", "late_weeks"):
        assert judged[kind] == counts[kind]

    expected = {
        "late_hours": SMALL.late_hours_rate * sales,
        "late_days": SMALL.late_days_rate * sales,
        "late_weeks": SMALL.late_weeks_rate * sales,
        "duplicate": SMALL.duplicate_rate * sales,
        "correction": SMALL.correction_rate * sales * 1.1,
        "date_move": SMALL.date_move_rate * SMALL.correction_rate * sales * 1.1,
        "void": SMALL.void_rate * sales,
    }
    for kind, mean in expected.items():
        assert 0.5 * mean <= counts[kind] <= 1.6 * mean, (kind, counts[kind], mean)
    assert 0 < counts["second_correction"] <= 0.3 * counts["correction"]

    invalid = {reason: counts[f"invalid_{reason}"] for reason in INVALID_REASONS}
    assert 0.5 * SMALL.invalid_rate * sales <= sum(invalid.values())
    assert sum(invalid.values()) <= 1.6 * SMALL.invalid_rate * sales
    assert all(invalid.values()), invalid
    assert invalid["malformed_json"] < max(v for k, v in invalid.items() if k != "malformed_json")

    pos_files = sum(1 for path in small.files if path.startswith("pos/"))
    assert 1 <= counts["out_of_order_batch"] <= max(3, 0.1 * pos_files)
    assert counts["partner_resend"] == len(small.of_type("sale", "partner"))


def test_duplicates_repeat_the_sale_line_later(small: Run) -> None:
    first = small.first_sales()
    sales = small.of_type("sale")
    assert len(sales) - len(first) == small.result.counts["duplicate"]
    for sale in sales:
        original = first[sale.obj["transaction_id"]]
        if sale is not original:
            assert sale.line == original.line
            assert SLOT <= sale.arrival - original.arrival <= timedelta(days=3)


def test_corrections_change_the_amount_and_some_move_the_date(small: Run) -> None:
    first = small.first_sales()
    by_root: defaultdict[str, list[Landed]] = defaultdict(list)
    for correction in small.of_type("correction"):
        by_root[correction.root].append(correction)
    assert sum(map(len, by_root.values())) == small.result.counts["correction"]
    own_ids = 0
    moved = 0
    for root, corrections in by_root.items():
        sale = first[root]
        corrections.sort(key=lambda r: r.arrival)
        assert len(corrections) <= 2
        previous = sale
        for correction in corrections:
            obj = correction.obj
            assert obj["store_id"] == sale.obj["store_id"]
            assert obj["product_id"] == sale.obj["product_id"]
            assert correction.net != previous.net
            assert correction.arrival - sale.arrival >= timedelta(days=1)
            assert correction.event_ts < correction.arrival
            if correction.event_ts.date() != previous.event_ts.date():
                moved += 1
                assert correction.event_ts.time() == previous.event_ts.time()
                assert 1 <= abs((correction.event_ts - previous.event_ts).days) <= 3
                assert correction.event_ts.date() >= SMALL.start
            if "corrects_transaction_id" in obj:
                own_ids += 1
                assert obj["transaction_id"] != root
            previous = correction
    assert moved == small.result.counts["date_move"] > 0
    assert 0 < own_ids < 0.4 * small.result.counts["correction"]


def test_an_older_version_is_delivered_after_a_newer_one(small: Run, tmp_path: Path) -> None:
    # The first corrected sale of the run races: its first correction's batch is delivered
    # out of order, after the batch of its second correction.
    def generation_order(root: str) -> tuple[str, str, str]:
        store, day, number = root.split("-")
        return day, store, number

    corrections = small.of_type("correction")
    racer = min({c.root for c in corrections}, key=generation_order)
    older, newer = sorted((c for c in corrections if c.root == racer), key=lambda c: c.arrival)
    assert older.arrival < newer.arrival
    simulate(SMALL, tmp_path, through=newer.arrival)
    assert (tmp_path / newer.path).exists()
    assert not (tmp_path / older.path).exists()
    simulate(SMALL, tmp_path, through=newer.arrival + timedelta(days=2))
    assert (tmp_path / older.path).read_bytes() == small.files[older.path]


def test_out_of_order_batches_are_withheld_until_delivered(tmp_path: Path) -> None:
    config = replace(SMALL, out_of_order_rate=0.3)
    full = simulate(config, tmp_path / "full")
    everything = _snapshot(tmp_path / "full")
    pos = [path for path in everything if path.startswith("pos/")]
    assert 0.15 * len(pos) <= full.counts["out_of_order_batch"] <= 0.45 * len(pos)

    through = START + timedelta(days=9, hours=1)
    cut = simulate(config, tmp_path / "cut", through=through)
    written = _snapshot(tmp_path / "cut")
    withheld = [
        path
        for path in everything
        if parse_arrival_dir(path.split("/")[1]) <= through and path not in written
    ]
    assert withheld
    for path in withheld:
        assert path.startswith("pos/")
        assert through - parse_arrival_dir(path.split("/")[1]) < timedelta(days=2)
    assert cut.files_written == len(written)

    later = simulate(config, tmp_path / "cut", through=through + timedelta(days=2))
    assert later.files_existing == len(written)
    assert all(path in _snapshot(tmp_path / "cut") for path in withheld)


def test_voids_reference_existing_sales(small: Run) -> None:
    first = small.first_sales()
    voids = small.of_type("void")
    assert len(voids) == small.result.counts["void"] > 0
    corrected = {c.root for c in small.of_type("correction")}
    for void in voids:
        sale = first[void.root]
        assert void.root not in corrected
        fields = ("store_id", "product_id", "quantity", "unit_price", "discount", "event_ts")
        assert [void.obj[k] for k in fields] == [sale.obj[k] for k in fields]
        assert SLOT <= void.arrival - sale.arrival <= timedelta(days=10)
    assert any("corrects_transaction_id" in v.obj for v in voids)
    assert any("corrects_transaction_id" not in v.obj for v in voids)


def test_partner_resends_the_first_week(small: Run, tmp_path: Path) -> None:
    partner_files = [path for path in small.files if path.startswith("partner/")]
    assert partner_files == [
        "partner/arrival_ts=20260111T090000Z/partner-resend-week-2026-01-01.jsonl"
    ]
    resent = [r.line for r in small.landed if r.source == "partner"]
    week_sales = [
        sale.line for sale in small.first_sales().values() if sale.event_ts.day <= 7
    ]  # event dates 2026-01-01 .. 2026-01-07
    assert sorted(resent) == sorted(week_sales)
    assert len(resent) == small.result.counts["partner_resend"]
    # Some of them were corrected or voided before the resend arrived.
    amended = {r.root: r.arrival for r in small.of_type("correction") + small.of_type("void")}
    partner_arrival = START + timedelta(days=10, hours=9)
    resent_ids = {json.loads(line)["transaction_id"] for line in resent}
    assert any(amended.get(txn, partner_arrival) < partner_arrival for txn in resent_ids)

    none = simulate(replace(SMALL, days=13), tmp_path / "short")
    assert none.counts["partner_resend"] == 0
    assert not (tmp_path / "short" / "partner").exists()
    off = simulate(replace(SMALL, days=14, partner_resend=False), tmp_path / "off")
    assert off.counts["partner_resend"] == 0
    assert not (tmp_path / "off" / "partner").exists()


def test_arrival_dir_round_trip() -> None:
    ts = datetime(2026, 1, 2, 6, 0, tzinfo=UTC)
    assert arrival_dir_name(ts) == "arrival_ts=20260102T060000Z"
    assert parse_arrival_dir("arrival_ts=20260102T060000Z") == ts
    assert parse_arrival_dir("arrival_ts=20260102T060000Z").tzinfo is UTC
    cet = datetime(2026, 3, 1, 1, 2, 3, tzinfo=timezone(timedelta(hours=1)))
    assert arrival_dir_name(cet) == "arrival_ts=20260301T000203Z"
    assert parse_arrival_dir(arrival_dir_name(cet)) == cet
    for garbage in (
        "",
        "arrival_ts=2026-01-02T06:00:00Z",
        "arrival_ts=20260102T060000",
        "arrival_date=20260102T060000Z",
        "arrival_ts=20261302T060000Z",
        "arrival_ts=20260102T250000Z",
        "arrival_ts=20260102T060000Z/pos-batch.jsonl",
    ):
        with pytest.raises(ValueError, match="malformed arrival folder name"):
            parse_arrival_dir(garbage)
    with pytest.raises(ValueError, match="timezone-aware"):
        arrival_dir_name(datetime(2026, 1, 2, 6))


def test_bad_arguments_are_rejected(tmp_path: Path) -> None:
    assert SimulationConfig().start == DEFAULT_START
    with pytest.raises(ValueError, match="timezone-aware"):
        simulate(SMALL, tmp_path, through=datetime(2026, 1, 5))
    for bad in (
        {"stores": 0},
        {"days": -1},
        {"late_hours_rate": 1.5},
        {"void_rate": -0.1},
        {"late_hours_rate": 0.6, "late_days_rate": 0.6},
    ):
        with pytest.raises(ValueError):
            SimulationConfig(**bad)
    early = simulate(SMALL, tmp_path, through=START - timedelta(hours=1))
    assert (early.files_written, early.records) == (0, 0)
