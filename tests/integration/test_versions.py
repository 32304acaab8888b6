"""Published versions (``tardy.consumers.versions``) and the models trained on them
(``tardy.training``) on real Spark + Delta + MLflow, through the CLI in-process.

On a copy of the ``small`` template: ``tardy publish`` publishes every gold model (v1), then
two restatements promote late sales (day A, then days A and B), each publishing the tables it
changed. A version published before both re-exports to the bytes and hash recorded when it
was published; each publication's changed days equal the days whose exported rows differ
from the previous version's (compared here as CSV lines, not by Spark); the revision counter
counts the recomputations of each day.

Then, on the same home (the last tests): two models are trained on the latest versions, one
on every day and one on early days only; a third restatement (a late sale on day C) makes
the first stale and not the second; retraining refuses a worse challenger, crowns one
trained on the corrected versions, and rolling the alias back restores v1 for readers.
"""

from __future__ import annotations

import csv
import hashlib
import json
import typing as t
from datetime import date, timedelta
from decimal import Decimal
from pathlib import Path
from types import SimpleNamespace

import pytest
from children import SMALL, SMALL_CLOCK, SMALL_CONFIG, cli_in_process, late_sales

DAILY = "gold.daily_store_revenue"
DAY_A, DAY_B = 1, 4  # offsets from the simulation's first day; both closed at its clock
DAY_C = 5  # the models' restatement: closed too
FEATURES = "gold.store_features"
HORIZON = 2  # the small template's 10 days hold 8 feature days with a 2-day label


def _cli(*argv: str) -> tuple[int, str, str]:
    return cli_in_process(*argv)


def _json(*argv: str) -> t.Any:
    code, out, err = _cli(*argv, "--json")
    assert code == 0, (argv, out[-2000:], err[-2000:])
    return json.loads(out)


def _land_late(home, hours: int, prefix: str, days: tuple[int, ...]) -> None:
    """One late sale on each of ``days``, arriving ``hours`` after the template's clock."""
    from tardy.ingest.landing import arrival_dir_name

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
            "gold.daily_store_net_revenue",
            "gold.store_features",
        )
    }
    again = _json("export", DAILY, "--as-of", f"{DAILY}@v1", "--to", str(tmp_path))
    data = Path(again["path"]).read_bytes()
    assert data == story.bytes_then
    assert hashlib.sha256(data).hexdigest() == again["sha256"]  # the file's own hash
    assert hash_by_days(data) == published[f"{DAILY}@v1"]["sha256"]
    assert again["publication"]["version"] == 1
    latest = _json("export", DAILY, "--to", str(tmp_path / "latest"))
    assert latest["publication"]["version"] == 3 and latest["sha256"] != again["sha256"]
    # Every version a promotion published hashed only the days it changed (from its diff's
    # rows after) and took the others' digests from the version before: the same hash as the
    # whole export's days give, and each day's digest the export's.
    promoted = [p for outcome in story.restatements for p in outcome["published"]]
    assert {p["table_name"] for p in promoted} >= {DAILY, FEATURES}
    for p in promoted:
        folder = str(tmp_path / p["name"])
        data = Path(_json("export", p["table_name"], "--as-of", p["name"], "--to", folder)["path"])
        digests = day_digests(data.read_bytes(), p["time_column"])
        assert p["day_digests"] == digests, p["name"]
        assert hash_by_days(data.read_bytes(), p["time_column"]) == p["sha256"], p["name"]
    # What each promotion's publication ran: the store's read, its append and a view per new
    # version (every gold column's text is Spark's): no comparison for the release notes, no
    # log read, no read of the versions.
    for outcome in story.restatements:
        assert outcome["statements"]["publish"] == len(outcome["published"]) + 2, outcome


def day_digests(data: bytes, time_column: str = "event_date") -> dict[str, str]:
    """Each day's ``<rows>:<digest>`` from an export file alone, by the documented rule
    (docs/versioned-truth.md, "Day digests"): the SHA-256 of the day's lines (by the time
    column's text), each with its line end."""
    header, *lines = data.decode().split("\n")[:-1]
    index = next(csv.reader([header])).index(time_column)
    days: dict[str, list[str]] = {}
    for line in lines:
        days.setdefault(next(csv.reader([line]))[index], []).append(line + "\n")
    return {
        day: f"{len(mine)}:{hashlib.sha256(''.join(mine).encode()).hexdigest()}"
        for day, mine in days.items()
    }


