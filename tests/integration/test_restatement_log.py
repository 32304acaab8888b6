"""The typed restatement log, and the migration of a log written by tardy before it.

A data home whose log was created by the previous code (schema 1: the DDL and view below,
copied from it, and rows as it wrote them: JSON text columns, the staged detail as JSON in
``message``) is opened by the current code, killed right after the migration's first commit
(``TARDY_FAILPOINT=migrate_log:1``, between adding the typed columns and replacing the view),
then opened again, in its own data home. The fast tier stops the migration in-process at that
failpoint (``phase_old_cut``: ``TARDY_FAILPOINT_MODE=raise``); the long tier's ``old`` is a
child process (this module run as a script) that builds the schema-1 log and is killed
migrating it. ``new`` runs in the worker's warm engine (``children.in_own_home``), checks
what the stop left, finishes the migration, appends typed rows and reads both kinds back,
with SQL on the typed columns.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import typing as t
from datetime import datetime

import pytest
from children import in_own_home

from tardy.project.home import project_root

OLD_ID, NEW_ID, FAILED_ID = "20240101T000000Z-old001", "20240301T000000Z-new001", "failed-1"
SILVER, DAILY = "silver.sales_transactions", "gold.daily_store_revenue"

# The previous code's DDL and view (tardy.engine.log at 7c15fb8), verbatim.
OLD_DDL = """
CREATE TABLE IF NOT EXISTS tardy.restatement_log (
  restatement_id STRING NOT NULL,
  action STRING NOT NULL,
  status STRING NOT NULL,
  logged_at TIMESTAMP NOT NULL,
  reason STRING NOT NULL,
  actor STRING NOT NULL,
  intervals STRING,
  rows_before STRING,
  rows_after STRING,
  bronze_version BIGINT,
  arrival_watermark TIMESTAMP,
  code_version STRING,
  snapshot_versions STRING,
  table_versions_before STRING,
  table_versions_after STRING,
  audit_results STRING,
  message STRING
) USING delta
TBLPROPERTIES ('delta.appendOnly' = 'true')
"""
OLD_VIEW = """
CREATE OR REPLACE VIEW tardy.restated_periods AS
WITH promoted AS (
  SELECT restatement_id, reason, actor, logged_at AS promoted_at,
         from_json(intervals, 'map<string, array<array<string>>>') AS intervals
  FROM tardy.restatement_log
  WHERE action = 'promoted'
    AND restatement_id NOT IN (
      SELECT restatement_id FROM tardy.restatement_log WHERE action = 'rolled_back'
    )
), days AS (
  SELECT restatement_id, reason, actor, promoted_at, model,
         explode(sequence(to_date(span[0]), to_date(span[1]))) AS period
  FROM promoted
  LATERAL VIEW explode(intervals) AS model, spans
  LATERAL VIEW explode(spans) AS span
)
SELECT model, period, restatement_id AS last_restatement_id, reason AS last_restatement_reason,
       actor AS last_restated_by, promoted_at AS last_restated_at
FROM (
  SELECT *, ROW_NUMBER() OVER (PARTITION BY model, period ORDER BY promoted_at DESC) AS rn
  FROM days
)
WHERE rn = 1
"""
OLD_STAGED_TABLE = {
    "model": SILVER,
    "prod_table": "sqlmesh__silver.silver__sales_transactions__1",
    "staged_table": "sqlmesh__silver.silver__sales_transactions__1__dev",
    "time_column": "event_date",
    "version_before": 7,
    "intervals": [["2024-01-02", "2024-01-03"]],
    "snapshot_version": "1",
    "changed": [["2024-01-02", "2024-01-02"]],
}
OLD_MANIFEST = {
    "arrival_watermark": "2024-01-05T10:00:00",
    "previous_watermark": None,
    "bronze_version": 4,
    "since_bronze_version": None,
    "late_rows": 3,
    "impacted": {SILVER: [["2024-01-02", "2024-01-03"]]},
    "absorbed_by_next_run": {SILVER: []},
    "reasons": {SILVER: "3 transactions"},
    "roots": {SILVER: [["2024-01-02", "2024-01-03"]]},
    "stock_commands": ["sqlmesh plan --restate-model silver.sales_transactions"],
}
OLD_AUDITS = [{"audits_run": 4, "blocking_failures": 0, "failed": []}]


def _old_rows() -> list[tuple[object, ...]]:
    """Rows as the previous code's ``LogEntry.row`` wrote them (JSON text)."""

    def js(value: object) -> str:
        return json.dumps(value, sort_keys=True, default=str)

    def row(action: str, at: int, **kw: t.Any) -> tuple[object, ...]:
        return (
            OLD_ID, action, action, datetime(2024, 1, 5, 11, at), "old late rows", "ci",
            kw.get("intervals"), kw.get("rows_before"), kw.get("rows_after"), 4,
            datetime(2024, 1, 5, 10), "abc", js({SILVER: "1"}), kw.get("before"),
            kw.get("after"), kw.get("audits"), kw.get("message"),
        )  # fmt: skip

    spans = js({SILVER: [["2024-01-02", "2024-01-02"]]})
    totals = js({SILVER: {"rows": 40, "sums": {"revenue": "180.50"}}})
    return [
        row("staging", 0, intervals=js(OLD_MANIFEST["impacted"])),
        row(
            "staged",
            1,
            intervals=spans,
            rows_before=totals,
            rows_after=totals,
            before=js({SILVER: 7}),
            audits=js(OLD_AUDITS),
            message=json.dumps(
                {
                    "staged_tables": [OLD_STAGED_TABLE],
                    "manifest": OLD_MANIFEST,
                    "accepted_large_change": False,
                }
            ),
        ),  # fmt: skip
        row("promoting", 2, intervals=spans, before=js({SILVER: 7})),
        row(
            "promoted",
            3,
            intervals=spans,
            before=js({SILVER: 7}),
            after=js({SILVER: 8}),
            message="committed silver.sales_transactions in this call",
        ),  # fmt: skip
    ]


