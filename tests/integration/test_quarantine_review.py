"""The steward's review of the quarantine, on a copy of the ``small`` template (two stores,
ten days, prod planned), in the worker's engine; in the long tier, real processes where the
process is the subject (a fix killed, a steward holding the lock).

A hostile batch of sales for a closed day (and an invalid store change) is ingested and
restated into the quarantine. Then:

- ``tardy quarantine`` lists every source's quarantined records: the sales ones equal an
  independent computation from the landing files (``oracle``), with their reasons;
- a rejected record leaves the open list, its decision is in the review table and its
  source's owner is told (the file sink); a duplicate names the record it replays;
- an invalid fix is refused naming the rule it fails, and writes nothing;
- a fix stopped before its file is renamed leaves no steward record; stopped after, a record
  ingest lands once, and the next fix of it appends its decision without a second file (the
  fast tier stops the command in-process at the failpoint; the long tier kills real
  ``tardy quarantine fix`` processes there);
- two stewards on one record: while one holds the lock the other is refused (exit 3) and
  writes nothing; then one fix, and the second attempt is refused as already decided (the
  other steward: a second hold of the lock in-process; the long tier: a process);
- the fixes, ingested and restated like any correction, change exactly their day's silver and
  gold rows, and gold then equals the oracle over every landing file.
"""

from __future__ import annotations

import contextlib
import json
import signal
import subprocess
import sys
import typing as t
from datetime import timedelta
from pathlib import Path

import oracle
import pytest
from children import SMALL, SMALL_CLOCK, SMALL_CONFIG, cli_cut_at, cli_in_process
from prod_checks import actual_daily, expected_daily
from review_story import env_of

from tardy.project.home import project_root

DAY = SMALL_CONFIG.start + timedelta(days=2)  # closed at SMALL_CLOCK (grace: 3 days)
ARRIVAL = SMALL_CLOCK + timedelta(hours=1)
STEWARD = "steward-ana@example.com"


def _sale(tid: str, **fields: str) -> str:
    values = {
        "transaction_id": f'"{tid}"',
        "record_type": '"sale"',
        "store_id": "1",
        "product_id": "2",
        "quantity": "1",
        "unit_price": "4.50",
        "discount": "0.00",
        "event_ts": f'"{DAY}T08:00:00Z"',
    } | fields
    return "{" + ",".join(f'"{k}":{v}' for k, v in values.items()) + "}\n"


# The hostile batch: each line fails one rule of the pos source's (macros/sales_rules.py).
HOSTILE = {
    # invalid_store_id: fixed, store_id=1, while another steward held the lock (in-process;
    # the long tier: a process)
    "Acut": _sale("QR-Acut", store_id='"x"'),
    "Aheld": _sale("QR-Aheld", store_id='"x"'),
    "B": _sale("QR-B", quantity="-1"),  # negative_quantity: rejected
    "Bcut": _sale("QR-Bcut", quantity="-2"),  # negative_quantity: rejected, stopped
    "C": _sale("QR-C", discount="9.00"),  # discount_exceeds_gross: an invalid fix refused
    "D": _sale("QR-D", quantity='"two"'),  # invalid_quantity: a duplicate of a valid sale
    # invalid_product_id: its fix stopped (in-process; the long tier: killed), completed
    "Ecut": _sale("QR-Ecut", product_id='"p"'),
    "Ekilled": _sale("QR-Ekilled", product_id='"p"'),
}
BAD_STORE_CHANGE = (
    '{"store_id":"x","effective_ts":"2026-01-03T09:00:00Z","region":"north",'
    '"format":"mall","manager":"Ann","change_id":"qr-1","is_correction":false}\n'
)