def hash_by_days(data: bytes, time_column: str = "event_date") -> str:
    """A version's hash from its export file alone, by the documented rule
    (docs/versioned-truth.md, "Day digests"): each day's lines hashed (``day_digests``),
    then the lines ``<day>,<rows>:<digest>``."""
    digests = day_digests(data, time_column)
    listed = "".join(f"{day},{digest}\n" for day, digest in sorted(digests.items()))
    return hashlib.sha256(listed.encode()).hexdigest()


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


def test_every_publication_is_announced_once_to_the_file_sink(story) -> None:
    """Each command delivered the publication events it raised (``tardy publish``, each
    promotion): one line per new version in ``notifications.jsonl``, none for the publish
    that found nothing new; the outbox is empty."""
    sink = story.home.root / "notifications.jsonl"
    events = [json.loads(line) for line in sink.read_text().splitlines()]
    announced = [e for e in events if e["event"] == "publication" and e["table"] == DAILY]
    versions = _json("versions", DAILY)
    assert [e["version"] for e in announced] == [p["version"] for p in versions] == [1, 2, 3]
    for event, publication in zip(announced, versions, strict=True):
        assert event["detail"]["changed_days"] == publication["changed_days"]
        assert event["detail"]["produced_by"] == publication["produced_by"]
        assert event["detail"]["sha256"] == publication["sha256"]
        assert f"{DAILY}@v{publication['version']} published" in event["text"]
    assert len({e["key"] for e in events}) == len(events)
    assert not list((story.home.root / "outbox" / "file").glob("*.json"))


def _export_rows(version: int, folder: Path) -> dict[tuple[str, str], dict[str, str]]:
    """A version of the daily table re-read from its export (CSV): rows by the grain."""
    exported = _json("export", DAILY, "--as-of", f"v{version}", "--to", str(folder))
    with Path(exported["path"]).open(newline="") as handle:
        return {(row["event_date"], row["store_id"]): row for row in csv.DictReader(handle)}


def test_each_release_note_matches_its_two_versions_and_survives_a_lost_file(
    story, tmp_path: Path
) -> None:
    """Each promotion's publication wrote a release note whose changed days, rows added,
    removed and changed and measure totals equal what the two versions' exports give
    (compared here row by row on the grain, not by Spark), with the restatement's reason;
    its material flag follows project.yaml's rule; a note a killed process never wrote is
    composed again, equal."""
    releases = story.home.root / "releases" / DAILY
    first = json.loads((releases / "v1.json").read_text())
    assert first["supersedes"] is None and first["produced_by"] == "run"
    measures = ["transactions", "items", "revenue", "corrected_transactions"]
    for number, outcome in enumerate(story.restatements, start=2):
        note = _json("versions", DAILY, "--notes", f"v{number}")
        assert note == json.loads((releases / f"v{number}.json").read_text())
        before = _export_rows(number - 1, tmp_path / f"v{number - 1}")
        after = _export_rows(number, tmp_path / f"v{number}")
        days = sorted(
            {key[0] for key in before.keys() | after.keys() if before.get(key) != after.get(key)}
        )
        assert [d["day"] for d in note["days"]] == days and days
        for day in note["days"]:
            old = {k: r for k, r in before.items() if k[0] == day["day"]}
            new = {k: r for k, r in after.items() if k[0] == day["day"]}
            assert (day["rows_before"], day["rows_after"]) == (len(old), len(new))
            assert day["added"] == len(new.keys() - old.keys())
            assert day["removed"] == len(old.keys() - new.keys())
            assert day["changed"] == sum(old[k] != new[k] for k in old.keys() & new.keys())
            for m in measures:
                totals = [sum(Decimal(r[m]) for r in side.values()) for side in (old, new)]
                assert [Decimal(x) for x in day["measures"][m]] == totals, (day, m)
            moved = [(len(old), len(new))] + [
                tuple(sum(Decimal(r["revenue"]) for r in side.values()) for side in (old, new))
            ]
            assert day["material"] == any(
                (b == 0 and a != 0) or (b != 0 and abs(a - b) / abs(b) >= Decimal("0.01"))
                for b, a in moved
            )
        assert note["material"] == any(d["material"] for d in note["days"])
        assert note["supersedes"] == number - 1
        assert note["restatement_id"] == outcome["restatement_id"]
        assert note["reason"] == f"versions: {['LATE-A', 'LATE-AB'][number - 2]}"
        assert note["material_measures"] == ["revenue"]
        markdown = Path(note["files"]["md"]).read_text()
        assert markdown.startswith(f"# {DAILY} v{number} (supersedes v{number - 1})")
        assert f"tardy show {DAILY} --as-of v{number - 1}" in markdown
    # The file sink's event names the note and says whether it is material.
    sink = story.home.root / "notifications.jsonl"
    events = [json.loads(line) for line in sink.read_text().splitlines()]
    latest = [e for e in events if e["event"] == "publication" and e.get("version") == 3]
    mine = [e for e in latest if e["table"] == DAILY]
    assert mine and mine[0]["detail"]["note"] == str(releases / "v3.md")
    assert mine[0]["detail"]["material"] == note["material"]
    # A note lost (a kill after the publication): composed again from the two versions.
    (releases / "v3.json").unlink()
    (releases / "v3.md").unlink()
    assert _json("versions", DAILY, "--notes", "latest") == note
    assert (releases / "v3.md").read_text() == markdown


