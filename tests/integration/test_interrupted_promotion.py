"""kill -9 during `tardy promote` and `tardy rollback`, then resume: no duplicate, no loss.

The kills are real processes on the test's own data home (a copy of the ``small`` template:
prod built over two stores and ten days); the checks between them run in this process, in the
worker's warm engine (``homes.Engine``), which releases the home before each killed process
starts. Three processes in all:

1. in-process: late rows for closed days landed, a restatement staged (``--no-promote``),
   prod fingerprinted;
2. ``tardy promote <id>`` is killed with SIGKILL (``TARDY_FAILPOINT``) after 2 tables, then
   after every table and the change trail's append but before the log says promoted (a kill
   before the first table, and at random moments, is ``make chaos``'s);
3. in-process: ``tardy restate`` finds the promotion the log says was interrupted, completes
   it and says so; the change trail holds each changed key once;
4. ``tardy rollback`` is killed after restoring 2 tables;
5. in-process: ``tardy rollback`` run again restores prod exactly; a stock full restatement
   of the same bronze (``Context.plan`` with ``restate_models``, as ``sqlmesh plan
   --restate-model`` does) equals prod as the promotion left it, the log holds each step and
   the change trail each key's reversal once.

That first test is in the long tier (``make test-long``), as are the real kills after it: a
``tardy promote`` process killed after its second table and completed by the next restate,
then on the product's default path, the warm engine, a promotion killed mid-statement and a
rollback killed after 2 tables, and a restatement killed before its promotion's intent. The
fast tier's guard is ``test_a_promotion_cut_after_its_second_table_...``: the same step
boundaries raised in-process (``TARDY_FAILPOINT_MODE=raise``, ``children.cli_cut_at``), the
same recovery checked, prod equal to the independent oracle's recomputation of every landed
file, and the completed promotion's publication events posted once to a loopback webhook by
the command after the one stopped before delivering them.
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

import pytest
from children import (
    SMALL,
    SMALL_CLOCK,
    SMALL_CONFIG,
    cli_cut_at,
    cli_in_process,
    cli_sequence,
    failing_at,
    late_sales,
)
from prod_checks import assert_prod_equals_recomputation
from webhook import Hook

from tardy.project.home import project_root

CONFIG, CLOCK = SMALL_CONFIG, SMALL_CLOCK
BIN = Path(sys.executable).parent


def _cli_json(*argv: str) -> t.Any:
    """``tardy <argv> --json`` in this process; its JSON."""
    code, out, _ = cli_in_process(*argv, "--json")
    assert code == 0, (argv, out[-3000:])
    return json.loads(out)


REASON = "late rows for closed days"


def land_late(home, context, spark) -> None:
    """On the small prod: late rows on closed days, ingested."""
    from tardy.ingest import ingest
    from tardy.ingest.landing import arrival_dir_name
    from tardy.requests.restatements import restate

    assert restate(context, spark, "baseline").status == "nothing_to_do"
    folder = home.landing / "pos" / arrival_dir_name(CLOCK + timedelta(hours=1))
    folder.mkdir(parents=True)
    (folder / "late.jsonl").write_text(late_sales("KILL", CONFIG.start))
    ingest(spark, home.landing)


def build_and_stage(home, context, spark, cut: bool = False) -> dict[str, t.Any]:
    """On the small prod: late rows on closed days, a staged restatement; with ``cut``,
    stopped in-process between the staging's commit and its event (``announce:0``)."""
    from tardy.errors import FailpointReached
    from tardy.requests.restatements import restate

    land_late(home, context, spark)
    if not cut:
        staged = restate(context, spark, REASON, promote=False)
        return {
            "id": staged.restatement_id,
            "tables": len(staged.diff.totals()),
            "fingerprint": _cli_json("fingerprint"),
        }
    with failing_at("announce:0"), pytest.raises(FailpointReached):
        restate(context, spark, REASON, promote=False)
    return held_staging(home.root)


def held_staging(home: Path) -> dict[str, t.Any]:
    """A staging stopped before its event: its id (the held event's file), its staged
    tables (the log's staged entry), the fingerprint."""
    (held,) = (home / "outbox" / "held").glob("*.json")
    restatement_id = json.loads(held.read_text())["awaits"]["restatement_id"]
    (entry,) = [e for e in _cli_json("log", restatement_id) if e["action"] == "staged"]
    return {
        "id": restatement_id,
        "tables": len(entry["rows_after"]),
        "fingerprint": _cli_json("fingerprint"),
    }


