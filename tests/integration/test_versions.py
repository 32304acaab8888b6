"""Published versions (``tardy.versions``) on real Spark + Delta, through the CLI in-process.

On a copy of the ``small`` template: ``tardy publish`` publishes every gold model (v1), then
two restatements promote late sales (day A, then days A and B), each publishing the tables it
changed. A version published before both re-exports to the bytes and hash recorded when it
was published; each publication's changed days equal the days whose exported rows differ
from the previous version's (compared here as CSV lines, not by Spark); the revision counter
counts the recomputations of each day.
"""

from __future__ import annotations

import csv
import hashlib
import json
import typing as t
from datetime import timedelta
from pathlib import Path
from types import SimpleNamespace

import pytest
from children import SMALL, SMALL_CLOCK, SMALL_CONFIG, cli_in_process, late_sales

DAILY = "gold.daily_store_revenue"
DAY_A, DAY_B = 1, 4  # offsets from the simulation's first day; both closed at its clock


def _cli(*argv: str) -> tuple[int, str, str]:
    return cli_in_process(*argv)


def _json(*argv: str) -> t.Any:
    code, out, err = _cli(*argv, "--json")
    assert code == 0, (argv, out[-2000:], err[-2000:])
    return json.loads(out)


def _land_late(home, hours: int, prefix: str, days: tuple[int, ...]) -> None:
    """One late sale on each of ``days``, arriving ``hours`` after the template's clock."""
    from tardy.landing import arrival_dir_name

    folder = home.landing / "pos" / arrival_dir_name(SMALL_CLOCK + timedelta(hours=hours))
    folder.mkdir(parents=True)
    (folder / f"{prefix}.jsonl").write_text(late_sales(prefix, SMALL_CONFIG.start, days, 1))


@pytest.fixture(scope="module")
def story(engine, tmp_path_factory: pytest.TempPathFactory) -> SimpleNamespace:
    from tardy.ingest import ingest

    root = tmp_path_factory.mktemp("versions") / "home"
    SMALL.copy_to(engine, root)
    home, _, spark = engine.open(root)
    exports = tmp_path_factory.mktemp("exports")
    first = _json("publish")
    v1 = _json("export", DAILY, "--as-of", "v1", "--to", str(exports / "at-publication"))
    bytes_then = Path(v1["path"]).read_bytes()
    restatements = []
    for hours, prefix, days in ((1, "LATE-A", (DAY_A,)), (2, "LATE-AB", (DAY_A, DAY_B))):
        _land_late(home, hours, prefix, days)
        ingest(spark, home.landing)
        outcome = _json("restate", "--reason", f"versions: {prefix}")
        assert outcome["status"] == "promoted", outcome
        restatements.append(outcome)
    return SimpleNamespace(
        home=home,
        spark=spark,
        first=first,
        v1=v1,
        bytes_then=bytes_then,
        restatements=restatements,
        exports=exports,
    )


def _lines(path: Path) -> set[tuple[str, ...]]:
    with path.open(newline="") as handle:
        return {tuple(row) for row in list(csv.reader(handle))[1:]}


def test_a_version_published_before_two_restatements_re_exports_byte_for_byte(
    story, tmp_path: Path
) -> None:
    published = {p["name"]: p for p in story.first["published"]}
    assert f"{DAILY}@v1" in published  # every gold model, none named in Python
    assert set(published) == {
        f"{name}@v1"
        for name in (
            DAILY,
            "gold.weekly_store_revenue",
            "gold.monthly_store_revenue",
            "gold.daily_region_revenue",
            "gold.store_features",
        )
    }
    again = _json("export", DAILY, "--as-of", f"{DAILY}@v1", "--to", str(tmp_path))
    data = Path(again["path"]).read_bytes()
    assert data == story.bytes_then
    assert hashlib.sha256(data).hexdigest() == published[f"{DAILY}@v1"]["sha256"]
    assert again["publication"]["version"] == 1
    latest = _json("export", DAILY, "--to", str(tmp_path / "latest"))
    assert latest["publication"]["version"] == 3 and latest["sha256"] != again["sha256"]


