"""The review commands on a copy of the ``small`` template, in-process in the worker's warm
engine: the fast tier's guard of ``test_restatement_races``'s rules (``review_story``). Its
kills are failpoints raised in-process at the same step boundaries (``children.cli_cut_at``);
the long tier kills real processes there, races two, and runs the ``tardy restate`` refused
while this process has the home open (the last test here).

A restatement is staged, a run commits, ``tardy promote`` refuses and ``tardy discard`` drops
it; a dry run writes nothing; the same rows are staged again and their promotion stopped
after its first table; another writer commits, so the stuck promotion is discarded by
restoring what it promoted; a restatement stopped after staging two tables, then one stopped
before its promotion's intent, are discarded by the next, which promotes the rows; the log is
typed; after a later daily run, ``tardy rollback`` refuses before restoring anything. Also:
the busy check names another holder of the state, and ignores this process's own.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
import typing as t
from pathlib import Path

import pytest
from children import SMALL, cli_cut_at
from review_story import (
    Child,
    assert_busy_refused,
    assert_cut_restatements_discarded,
    assert_dry_run_wrote_nothing,
    assert_promotion_refused_after_a_run_then_discarded,
    assert_rollback_refused_after_a_later_run,
    assert_stuck_promotion_discarded,
    assert_typed_log,
    phase_after,
    phase_build,
    phase_stuck,
    refused_restate,
    stage_tables,
)


@pytest.fixture(scope="module")
def story(engine: t.Any, tmp_path_factory: pytest.TempPathFactory) -> dict[str, t.Any]:
    home = tmp_path_factory.mktemp("review") / "home"
    SMALL.copy_to(engine, home)
    try:
        child = Child(*engine.open(home))
        build = phase_build(child, refused=False)
        staged = build["again"]["staged"]["out"]["restatement_id"]
        cli_cut_at("promote:1", "promote", staged)
        stuck = phase_stuck(child, staged)
        cli_cut_at("stage:2", "restate", "--reason", "cut", "--json")
        stage_cut = {"stage_tables": stage_tables(child)}
        cli_cut_at("intent:0", "restate", "--reason", "cut", "--json")
        intent_cut = {"stage_tables": stage_tables(child)}
        promoted = child.cli("restate", "--reason", "the late rows", "--json")
        after = phase_after(child, promoted["out"]["restatement_id"])
    finally:
        engine.release()
    return {
        "build": build,
        "promote_killed": {"how": "cut"},
        "stuck": stuck,
        "stage_cut": stage_cut,
        "intent_cut": intent_cut,
        "promoted": promoted,
        "after": after,
    }


def test_a_dry_run_writes_nothing(story: dict[str, t.Any]) -> None:
    assert_dry_run_wrote_nothing(story["build"], story["after"])


def test_a_run_while_staged_makes_promotion_refuse_and_discard_then_restate_works(
    story: dict[str, t.Any],
) -> None:
    assert_promotion_refused_after_a_run_then_discarded(story["build"])
    promoted = story["promoted"]
    assert promoted["code"] == 0 and promoted["out"]["status"] == "promoted", promoted
    rid = promoted["out"]["restatement_id"]
    assert story["after"]["log"][rid] == ["staging", "staged", "promoting", "promoted"]
    silver = "silver.sales_transactions"
    again = story["build"]["again"]["staged"]["out"]
    assert promoted["out"]["evaluated"][silver] == again["evaluated"][silver]


def test_restatements_stopped_while_staging_are_discarded_by_the_next_one(
    story: dict[str, t.Any],
) -> None:
    promoted = story["promoted"]
    assert promoted["code"] == 0 and promoted["out"]["status"] == "promoted", promoted
    log = story["after"]["log"]
    assert_cut_restatements_discarded(story["stage_cut"], story["intent_cut"], promoted["out"], log)


def test_a_stuck_promotion_whose_prod_changed_is_discarded_by_restoring_what_it_promoted(
    story: dict[str, t.Any],
) -> None:
    assert_stuck_promotion_discarded(story["build"], story["promote_killed"], story["stuck"])


def test_the_log_holds_typed_audits_versions_and_staged_tables(story: dict[str, t.Any]) -> None:
    assert_typed_log(story["after"]["typed"])


def test_a_rollback_after_a_later_run_refuses_before_restoring_anything(
    story: dict[str, t.Any],
) -> None:
    promoted = story["promoted"]["out"]["restatement_id"]
    assert_rollback_refused_after_a_later_run(story["after"], promoted)


# A process holding a POSIX lock on a file, as DuckDB holds its database file; started by a
# shell that exits at once, so that it is not this process's child (those are its own JVM).
HOLD_POSIX_LOCK = """
import fcntl, sys, time
with open(sys.argv[1], "r+b") as f:
    fcntl.lockf(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
    print("locked", flush=True)
    time.sleep(60)
"""


def test_the_busy_check_names_another_holder_of_the_state_and_ignores_its_own(
    tmp_path: Path,
) -> None:
    import fcntl

    from tardy.runtime.busy import home_busy

    state = tmp_path / "state.duckdb"
    state.write_bytes(b"")
    assert home_busy(tmp_path, wait=0) is None
    detached = '"$0" -c "$1" "$2" & echo $!'  # prints the holder's pid, then exits
    shell = subprocess.Popen(
        ["sh", "-c", detached, sys.executable, HOLD_POSIX_LOCK, state],
        stdout=subprocess.PIPE,
        text=True,
    )
    assert shell.stdout is not None
    pid = int(shell.stdout.readline())
    try:
        assert shell.stdout.readline().strip() == "locked"
        busy = home_busy(tmp_path, wait=0)
        assert busy is not None and busy.exit_code == 3
        assert f"open in another process (pid {pid}: python -c" in str(busy)
        assert "SQLMesh state (DuckDB, state.duckdb)" in str(busy)
    finally:
        os.kill(pid, signal.SIGKILL)
        shell.wait()
    deadline = time.monotonic() + 10
    while Path(f"/proc/{pid}").exists() and time.monotonic() < deadline:
        time.sleep(0.05)
    assert home_busy(tmp_path, wait=0) is None  # the kernel dropped the dead holder's lock
    with open(state, "r+b") as own:  # a lock of this process (or its JVM) is not "another"
        fcntl.lockf(own, fcntl.LOCK_EX | fcntl.LOCK_NB)
        assert home_busy(tmp_path, wait=0) is None


# Long tier: a real `tardy restate` process refused. Its fast guard: the busy check above (a
# process holding the state is named; this process's own lock is not another holder).
@pytest.mark.long
def test_a_process_that_has_the_home_open_refuses_a_restatement_with_exit_3(
    engine: t.Any, tmp_path: Path
) -> None:
    from tardy.engine import log

    home = tmp_path / "home"
    SMALL.copy_to(engine, home)
    try:
        child = Child(*engine.open(home))
        busy = refused_restate(child)
        reasons = sorted({e["reason"] for e in log.entries(child.spark)})
    finally:
        engine.release()
    assert_busy_refused(busy, {"reasons": reasons})
