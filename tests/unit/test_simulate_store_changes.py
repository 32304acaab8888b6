"""Unit tests of the simulator's store changes (source ``store_master``): pure Python, no Spark.

Each kind is judged from the landed files, independently of the simulator's own counts."""

from __future__ import annotations

import json
from collections import Counter
from dataclasses import dataclass, replace
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from tardy.ingest.landing import parse_arrival_dir
from tardy.simulate import SimulationConfig, simulate
from tardy.simulate.store_changes import STORE_FORMATS, STORE_KINDS, STORE_REGIONS

CONFIG = SimulationConfig(stores=5, days=60)
START = datetime(2026, 1, 1, tzinfo=UTC)
LAST_ARRIVAL = START + timedelta(days=CONFIG.days - 1, hours=18)
KEYS = ["store_id", "effective_ts", "region", "format", "manager", "change_id", "is_correction"]
SLOT = timedelta(hours=6)


@dataclass(frozen=True)
class Change:
    path: str
    arrival: datetime
    line: str
    obj: dict[str, Any]

    @property
    def effective(self) -> datetime:
        return datetime.strptime(self.obj["effective_ts"], "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=UTC)

    @property
    def key(self) -> tuple[int, str]:
        return self.obj["store_id"], self.obj["effective_ts"]


def _snapshot(root: Path) -> dict[str, bytes]:
    return {p.relative_to(root).as_posix(): p.read_bytes() for p in root.rglob("*") if p.is_file()}


def _invalid(obj: dict[str, Any]) -> str | None:
    """The spec's reason for a store record, judged from the JSON alone."""
    store = obj.get("store_id")
    if type(store) is not int or store < 1:
        return "unknown_store"
    if not obj.get("effective_ts"):
        return "missing_effective_ts"
    return None


@dataclass
class Run:
    root: Path
    counts: dict[str, int]
    files: dict[str, bytes]
    changes: list[Change]  # every store_master line, in arrival then file order

    @property
    def valid(self) -> list[Change]:
        return [c for c in self.changes if _invalid(c.obj) is None]


def _run(config: SimulationConfig, root: Path) -> Run:
    result = simulate(config, root)
    files = _snapshot(root)
    changes = []
    for path in sorted(p for p in files if p.startswith("store_master/")):
        arrival = parse_arrival_dir(path.split("/")[1])
        for line in files[path].decode().split("\n")[:-1]:
            changes.append(Change(path, arrival, line, json.loads(line)))
    return Run(root, result.counts, files, changes)


@pytest.fixture(scope="module")
def run(tmp_path_factory: pytest.TempPathFactory) -> Run:
    return _run(CONFIG, tmp_path_factory.mktemp("store_landing"))


def test_every_store_kind_is_present(run: Run) -> None:
    store_counts = {k: run.counts[k] for k in STORE_KINDS}
    assert all(store_counts.values()), store_counts
    assert run.counts["store_opening"] == CONFIG.stores
    changes = sum(run.counts[k] for k in ("store_on_time", "store_late_days", "store_late_weeks"))
    # About one change per store per 10 days.
    assert (
        0.5 * CONFIG.stores * CONFIG.days / 10 <= changes <= 1.5 * CONFIG.stores * CONFIG.days / 10
    )
    assert len(run.changes) == sum(v for k, v in store_counts.items() if k != "store_out_of_order")


def test_files_and_records_follow_the_contract(run: Run) -> None:
    paths = [p for p in run.files if p.startswith("store_master/")]
    assert paths and all(p.endswith("/store-changes.jsonl") for p in paths)
    for path in paths:
        arrival = parse_arrival_dir(path.split("/")[1])
        assert START <= arrival <= LAST_ARRIVAL
        assert arrival.hour % 6 == 0 and arrival.minute == arrival.second == 0
    for change in run.changes:
        obj = change.obj
        keys = [k for k in KEYS if k != "effective_ts"] if "effective_ts" not in obj else KEYS
        assert list(obj) == keys, change.line
        assert change.line == json.dumps(obj, separators=(",", ":"))
        assert obj["region"] in STORE_REGIONS and obj["format"] in STORE_FORMATS
        assert isinstance(obj["manager"], str) and obj["manager"]
        assert obj["is_correction"] in (True, False)
    for change in run.valid:
        assert 1 <= change.obj["store_id"] <= CONFIG.stores
        assert change.effective.minute == change.effective.second == 0
        assert START <= change.effective <= change.arrival <= LAST_ARRIVAL
        assert change.obj["change_id"].startswith(f"C{change.obj['store_id']:03d}-")


def test_openings_arrive_on_time_in_the_first_slot(run: Run) -> None:
    openings = [c for c in run.changes if c.obj["change_id"].endswith("-0")]
    assert sorted(c.obj["store_id"] for c in openings) == list(range(1, CONFIG.stores + 1))
    for opening in openings:
        assert opening.effective == opening.arrival == START
        assert opening.obj["is_correction"] is False
    firsts = {}
    for change in sorted(run.valid, key=lambda c: c.effective):
        firsts.setdefault(change.obj["store_id"], change)
    assert all(c.obj["change_id"].endswith("-0") for c in firsts.values())


def test_lateness_duplicates_and_out_of_order_judged_from_the_files(run: Run) -> None:
    originals = [
        c for c in run.valid if not c.obj["is_correction"] and not c.obj["change_id"].endswith("-0")
    ]
    first: dict[str, Change] = {}
    for change in originals:  # arrival order
        first.setdefault(change.line, change)
    judged: Counter[str] = Counter()
    for change in first.values():
        effective = change.effective
        normal = effective.replace(hour=0) + SLOT * (effective.hour // 6 + 1)
        assert normal.date() == effective.date()
        late = change.arrival - normal
        assert late % timedelta(days=1) == timedelta(0), change.line
        if late == timedelta(0):
            judged["store_on_time"] += 1
        elif late <= timedelta(days=6):
            judged["store_late_days"] += 1
        else:
            assert late <= timedelta(days=28), change.line
            judged["store_late_weeks"] += 1
    for kind in ("store_on_time", "store_late_days", "store_late_weeks"):
        assert judged[kind] == run.counts[kind], kind

    repeats = [c for c in originals if c is not first[c.line]]
    assert len(repeats) == run.counts["store_duplicate"]
    for repeat in repeats:
        assert SLOT <= repeat.arrival - first[repeat.line].arrival <= timedelta(days=3)
    ids = Counter(c.obj["change_id"] for c in first.values())
    assert max(ids.values()) == 1  # a duplicate repeats its id; nothing else shares it

    overtaking = [
        c
        for c in first.values()
        if any(
            o.obj["store_id"] == c.obj["store_id"]
            and o.effective < c.effective
            and o.arrival > c.arrival
            for o in first.values()
        )
    ]
    assert len(overtaking) == run.counts["store_out_of_order"]


def test_corrections_change_the_region_and_arrive_after_the_original(run: Run) -> None:
    originals: dict[tuple[int, str], Change] = {}
    for change in run.valid:
        if not change.obj["is_correction"]:
            originals.setdefault(change.key, change)
    corrections = [c for c in run.valid if c.obj["is_correction"]]
    assert len(corrections) == run.counts["store_correction"]
    ids = {c.obj["change_id"] for c in run.changes if not c.obj["is_correction"]}
    for correction in corrections:
        original = originals[correction.key]
        assert correction.obj["region"] != original.obj["region"]
        assert correction.arrival > original.arrival
        assert correction.obj["change_id"] not in ids


def test_invalid_records_carry_a_spec_reason(run: Run) -> None:
    judged = Counter(_invalid(c.obj) for c in run.changes)
    first_path = {}
    for change in run.changes:
        first_path.setdefault(change.obj["change_id"], change.path)
    for change in run.changes:
        if _invalid(change.obj):  # in the file of the change it goes with: <id>-X1 / <id>-X2
            assert change.obj["change_id"][-3:] in ("-X1", "-X2")
            assert change.path == first_path[change.obj["change_id"][:-3]]
    assert judged["unknown_store"] == run.counts["store_invalid_unknown_store"]
    assert judged["missing_effective_ts"] == run.counts["store_invalid_missing_effective_ts"]
    for change in run.changes:
        if _invalid(change.obj) == "unknown_store":
            assert change.obj["store_id"] in [
                *(-s for s in range(1, 6)),
                *(f"S-{s}" for s in range(1, 6)),
            ]
            assert "effective_ts" in change.obj  # the first failing rule is the reason


def test_same_config_gives_identical_files(run: Run, tmp_path: Path) -> None:
    again = _run(CONFIG, tmp_path / "again")
    assert again.files == run.files and again.counts == run.counts
    other = _run(replace(CONFIG, seed=7), tmp_path / "other")
    store = lambda files: {p: d for p, d in files.items() if p.startswith("store_master/")}  # noqa: E731
    assert store(other.files) != store(run.files)


def test_sales_files_are_the_same_with_or_without_store_changes(run: Run, tmp_path: Path) -> None:
    off = _run(replace(CONFIG, store_changes=False), tmp_path / "off")
    assert not (tmp_path / "off" / "store_master").exists()
    assert all(off.counts[k] == 0 for k in STORE_KINDS)
    sales = {p: d for p, d in run.files.items() if not p.startswith("store_master/")}
    assert sales and off.files == sales
    assert {k: v for k, v in off.counts.items() if k not in STORE_KINDS} == {
        k: v for k, v in run.counts.items() if k not in STORE_KINDS
    }


def test_through_writes_only_what_is_delivered(run: Run, tmp_path: Path) -> None:
    through = START + timedelta(days=20, hours=7)
    cut = simulate(CONFIG, tmp_path, through=through)
    written = {p: d for p, d in _snapshot(tmp_path).items() if p.startswith("store_master/")}
    expected = {
        p: d
        for p, d in run.files.items()
        if p.startswith("store_master/") and parse_arrival_dir(p.split("/")[1]) <= through
    }
    assert written == expected
    assert 0 < len(written) < sum(p.startswith("store_master/") for p in run.files)
    assert cut.counts["store_opening"] == CONFIG.stores
    rest = simulate(CONFIG, tmp_path)
    assert rest.counts == run.counts
    assert _snapshot(tmp_path) == run.files


def test_a_one_day_run_has_only_the_openings(tmp_path: Path) -> None:
    one = _run(replace(CONFIG, days=1), tmp_path)
    assert [c.obj["change_id"] for c in one.changes] == [f"C{s:03d}-0" for s in range(1, 6)]
    assert {k: one.counts[k] for k in STORE_KINDS if one.counts[k]} == {"store_opening": 5}