# The last day of the period a model's time column keys, by the calendar (the oracle of the
# final aliases): a week's Sunday (the partial first week keyed by the data's first day too),
# a month's last day, else the day itself.
PERIOD_LAST_DAY = {
    "gold.weekly_store_revenue": lambda key: key + timedelta(days=6 - key.weekday()),
    "gold.monthly_store_revenue": lambda key: (
        (key.replace(day=28) + timedelta(days=4)).replace(day=1) - timedelta(days=1)
    ),
}


def test_the_final_alias_holds_exactly_the_final_periods_of_the_latest_publication(
    story,
) -> None:
    """``<schema>_final.<table>``: the rows of the latest publication whose period ended
    before the first provisional day (``max(bronze arrival_ts) - grace_days``, the rule
    ``tardy status`` documents), computed here from bronze and the calendar."""
    from tardy.project.context import load_config

    spark = story.spark
    grace = int(load_config().variables["grace_days"])
    bronze = [
        name
        for name in ("bronze.pos_events", "bronze.store_changes", "bronze.payment_refunds")
        if spark.catalog.tableExists(name)
    ]
    arrivals = " UNION ALL ".join(f"SELECT MAX(arrival_ts) AS ts FROM {name}" for name in bronze)
    latest = spark.sql(f"SELECT MAX(ts) AS ts FROM ({arrivals})").first().ts
    first_provisional = (latest - timedelta(days=grace)).date()
    kept: dict[str, tuple[int, int]] = {}  # per model: final rows, provisional rows
    for table in (p["table_name"] for p in story.first["published"]):
        column = _json("versions", table)[-1]["time_column"]
        schema, name = table.split(".")
        published = spark.table(f"{schema}_published.{name}").collect()
        final = spark.table(f"{schema}_final.{name}").collect()
        last_day = PERIOD_LAST_DAY.get(table, lambda key: key)
        expected = [r for r in published if last_day(r[column]) < first_provisional]
        assert sorted(map(tuple, final)) == sorted(map(tuple, expected)), table
        kept[table] = (len(expected), len(published) - len(expected))
    # The small template's days, weeks and month: final days and weeks, provisional ones
    # left out (its one month is still provisional: no row).
    assert all(min(kept[table]) > 0 for table in (DAILY, "gold.weekly_store_revenue")), kept
    assert kept["gold.monthly_store_revenue"][0] == 0, kept