def test_each_publication_names_the_days_it_changed_and_how_often(story, tmp_path: Path) -> None:
    versions = _json("versions", DAILY)
    assert [p["version"] for p in versions] == [1, 2, 3]
    ids = [r["restatement_id"] for r in story.restatements]
    assert [p["produced_by"] for p in versions[1:]] == ids
    for outcome in story.restatements:  # each promotion published what it committed
        assert f"{DAILY}@v{story.restatements.index(outcome) + 2}" in {
            p["name"] for p in outcome["published"]
        }
    lines = {}
    for p in versions:
        exported = _json("export", DAILY, "--as-of", f"v{p['version']}", "--to", str(tmp_path))
        lines[p["version"]] = _lines(Path(exported["path"]))
    for p in versions[1:]:
        moved = lines[p["version"]] ^ lines[p["version"] - 1]
        assert p["changed_days"] == sorted({row[0] for row in moved})  # event_date first
    day_a = str(SMALL_CONFIG.start + timedelta(days=DAY_A))
    day_b = str(SMALL_CONFIG.start + timedelta(days=DAY_B))
    assert versions[1]["changed_days"] == [day_a] and versions[1]["revisions"] == {day_a: 1}
    assert versions[2]["changed_days"] == [day_a, day_b]
    assert versions[2]["revisions"] == {day_a: 2, day_b: 1}
    assert _json("publish")["published"] == []  # nothing new since the last promotion


def test_show_re_reads_a_published_day(story, tmp_path: Path) -> None:
    """`tardy show --as-of v1 --day A` is v1's rows of day A (its export's lines), after the
    two restatements changed that day."""
    day_a = str(SMALL_CONFIG.start + timedelta(days=DAY_A))
    exported = _json("export", DAILY, "--as-of", "v1", "--to", str(tmp_path))
    expected = sorted(row for row in _lines(Path(exported["path"])) if row[0] == day_a)
    shown = _json("show", DAILY, "--as-of", "v1", "--day", day_a)
    assert shown["publication"]["version"] == 1 and shown["day"] == day_a
    assert [tuple(row) for row in shown["rows"]] == expected and expected
    now = _json("show", DAILY, "--day", day_a)
    assert now["publication"]["version"] == 3 and now["rows"] != shown["rows"]
    code, out, _ = _cli("show", DAILY, "--as-of", "v1", "--day", day_a)
    assert code == 0 and f"{DAILY}@v1" in out and f"{len(expected)} rows" in out


def test_export_refuses_bytes_that_differ_from_what_was_published(story, tmp_path: Path) -> None:
    """Runs last: it damages the record of v1."""
    from delta.tables import DeltaTable

    from tardy.versions import TABLE

    published = _json("versions", DAILY)
    moment = published[1]["published_at"]
    by_time = _json("export", DAILY, "--as-of", moment, "--to", str(tmp_path / "t"))
    assert by_time["publication"]["version"] == 2
    code, _, err = _cli("export", DAILY, "--as-of", "v9", "--to", str(tmp_path / "none"))
    assert code == 1 and "no published version v9" in " ".join(err.split())
    DeltaTable.forName(story.spark, TABLE).update(
        f"table_name = '{DAILY}' AND version = 1", {"sha256": "'x' || substr(sha256, 2)"}
    )
    code, _, err = _cli("export", DAILY, "--as-of", "v1", "--to", str(tmp_path / "damaged"))
    assert code == 1 and "no longer reads the same" in " ".join(err.split())


def test_check_marks_a_version_whose_files_are_gone(story) -> None:
    """`tardy versions --check` marks a version time travel can no longer read: a data file
    only v1 held is deleted, as a VACUUM past v1 would. Runs last: it damages v1."""
    from urllib.parse import urlparse

    published = _json("versions", DAILY, "--check")
    assert [p["readable"] for p in published] == [True, True, True]
    first, latest = published[0], published[-1]

    def files(p: dict) -> set[str]:
        query = f"SELECT * FROM {p['physical_table']} VERSION AS OF {p['delta_version']}"
        return set(story.spark.sql(query).inputFiles())

    only_v1 = sorted(files(first) - files(latest))
    assert only_v1  # the restatements rewrote day A's files
    Path(urlparse(only_v1[0]).path).unlink()
    checked = {p["version"]: p["readable"] for p in _json("versions", DAILY, "--check")}
    assert checked[1] is False and checked[3] is True
    assert _json("versions", DAILY)[0]["readable"] is None  # not checked: not claimed
    code, out, _ = _cli("versions", DAILY, "--check")
    assert code == 0 and "v1 gone" in out