def _old_log(spark: t.Any) -> int:
    """A schema-1 log with one promoted restatement; its rows."""
    spark.sql("CREATE SCHEMA IF NOT EXISTS tardy")
    spark.sql(OLD_DDL)
    spark.sql(OLD_VIEW)
    schema = spark.table("tardy.restatement_log").schema
    spark.createDataFrame(_old_rows(), schema=schema).write.format("delta").mode(
        "append"
    ).saveAsTable("tardy.restatement_log")
    return spark.table("tardy.restatement_log").count()


def phase_old() -> None:
    """The long tier's child: the schema-1 log, then the current code migrates it and is
    killed between the migration's two steps."""
    from tardy.engine import log
    from tardy.project.context import open_context, spark_of

    spark = spark_of(open_context(load=False))
    print("RESULT " + json.dumps({"old_rows": _old_log(spark)}))
    sys.stdout.flush()
    os.environ["TARDY_FAILPOINT"] = "migrate_log:1"
    log.ensure_log(spark)
    raise SystemExit("the failpoint was never reached")


def phase_old_cut() -> dict[str, int]:
    """The fast tier's same step in-process: the schema-1 log, its migration stopped at the
    same failpoint (``children.failing_at``: raised where the long tier kills)."""
    from children import failing_at

    from tardy.engine import log
    from tardy.errors import FailpointReached
    from tardy.project.context import open_context, spark_of

    spark = spark_of(open_context(load=False))
    old = {"old_rows": _old_log(spark)}
    with failing_at("migrate_log:1"):
        try:
            log.ensure_log(spark)
        except FailpointReached:
            return old
    raise AssertionError("the failpoint was never reached")