def _first_provisional_day(spark) -> date:
    """``max(arrival_ts)`` over the bronze tables, minus the grace window: its date."""
    from tardy.project.context import load_config

    grace = int(load_config().variables["grace_days"])
    names = ("bronze.pos_events", "bronze.store_changes", "bronze.payment_refunds")
    bronze = [n for n in names if spark.catalog.tableExists(n)]
    arrivals = " UNION ALL ".join(f"SELECT MAX(arrival_ts) AS ts FROM {n}" for n in bronze)
    latest = spark.sql(f"SELECT MAX(ts) AS ts FROM ({arrivals})").first().ts
    return (latest - timedelta(days=grace)).date()


def test_status_names_each_restated_period_with_its_model(story) -> None:
    """``tardy status --json``'s ``restated``: every published model's periods the two
    promotions changed, each with its model, the latest restatement and its status by the
    calendar; the daily days A and B and the weeks that hold them, by the calendar here."""
    restated = _json("status")["restated"]
    first_provisional = _first_provisional_day(story.spark)
    latest = story.restatements[-1]["restatement_id"]
    published = {p["table_name"] for p in story.first["published"]}
    by_model: dict[str, set[str]] = {}
    for period in restated:
        assert period["model"] in published, period
        by_model.setdefault(period["model"], set()).add(period["event_date"])
        last_day = PERIOD_LAST_DAY.get(period["model"], lambda key: key)
        final = last_day(date.fromisoformat(period["event_date"])) < first_provisional
        assert period["period_status"] == ("final" if final else "provisional"), period
        assert period["restatement_id"] == latest and period["reason"] == "versions: LATE-AB"
    days = [SMALL_CONFIG.start + timedelta(days=offset) for offset in (DAY_A, DAY_B)]
    assert by_model[DAILY] == {str(day) for day in days}
    weeks = {max(day - timedelta(days=day.weekday()), SMALL_CONFIG.start) for day in days}
    assert by_model["gold.weekly_store_revenue"] == {str(week) for week in weeks}


# What `status` sums per model: its grain, time column and headline measure (the models' own
# MODEL blocks; the measure: the first of its columns project.yaml's release notes judge,
# `revenue` before `net_revenue` in the net revenue model).
MOVED = {
    DAILY: (("event_date", "store_id"), "event_date", "revenue"),
    "gold.weekly_store_revenue": (("week_start", "store_id"), "first_day", "revenue"),
    "gold.daily_store_net_revenue": (("event_date", "store_id"), "event_date", "revenue"),
}


def _exported(table: str, as_of: str, folder: Path, grain: tuple[str, ...]) -> dict:
    """A version of ``table`` re-read from its export (CSV): rows by the grain."""
    exported = _json("export", table, "--as-of", as_of, "--to", str(folder))
    with Path(exported["path"]).open(newline="") as handle:
        return {tuple(row[c] for c in grain): row for row in csv.DictReader(handle)}


def test_status_says_how_much_restatements_moved_each_published_model(
    story, tmp_path: Path
) -> None:
    """``status --json``'s ``revisions_by_model``: per published model, the rows the two
    promotions changed, their periods, the highest revision (day A's row: both) and the
    headline measure first published and now. The oracle: the model's exports of v1 and of
    the latest version, compared here by grain (no trail, no status view)."""
    status = _json("status")
    moved = status["revisions_by_model"]
    assert set(moved) <= {p["table_name"] for p in story.first["published"]}
    for table, (grain, time, measure) in MOVED.items():
        before = _exported(table, "v1", tmp_path / f"{table}-v1", grain)
        after = _exported(table, "latest", tmp_path / f"{table}-latest", grain)
        keys = {k for k in before.keys() | after.keys() if before.get(k) != after.get(k)}
        first = sum(Decimal(before[k][measure]) for k in keys if k in before)
        now = sum(Decimal(after[k][measure]) for k in keys if k in after)
        got = moved[table]
        assert (got["model"], got["measure"]) == (table, measure)
        assert got["rows"] == len(keys) > 0, (table, got)
        assert got["days"] == len({(after.get(k) or before[k])[time] for k in keys}), table
        assert got["max_revision"] == 2, (table, got)
        assert (Decimal(got["first_published"]), Decimal(got["now"])) == (first, now), table
        assert Decimal(got["net_change"]) == now - first != 0, table
    assert status["revisions"] == moved[DAILY]


