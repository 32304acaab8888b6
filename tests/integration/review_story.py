"""The review commands' story on a copy of the ``small`` template, in-process in the warm
engine: shared by the fast tier's ``test_review_commands`` and the long tier's
``test_restatement_races`` (which adds the kills and the race of two processes).

- build: ``tardy restate`` started while this process has the data home open is refused
  (exit 3), naming the process; late rows for closed days; a restatement is staged, a
  ``sqlmesh run`` commits, ``tardy promote`` refuses (exit 2) and commits nothing; ``tardy
  discard`` drops the stage; ``restate --dry-run`` writes nothing; the same rows are staged
  again;
- after (once a restatement of them is promoted): every restatement's log, typed; a later
  daily run, then a ``tardy rollback`` that refuses (2) before restoring anything.

The ``assert_*`` functions hold each rule's checks once, for both tiers.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import typing as t
from datetime import timedelta
from pathlib import Path

from children import SMALL_CLOCK, SMALL_CONFIG, cli_in_process, late_sales

from tardy.project.home import project_root

CONFIG, CLOCK = SMALL_CONFIG, SMALL_CLOCK
TERMINAL = {"promoted", "discarded", "rolled_back", "audit_failed", "breaker_tripped"}
BIN = Path(sys.executable).parent


# -- in-process work on the data home, in the warm engine ------------------------------------


class Child:
    """The phase's home, context and session (opened in the warm engine), and what it
    observes."""

    def __init__(self, home: t.Any, context: t.Any, spark: t.Any) -> None:
        self.started = time.perf_counter()
        self.seconds: dict[str, float] = {}  # cumulative, at each mark
        self.home, self.context, self.spark = home, context, spark

    def mark(self, step: str) -> None:
        self.seconds[f"{len(self.seconds)} {step}"] = round(time.perf_counter() - self.started, 1)

    def cli(self, *argv: str) -> dict[str, t.Any]:
        """``tardy <argv>`` in this process: exit code, stdout (JSON when it is), stderr."""
        code, text, err = cli_in_process(*argv)
        self.mark(argv[0])
        try:
            payload: t.Any = json.loads(text)
        except ValueError:
            payload = " ".join(text.split())
        return {"code": code, "out": payload, "err": " ".join(err.split())}

    def fingerprints(self) -> dict[str, t.Any]:
        from tardy.consumers.fingerprint import fingerprints

        return {k: v.as_dict() for k, v in fingerprints(self.context, self.spark).items()}

    def versions(self) -> dict[str, int]:
        """Each model's prod table's latest Delta version, from its ``_delta_log`` files."""
        return {model: _log_commits(log)[-1][0] for model, log in self._prod_logs().items()}

    def last_commits(self) -> dict[str, list[str]]:
        """Each model's prod table's latest Delta operation and its tag, from its log."""
        return {model: _log_commits(log)[-1][1:] for model, log in self._prod_logs().items()}

    def _prod_logs(self) -> dict[str, Path]:
        """Each model's prod table's ``_delta_log`` folder in the home's warehouse (a managed
        table's location is ``<schema>.db/<table>``; read as files, no Spark statement)."""
        from sqlglot import exp

        from tardy.engine import sqlmesh_api

        out = {}
        for s in sqlmesh_api.model_snapshots(self.context):
            if not sqlmesh_api.has_intervals(s):  # a view has no Delta history
                continue
            name = exp.to_table(s.table_name(is_deployable=True), dialect="spark")
            schema, table = name.db, name.name  # the catalog's, if named, is the home's
            log = self.home.root / "warehouse" / f"{schema}.db" / table / "_delta_log"
            assert log.is_dir(), log
            out[s.model.name] = log
        return out

    def actions(self, restatement_id: str) -> list[str]:
        from tardy.engine import log

        return [row["action"] for row in log.entries(self.spark, restatement_id)]

    def log_rows(self) -> int:
        from tardy.engine import log

        return len(log.entries(self.spark))

    def watermarks(self) -> int:
        from tardy.engine.watermark import WATERMARK_TABLE

        return self.spark.table(WATERMARK_TABLE).count()

    def run(self, days: int, **kwargs: t.Any) -> None:
        self.context.run(execution_time=CLOCK + timedelta(days=days), **kwargs)
        self.mark("run")


