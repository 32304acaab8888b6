"""Store changes through `tardy ingest` on real Spark + Delta: ``store_master`` landing files go
to ``bronze.store_changes``, every other source system to ``bronze.pos_events``, one ledger.

The Spark work runs on a data home of its own, opened in the worker's warm engine
(``children.in_own_home``), as test_hostile_landing.py does: the hand-written pos lines it
ingests are no other module's business. It ingests a small
hand-written landing (a store_master file with a valid change, the same line again, a line
that is not JSON, a JSON array, a record missing most fields, an offset timestamp, a bad
store id and timestamp, a blank line; and a pos file), reads back both bronze tables and the
ledger, ingests again (nothing new) and runs ``tardy ingest --json`` once more. The parent
checks every row against the files it wrote, split into lines here (not with ingest's code).
"""

from __future__ import annotations

import contextlib
import hashlib
import io
import json
from pathlib import Path

from children import in_own_home

BRONZE_TABLE = "bronze.pos_events"  # sources.yaml: pos and partner land here
STORE_CHANGES_TABLE = "bronze.store_changes"  # sources.yaml: store_master

ARRIVAL = "arrival_ts=20260105T060000Z"
STORE_FILE = f"store_master/{ARRIVAL}/changes.jsonl"
STORE_COPY = "store_master/arrival_ts=20260106T000000Z/changes-resent.jsonl"
POS_FILE = f"pos/{ARRIVAL}/pos-batch.jsonl"
VALID = (
    '{"store_id":1,"effective_ts":"2026-01-05T00:00:00Z","region":"north","format":"express",'
    '"manager":"Ann Lee","change_id":"C1","is_correction":false}'
)
STORE_LINES = [
    VALID,
    VALID,  # the same line again: a second row, silver decides it changes nothing
    "this is not JSON {",
    "[1, 2]",
    '{"store_id":2}',
    '{"store_id": 1, "effective_ts": "2026-01-05T02:00:00+02:00", "region": "south", '
    '"format": "express", "manager": "Ann Lee", "change_id": "C1-R", "is_correction": true}',
    '{"store_id":"S-9","effective_ts":"2026-13-01","region":" ","is_correction":"yes","extra":[1]}',
    "",
]
POS_LINES = [
    '{"transaction_id":"T1","record_type":"sale","store_id":1,"product_id":2,"quantity":1,'
    '"unit_price":4.50,"discount":0.00,"event_ts":"2026-01-05T08:00:00Z"}',
    '{"transaction_id": "T2", ',
]
SPEC_COLUMNS = [
    "record_id",
    "source_system",
    "source_file",
    "file_sha256",
    "line_number",
    "ingestion_id",
    "ingested_at",
    "arrival_ts",
    "arrival_date",
    "effective_ts",
    "raw_record",
    "parse_error",
    "store_id",
    "effective_ts_raw",
    "region",
    "format",
    "manager",
    "change_id",
    "is_correction",
]
# The JSON keys `tardy ingest --json` printed before store changes existed: a contract.
INGEST_JSON_KEYS = {
    "ingestion_id",
    "files_ingested",
    "files_skipped",
    "rows",
    "rows_with_parse_error",
    "skipped",
    "ingested",
    "files_refused",
    "refused",
}