def _new_entries() -> list[t.Any]:
    """The current code's entries for a new restatement, with real engine objects."""
    from tardy.engine.audit import AuditResult
    from tardy.engine.log import Action, LogEntry
    from tardy.engine.results import Manifest
    from tardy.engine.stage import StagedTable

    spans = {SILVER: [["2024-03-01", "2024-03-02"]], DAILY: [["2024-03-02", "2024-03-02"]]}
    audits = [
        AuditResult(
            "not_null",
            SILVER,
            ["2024-03-01", "2024-03-02"],
            0,
            True,
            [["2024-03-01", "2024-03-02"]],
        ),
        AuditResult(
            "reconciles_with_silver",
            DAILY,
            ["2024-03-02", "2024-03-02"],
            0,
            True,
            [["2024-03-02", "2024-03-02"]],
        ),
        AuditResult(
            "few_quarantined",
            SILVER,
            ["2024-03-01", "2024-03-02"],
            3,
            False,
            [["2024-03-01", "2024-03-02"]],
        ),
    ]
    staged = [
        StagedTable(SILVER, "p.s", "p.s__dev", "event_date", 11, spans[SILVER], "v1",
                    [["2024-03-02", "2024-03-02"]]),
        StagedTable(DAILY, "p.d", "p.d__dev", "event_date", 5, spans[DAILY], "v2",
                    [["2024-03-02", "2024-03-02"]]),
    ]  # fmt: skip
    manifest = Manifest(
        arrival_watermark="2024-03-03T09:30:00",
        previous_watermark="2024-01-05T10:00:00",
        bronze_version=9,
        since_bronze_version=4,
        late_rows=2,
        impacted=spans,
        absorbed_by_next_run={SILVER: [], DAILY: []},
        reasons={SILVER: "2 transactions", DAILY: "the intervals that read ..."},
        roots={SILVER: spans[SILVER]},
        stock_commands=["sqlmesh plan --restate-model silver.sales_transactions"],
    )
    totals = {
        SILVER: {"rows": 50, "sums": {"revenue": "225.00", "items": "51"}},
        DAILY: {"rows": 2, "sums": {"revenue": "225.00"}},
    }
    common: dict[str, t.Any] = dict(
        restatement_id=NEW_ID,
        reason="new late rows",
        actor="ci",
        intervals=spans,
        bronze_version=9,
        snapshot_versions={SILVER: "v1", DAILY: "v2"},
        table_versions_before={SILVER: 11, DAILY: 5},
    )
    changed = {SILVER: [["2024-03-02", "2024-03-02"]], DAILY: [["2024-03-02", "2024-03-02"]]}
    return [
        LogEntry(action=Action.STAGING, logged_at=datetime(2024, 3, 3, 10, 0), **common),
        LogEntry(
            action=Action.STAGED,
            logged_at=datetime(2024, 3, 3, 10, 1),
            rows_before=totals,
            rows_after=totals,
            audits=audits,
            staged_tables=staged,
            manifest=manifest,
            accepted_large_change=True,
            message="staged 2 table(s), 2 with changed days",
            **common,
        ),
        LogEntry(
            action=Action.PROMOTED,
            logged_at=datetime(2024, 3, 3, 10, 2),
            table_versions_after={SILVER: 12, DAILY: 6},
            **{**common, "intervals": changed},
        ),
        LogEntry(
            restatement_id=FAILED_ID,
            action=Action.AUDIT_FAILED,
            reason="bad rows",
            logged_at=datetime(2024, 3, 4, 8, 0),
            audits=[
                AuditResult(
                    "not_null",
                    SILVER,
                    ["2024-03-04", "2024-03-04"],
                    0,
                    True,
                    [["2024-03-04", "2024-03-04"]],
                ),
                AuditResult(
                    "reconciles_with_bronze",
                    SILVER,
                    ["2024-03-04", "2024-03-04"],
                    7,
                    True,
                    [["2024-03-04", "2024-03-04"]],
                ),
            ],  # fmt: skip
            message="blocking audit failed: ...",
        ),
    ]


def phase_new() -> dict[str, t.Any]:
    """What the kill left, the migration finished (twice), typed rows appended, both read."""
    from tardy.engine import log, log_schema
    from tardy.project.context import open_context, spark_of

    spark = spark_of(open_context(load=False))
    table = log_schema.LOG_TABLE

    def commits() -> int:
        return spark.sql(f"DESCRIBE HISTORY {table}").count()

    def rows(sql: str) -> list[list[t.Any]]:
        return [list(r) for r in spark.sql(sql).collect()]

    out: dict[str, t.Any] = {
        "killed": {
            "missing": log_schema.missing_columns(spark),
            "view_comment": spark.catalog.getTable(log_schema.PERIODS_VIEW).description,
            "periods": rows(
                "SELECT model, period, last_restatement_id FROM tardy.restated_periods"
            ),
            "commits": commits(),
        }
    }  # fmt: skip
    old_entries = log.entries(spark, OLD_ID)  # finishes the migration
    log.ensure_log(spark)
    out["migrated"] = {
        "view_comment": spark.catalog.getTable(log_schema.PERIODS_VIEW).description,
        "commits": commits(),
        "properties": dict(rows(f"SHOW TBLPROPERTIES {table}")),
        "schema": spark.table(table).schema.simpleString(),
    }
    for entry in _new_entries():
        log.append(spark, entry)
    spark.sql("CREATE SCHEMA IF NOT EXISTS fresh")
    spark.sql(log_schema.LOG_DDL.replace(table, "fresh.restatement_log"))
    out["fresh_schema"] = spark.table("fresh.restatement_log").schema.simpleString()
    out["old_entries"] = old_entries
    out["old_again"] = log.entries(spark, OLD_ID)
    out["new"] = log.entries(spark, NEW_ID)
    out["failed"] = log.entries(spark, FAILED_ID)
    out["summary"] = log.summary(spark)
    out["sql"] = {
        "failing_audits": rows(
            f"SELECT restatement_id, a.model, a.audit, a.interval_start, a.failing_rows, "
            f"a.blocking FROM {table} LATERAL VIEW explode(audits) AS a "
            "WHERE a.failing_rows > 0 ORDER BY restatement_id"
        ),
        "audits_per_row": rows(
            f"SELECT restatement_id, action, size(audits) FROM {table} "
            "WHERE audits IS NOT NULL ORDER BY logged_at"
        ),
        "version_steps": rows(
            f"SELECT m, model_versions_after[m] - model_versions_before[m] FROM {table} "
            "LATERAL VIEW explode(map_keys(model_versions_after)) AS m "
            f"WHERE restatement_id = '{NEW_ID}' ORDER BY m"
        ),
        "spans": rows(
            f"SELECT action, m, datediff(s.`end`, s.`start`) + 1 FROM {table} "
            "LATERAL VIEW explode(model_intervals) AS m, spans LATERAL VIEW explode(spans) AS s "
            f"WHERE restatement_id = '{NEW_ID}' ORDER BY logged_at, m"
        ),
        "staged_tables": rows(
            f"SELECT s.model, s.version_before, size(s.changed), manifest.bronze_version, "
            f"manifest.arrival_watermark, accepted_large_change, model_rows_after['{SILVER}'].rows "
            f"FROM {table} LATERAL VIEW explode(staged_tables) AS s ORDER BY s.model"
        ),
        "json_columns_set": rows(
            f"SELECT restatement_id, count(*) FROM {table} WHERE "
            + " OR ".join(f"{c} IS NOT NULL" for c in log_schema.JSON_COLUMNS)
            + " GROUP BY restatement_id"
        ),
        "periods": rows(
            "SELECT model, period, last_restatement_id FROM tardy.restated_periods "
            "ORDER BY model, period"
        ),
    }  # fmt: skip
    return out


