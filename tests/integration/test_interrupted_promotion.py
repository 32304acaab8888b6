"""kill -9 during `tardy promote`, at several points, then resume: no duplicate, no loss.

Real processes on their own data home (the shared pytest SparkSession holds this session's
Derby metastore, so the killed processes cannot share it):

1. a child (this module run as a script) simulates a small lakehouse, builds prod, lands late
   rows for closed days and stages a restatement (``--no-promote``);
2. ``tardy promote <id>`` is killed with SIGKILL (``TARDY_FAILPOINT``) before any table is
   committed, then after 2 tables, then after every table but before the log says promoted;
3. ``tardy restate`` finds the promotion the log says was interrupted, completes it and says so;
4. ``tardy rollback`` killed after restoring 2 tables is run again and restores prod exactly;
5. a stock full restatement of the same bronze equals prod as the promotion left it, and the
   log holds each step.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path

from children import late_sales

from tardy.home import project_root
from tardy.simulate import SimulationConfig

CONFIG = SimulationConfig(seed=3, stores=2, days=10, transactions_per_store_day=20)
CLOCK = datetime.combine(CONFIG.start + timedelta(days=CONFIG.days), datetime.min.time(), UTC)
BIN = Path(sys.executable).parent


def build_and_stage() -> None:
    """Child: prod from scratch, late rows on closed days, a staged restatement (prints JSON)."""
    from tardy.engine.restate import restate
    from tardy.home import activate
    from tardy.ingest import ingest
    from tardy.project import open_context, spark_of
    from tardy.simulate import arrival_dir_name, simulate

    home = activate()
    context = open_context()
    spark = spark_of(context)
    simulate(CONFIG, home.landing, through=CLOCK)
    ingest(spark, home.landing)
    context.plan("prod", execution_time=CLOCK, auto_apply=True, no_prompts=True)
    assert restate(context, spark, "baseline").status == "nothing_to_do"
    folder = home.landing / "pos" / arrival_dir_name(CLOCK + timedelta(hours=1))
    folder.mkdir(parents=True)
    (folder / "late.jsonl").write_text(late_sales("KILL", CONFIG.start))
    ingest(spark, home.landing)
    staged = restate(context, spark, "late rows for closed days", promote=False)
    print(json.dumps({"id": staged.restatement_id, "tables": len(staged.diff.totals())}))


def _run(home: Path, *args: str, failpoint: str | None = None) -> subprocess.CompletedProcess:
    env = {**os.environ, "TARDY_HOME": str(home)}
    env.pop("TARDY_FAILPOINT", None)
    if failpoint:
        env["TARDY_FAILPOINT"] = failpoint
    return subprocess.run(
        args, cwd=project_root(), env=env, capture_output=True, text=True, timeout=900
    )


def _ok(done: subprocess.CompletedProcess) -> str:
    assert done.returncode == 0, f"{done.args}\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}"
    return done.stdout


def test_promotion_killed_at_several_points_resumes_to_a_full_rebuild(tmp_path: Path) -> None:
    home = tmp_path / "home"
    staged = json.loads(_ok(_run(home, str(BIN / "python"), __file__)).strip().splitlines()[-1])
    restatement_id, tables = staged["id"], staged["tables"]
    assert tables == 5  # silver, daily, weekly, monthly, features
    unrestated = json.loads(_ok(_run(home, str(BIN / "tardy"), "fingerprint", "--json")))

    for point in ("promote:0", "promote:2", f"promote:{tables}"):
        killed = _run(home, str(BIN / "tardy"), "promote", restatement_id, failpoint=point)
        assert killed.returncode == -signal.SIGKILL, (point, killed.stderr[-2000:])

    resumed = _ok(_run(home, str(BIN / "tardy"), "restate", "--reason", "resume", "--json"))
    outcome = json.loads(resumed)
    assert outcome["recovered"] == (
        f"completed the interrupted promotion of restatement {restatement_id}"
    )
    assert outcome["status"] == "nothing_to_do"

    log = json.loads(_ok(_run(home, str(BIN / "tardy"), "log", restatement_id, "--json")))
    assert [e["action"] for e in log] == ["staging", "staged", "promoting", "promoted"]
    # Each table got exactly one promotion commit, whatever the kills.
    promoted = log[-1]
    for model, before in promoted["table_versions_before"].items():
        assert promoted["table_versions_after"][model] == before + 1

    after_resume = json.loads(_ok(_run(home, str(BIN / "tardy"), "fingerprint", "--json")))
    assert after_resume != unrestated

    # A rollback killed after restoring 2 of the 5 tables left its intent in the log; running
    # it again restores the rest (the restored ones only once) and prod is back to before.
    rollback = ("rollback", restatement_id, "--reason", "kill test", "--json")
    killed = _run(home, str(BIN / "tardy"), *rollback, failpoint="rollback:2")
    assert killed.returncode == -signal.SIGKILL, killed.stderr[-2000:]
    log = json.loads(_ok(_run(home, str(BIN / "tardy"), "log", restatement_id, "--json")))
    assert log[-1]["action"] == "rolling_back"
    rolled = json.loads(_ok(_run(home, str(BIN / "tardy"), *rollback)))
    log = json.loads(_ok(_run(home, str(BIN / "tardy"), "log", restatement_id, "--json")))
    assert [e["action"] for e in log[-2:]] == ["rolling_back", "rolled_back"]
    for model, version in rolled["table_versions"].items():
        assert version == promoted["table_versions_after"][model] + 1, model  # one RESTORE
    assert json.loads(_ok(_run(home, str(BIN / "tardy"), "fingerprint", "--json"))) == unrestated
    end = (CLOCK - timedelta(days=1)).date().isoformat()
    _ok(
        _run(
            home,
            str(BIN / "sqlmesh"),
            "plan",
            "--restate-model",
            "bronze.pos_events",
            "--start",
            CONFIG.start.isoformat(),
            "--end",
            end,
            "--execution-time",
            CLOCK.isoformat(),
            "--auto-apply",
            "--no-prompts",
        )
    )
    rebuilt = json.loads(_ok(_run(home, str(BIN / "tardy"), "fingerprint", "--json")))
    assert after_resume == rebuilt
    silver = after_resume["silver.sales_transactions"]
    assert silver["rows"] > 0


if __name__ == "__main__":
    build_and_stage()