def test_the_card_of_a_published_model_says_who_what_and_how_final(story) -> None:
    """``tardy card``: description and owner as the model file declares them, the current
    version and the restatement that last restated it, the day it is final through by the
    calendar (a week: the Sunday before the first provisional day's week), and the declared
    sources upstream of it; a model that is not published is refused."""
    from tardy.project.home import project_root

    first_provisional = _first_provisional_day(story.spark)
    versions = _json("versions", DAILY)
    card = _json("card", DAILY)
    text = (project_root() / "models" / "gold" / "daily_store_revenue.sql").read_text()
    assert card["description"] and f"description '{card['description']}'" in text
    assert card["owner"] == "finance_analytics" and "owner finance_analytics," in text
    assert card["current_version"] == f"{DAILY}@v3"
    assert card["last_published_at"] == card["last_restated_at"] == versions[-1]["published_at"]
    assert card["last_restatement_id"] == story.restatements[-1]["restatement_id"]
    assert card["final_through"] == str(first_provisional - timedelta(days=1))

    # The sources with records in the bronze tables each model reads (the small template's
    # sales come from one system).
    def systems(*tables: str) -> set[str]:
        union = " UNION ALL ".join(f"SELECT source_system FROM {t}" for t in tables)
        return {
            r.source_system for r in story.spark.sql(f"SELECT DISTINCT * FROM ({union})").collect()
        }

    assert {s["source_system"] for s in card["sources"]} == systems("bronze.pos_events")
    assert 0 < card["statements"] <= 3
    weekly = _json("card", "gold.weekly_store_revenue")
    monday = first_provisional - timedelta(days=first_provisional.weekday())
    assert weekly["final_through"] == str(max(monday, SMALL_CONFIG.start) - timedelta(days=1))
    region = _json("card", "gold.daily_region_revenue")  # sales joined to the store master
    assert {s["source_system"] for s in region["sources"]} == systems(
        "bronze.pos_events", "bronze.store_changes"
    )
    assert "store_master" in systems("bronze.store_changes")
    code, _, err = _cli("card", "silver.sales_transactions")
    assert code == 1 and "not a published model" in err


def test_every_published_model_has_a_status_view_by_the_calendar_and_its_first_version(
    story,
) -> None:
    """``tardy.<table>_status`` for every published model: its rows, each period final by the
    calendar (as the final alias), each measure (the model's numeric columns outside grain
    and time) as first published equal to v1's value read by time travel here (0 for a row
    added later), its change since, and a revision for the rows the restatements changed."""
    spark = story.spark
    view = spark.table("tardy.daily_store_revenue_status")  # the name status has always used
    assert "period_status" in view.columns
    first_provisional = _first_provisional_day(spark)
    measured: dict[str, set[str]] = {}
    for table in (p["table_name"] for p in story.first["published"]):
        rows = spark.table(f"tardy.{table.split('.')[1]}_status").collect()
        v1 = _json("versions", table)[0]
        old = spark.sql(
            f"SELECT * FROM {v1['physical_table']} VERSION AS OF {v1['delta_version']}"
        ).collect()
        prefix = "first_published_"
        measures = {
            c[len(prefix) :] for c in (rows[0].asDict() if rows else {}) if c.startswith(prefix)
        }
        measured[table] = measures
        key = [c for c in spark.table(table).columns if c not in measures]
        before = {tuple(r[c] for c in key): r for r in old}
        assert sorted(tuple(r[c] for c in key) for r in rows) == sorted(
            tuple(r[c] for c in key) for r in spark.table(table).collect()
        ), table
        last_day = PERIOD_LAST_DAY.get(table, lambda k: k)
        column = v1["time_column"]
        revised = 0
        for row in rows:
            final = last_day(row[column]) < first_provisional
            assert row["period_status"] == ("final" if final else "provisional"), (table, row)
            was = before.get(tuple(row[c] for c in key))
            for m in measures:
                assert row[prefix + m] == (was[m] if was is not None else 0), (table, m, row)
                assert row[f"{m}_change_since_first_published"] == row[m] - row[prefix + m]
            changed = was is None or any(was[m] != row[m] for m in measures)
            assert (row["revision"] > 0) == changed, (table, row)
            revised += changed
        if table in (DAILY, "gold.weekly_store_revenue"):
            assert revised > 0, table  # the late sales moved days A and B and their weeks
    assert measured[DAILY] == {"transactions", "items", "revenue", "corrected_transactions"}
    assert measured["gold.weekly_store_revenue"] == {
        "days_with_sales",
        "transactions",
        "items",
        "revenue",
    }


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