def staged_events(home: Path) -> list[dict[str, t.Any]]:
    """The "staged, awaiting review" events the file sink received."""
    sink = home / "notifications.jsonl"
    lines = sink.read_text().splitlines() if sink.exists() else []
    return [e for e in map(json.loads, lines) if e["event"] == "restatement_staged"]


def _trail(spark, restatement_id: str) -> list[list[str]]:
    """The change trail's rows of the restatement: model, row key, day, change, action."""
    from tardy.engine.trail import changes

    return [
        [r["model"], r["row_key"], str(r["event_date"]), r["change"], r["action"]]
        for r in changes(spark, restatement_id=restatement_id)
    ]


def resume(spark, restatement_id: str, restated: t.Any = None) -> dict[str, t.Any]:
    """``tardy restate`` (it finds the interrupted promotion; ``restated``: what one printed),
    then the log, the fingerprint and the change trail."""
    return {
        "restate": restated or _cli_json("restate", "--reason", "resume"),
        "log": _cli_json("log", restatement_id),
        "fingerprint": _cli_json("fingerprint"),
        "trail": _trail(spark, restatement_id),
    }


def assert_completed_once(
    outcome: dict[str, t.Any], log: list[dict[str, t.Any]], restatement_id: str, tables: int
) -> dict[str, t.Any]:
    """The resuming command completed the interrupted promotion: the log's steps, and each
    table promoted by exactly one commit whatever the kill. The log's promoted entry."""
    assert outcome["recovered"] == (
        f"completed the interrupted promotion of restatement {restatement_id}"
    )
    assert [e["action"] for e in log] == ["staging", "staged", "promoting", "promoted"]
    promoted = log[-1]
    assert len(promoted["table_versions_before"]) == tables
    for model, before in promoted["table_versions_before"].items():
        assert promoted["table_versions_after"][model] == before + 1, model
    return promoted


def stock_full_restatement(context) -> dict[str, t.Any]:
    """A stock full restatement of every day from bronze (as ``sqlmesh plan
    --restate-model`` does), then the fingerprint."""
    context.plan(
        "prod",
        restate_models=["bronze.pos_events"],
        start=CONFIG.start.isoformat(),
        end=(CLOCK - timedelta(days=1)).date().isoformat(),
        execution_time=CLOCK,
        auto_apply=True,
        no_prompts=True,
        skip_tests=True,
    )
    return _cli_json("fingerprint")


def finish(context, spark, restatement_id: str) -> dict[str, t.Any]:
    """After a killed rollback: the log it left, ``tardy rollback`` run again, the log and
    the fingerprint; then a stock full restatement of every day from bronze (as ``sqlmesh
    plan --restate-model`` does) and the fingerprint."""
    out: dict[str, t.Any] = {"killed_log": _cli_json("log", restatement_id)}
    out["rollback"] = _cli_json("rollback", restatement_id, "--reason", "kill test")
    out["log"] = _cli_json("log", restatement_id)
    out["fingerprint"] = _cli_json("fingerprint")
    out["trail"] = _trail(spark, restatement_id)
    out["rebuilt"] = stock_full_restatement(context)
    return out