# -- the parent --------------------------------------------------------------------------------


@pytest.fixture(
    scope="module",
    # the fast tier stops the migration in-process at the failpoint; the long tier kills a
    # real process there (its own JVM)
    params=["cut", pytest.param("killed", marks=pytest.mark.long)],
)
def migrated(
    engine, tmp_path_factory: pytest.TempPathFactory, request: pytest.FixtureRequest
) -> dict[str, t.Any]:
    home = tmp_path_factory.mktemp("old_log_home")
    if request.param == "cut":
        old = in_own_home(engine, home, phase_old_cut)
        return {"old_phase": old, **in_own_home(engine, home, phase_new)}
    env = {**os.environ, "TARDY_HOME": str(home)}
    env.pop("TARDY_FAILPOINT", None)
    killed = subprocess.run(
        [sys.executable, __file__, "old"],
        cwd=project_root(),
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
        start_new_session=True,  # the failpoint kills the group, the JVM with it
    )
    assert killed.returncode == -signal.SIGKILL, killed.stderr[-3000:]
    old = json.loads(killed.stdout.strip().splitlines()[-1][len("RESULT ") :])
    return {"old_phase": old, **in_own_home(engine, home, phase_new)}


def test_a_kill_between_the_migration_steps_leaves_a_readable_log(
    migrated: dict[str, t.Any],
) -> None:
    from tardy.engine.log_schema import TYPED_COLUMNS, VIEW_COMMENT

    assert migrated["old_phase"] == {"old_rows": 4}
    killed = migrated["killed"]
    assert killed["missing"] == []  # the typed columns came in the one commit before the kill
    assert killed["view_comment"] != VIEW_COMMENT  # the view was not replaced yet
    assert killed["periods"] == [[SILVER, "2024-01-02", OLD_ID]]  # and still reads
    # then the migration finishes once: no commit when run again
    migrated_ = migrated["migrated"]
    assert migrated_["view_comment"] == VIEW_COMMENT
    assert migrated_["commits"] == killed["commits"]
    assert migrated_["properties"]["delta.appendOnly"] == "true"
    for name, kind in TYPED_COLUMNS.items():
        assert f"{name}:{kind.lower().replace(' ', '').replace('`', '')}" in migrated_["schema"]
    assert migrated["fresh_schema"] == migrated_["schema"]  # a fresh log is the same