def test_the_published_view_reads_the_latest_publication(story, tmp_path: Path) -> None:
    """`gold_published.daily_store_revenue` is v3's rows (its export's lines): the view
    each publication re-points."""
    from tardy.consumers.versions import as_text

    latest = _json("export", DAILY, "--to", str(tmp_path))
    assert latest["publication"]["version"] == 3
    viewed = story.spark.sql("SELECT * FROM gold_published.daily_store_revenue").toArrow()
    lines = {tuple(as_text(v) for v in row.values()) for row in viewed.to_pylist()}
    assert lines == _lines(Path(latest["path"])) and viewed.num_rows == latest["rows"]


def test_versions_published_before_day_digests_keep_their_rule(story, tmp_path: Path) -> None:
    """A publications table from before day digests (no ``day_digests`` column, each
    ``sha256`` the whole export's) gets the column on first use, and its versions verify by
    the whole export's hash, as they were published. The table is put back afterwards."""
    from tardy.consumers.versions import TABLE

    spark = story.spark
    exported = _json("export", DAILY, "--as-of", "v1", "--to", str(tmp_path / "now"))
    whole = hashlib.sha256(Path(exported["path"]).read_bytes()).hexdigest()
    kept = "tardy.published_versions_kept"
    spark.sql(f"ALTER TABLE {TABLE} RENAME TO {kept}")
    try:
        columns = [c for c in spark.table(kept).columns if c not in ("sha256", "day_digests")]
        spark.sql(
            f"CREATE TABLE {TABLE} USING delta AS SELECT {', '.join(columns)}, "
            f"CASE WHEN table_name = '{DAILY}' AND version = 1 THEN '{whole}' ELSE 'x' "
            f"END AS sha256 FROM {kept}"
        )
        legacy = _json("export", DAILY, "--as-of", "v1", "--to", str(tmp_path / "legacy"))
        assert legacy["sha256"] == whole
        assert legacy["publication"]["day_digests"] is None
        assert "day_digests" in spark.table(TABLE).columns  # added on first use
        code, _, err = _cli("export", DAILY, "--as-of", "v2", "--to", str(tmp_path / "x"))
        assert code == 1 and "no longer reads the same" in " ".join(err.split())
    finally:
        spark.sql(f"DROP TABLE IF EXISTS {TABLE}")
        spark.sql(f"ALTER TABLE {kept} RENAME TO {TABLE}")


def test_export_refuses_bytes_that_differ_from_what_was_published(story, tmp_path: Path) -> None:
    """Runs last: it damages the record of v1."""
    from delta.tables import DeltaTable

    from tardy.consumers.versions import TABLE

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
    # A day's digest that no longer matches is named.
    day_a = str(SMALL_CONFIG.start + timedelta(days=DAY_A))
    DeltaTable.forName(story.spark, TABLE).update(
        f"table_name = '{DAILY}' AND version = 2",
        {
            "day_digests": f"transform_values(day_digests, (k, v) -> "
            f"CASE WHEN k = '{day_a}' THEN '1:x' ELSE v END)"
        },
    )
    code, _, err = _cli("export", DAILY, "--as-of", "v2", "--to", str(tmp_path / "day"))
    assert code == 1 and f"1 day(s) ({day_a})" in " ".join(err.split())


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


# -- models trained on published versions (run after the tests above: a third restatement) --