def child() -> dict:
    from tardy.cli import main
    from tardy.ingest import ingest
    from tardy.ingest.tables import LEDGER_TABLE
    from tardy.project.context import open_context, spark_of
    from tardy.project.home import activate

    home = activate()
    spark = spark_of(open_context(load=False))
    root = home.landing.resolve()
    for relative, lines in ((STORE_FILE, STORE_LINES), (POS_FILE, POS_LINES)):
        path = root / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("\n".join(lines) + "\n")

    def rows(table: str) -> list[dict[str, object]]:
        order = "source_file" if table == LEDGER_TABLE else "source_file, line_number"
        frame = spark.sql(f"SELECT * FROM {table} ORDER BY {order}")
        return [
            {k: None if v is None else str(v) for k, v in r.asDict().items()}
            for r in frame.collect()
        ]

    def count(table: str) -> int:
        return spark.table(table).count()

    out: dict[str, object] = {"root": str(root)}
    out["first"] = ingest(spark, root).as_dict()
    out["store"] = rows(STORE_CHANGES_TABLE)
    out["pos"] = rows(BRONZE_TABLE)
    out["ledger"] = rows(LEDGER_TABLE)
    out["columns"] = spark.table(STORE_CHANGES_TABLE).columns
    out["types"] = {
        f.name: f.dataType.simpleString() for f in spark.table(STORE_CHANGES_TABLE).schema
    }
    detail = spark.sql(f"DESCRIBE DETAIL {STORE_CHANGES_TABLE}").first()
    out["partition_columns"] = list(detail.partitionColumns)
    out["properties"] = dict(detail.properties)
    try:
        spark.sql(f"DELETE FROM {STORE_CHANGES_TABLE} WHERE store_id = '1'")
        out["delete"] = None
    except Exception as error:  # Delta's appendOnly refuses it
        out["delete"] = type(error).__name__ + ": " + str(error)[:300]

    out["second"] = ingest(spark, root).as_dict()
    copy = root / STORE_COPY  # the same bytes under another name: recognised, skipped
    copy.parent.mkdir(parents=True)
    copy.write_bytes((root / STORE_FILE).read_bytes())
    stdout, stderr = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(stdout), contextlib.redirect_stderr(stderr):
        code = main(["ingest", "--json"])
    out["cli"] = {"code": code, "stdout": stdout.getvalue(), "stderr": stderr.getvalue()[-2000:]}
    out["counts_after"] = {t: count(t) for t in (STORE_CHANGES_TABLE, BRONZE_TABLE, LEDGER_TABLE)}
    return out


def declared_columns(name: str) -> dict[str, str]:
    """A table's columns and types as external_models.yaml declares them."""
    from ruamel.yaml import YAML

    from tardy.project.home import project_root

    models = YAML(typ="safe").load((project_root() / "external_models.yaml").read_text())
    return next(m["columns"] for m in models if m["name"] == name)