@pytest.fixture(scope="module")
def lake(engine: t.Any, tmp_path_factory: pytest.TempPathFactory) -> dict[str, t.Any]:
    """The small template's copy with the hostile batch ingested and restated; each hostile
    line's record id."""
    from tardy.ingest import ingest
    from tardy.ingest.landing import arrival_dir_name
    from tardy.requests.restatements import restate

    root = tmp_path_factory.mktemp("quarantine-review") / "home"
    SMALL.copy_to(engine, root)
    home, context, spark = engine.open(root)
    batch = home.landing / "pos" / arrival_dir_name(ARRIVAL)
    batch.mkdir(parents=True)
    path = batch / "hostile.jsonl"
    path.write_text("".join(HOSTILE.values()))
    stores = home.landing / "store_master" / arrival_dir_name(ARRIVAL)
    stores.mkdir(parents=True)
    (stores / "store-changes.jsonl").write_text(BAD_STORE_CHANGE)
    assert ingest(spark, home.landing).files_ingested == 2
    assert str(restate(context, spark, "the hostile batch").status) == "promoted"
    import hashlib

    sha = hashlib.sha256(path.read_bytes()).hexdigest()
    ids = {name: f"{sha}:{n}" for n, name in enumerate(HOSTILE, start=1)}
    return {"home": home, "context": context, "spark": spark, "ids": ids}


def _cli(*argv: str) -> tuple[int, t.Any, str]:
    code, out, err = cli_in_process(*argv, "--json")
    return code, json.loads(out) if out.strip() else None, err


def _line(text: str) -> str:
    """``text`` with its terminal wrapping undone."""
    return " ".join(text.split())


def _listed(*flags: str) -> dict[str, dict[str, t.Any]]:
    code, payload, err = _cli("quarantine", *flags)
    assert code == 0, err
    return {r["record_id"]: r for r in payload["records"]}


def _reviewed(lake: dict[str, t.Any]) -> dict[str, str]:
    """Each quarantined record's review, read in-process (``tardy.quarantine.listing``)."""
    from tardy.quarantine.listing import read

    return {r.record_id: str(r.review) for r in read(lake["context"], lake["spark"]).records}


def _steward_files(home: t.Any, record_id: str) -> list[Path]:
    sha, line = record_id.rsplit(":", 1)
    return sorted(home.landing.glob(f"pos/arrival_ts=*/steward-{sha[:20]}-{line}-*.jsonl"))


def _reviews(spark: t.Any, record_id: str) -> list[t.Any]:
    if not spark.catalog.tableExists("tardy.quarantine_reviews"):
        return []
    return spark.sql(
        f"SELECT * FROM tardy.quarantine_reviews WHERE record_id = '{record_id}' "
        "ORDER BY decided_at"
    ).collect()


def test_every_sources_quarantine_is_listed_with_its_reason(lake: dict[str, t.Any]) -> None:
    home = lake["home"]
    listed = _listed("--all")
    files = oracle.sales_files(home.landing)
    recs = oracle.records(files, home.landing)
    invalid = recs[~recs["valid"]]
    expected = {row.record_id: row.reason for row in invalid.itertuples()}
    assert set(lake["ids"].values()) <= set(expected)  # the oracle sees the hostile lines
    sales = {
        rid: r["reason"] for rid, r in listed.items() if r["model"] == "silver.sales_quarantine"
    }
    assert sales == expected
    assert {listed[rid]["source"] for rid in lake["ids"].values()} == {"pos"}
    assert all(listed[rid]["day"] == str(DAY) for rid in lake["ids"].values())
    (store,) = [r for r in listed.values() if '"change_id":"qr-1"' in r["raw_record"]]
    assert (store["source"], store["model"]) == ("store_master", "silver.store_quarantine")
    assert all(r["review"] == "open" for r in listed.values())
    # Ages on the feed's clock: the hostile batch arrived last, so its age is 0.
    assert {listed[rid]["age_hours"] for rid in lake["ids"].values()} == {0.0}
    only = _listed("--source", "pos", "--reason", "negative_quantity")
    assert lake["ids"]["B"] in only
    assert set(only) == {
        rid
        for rid, r in listed.items()
        if (r["source"], r["reason"]) == ("pos", "negative_quantity")
    }