# The features model's feature columns (gold.store_features: its numeric columns outside its
# day and store), as the oracle reads them.
COLUMNS = (
    "revenue_1d",
    "revenue_7d",
    "revenue_28d",
    "transactions_7d",
    "transactions_28d",
    "avg_ticket_28d",
    "active_days_28d",
)


def _day(offset: int) -> str:
    return str(SMALL_CONFIG.start + timedelta(days=offset))


@pytest.fixture(scope="module")
def models(story) -> SimpleNamespace:
    """v1 (champion) trained on every feature day, v2 on days 0..2 only; then day C's late
    sale is restated; v3 retrained with a near-zero penalty (overfits: refused), v4 with the
    champion's parameters on the corrected versions."""
    from tardy.ingest import ingest

    window = ("--horizon-days", str(HORIZON), "--holdout-days", "2")
    wide = _json("train", *window)
    early = _json("train", "--to", _day(2), "--horizon-days", str(HORIZON), "--holdout-days", "1")
    _land_late(story.home, 3, "LATE-C", (DAY_C,))
    ingest(story.spark, story.home.landing)
    restated = _json("restate", "--reason", "models: LATE-C")
    assert restated["status"] == "promoted", restated
    rid = restated["restatement_id"]
    impact = _json("impact", rid)
    code, out, err = _cli("retrain", "--after", rid, "--alpha", "1e-6", "--json")
    assert code == 5, (out[-2000:], err[-2000:])  # ChallengerRefused's exit code
    refused = json.loads(out)
    crowned = _json("retrain", "--after", rid)
    import mlflow  # this process reads the home's registry, as a consumer would

    uri = f"sqlite:///{story.home.root / 'models' / 'mlflow.db'}"
    mlflow.set_tracking_uri(uri)
    mlflow.set_registry_uri(uri)
    return SimpleNamespace(
        wide=wide["model"],
        early=early["model"],
        rid=rid,
        impact=impact,
        refused=refused,
        crowned=crowned,
    )


def test_impact_names_exactly_the_models_trained_on_changed_days(models) -> None:
    """Day C's late sale changes daily revenue of day C and the features of day C onwards;
    v1 read both (features 0..7, labels 1..9), v2 read days before C only."""
    wide, early = models.wide, models.early
    assert [(i["first_day"], i["last_day"]) for i in wide["inputs"]] == [
        (_day(0), _day(7)),
        (_day(1), _day(9)),
    ]
    assert [(i["first_day"], i["last_day"]) for i in early["inputs"]] == [
        (_day(0), _day(2)),
        (_day(1), _day(2 + HORIZON)),
    ]
    assert wide["champion"] and not early["champion"]
    stale = {
        (s["version"], s["reads"].split("@")[0]): s["days"] for s in models.impact["stale_models"]
    }
    assert stale == {
        (wide["version"], FEATURES): [_day(DAY_C), _day(DAY_C + 1), _day(DAY_C + 2)],
        (wide["version"], DAILY): [_day(DAY_C)],
    }
    published = {p["table_name"]: p for p in models.impact["published"]}
    assert published[DAILY]["superseded"] == f"{DAILY}@v3"
    assert published[DAILY]["by"] == f"{DAILY}@v4"
    assert published[DAILY]["changed_days"] == [_day(DAY_C)]
    code, _, err = _cli("impact", "19700101T000000Z-000000")
    assert code == 1 and "published nothing" in " ".join(err.split())