def _sha(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _expected_store_row(line: str) -> dict[str, str | None]:
    """The text columns of one store_master line, judged here with ``json``."""
    fields = ("store_id", "effective_ts", "region", "format", "manager", "change_id")
    try:
        record = json.loads(line)
    except json.JSONDecodeError:
        record = None
    if not isinstance(record, dict):
        return {f if f != "effective_ts" else "effective_ts_raw": None for f in fields} | {
            "is_correction": None
        }
    texts: dict[str, str | None] = {}
    for name in (*fields, "is_correction"):
        value = record.get(name)
        if isinstance(value, bool):
            value = "true" if value else "false"
        texts["effective_ts_raw" if name == "effective_ts" else name] = (
            None if value is None else str(value)
        )
    return texts


def test_store_changes_and_sales_land_in_their_own_tables(engine, tmp_path: Path) -> None:
    out = in_own_home(engine, tmp_path / "home", child)
    root = Path(out["root"])
    store_sha, pos_sha = _sha(root / STORE_FILE), _sha(root / POS_FILE)

    first = out["first"]
    assert set(first) >= INGEST_JSON_KEYS
    assert first["files_ingested"] == 2 and first["files_skipped"] == 0
    assert first["rows"] == len(STORE_LINES) + len(POS_LINES)
    assert first["rows_by_table"] == {
        "bronze.pos_events": len(POS_LINES),
        "bronze.store_changes": len(STORE_LINES),
        "bronze.payment_refunds": 0,  # every declared bronze table is counted
    }
    # not JSON, an array, the blank line; the truncated sale
    assert first["rows_with_parse_error"] == 4
    assert sorted((i["source_file"], i["rows"], i["table"]) for i in first["ingested"]) == [
        (POS_FILE, len(POS_LINES), "bronze.pos_events"),
        (STORE_FILE, len(STORE_LINES), "bronze.store_changes"),
    ]

    # bronze.store_changes: exactly the spec's columns, one row per store_master line.
    assert out["columns"] == SPEC_COLUMNS
    assert out["types"] == declared_columns("bronze.store_changes")
    assert out["partition_columns"] == ["arrival_date"]
    assert out["properties"].get("delta.appendOnly") == "true"
    assert out["properties"].get("delta.enableChangeDataFeed") == "true"
    assert out["delete"] is not None and "append" in out["delete"].lower()
    store = out["store"]
    assert [r["line_number"] for r in store] == [str(n) for n in range(1, len(STORE_LINES) + 1)]
    ingestion = first["ingestion_id"]
    for row, line in zip(store, STORE_LINES, strict=True):
        number = row["line_number"]
        assert row["record_id"] == f"{store_sha}:{number}"
        assert (row["source_system"], row["source_file"]) == ("store_master", STORE_FILE)
        assert (row["file_sha256"], row["ingestion_id"]) == (store_sha, ingestion)
        assert (row["arrival_ts"], row["arrival_date"]) == ("2026-01-05 06:00:00", "2026-01-05")
        assert row["raw_record"] == line
        assert {k: row[k] for k in _expected_store_row(line)} == _expected_store_row(line), line
    errors = [row["parse_error"] for row in store]
    assert [e is not None for e in errors] == [False, False, True, True, False, False, False, True]
    assert errors[3].startswith("not a JSON object") and errors[7] == "blank line"
    effective = [row["effective_ts"] for row in store]
    # parsed like event_ts: UTC, an offset converted; NULL when missing or unparseable
    assert effective == [
        "2026-01-05 00:00:00",
        "2026-01-05 00:00:00",
        None,
        None,
        None,
        "2026-01-05 00:00:00",
        None,
        None,
    ]
    assert store[5]["effective_ts_raw"] == "2026-01-05T02:00:00+02:00"
    assert (store[6]["store_id"], store[6]["is_correction"]) == ("S-9", "yes")

    # bronze.pos_events: only the pos file, as before.
    pos = out["pos"]
    assert [(r["source_file"], r["raw_record"]) for r in pos] == [(POS_FILE, x) for x in POS_LINES]
    assert pos[0]["event_ts"] == "2026-01-05 08:00:00" and pos[0]["transaction_id"] == "T1"
    assert pos[1]["parse_error"] is not None and "effective_ts" not in pos[0]

    # One ledger for both tables.
    ledger = sorted(
        (r["source_system"], r["source_file"], r["file_sha256"], r["rows"]) for r in out["ledger"]
    )
    assert ledger == [
        ("pos", POS_FILE, pos_sha, str(len(POS_LINES))),
        ("store_master", STORE_FILE, store_sha, str(len(STORE_LINES))),
    ]

    # Ingesting again is a no-op; a renamed copy of the store file is recognised too.
    second = out["second"]
    assert (second["files_ingested"], second["files_skipped"], second["rows"]) == (0, 2, 0)
    assert second["rows_by_table"] == dict.fromkeys(first["rows_by_table"], 0)
    assert out["cli"]["code"] == 0, out["cli"]["stderr"]
    cli = json.loads(out["cli"]["stdout"])
    assert set(cli) >= INGEST_JSON_KEYS
    assert (cli["files_ingested"], cli["files_skipped"], cli["rows"]) == (0, 3, 0)
    resent = [s for s in cli["skipped"] if s["source_file"] == STORE_COPY]
    assert resent and resent[0]["duplicate_of"] == STORE_FILE
    assert out["counts_after"] == {
        "bronze.store_changes": len(STORE_LINES),
        "bronze.pos_events": len(POS_LINES),
        "bronze.ingest_ledger": 2,
    }
