"""Restatements against other writers, each other, kills and the review commands.

One small lakehouse in its own data home (a copy of the ``small`` template), driven through a
chain of scenarios (module fixture). The observations run in this process, in the worker's
warm engine (``homes.Engine``), calling ``tardy.cli.main`` in-process for exit codes and
messages; real processes only where the process is the subject: a ``tardy restate`` refused
while this process has the home open, the two kills (``tardy promote`` and ``tardy restate``
with ``TARDY_FAILPOINT``, each leading its process group so that its JVM dies with it) and the
race of two ``tardy restate``:

- build: ``tardy restate`` started while this process has the data home open is refused
  (exit 3), naming the process; late rows for closed days; a restatement is staged, a
  ``sqlmesh run`` commits, ``tardy promote`` refuses (exit 2) and commits nothing; ``tardy
  discard`` drops the stage; ``restate --dry-run`` writes nothing; the same rows are staged
  again, and ``tardy promote`` of them is killed after its first table;
- stuck: a run of the gold models commits to tables the promotion had not reached; ``tardy
  promote`` refuses (2), ``tardy restate`` is refused (3) while it is ``promoting``; ``tardy
  discard`` restores the promoted table and drops the stage; then ``tardy restate`` is killed
  after staging two tables;
- race: two ``tardy restate`` at once: one is refused (3), the other discards the half-made
  stage and restates the late rows to the end;
- after: every restatement's log; a later daily run, then a ``tardy rollback`` that refuses
  (2) before restoring anything.
"""

from __future__ import annotations

import json
import signal
import subprocess
import time
import typing as t
from pathlib import Path

import pytest
from children import SMALL
from review_story import (
    BIN,
    Child,
    assert_busy_refused,
    assert_cut_restatements_discarded,
    assert_dry_run_wrote_nothing,
    assert_promotion_refused_after_a_run_then_discarded,
    assert_rollback_refused_after_a_later_run,
    assert_stuck_promotion_discarded,
    assert_typed_log,
    env_of,
    gold_of,
    phase_after,
    phase_build,
    phase_stuck,
    run_killed,
    silver_of,
    stage_tables,
)

from tardy.project.home import project_root

# The long tier (`make test-long`): the fast tier's guards are test_review_commands (the
# review commands in-process), test_interrupted_promotion's warm-engine kills and
# unit/test_lock (two holders of the lock, real processes).
pytestmark = pytest.mark.long


# -- the parent: real processes ---------------------------------------------------------------


def _tardy(home: Path, out: Path, *args: str) -> subprocess.Popen:
    """``tardy <args>`` started now, its output to ``out``.{out,err}."""
    return subprocess.Popen(
        [str(BIN / "tardy"), *args],
        cwd=project_root(),
        env=env_of(home),
        stdout=open(out.with_suffix(".out"), "w"),  # noqa: SIM115 (closed with the process)
        stderr=open(out.with_suffix(".err"), "w"),  # noqa: SIM115
        start_new_session=True,
    )


def _finished(process: subprocess.Popen, out: Path) -> dict[str, t.Any]:
    started = time.perf_counter()
    code = process.wait(timeout=900)
    text = out.with_suffix(".out").read_text()
    try:
        payload: t.Any = json.loads(text)
    except ValueError:
        payload = text
    return {
        "code": code,
        "out": payload,
        "err": out.with_suffix(".err").read_text()[-3000:],
        "waited": round(time.perf_counter() - started, 1),
    }


@pytest.fixture(scope="module")
def chain(engine: t.Any, tmp_path_factory: pytest.TempPathFactory) -> dict[str, t.Any]:
    root = tmp_path_factory.mktemp("races")
    home = root / "home"
    started = time.perf_counter()
    results: dict[str, t.Any] = {"seconds": {}}

    def done(step: str) -> None:
        results["seconds"][step] = round(time.perf_counter() - started, 1)

    SMALL.copy_to(engine, home)
    results["build"] = phase_build(Child(*engine.open(home)))
    engine.release()
    second = results["build"]["again"]["staged"]["out"]["restatement_id"]
    # `tardy promote` of the staged restatement, killed after its first table.
    results["promote_killed"] = {
        "how": "killed",
        "code": run_killed(home, "promote:1", "promote", second),
    }
    done("build, promote killed")

    results["stuck"] = phase_stuck(Child(*engine.open(home)), second)
    engine.release()
    # `tardy restate`, killed after staging two tables.
    code = run_killed(home, "stage:2", "restate", "--reason", "killed", "--json")
    results["stage_killed"] = {"code": code, "stage_tables": stage_tables(home=home)}
    # `tardy restate` again (it discards that stage first), killed with every table staged,
    # audited and diffed, just before its promotion's intent is logged.
    code = run_killed(home, "intent:0", "restate", "--reason", "killed", "--json")
    results["intent_killed"] = {"code": code, "stage_tables": stage_tables(home=home)}
    done("stuck, restate killed twice")

    racers = [
        _tardy(home, root / f"race{i}", "restate", "--reason", "race", "--json") for i in (1, 2)
    ]
    results["race"] = [_finished(p, root / f"race{i}") for i, p in zip((1, 2), racers, strict=True)]
    results["race_stage_tables"] = stage_tables(home=home)
    done("race")
    winner = [r for r in results["race"] if r["code"] == 0]
    assert winner, results["race"]
    results["after"] = phase_after(Child(*engine.open(home)), winner[0]["out"]["restatement_id"])
    engine.release()
    done("after")
    print(json.dumps(results["seconds"]))  # shown with -s: where the time goes
    return results