def _run(
    home: Path, *args: str, failpoint: str | None = None, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess:
    environ = {**os.environ, "TARDY_HOME": str(home), **(env or {})}
    environ.pop("TARDY_FAILPOINT", None)
    if failpoint:
        environ["TARDY_FAILPOINT"] = failpoint
    return subprocess.run(
        args, cwd=project_root(), env=environ, capture_output=True, text=True, timeout=900
    )


@pytest.mark.long  # its rules' fast guard: the next test
def test_promotion_killed_at_several_points_resumes_to_a_full_rebuild(
    engine, tmp_path: Path
) -> None:
    started, seconds = time.perf_counter(), {}

    def mark(step: str) -> None:
        seconds[step] = round(time.perf_counter() - started, 1)

    home = tmp_path / "home"
    SMALL.copy_to(engine, home)
    mark("copy")
    land_late(*engine.open(home))
    engine.release()
    # `tardy restate --no-promote` killed between its staging's commit and its event.
    restate = ("restate", "--no-promote", "--reason", REASON, "--json")
    killed = _run(home, str(BIN / "tardy"), *restate, failpoint="announce:0")
    assert killed.returncode == -signal.SIGKILL, killed.stderr[-2000:]
    engine.open(home)
    staged = held_staging(home)
    engine.release()
    mark("staged")
    restatement_id, tables, unrestated = staged["id"], staged["tables"], staged["fingerprint"]
    assert tables == 7  # silver, daily, net, weekly, monthly, features, region
    assert staged_events(home) == []  # killed before its event was kept

    for point in ("promote:2", "trail:1"):
        killed = _run(home, str(BIN / "tardy"), "promote", restatement_id, failpoint=point)
        assert killed.returncode == -signal.SIGKILL, (point, killed.stderr[-2000:])
        mark(point)

    resumed = resume(engine.open(home)[2], restatement_id)
    engine.release()
    mark("resumed")
    # The killed promote settled the held event; a later command delivered it, once.
    (event,) = staged_events(home)
    assert event["detail"]["restatement_id"] == restatement_id
    assert len(event["detail"]["models"]) == tables
    outcome, log, after_resume = resumed["restate"], resumed["log"], resumed["fingerprint"]
    assert outcome["recovered"] == (
        f"completed the interrupted promotion of restatement {restatement_id}"
    )
    assert outcome["status"] == "nothing_to_do"
    assert [e["action"] for e in log] == ["staging", "staged", "promoting", "promoted"]
    # Each table got exactly one promotion commit, whatever the kills.
    promoted = log[-1]
    assert len(promoted["table_versions_before"]) == tables
    for model, before in promoted["table_versions_before"].items():
        assert promoted["table_versions_after"][model] == before + 1
    assert after_resume != unrestated
    # The change trail, written once whatever the kills: silver added the 4 late sales (2 on
    # each of days 1 and 4, store 1), daily gold changed store 1 on those days.
    trail = resumed["trail"]
    assert len({tuple(row[:3]) for row in trail}) == len(trail)
    days = [(CONFIG.start + timedelta(days=n)).isoformat() for n in (1, 4)]
    silver = sorted(row[1:4] for row in trail if row[0] == "silver.sales_transactions")
    late = [
        [f"KILL-{n}-{i}", day, "added"] for n, day in zip((1, 4), days, strict=True) for i in (0, 1)
    ]
    assert silver == late
    daily = sorted(row[1:4] for row in trail if row[0] == "gold.daily_store_revenue")
    assert daily == [[f"{day}|1", day, "changed"] for day in days]
    assert {row[4] for row in trail} == {"promoted"}
    assert {row[0] for row in trail} == set(promoted["table_versions_before"])

    # A rollback killed after restoring 2 of the 5 tables left its intent in the log; running
    # it again restores the rest (the restored ones only once) and prod is back to before.
    rollback = ("rollback", restatement_id, "--reason", "kill test", "--json")
    killed = _run(home, str(BIN / "tardy"), *rollback, failpoint="rollback:2")
    assert killed.returncode == -signal.SIGKILL, killed.stderr[-2000:]
    mark("rollback:2")
    _, context, spark = engine.open(home)
    seen = finish(context, spark, restatement_id)
    engine.release()
    mark("finished")
    print(json.dumps(seconds))  # shown with -s: where the time goes
    assert seen["killed_log"][-1]["action"] == "rolling_back"
    assert [e["action"] for e in seen["log"][-2:]] == ["rolling_back", "rolled_back"]
    rolled = seen["rollback"]
    assert len(rolled["table_versions"]) == tables
    for model, version in rolled["table_versions"].items():
        assert version == promoted["table_versions_after"][model] + 1, model  # one RESTORE
    assert seen["fingerprint"] == unrestated
    flip = {"added": "removed", "removed": "added", "changed": "changed"}
    assert sorted(row[:3] + [row[3]] for row in seen["trail"] if row[4] == "rolled_back") == sorted(
        row[:3] + [flip[row[3]]] for row in trail
    )
    assert len(seen["trail"]) == 2 * len(trail)

    # A stock full restatement of the same bronze equals prod as the promotion left it.
    assert after_resume == seen["rebuilt"]
    silver = after_resume["silver.sales_transactions"]
    assert silver["rows"] > 0


def test_a_promotion_cut_after_its_second_table_is_completed_by_the_next_restate_exactly(
    engine, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The fast tier's guard of the kills below, in-process: ``tardy promote`` stopped at the
    failpoint ``promote:2`` (after its second table's commit, where the long tier kills the
    process); the next ``tardy restate`` completes the promotion it finds interrupted, each
    table promoted exactly once and the change trail written once, and prod equals the
    independent oracle's recomputation of every landed file. That restate is itself stopped
    between its publication and the delivery of its events (``deliver:0``): the next command
    posts each of the publication's events once to a webhook on loopback. Then ``tardy
    rollback`` stopped at ``rollback:2``, run again, restores the rest: each table one
    RESTORE, prod as before."""
    from tardy.consumers.versions import publications

    hook = Hook()
    monkeypatch.setenv("TARDY_WEBHOOK_URL", hook.url)
    home = tmp_path / "home"
    SMALL.copy_to(engine, home)
    data_home, context, spark = engine.open(home)
    try:
        staged = build_and_stage(data_home, context, spark, cut=True)
        restatement_id, tables = staged["id"], staged["tables"]
        assert not list((home / "outbox").glob("webhook/[0-9]*.json"))  # held, not kept
        assert staged_events(home) == []
        cli_cut_at("promote:2", "promote", restatement_id)
        assert [e["action"] for e in _cli_json("log", restatement_id)][-1] == "promoting"
        # The staged event, settled by the stopped promote, went with the next command (the
        # log); a stopped command delivers nothing of its own.
        assert [b["event"] for _, b in hook.accepted] == ["restatement_staged"]
        printed, _ = cli_cut_at("deliver:0", "restate", "--reason", "resume", "--json")
        assert [b["event"] for _, b in hook.accepted] == ["restatement_staged"]  # not delivered
        resumed = resume(spark, restatement_id, json.loads(printed))
        published = {
            (p.table_name, p.version)
            for p in publications(spark)
            if p.restatement_id == restatement_id
        }
        bodies = [body for _, body in hook.accepted]
        delivered = sorted(
            (b["table"], b["version"]) for b in bodies if b["event"] == "publication"
        )
        announced = [b["detail"] for b in bodies if b["event"] == "restatement_staged"]
        landing = data_home.landing
        last = (CLOCK - timedelta(days=1)).date()
        assert_prod_equals_recomputation(
            spark, landing.rglob("*.jsonl"), landing, CONFIG.start, last
        )
        cli_cut_at("rollback:2", "rollback", restatement_id, "--reason", "cut")
        killed_log = _cli_json("log", restatement_id)
        rolled = _cli_json("rollback", restatement_id, "--reason", "cut")
        log = _cli_json("log", restatement_id)
        rolled_back = _cli_json("fingerprint")
    finally:
        engine.release()
        hook.close()
    assert published and delivered == sorted(published)  # each publication's event once
    # The staging stopped before its event: the next command (the promote) settled it from
    # the log, a later one delivered it, once.
    assert [(a["restatement_id"], len(a["models"])) for a in announced] == [
        (restatement_id, tables)
    ]
    assert not list((home / "outbox" / "held").glob("*.json"))
    promoted = assert_completed_once(resumed["restate"], resumed["log"], restatement_id, tables)
    assert resumed["fingerprint"] != staged["fingerprint"]
    trail = resumed["trail"]
    assert trail and len({tuple(row[:3]) for row in trail}) == len(trail)
    assert {row[4] for row in trail} == {"promoted"}
    assert killed_log[-1]["action"] == "rolling_back"
    assert [e["action"] for e in log[-2:]] == ["rolling_back", "rolled_back"]
    assert len(rolled["table_versions"]) == tables
    for model, version in rolled["table_versions"].items():
        assert version == promoted["table_versions_after"][model] + 1, model  # one RESTORE
    assert rolled_back == staged["fingerprint"]


# Long: the same kill as the fast test above, of a real `tardy promote` process (its own JVM).
@pytest.mark.long
def test_a_killed_promotion_is_completed_by_the_next_restate_exactly(
    engine, tmp_path: Path
) -> None:
    """``tardy promote`` (a process) killed -9 after its second table; the next ``tardy
    restate`` completes the promotion it finds interrupted, each table promoted exactly once
    and the change trail written once, and prod equals the independent oracle's recomputation
    of every landed file."""
    home = tmp_path / "home"
    SMALL.copy_to(engine, home)
    staged = build_and_stage(*engine.open(home))
    engine.release()
    restatement_id, tables = staged["id"], staged["tables"]
    killed = _run(home, str(BIN / "tardy"), "promote", restatement_id, failpoint="promote:2")
    assert killed.returncode == -signal.SIGKILL, killed.stderr[-2000:]
    data_home, _, spark = engine.open(home)
    try:
        resumed = resume(spark, restatement_id)
        landing = data_home.landing
        last = (CLOCK - timedelta(days=1)).date()
        assert_prod_equals_recomputation(
            spark, landing.rglob("*.jsonl"), landing, CONFIG.start, last
        )
    finally:
        engine.release()
    assert_completed_once(resumed["restate"], resumed["log"], restatement_id, tables)
    assert resumed["fingerprint"] != staged["fingerprint"]
    trail = resumed["trail"]
    assert trail and len({tuple(row[:3]) for row in trail}) == len(trail)
    assert {row[4] for row in trail} == {"promoted"}


# Long: a real `tardy promote` killed between its publication and the delivery of its events
# (its own JVM). Its fast guard: the `deliver:0` cut of the test above.
@pytest.mark.long
def test_a_promote_killed_before_delivery_loses_no_publication_event(
    engine, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``tardy promote`` (a process) killed -9 at ``deliver:0``, once its promotion and
    publication are committed: the webhook on loopback received nothing; the next command
    posts each of the publication's events once."""
    from tardy.consumers.versions import publications

    hook = Hook()
    monkeypatch.setenv("TARDY_WEBHOOK_URL", hook.url)
    home = tmp_path / "home"
    SMALL.copy_to(engine, home)
    try:
        staged = build_and_stage(*engine.open(home))
        engine.release()
        hook.accepted.clear()  # the staged event
        restatement_id = staged["id"]
        killed = _run(home, str(BIN / "tardy"), "promote", restatement_id, failpoint="deliver:0")
        assert killed.returncode == -signal.SIGKILL, killed.stderr[-2000:]
        assert hook.accepted == []  # killed before it delivered
        spark = engine.open(home)[2]
        log = _cli_json("log", restatement_id)  # the next command delivers
        published = {
            (p.table_name, p.version)
            for p in publications(spark)
            if p.restatement_id == restatement_id
        }
    finally:
        engine.release()
        hook.close()
    assert [e["action"] for e in log][-1] == "promoted"
    delivered = sorted((body["table"], body["version"]) for _, body in hook.accepted)
    assert published and delivered == sorted(published)


# Long: each part of its story starts a warm engine (a cold JVM) and runs its commands as
# processes of it; 1,434-1,453 s in CI on 11-29. Its fast guards: the test above (a killed
# promotion completed), test_warm_engine (a client killed mid-statement or inside a metastore
# call never wedges the engine), CI's short chaos run (a warm restatement killed).
@pytest.mark.long
def test_promotion_killed_mid_statement_on_the_warm_engine_resumes_exactly(
    engine, tmp_path: Path
) -> None:
    """The same staged restatement, promoted on the data home's warm engine: ``tardy
    promote`` is killed -9 0.3 s into its third table's write, while the server executes
    it. The resume, on the same engine, must find each table promoted exactly once: the
    engine interrupts the dead client's statement before anything reads (or the statement
    had committed, under the restatement's tag), so no late commit lands behind the resume.
    A rollback killed after restoring 2 tables, run again, restores the rest. Prod then
    equals the oracle's recomputation of every landed file, in-process."""
    _killed_on_the_warm_engine(engine, tmp_path, then_cut=False)


@pytest.mark.long  # its fast guard: CI's short chaos run (a warm restate killed)
def test_a_restatement_killed_before_its_intent_on_the_warm_engine_is_redone(
    engine, tmp_path: Path
) -> None:
    """The fast test's story, then a restatement of the same rows killed before its
    promotion's intent: the next one discards its stage and promotes them again, all on one
    engine."""
    _killed_on_the_warm_engine(engine, tmp_path, then_cut=True)


def _killed_on_the_warm_engine(engine, tmp_path: Path, *, then_cut: bool) -> None:
    home = tmp_path / "home"
    SMALL.copy_to(engine, home)
    staged = build_and_stage(*engine.open(home))
    engine.release()
    restatement_id, tables = staged["id"], staged["tables"]
    warm = {"TARDY_ENGINE": "on"}
    environ = {**os.environ, "TARDY_HOME": str(home), **warm}
    environ.pop("TARDY_FAILPOINT", None)

    def tardy_json(*commands: tuple[str, ...]) -> list[t.Any]:
        """The commands, each with ``--json``, in one client process of the warm engine
        (the killed commands are processes of their own)."""
        done = cli_sequence(environ, *((*argv, "--json") for argv in commands))
        for argv, (code, out, err) in zip(commands, done, strict=True):
            assert code == 0, (argv, out[-3000:], err[-3000:])
        return [json.loads(out) for _, out, _ in done]

    def killed(*argv: str, failpoint: str) -> None:
        done = _run(home, str(BIN / "tardy"), *argv, failpoint=failpoint, env=warm)
        assert done.returncode == -signal.SIGKILL, done.stderr[-2000:]

    def in_process(check: t.Callable[[t.Any, t.Any], t.Any]) -> t.Any:
        data_home, _, spark = engine.open(home)
        try:
            return check(data_home, spark)
        finally:
            engine.release()

    try:
        (started,) = tardy_json(("engine", "start"))
        killed("promote", restatement_id, failpoint="promote:2:inflight")
        outcome, log, after_resume, serving = tardy_json(
            ("restate", "--reason", "resume"),
            ("log", restatement_id),
            ("fingerprint",),
            ("engine",),
        )
        # One engine served every command: the killed client did not take it down.
        assert serving["pid"] == started["pid"]
    finally:
        _run(home, str(BIN / "tardy"), "engine", "stop", env=warm)
    promoted = assert_completed_once(outcome, log, restatement_id, tables)
    assert after_resume != staged["fingerprint"]

    def equals_the_oracle(data_home: t.Any, spark: t.Any) -> None:
        # Prod as the resumed promotion left it equals the independent oracle's
        # recomputation of every landed file (``oracle.py``: pandas, not SQLMesh nor tardy).
        landing = data_home.landing
        last = (CLOCK - timedelta(days=1)).date()
        assert_prod_equals_recomputation(
            spark, landing.rglob("*.jsonl"), landing, CONFIG.start, last
        )

    in_process(equals_the_oracle)

    rollback = ("rollback", restatement_id, "--reason", "kill test")
    try:
        (started,) = tardy_json(("engine", "start"))
        # A rollback killed after restoring 2 tables: run again, it restores the rest.
        killed(*rollback, failpoint="rollback:2")
        killed_log, rolled, rolled_back = tardy_json(
            ("log", restatement_id), rollback, ("fingerprint",)
        )
        if then_cut:
            # A restatement of the same rows killed with every table staged, before its
            # promotion's intent: the next one discards its stage and promotes them again.
            killed("restate", "--reason", "cut", failpoint="intent:0")
            again, promoted_again = tardy_json(
                ("restate", "--reason", "after the cut"), ("fingerprint",)
            )
        (serving,) = tardy_json(("engine",))
        assert serving["pid"] == started["pid"]
    finally:
        _run(home, str(BIN / "tardy"), "engine", "stop", env=warm)
    # The rollback: its intent was left by the kill; run again, each table got one RESTORE
    # after the promotion's commit (so no late commit of the killed promote landed between)
    # and prod is exactly as before the restatement.
    assert killed_log[-1]["action"] == "rolling_back"
    assert len(rolled["table_versions"]) == tables
    for model, version in rolled["table_versions"].items():
        assert version == promoted["table_versions_after"][model] + 1, model
    assert rolled_back == staged["fingerprint"]
    if then_cut:
        cut = again["recovered"].removeprefix("discarded restatement ").split(",")[0]
        assert again["recovered"] == f"discarded restatement {cut}, interrupted while staging"
        assert again["status"] == "promoted" and promoted_again == after_resume

    trail = in_process(lambda _, spark: _trail(spark, restatement_id))
    # The change trail: each changed key once per action, whatever the kills, and the
    # rollback's rows reverse the promotion's.
    for action in ("promoted", "rolled_back"):
        rows = [tuple(row[:3]) for row in trail if row[4] == action]
        assert rows and len(set(rows)) == len(rows), action
    flip = {"added": "removed", "removed": "added", "changed": "changed"}
    assert sorted(row[:4] for row in trail if row[4] == "rolled_back") == sorted(
        row[:3] + [flip[row[3]]] for row in trail if row[4] == "promoted"
    )