def test_old_rows_read_as_before_the_migration(migrated: dict[str, t.Any]) -> None:
    old = migrated["old_entries"]  # read as the migration finished
    assert migrated["old_again"] == old  # and after new rows were appended
    assert [e["action"] for e in old] == ["staging", "staged", "promoting", "promoted"]
    staged, promoted = old[1], old[3]
    assert staged["intervals"] == {SILVER: [["2024-01-02", "2024-01-02"]]}
    assert staged["rows_after"] == {SILVER: {"rows": 40, "sums": {"revenue": "180.50"}}}
    assert staged["audit_results"] == OLD_AUDITS
    assert staged["snapshot_versions"] == {SILVER: "1"}
    assert staged["staged_tables"] == [OLD_STAGED_TABLE]  # from the JSON in message
    assert staged["manifest"] == OLD_MANIFEST and staged["accepted_large_change"] is False
    assert promoted["table_versions_before"] == {SILVER: 7}
    assert promoted["table_versions_after"] == {SILVER: 8}
    assert promoted["staged_tables"] is None and promoted["message"].startswith("committed")


def test_new_rows_are_typed_and_read_in_the_same_shapes(migrated: dict[str, t.Any]) -> None:
    new = migrated["new"]
    assert [e["action"] for e in new] == ["staging", "staged", "promoted"]
    staged, promoted = new[1], new[2]
    assert staged["message"] == "staged 2 table(s), 2 with changed days"
    assert staged["intervals"] == {
        SILVER: [["2024-03-01", "2024-03-02"]],
        DAILY: [["2024-03-02", "2024-03-02"]],
    }
    assert staged["rows_after"][SILVER] == {
        "rows": 50,
        "sums": {"revenue": "225.00", "items": "51"},
    }
    assert staged["audit_results"] == [
        {
            "audits_run": 3,
            "blocking_failures": 0,
            "failed": [
                {
                    "audit": "few_quarantined",
                    "model": SILVER,
                    "interval": ["2024-03-01", "2024-03-02"],
                    "rows": 3,
                    "blocking": False,
                }
            ],
        }
    ]
    tables = staged["staged_tables"]
    assert [(s["model"], s["version_before"], s["changed"]) for s in tables] == [
        (SILVER, 11, [["2024-03-02", "2024-03-02"]]),
        (DAILY, 5, [["2024-03-02", "2024-03-02"]]),
    ]
    assert tables[0]["intervals"] == [["2024-03-01", "2024-03-02"]]
    manifest = staged["manifest"]
    assert manifest["arrival_watermark"] == "2024-03-03T09:30:00"
    assert manifest["previous_watermark"] == "2024-01-05T10:00:00"
    assert manifest["absorbed_by_next_run"] == {SILVER: [], DAILY: []}
    assert manifest["since_bronze_version"] == 4 and manifest["stock_commands"]
    assert staged["accepted_large_change"] is True
    assert promoted["table_versions_after"] == {SILVER: 12, DAILY: 6}
    assert promoted["audit_results"] is None and promoted["staged_tables"] is None
    failed = migrated["failed"][0]["audit_results"][0]
    assert failed["audits_run"] == 2 and failed["blocking_failures"] == 1
    assert [f["audit"] for f in failed["failed"]] == ["reconciles_with_bronze"]
    statuses = {s["restatement_id"]: s["status"] for s in migrated["summary"]}
    assert statuses == {OLD_ID: "promoted", NEW_ID: "promoted", FAILED_ID: "audit_failed"}


def test_typed_columns_answer_sql(migrated: dict[str, t.Any]) -> None:
    sql = migrated["sql"]
    assert sql["failing_audits"] == [
        [NEW_ID, SILVER, "few_quarantined", "2024-03-01", 3, False],
        [FAILED_ID, SILVER, "reconciles_with_bronze", "2024-03-04", 7, True],
    ]
    assert sql["audits_per_row"] == [[NEW_ID, "staged", 3], [FAILED_ID, "audit_failed", 2]]
    assert sql["version_steps"] == [[DAILY, 1], [SILVER, 1]]
    assert sql["spans"] == [
        ["staging", DAILY, 1], ["staging", SILVER, 2],
        ["staged", DAILY, 1], ["staged", SILVER, 2],
        ["promoted", DAILY, 1], ["promoted", SILVER, 1],
    ]  # fmt: skip
    assert sql["staged_tables"] == [
        [DAILY, 5, 1, 9, "2024-03-03 09:30:00", True, 50],
        [SILVER, 11, 1, 9, "2024-03-03 09:30:00", True, 50],
    ]
    assert sql["json_columns_set"] == [[OLD_ID, 4]]  # only the old rows hold JSON text
    # The view reads both: the old promotion's day and the new one's changed days.
    assert sql["periods"] == [
        [DAILY, "2024-03-02", NEW_ID],
        [SILVER, "2024-01-02", OLD_ID],
        [SILVER, "2024-03-02", NEW_ID],
    ]


if __name__ == "__main__":
    phase = sys.argv[1]
    if phase == "old":
        phase_old()
    else:
        raise SystemExit(f"unknown phase {phase}")