def test_a_process_that_has_the_home_open_refuses_a_restatement_with_exit_3(
    chain: dict[str, t.Any],
) -> None:
    assert_busy_refused(chain["build"], chain["after"])


def test_a_dry_run_writes_nothing(chain: dict[str, t.Any]) -> None:
    assert_dry_run_wrote_nothing(chain["build"], chain["after"])


def test_a_run_while_staged_makes_promotion_refuse_and_discard_then_restate_works(
    chain: dict[str, t.Any],
) -> None:
    build = chain["build"]
    assert_promotion_refused_after_a_run_then_discarded(build)
    # ... and the same late rows are promoted in the end (by the race's winner)
    silver = "silver.sales_transactions"
    winner = next(r for r in chain["race"] if r["code"] == 0)["out"]
    assert winner["status"] == "promoted"
    assert winner["evaluated"][silver] == build["again"]["staged"]["out"]["evaluated"][silver]


def test_a_stuck_promotion_whose_prod_changed_is_discarded_by_restoring_what_it_promoted(
    chain: dict[str, t.Any],
) -> None:
    assert_stuck_promotion_discarded(chain["build"], chain["promote_killed"], chain["stuck"])


def test_a_restatement_killed_while_staging_is_discarded_by_the_next_one(
    chain: dict[str, t.Any],
) -> None:
    assert chain["stage_killed"]["code"] == -signal.SIGKILL, chain["stage_killed"]
    assert chain["intent_killed"]["code"] == -signal.SIGKILL, chain["intent_killed"]
    winner = next(r for r in chain["race"] if r["code"] == 0)["out"]
    assert_cut_restatements_discarded(
        chain["stage_killed"], chain["intent_killed"], winner, chain["after"]["log"]
    )
    assert chain["race_stage_tables"] == []


def test_two_restatements_at_once_one_is_refused_the_other_completes(
    chain: dict[str, t.Any],
) -> None:
    codes = sorted(r["code"] for r in chain["race"])
    assert codes == [0, 3], chain["race"]
    loser = next(r for r in chain["race"] if r["code"] == 3)
    assert loser["out"]["status"] == "refused" and loser["out"]["exit_code"] == 3
    error = loser["out"]["error"]
    assert "is running (pid" in error or "is open in another process" in error, error
    assert "Traceback" not in loser["err"]
    winner = next(r for r in chain["race"] if r["code"] == 0)["out"]
    assert winner["status"] == "promoted" and winner["promoted"]
    log = chain["after"]["log"]
    assert log[winner["restatement_id"]] == ["staging", "staged", "promoting", "promoted"]
    assert sum(actions[0] == "staging" for actions in log.values()) == 5  # the loser: none
    # the same rows the killed promotion had committed to silver, now everywhere
    stuck = chain["stuck"]["killed"]["fingerprints"]
    assert silver_of(chain["after"]["promoted"]) == silver_of(stuck)
    assert gold_of(chain["after"]["promoted"]) != gold_of(chain["build"]["again"]["fingerprints"])


def test_the_log_holds_typed_audits_versions_and_staged_tables(chain: dict[str, t.Any]) -> None:
    assert_typed_log(chain["after"]["typed"])


def test_a_rollback_after_a_later_run_refuses_before_restoring_anything(
    chain: dict[str, t.Any],
) -> None:
    winner = next(r for r in chain["race"] if r["code"] == 0)["out"]["restatement_id"]
    assert_rollback_refused_after_a_later_run(chain["after"], winner)