def test_a_rejected_record_leaves_the_open_list_and_its_owner_is_told(
    lake: dict[str, t.Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("TARDY_ACTOR", STEWARD)
    home, spark, rejected = lake["home"], lake["spark"], lake["ids"]["B"]
    short = rejected[:6] + rejected[64:]  # the hostile file's hash prefix names it alone
    code, decided, err = _cli("quarantine", "reject", short, "--reason", "a test till")
    assert code == 0, err
    assert decided["notified"] == ["store-systems@example.com"]
    assert rejected not in _listed()  # the open list, as the steward reads it
    assert _reviewed(lake)[rejected] == "rejected"
    (row,) = _reviews(spark, rejected)
    assert (row.decision, row.reason, row.steward, row.source_system) == (
        "rejected",
        "a test till",
        STEWARD,
        "pos",
    )
    (told,) = _told(home, rejected)
    assert told["detail"]["owner"] == "store-systems@example.com"
    assert told["detail"]["records"] == [rejected]
    # Decided once: another decision is refused unless it supersedes this one.
    code, _, err = _cli("quarantine", "reject", short, "--reason", "again")
    assert code == 3 and "already rejected" in err
    assert len(_reviews(spark, rejected)) == 1


def _told(home: t.Any, record_id: str) -> list[dict[str, t.Any]]:
    """The rejection events of ``record_id`` the file sink received."""
    sink = home.root / "notifications.jsonl"
    events = [json.loads(line) for line in sink.read_text().splitlines()] if sink.exists() else []
    return [
        e
        for e in events
        if e["event"] == "quarantine_rejected" and record_id in e["detail"]["records"]
    ]


def test_a_rejection_stopped_before_its_event_is_announced_once_by_the_next_command(
    lake: dict[str, t.Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    """``tardy quarantine reject`` stopped between its decision's commit and its event
    (``announce:0``, where a kill would land): the decision is in the review table, its
    owner not told yet; the next quarantine command settles the held event (the review
    table has the decision) and its delivery tells the owner, once."""
    monkeypatch.setenv("TARDY_ACTOR", STEWARD)
    home, rejected = lake["home"], lake["ids"]["Bcut"]
    short = rejected[:6] + rejected[64:]
    cli_cut_at("announce:0", "quarantine", "reject", short, "--reason", "cut", "--json")
    assert _reviewed(lake)[rejected] == "rejected"  # committed
    assert _told(home, rejected) == []  # held, not kept
    assert rejected not in _listed()  # the listing settles it; its delivery follows
    (told,) = _told(home, rejected)
    assert (told["detail"]["owner"], told["detail"]["reason"]) == (
        "store-systems@example.com",
        "cut",
    )
    _listed()
    assert len(_told(home, rejected)) == 1
    assert not list((home.root / "outbox" / "held").glob("*.json"))


def test_a_duplicate_names_the_record_it_replays(lake: dict[str, t.Any]) -> None:
    spark, dup = lake["spark"], lake["ids"]["D"]
    original = spark.sql(
        "SELECT s.source_record_id FROM silver.sales_transactions s "
        f"WHERE s.event_date = DATE'{DAY}' ORDER BY s.transaction_id LIMIT 1"
    ).first()[0]
    code, decided, err = _cli("quarantine", "duplicate", dup, "--of", original[:8] + original[64:])
    assert code == 0, err
    (row,) = _reviews(spark, dup)
    assert (row.decision, row.duplicate_of) == ("duplicate", original)
    code, _, err = _cli("quarantine", "duplicate", dup, "--of", "ffffff:1", "--supersede")
    assert code == 1 and "no record" in err
    # Only onto a valid original of the same source: not a quarantined record.
    bad = lake["ids"]["C"]
    code, _, err = _cli("quarantine", "duplicate", dup, "--of", bad, "--supersede")
    assert code == 1 and "is not a valid record of source pos (quarantined)" in _line(err)
    # Not another source's: a store change's record id, of the store master's bronze table.
    other = spark.sql("SELECT record_id FROM bronze.store_changes LIMIT 1").first()[0]
    code, _, err = _cli("quarantine", "duplicate", dup, "--of", other, "--supersede")
    assert code == 1 and "no record of source pos" in _line(err)
    # (One a later correction superseded: tests/unit/test_duplicate_originals.py.)
    assert len(_reviews(spark, dup)) == 1


def test_an_invalid_fix_is_refused_with_the_rule_and_writes_nothing(
    lake: dict[str, t.Any],
) -> None:
    home, spark, bad = lake["home"], lake["spark"], lake["ids"]["C"]
    landed = sorted(home.landing.rglob("*"))
    code, _, err = _cli("quarantine", "fix", bad, "--set", "discount=10.00", "--reason", "typo")
    assert code == 1
    assert "fails rule discount_exceeds_gross" in " ".join(err.split())
    assert sorted(home.landing.rglob("*")) == landed
    assert _reviews(spark, bad) == []


def _fix_stopped_at(home: t.Any, point: str, how: str, *argv: str) -> None:
    """``tardy quarantine fix <argv>`` stopped at the failpoint ``point``: in this process
    (``how == "cut"``: raised where a kill would land, ``children.cli_cut_at``), or as a real
    process killed -9 there (``how == "killed"``, the long tier: its own JVM)."""
    if how == "cut":
        cli_cut_at(point, "quarantine", "fix", *argv)
        return
    done = subprocess.run(
        [str(Path(sys.executable).parent / "tardy"), "quarantine", "fix", *argv],
        env={**env_of(home.root), "TARDY_FAILPOINT": point},
        cwd=project_root(),
        capture_output=True,
        text=True,
        timeout=600,
        start_new_session=True,  # the failpoint kills the group, the JVM with it
    )
    assert done.returncode == -signal.SIGKILL, done.stderr[-2000:]


@pytest.mark.parametrize("how", ["cut", pytest.param("killed", marks=pytest.mark.long)])
def test_a_killed_fix_leaves_no_record_or_one_that_lands_once(
    lake: dict[str, t.Any], engine: t.Any, how: str
) -> None:
    """``tardy quarantine fix`` stopped before its steward file is renamed (``fix:0``), then
    after (``fix:1``): no record, then a whole record ingest lands once; the next fix appends
    its decision without a second file. The long tier kills real processes at those points
    (the engine released to them)."""
    from tardy.ingest import ingest

    home, killed = lake["home"], lake["ids"][f"E{how}"]
    argv = (killed, "--set", "product_id=3", "--reason", "product typo", "--json")
    if how == "killed":
        engine.release()
    _fix_stopped_at(home, "fix:0", how, *argv)  # before the rename: no steward record
    assert _steward_files(home, killed) == []
    spark = engine.open(home.root)[2]
    assert ingest(spark, home.landing).files_ingested == 0
    if how == "killed":
        engine.release()
    _fix_stopped_at(home, "fix:1", how, *argv)  # after it: a whole record, no decision yet
    _, lake["context"], lake["spark"] = engine.open(home.root)  # new ones after a release
    spark = lake["spark"]
    (path,) = _steward_files(home, killed)
    record = json.loads(path.read_text())
    assert path.read_text().count("\n") == 1 and record["product_id"] == 3
    assert _reviews(spark, killed) == []
    assert ingest(spark, home.landing).files_ingested == 1
    assert ingest(spark, home.landing).files_ingested == 0  # landed once

    code, decided, err = _cli("quarantine", "fix", *argv[:-1])
    assert code == 0, err
    assert decided["completed_interrupted_fix"] is True
    assert decided["steward_file"] == path.relative_to(home.landing).as_posix()
    assert _steward_files(home, killed) == [path]  # no second record
    (row,) = _reviews(spark, killed)
    assert (row.decision, row.steward_file, row.reason) == (
        "fixed",
        decided["steward_file"],
        "product typo",
    )


HOLD = """
import sys, time
from pathlib import Path
from tardy.engine.restate import hold
from tardy.quarantine.steward import LOCK_NAME
with hold(LOCK_NAME):
    print("held", flush=True)
    while not Path(sys.argv[1]).exists():
        time.sleep(0.05)
"""


@contextlib.contextmanager
def _other_steward(how: str, home: t.Any, tmp_path: Path) -> t.Iterator[None]:
    """Another steward holding the steward's lock for the block: this process's own hold of
    it through a second open of the lock (``how == "cut"``: the lock is a ``flock``, taken
    per open file), or a real process holding it (``"held"``, the long tier)."""
    if how == "cut":
        from tardy.engine.restate import restatement_lock
        from tardy.project.context import load_config
        from tardy.quarantine.steward import LOCK_NAME

        with restatement_lock(load_config(), None).exclusive(LOCK_NAME):
            yield
        return
    done = tmp_path / "done"
    other = subprocess.Popen(
        [sys.executable, "-c", HOLD, str(done)],
        env=env_of(home.root),
        cwd=project_root(),
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert other.stdout is not None and other.stdout.readline().strip() == "held"
        yield
    finally:
        done.touch()
        assert other.wait(timeout=60) == 0


@pytest.mark.parametrize("how", ["cut", pytest.param("held", marks=pytest.mark.long)])
def test_two_stewards_end_with_one_fix_and_one_refusal(
    lake: dict[str, t.Any], tmp_path: Path, how: str
) -> None:
    from tardy.ingest import ingest

    home, spark, fixed = lake["home"], lake["spark"], lake["ids"][f"A{how}"]
    args = ("quarantine", "fix", fixed, "--set", "store_id=1", "--reason", "store typo")
    with _other_steward(how, home, tmp_path):
        code, _, err = _cli(*args)  # the other steward decides: refused, nothing written
        assert code == 3, err
        assert _steward_files(home, fixed) == [] and _reviews(spark, fixed) == []
    code, decided, err = _cli(*args)
    assert code == 0, err
    (landed,) = _steward_files(home, fixed)
    assert decided["steward_file"] == landed.relative_to(home.landing).as_posix()
    code, _, err = _cli(*args)  # the second steward, once the first is done
    assert code == 3 and "already fixed" in err
    assert len(_steward_files(home, fixed)) == 1 and len(_reviews(spark, fixed)) == 1
    assert ingest(spark, home.landing).files_ingested == 1


def test_the_fixes_restate_exactly_their_day_to_the_oracle(lake: dict[str, t.Any]) -> None:
    """After the fixes landed (A: store 1, E: product 3, all of DAY; the fast tier's two, the
    long tier's too when the module runs whole), a restatement changes silver by exactly
    their transactions and gold by exactly DAY's store 1, and gold equals the oracle over
    every landing file, steward records included."""
    from tardy.engine.detect import detect
    from tardy.requests.restatements import restate

    home, context, spark = lake["home"], lake["context"], lake["spark"]
    reviewed = _reviewed(lake)
    fixed = {f"QR-{name}" for name, rid in lake["ids"].items() if reviewed[rid] == "fixed"}
    assert {"QR-Acut", "QR-Ecut"} <= fixed
    roots = detect(context, spark).roots
    assert roots["silver.sales_transactions"] == [[str(DAY), str(DAY)]]
    silver_before = {r.transaction_id for r in spark.table("silver.sales_transactions").collect()}
    before = actual_daily(spark)
    assert str(restate(context, spark, "steward fixes").status) == "promoted"
    silver_after = {r.transaction_id for r in spark.table("silver.sales_transactions").collect()}
    assert silver_after - silver_before == fixed
    assert silver_before <= silver_after
    after = actual_daily(spark)
    assert {k for k in after if after[k] != before.get(k)} == {(DAY, 1)}
    assert after == expected_daily(oracle.sales_files(home.landing), home.landing)