def _holdout_mae(tmp_path: Path, challenger: dict, start: str, version: int) -> float:
    """The mean absolute error of model ``version`` over the challenger's held-out rows (its
    feature days from ``start``), rebuilt from the pinned versions' CSV exports (not by
    tardy's snapshot code)."""
    import mlflow

    pins = {i["table_name"]: i for i in challenger["inputs"]}
    rows = {}
    for table in (FEATURES, DAILY):
        exported = _json(
            "export", table, "--as-of", f"v{pins[table]['version']}", "--to", str(tmp_path)
        )
        with Path(exported["path"]).open(newline="") as handle:
            rows[table] = list(csv.DictReader(handle))
    revenue = {(r["store_id"], r["event_date"]): Decimal(r["revenue"]) for r in rows[DAILY]}
    last = pins[FEATURES]["last_day"]
    held = [r for r in rows[FEATURES] if start <= r["feature_date"] <= last]
    features = [[0.0 if r[c] == "\\N" else float(r[c]) for c in COLUMNS] for r in held]
    labels = [
        float(
            sum(
                revenue.get(
                    (r["store_id"], str(date.fromisoformat(r["feature_date"]) + timedelta(days=k))),
                    Decimal(0),
                )
                for k in range(1, HORIZON + 1)
            )
        )
        for r in held
    ]
    import pandas as pd

    model = mlflow.sklearn.load_model(f"models:/store_revenue/{version}")
    predicted = model.predict(pd.DataFrame(features, columns=list(COLUMNS)))
    assert len(held) == 2 * 2  # two stores, two held-out days
    return sum(abs(p - y) for p, y in zip(predicted, labels, strict=True)) / len(labels)


def test_retrain_refuses_a_worse_model_and_crowns_one_trained_on_corrected_data(
    models, tmp_path: Path
) -> None:
    refused, crowned = models.refused, models.crowned
    wide = models.wide["version"]
    assert refused["promoted"] is False and refused["champion"] == wide
    assert refused["backtest"]["challenger_mae"] > refused["backtest"]["champion_mae"]
    assert refused["challenger"]["decision"].startswith("refused: ")
    assert refused["backtest"]["holdout_start"] == crowned["backtest"]["holdout_start"]
    assert crowned["promoted"] is True and crowned["champion_before"] == wide
    assert crowned["backtest"]["challenger_mae"] <= crowned["backtest"]["champion_mae"] * 1.05
    challenger = crowned["challenger"]
    assert (
        challenger["trained_after"] == models.rid and crowned["champion"] == challenger["version"]
    )
    # Its lineage names the versions the restatement published (their Delta versions).
    after = {p["table_name"]: p for p in _json("versions") if p["produced_by"] == models.rid}
    assert {i["table_name"]: (i["version"], i["delta_version"]) for i in challenger["inputs"]} == {
        t: (after[t]["version"], after[t]["delta_version"]) for t in (FEATURES, DAILY)
    }
    assert challenger["snapshot_sha256"] != models.wide["snapshot_sha256"]
    # Both backtests, recomputed from the pinned versions' exports.
    for version, reported in (
        (challenger["version"], crowned["backtest"]["challenger_mae"]),
        (wide, crowned["backtest"]["champion_mae"]),
        (refused["challenger"]["version"], refused["backtest"]["challenger_mae"]),
    ):
        start = crowned["backtest"]["holdout_start"]
        assert _holdout_mae(tmp_path, challenger, start, version) == pytest.approx(
            reported, abs=1e-4
        )
    listed = {m["version"]: m for m in _json("models")}
    assert [v for v, m in listed.items() if m["champion"]] == [challenger["version"]]


def test_rolling_the_alias_back_restores_v1_for_readers(models) -> None:
    import mlflow
    import pandas as pd
    from mlflow import MlflowClient

    probe = pd.DataFrame([[float(i + 1) * 10 for i in range(len(COLUMNS))]], columns=list(COLUMNS))

    def by_alias() -> tuple[int, float]:
        version = int(
            MlflowClient().get_model_version_by_alias("store_revenue", "champion").version
        )
        return version, float(
            mlflow.sklearn.load_model("models:/store_revenue@champion").predict(probe)[0]
        )

    crowned = models.crowned["challenger"]["version"]
    assert by_alias()[0] == crowned
    rolled = _json("models", "--rollback")
    assert [m["version"] for m in rolled if m["champion"]] == [models.wide["version"]]
    version, prediction = by_alias()
    v1 = float(
        mlflow.sklearn.load_model(f"models:/store_revenue/{models.wide['version']}").predict(probe)[
            0
        ]
    )
    assert version == models.wide["version"] and prediction == v1
    code, _, err = _cli("models", "--rollback")
    assert code == 1 and "no earlier version" in " ".join(err.split())