def _log_commits(log: Path) -> list[list[t.Any]]:
    """A Delta log's commits, oldest first: version, operation, ``userMetadata`` ("" when
    none), from the commit files (``<20-digit version>.json``, one action per line)."""
    out = []
    for path in sorted(log.glob("[0-9]" * 20 + ".json")):
        for line in path.read_text().splitlines():
            info = json.loads(line).get("commitInfo")
            if info is not None:
                out.append([int(path.stem), info["operation"], info.get("userMetadata") or ""])
    assert out, f"{log} holds no commit"
    return out


def land_late_rows(child: Child) -> None:
    """Four sales for two closed days, arriving an hour after the clock."""
    from tardy.ingest import ingest
    from tardy.ingest.landing import arrival_dir_name

    folder = child.home.landing / "pos" / arrival_dir_name(CLOCK + timedelta(hours=1))
    folder.mkdir(parents=True)
    (folder / "late.jsonl").write_text(late_sales("RACE", CONFIG.start))
    ingest(child.spark, child.home.landing)


def refused_restate(child: Child) -> dict[str, t.Any]:
    """``tardy restate`` as a process while this one has the home's state and metastore
    open: its exit code and output, and this process's pid."""
    child.context.state_sync.get_environment("prod")  # this process has the state ...
    child.spark.sql("SHOW TABLES IN bronze").collect()  # ... and the metastore open
    busy = subprocess.Popen(  # refused while this process holds the home
        [str(BIN / "tardy"), "restate", "--reason", "busy", "--json"],
        cwd=project_root(),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    stdout, stderr = busy.communicate(timeout=600)
    return {
        "pid": os.getpid(),
        "busy": {"code": busy.returncode, "out": stdout, "err": stderr[-3000:]},
    }


def phase_build(child: Child, *, refused: bool = True) -> dict[str, t.Any]:
    """The story's first part; with ``refused``, first a ``tardy restate`` process refused
    while this process has the home open (``refused_restate``)."""
    land_late_rows(child)
    out: dict[str, t.Any] = refused_restate(child) if refused else {}

    # Staged, then a run commits to prod: promotion refuses and commits nothing.
    staged = child.cli("restate", "--reason", "first", "--no-promote", "--json")
    first = staged["out"]["restatement_id"]
    out["first"] = {"id": first, "staged": staged, "stage_tables": stage_tables(child)}
    versions_staged = child.versions()
    child.run(1)
    out["first"]["versions"] = [versions_staged, child.versions()]
    prints, versions = child.fingerprints(), child.versions()
    out["first"]["promote"] = child.cli("promote", first, "--json")
    out["first"]["refused"] = {
        "fingerprints": [prints, child.fingerprints()],
        "versions": [versions, child.versions()],
        "actions": child.actions(first),
    }
    out["first"]["discard"] = child.cli("discard", first)
    out["first"]["discarded"] = {
        "fingerprints": [prints, child.fingerprints()],
        "versions": [versions, child.versions()],
        "actions": child.actions(first),
        "stage_tables": stage_tables(child),
    }

    before = (child.fingerprints(), child.log_rows(), child.watermarks(), stage_tables(child))
    out["dry_run"] = child.cli("restate", "--reason", "dry", "--dry-run", "--json")
    after = (child.fingerprints(), child.log_rows(), child.watermarks(), stage_tables(child))
    out["dry_run_before"], out["dry_run_after"] = before, after

    # The documented way on: stage the same late rows again.
    again = child.cli("restate", "--reason", "again", "--no-promote", "--json")
    out["again"] = {
        "staged": again,
        "fingerprints": child.fingerprints(),
        "versions": child.versions(),
        "watermarks": child.watermarks(),
    }
    out["seconds"] = child.seconds
    return out


def phase_stuck(child: Child, restatement_id: str) -> dict[str, t.Any]:
    out: dict[str, t.Any] = {
        "killed": {
            "actions": child.actions(restatement_id),
            "fingerprints": child.fingerprints(),
            "commits": child.last_commits(),
        }
    }
    # Another writer commits to the gold tables the killed promotion had not reached.
    child.run(2, select_models=["gold.*"], no_auto_upstream=True)
    prints, versions = child.fingerprints(), child.versions()
    out["written"] = {"fingerprints": prints, "versions": versions}
    out["promote"] = child.cli("promote", restatement_id, "--json")
    out["restate"] = child.cli("restate", "--reason", "blocked", "--json")
    out["refused"] = {
        "fingerprints": child.fingerprints(),
        "versions": child.versions(),
        "actions": child.actions(restatement_id),
        "log_rows": child.log_rows(),
    }
    watermarks = child.watermarks()
    out["discard"] = child.cli("discard", restatement_id)
    out["discarded"] = {
        "fingerprints": child.fingerprints(),
        "versions": child.versions(),
        "commits": child.last_commits(),
        "actions": child.actions(restatement_id),
        "stage_tables": stage_tables(child),
        "watermarks": [watermarks, child.watermarks()],
    }
    out["seconds"] = child.seconds
    return out


def phase_after(child: Child, promoted_id: str) -> dict[str, t.Any]:
    from tardy.engine import log

    entries = log.entries(child.spark)
    out: dict[str, t.Any] = {
        "log": {
            rid: [e["action"] for e in entries if e["restatement_id"] == rid]
            for rid in dict.fromkeys(e["restatement_id"] for e in entries)
        },
        "reasons": sorted({e["reason"] for e in entries}),
        "promoted": child.fingerprints(),
        "typed": typed_log(child, promoted_id),
    }
    child.run(3)  # a later daily run rewrites the restated tables' recent days
    prints, versions = child.fingerprints(), child.versions()
    out["rollback"] = child.cli("rollback", promoted_id, "--reason", "too late", "--json")
    out["refused"] = {
        "fingerprints": [prints, child.fingerprints()],
        "versions": [versions, child.versions()],
        "actions": child.actions(promoted_id),
    }
    out["seconds"] = child.seconds
    return out


def typed_log(child: Child, restatement_id: str) -> dict[str, t.Any]:
    """The promoted restatement's log rows read with SQL on the typed columns, and as
    ``tardy log <id> --json`` prints them."""
    from tardy.engine.log import LOG_TABLE

    def rows(sql: str) -> list[list[t.Any]]:
        return [list(r) for r in child.spark.sql(sql).collect()]

    of = f"restatement_id = '{restatement_id}'"
    return {
        "audits": rows(
            f"SELECT a.model, a.audit, a.interval_start, a.interval_end, a.blocking, "
            f"a.failing_rows FROM {LOG_TABLE} LATERAL VIEW explode(audits) AS a "
            f"WHERE {of} AND action = 'staged'"
        ),
        "version_steps": rows(
            f"SELECT m, model_versions_after[m] - model_versions_before[m] FROM {LOG_TABLE} "
            f"LATERAL VIEW explode(map_keys(model_versions_after)) AS m "
            f"WHERE {of} AND action = 'promoted' ORDER BY m"
        ),
        "staged_tables": rows(
            f"SELECT s.model, s.version_before, size(s.intervals), size(s.changed), "
            f"manifest.bronze_version = bronze_version, accepted_large_change "
            f"FROM {LOG_TABLE} LATERAL VIEW explode(staged_tables) AS s "
            f"WHERE {of} ORDER BY s.model"
        ),
        "promoted_days": rows(
            f"SELECT m, d FROM {LOG_TABLE} LATERAL VIEW explode(model_intervals) AS m, spans "
            "LATERAL VIEW explode(spans) AS s LATERAL VIEW explode(sequence(s.`start`, s.`end`)) "
            f"AS d WHERE {of} AND action = 'promoted' ORDER BY m, d"
        ),
        "periods": rows(
            f"SELECT model, period FROM tardy.restated_periods WHERE last_restatement_id = "
            f"'{restatement_id}' ORDER BY model, period"
        ),
        "json_text": rows(
            f"SELECT count(*) FROM {LOG_TABLE} WHERE coalesce(intervals, rows_before, "
            "rows_after, snapshot_versions, table_versions_before, table_versions_after, "
            "audit_results) IS NOT NULL"
        ),
        "cli": child.cli("log", restatement_id, "--json")["out"],
    }


def stage_tables(child: Child | None = None, home: Path | None = None) -> list[str]:
    """The staged rows tables' folders (``stage/<restatement id>/<model>`` in the data home),
    and any rows table in the metastore's warehouse (``__dev__rows``: none is written)."""
    root = child.home.root if child else home
    assert root is not None
    staged = [f"{p.parent.name}/{p.name}" for p in (root / "stage").glob("*/*")]
    return sorted([*staged, *(p.name for p in (root / "warehouse").glob("*.db/*__dev__rows"))])


# -- processes ---------------------------------------------------------------------------------


def env_of(home: Path) -> dict[str, str]:
    env = {**os.environ, "TARDY_HOME": str(home)}
    env.pop("TARDY_FAILPOINT", None)
    return env


def run_killed(home: Path, failpoint: str, *args: str) -> int:
    """``tardy <args>`` until ``failpoint`` kills it with its process group; its exit code."""
    done = subprocess.run(
        [str(BIN / "tardy"), *args],
        cwd=project_root(),
        env={**env_of(home), "TARDY_FAILPOINT": failpoint},
        capture_output=True,
        text=True,
        timeout=900,
        start_new_session=True,
    )
    assert done.returncode == -signal.SIGKILL, f"{failpoint}\n{done.stderr[-3000:]}"
    return done.returncode


def silver_of(prints: dict[str, t.Any]) -> t.Any:
    return prints["silver.sales_transactions"]


def gold_of(prints: dict[str, t.Any]) -> dict[str, t.Any]:
    return {k: v for k, v in prints.items() if k.startswith("gold.")}


# -- the rules' checks, for both tiers ---------------------------------------------------------


def assert_busy_refused(build: dict[str, t.Any], after: dict[str, t.Any]) -> None:
    """``tardy restate`` while this process had the home open: exit 3, naming the holder,
    nothing logged."""
    busy = build["busy"]
    assert busy["code"] == 3, busy
    refusal = json.loads(busy["out"])
    assert refusal["status"] == "refused" and refusal["exit_code"] == 3
    assert f"open in another process (pid {build['pid']}:" in refusal["error"]
    assert "Derby metastore" in refusal["error"] and "SQLMesh state" in refusal["error"]
    assert "Traceback" not in busy["err"]
    assert "busy" not in after["reasons"]  # nothing was logged


def assert_cut_restatements_discarded(
    stage_cut: dict[str, t.Any],
    intent_cut: dict[str, t.Any],
    next_one: dict[str, t.Any],
    log: dict[str, list[str]],
) -> None:
    """A restatement stopped (killed, or cut in-process) after staging two tables, then one
    stopped with every table staged, before its promotion's intent: the log still says
    staging for both (the staged entry is committed with the intent), not "staged" awaiting a
    review nobody asked for, so the next restatement discards them instead of refusing."""
    assert len(stage_cut["stage_tables"]) == 2  # silver and daily staged, then the stop
    assert len(intent_cut["stage_tables"]) == 7, intent_cut
    discarded = next_one["recovered"].removeprefix("discarded restatement ").split(",")[0]
    assert next_one["recovered"] == f"discarded restatement {discarded}, interrupted while staging"
    cut = [rid for rid, actions in log.items() if actions == ["staging", "discarded"]]
    assert discarded in cut and len(cut) == 2, log  # both stopped ones
    assert all(actions[-1] in TERMINAL for actions in log.values())


def assert_dry_run_wrote_nothing(build: dict[str, t.Any], after: dict[str, t.Any]) -> None:
    dry = build["dry_run"]
    assert dry["code"] == 0 and dry["out"]["status"] == "dry_run"
    assert dry["out"]["impacted"]["silver.sales_transactions"]  # it saw the late rows
    assert dry["out"]["restatement_id"] is None
    # prod fingerprints, log rows, watermark rows, staged tables
    assert build["dry_run_after"] == build["dry_run_before"]
    assert "dry" not in after["reasons"]


def assert_promotion_refused_after_a_run_then_discarded(build: dict[str, t.Any]) -> None:
    """Staged, then a run committed: ``tardy promote`` refused (2) without a commit or an
    intent; ``tardy discard`` dropped the stage; staging again found the same intervals."""
    first = build["first"]
    rid = first["id"]
    assert first["staged"]["code"] == 0 and first["staged"]["out"]["status"] == "staged"
    assert first["stage_tables"]  # staging made its tables
    before_run, after_run = first["versions"]
    assert all(after_run[m] > before_run[m] for m in first["staged"]["out"]["evaluated"])

    promote = first["promote"]
    assert promote["code"] == 2, promote
    assert promote["out"]["status"] == "failed" and promote["out"]["exit_code"] == 2
    error = promote["out"]["error"]
    assert f"prod changed since restatement {rid} was staged" in error
    assert "silver.sales_transactions" in error and "nothing was promoted" in error
    assert f"`tardy discard {rid}`, then `tardy restate" in error
    refused = first["refused"]
    assert refused["fingerprints"][1] == refused["fingerprints"][0]
    assert refused["versions"][1] == refused["versions"][0]  # not a single commit
    assert refused["actions"] == ["staging", "staged"]  # no `promoting` intent left behind

    discard = first["discard"]
    assert discard["code"] == 0, discard
    assert discard["out"].endswith(f"discarded restatement {rid}; prod was never touched")
    discarded = first["discarded"]
    assert discarded["actions"] == ["staging", "staged", "discarded"]
    assert discarded["fingerprints"][1] == discarded["fingerprints"][0]
    assert discarded["versions"][1] == discarded["versions"][0]
    assert discarded["stage_tables"] == []

    again = build["again"]["staged"]
    assert again["code"] == 0 and again["out"]["status"] == "staged"
    silver = "silver.sales_transactions"
    assert again["out"]["evaluated"][silver] == first["staged"]["out"]["evaluated"][silver]


def assert_typed_log(typed: dict[str, t.Any]) -> None:
    """The promoted restatement's log rows: typed audits, versions, staged tables, days."""
    cli = typed["cli"]  # tardy log <id> --json: the keys it always printed
    staged, promoted = cli[1], cli[-1]
    assert [e["action"] for e in cli] == ["staging", "staged", "promoting", "promoted"]
    # Every audit run is a row: model, audit, interval, blocking, failing rows (0: passed).
    audits = typed["audits"]
    assert len(audits) == staged["audit_results"][0]["audits_run"] > 0
    assert "silver.sales_transactions" in {a[0] for a in audits} <= set(staged["intervals"])
    assert all(a[2] <= a[3] and a[5] == 0 for a in audits), audits
    assert staged["audit_results"][0]["blocking_failures"] == 0
    # One promotion commit per table whose days changed.
    steps = typed["version_steps"]
    assert steps == [[m, 1] for m in sorted(promoted["table_versions_after"])] and steps
    tables = typed["staged_tables"]
    assert [s[0] for s in tables] == sorted(staged["intervals"])
    assert all(s[2] >= 1 and s[5] is False and s[4] is True for s in tables), tables
    assert {s[0]: s[1] for s in tables} == staged["table_versions_before"]
    assert staged["message"].startswith(f"staged {len(tables)} table(s)")
    assert [e["staged_tables"] for e in cli].count(None) == 3  # only the staged row has them
    # The view's days are the promoted row's typed intervals (nothing later promoted them).
    assert typed["periods"] == typed["promoted_days"] and typed["periods"]
    assert typed["json_text"] == [[0]]  # a home created by this code writes no JSON text


def assert_rollback_refused_after_a_later_run(after: dict[str, t.Any], promoted_id: str) -> None:
    rollback = after["rollback"]
    assert rollback["code"] == 2, rollback
    error = rollback["out"]["error"]
    assert error.startswith("nothing was restored: ")
    assert f"changed after restatement {promoted_id} was promoted" in error
    assert "`tardy ingest`" in error and f'`tardy restate --reason "undo {promoted_id}"`' in error
    refused = after["refused"]
    assert refused["fingerprints"][1] == refused["fingerprints"][0]
    assert refused["versions"][1] == refused["versions"][0]  # no RESTORE
    assert refused["actions"] == ["staging", "staged", "promoting", "promoted"]


def assert_stuck_promotion_discarded(
    build: dict[str, t.Any], promote_killed: dict[str, t.Any], stuck: dict[str, t.Any]
) -> None:
    """``tardy promote`` killed after its first table, then another writer committed to the
    tables it had not reached: promote refuses (2), restate is refused (3) while it is
    ``promoting``, discard restores what it promoted and drops the stage."""
    rid = build["again"]["staged"]["out"]["restatement_id"]
    f0 = build["again"]["fingerprints"]  # prod before the promotion
    if promote_killed["how"] == "killed":  # a real process (else stopped in-process there)
        assert promote_killed["code"] == -signal.SIGKILL, promote_killed
    killed = stuck["killed"]
    assert killed["actions"] == ["staging", "staged", "promoting"]
    assert killed["commits"]["silver.sales_transactions"] == ["WRITE", f"tardy:promote:{rid}"]
    assert silver_of(killed["fingerprints"]) != silver_of(f0)  # silver was promoted ...
    assert gold_of(killed["fingerprints"]) == gold_of(f0)  # ... gold was not

    written = stuck["written"]["versions"]
    for model in ("gold.daily_store_revenue", "gold.weekly_store_revenue"):
        assert written[model] > build["again"]["versions"][model]  # the other writer
    assert (
        written["silver.sales_transactions"]
        == build["again"]["versions"]["silver.sales_transactions"] + 1
    )  # only the promotion's commit

    promote = stuck["promote"]
    assert promote["code"] == 2, promote
    assert "silver.sales_transactions were promoted by an earlier" in promote["out"]["error"]
    assert f"`tardy discard {rid}`" in promote["out"]["error"]
    restate = stuck["restate"]
    assert restate["code"] == 3, restate
    assert f"restatement {rid} is promoting" in restate["out"]["error"]
    assert f"`tardy discard {rid}`" in restate["out"]["error"]
    refused = stuck["refused"]
    assert refused["fingerprints"] == stuck["written"]["fingerprints"]
    assert refused["versions"] == written
    assert refused["actions"] == ["staging", "staged", "promoting"]

    discard = stuck["discard"]
    assert discard["code"] == 0, discard
    assert "restored silver.sales_transactions to version" in discard["out"]
    discarded = stuck["discarded"]
    assert discarded["actions"] == ["staging", "staged", "promoting", "discarding", "discarded"]
    assert discarded["commits"]["silver.sales_transactions"] == [
        "RESTORE",
        f"tardy:rollback:{rid}",
    ]
    assert silver_of(discarded["fingerprints"]) == silver_of(f0)
    assert gold_of(discarded["fingerprints"]) == gold_of(stuck["written"]["fingerprints"])
    for model, version in discarded["versions"].items():  # one RESTORE, nothing else
        expected = written[model] + (model == "silver.sales_transactions")
        assert version == expected, model
    assert discarded["stage_tables"] == []
    assert discarded["watermarks"][1] == discarded["watermarks"][0]  # it was never advanced
