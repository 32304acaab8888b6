"""The CLI as a user runs it, on the product's default path: the fast tier's one module whose
subject is processes. One warm engine for the data home (started once), and `tardy ingest`,
`detect`, `restate --no-promote`, `promote` and `status` each a process of its own on it, on
a copy of the ``small`` template with late sales landed for two closed days. The engine
answers only its owner's token; `tardy engine stop` leaves no JVM of the home behind. Prod
then equals the independent oracle's recomputation of every landed file.

Everything else whose subject is a process is in the long tier (``test_cli``'s demo, the
kills, the races, the cluster, the warm engine's lifecycle: docs/testing.md).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import typing as t
from datetime import timedelta
from pathlib import Path

import pytest
from children import (
    SMALL,
    SMALL_CLOCK,
    SMALL_CONFIG,
    connect_asks,
    late_sales,
)
from proc_table import command_lines
from prod_checks import assert_prod_equals_recomputation

from tardy.project.home import project_root
from tardy.runtime import warm

BIN = Path(sys.executable).parent
LATE_DAYS = [(SMALL_CONFIG.start + timedelta(days=n)).isoformat() for n in (1, 4)]


def _tardy(home: Path, *argv: str) -> subprocess.CompletedProcess[str]:
    """``tardy <argv>`` as a process on the home's warm engine (``TARDY_ENGINE`` unset: the
    product's default)."""
    env = {k: v for k, v in os.environ.items() if k not in ("TARDY_ENGINE", "TARDY_FAILPOINT")}
    return subprocess.run(
        [str(BIN / "tardy"), *argv],
        cwd=project_root(),
        env={**env, "TARDY_HOME": str(home)},
        capture_output=True,
        text=True,
        timeout=1200,  # a bound for a wedge, not a speed
    )


def _json(home: Path, *argv: str) -> t.Any:
    done = _tardy(home, *argv, "--json")
    assert done.returncode == 0, f"{argv}\n{done.stdout[-2000:]}\n{done.stderr[-3000:]}"
    return json.loads(done.stdout)


def _jvms_of(home: Path) -> list[str]:
    """The command lines of live JVMs that name the data home (the engine's server)."""
    return [
        cmdline
        for cmdline in command_lines().values()
        if "java" in cmdline.split(" ", 1)[0] and str(home) in cmdline
    ]


@pytest.fixture(scope="module")
def smoke(engine: t.Any, tmp_path_factory: pytest.TempPathFactory) -> t.Iterator[dict[str, t.Any]]:
    from tardy.ingest.landing import arrival_dir_name

    home = tmp_path_factory.mktemp("smoke") / "home"
    SMALL.copy_to(engine, home)
    folder = home / "landing" / "pos" / arrival_dir_name(SMALL_CLOCK + timedelta(hours=1))
    folder.mkdir(parents=True)
    (folder / "late.jsonl").write_text(late_sales("SMOKE", SMALL_CONFIG.start))
    out: dict[str, t.Any] = {"home": home}
    try:
        out["engine"] = _json(home, "engine", "start")
        out["ingest"] = _json(home, "ingest")
        out["detect"] = _json(home, "detect")
        out["staged"] = _json(home, "restate", "--no-promote", "--reason", "smoke")
        out["promoted"] = _json(home, "promote", out["staged"]["restatement_id"])
        out["status"] = _json(home, "status")
        out["engine_after"] = _json(home, "engine")
        yield out
    finally:
        warm.stop(warm.Paths(home), timeout=10)  # whatever a failed step left running


def test_each_command_is_a_process_on_one_warm_engine(smoke: dict[str, t.Any]) -> None:
    started, after = smoke["engine"], smoke["engine_after"]
    assert started["state"] == after["state"] == "running", after
    assert started["pid"] == after["pid"]  # one engine served every command
    assert smoke["ingest"]["files_ingested"] == 1
    roots = smoke["detect"]["roots"]["silver.sales_transactions"]
    assert roots == [[day, day] for day in LATE_DAYS], smoke["detect"]
    staged = smoke["staged"]
    assert staged["status"] == "staged" and staged["restatement_id"], staged
    promoted = smoke["promoted"]
    assert promoted["status"] == "promoted", promoted
    assert {"silver.sales_transactions", "gold.daily_store_revenue"} <= set(promoted["promoted"])
    restated = smoke["status"]["restated"]  # status names the promoted restatement's days
    daily = {d["event_date"] for d in restated if d["model"] == "gold.daily_store_revenue"}
    assert daily == set(LATE_DAYS), restated
    assert {d["restatement_id"] for d in restated} == {staged["restatement_id"]}


def test_the_engine_answers_only_its_owners_token(smoke: dict[str, t.Any]) -> None:
    home, url = smoke["home"], smoke["engine_after"]["url"]
    token = warm.Paths(home).token.read_text().strip()
    server = (
        Path(f"/proc/{smoke['engine_after']['pid']}/cmdline").read_bytes().decode(errors="replace")
    )
    assert token not in server  # no command line shows the secret
    for refused in (url, f"{url}/;token=not-the-secret"):
        done = connect_asks(refused)
        assert done.returncode != 0 and "42" not in done.stdout, refused
    done = connect_asks(f"{url}/;token={token}")
    assert done.stdout.strip() == "42", done.stderr[-2000:]


def test_stop_leaves_no_jvm_and_prod_equals_the_oracle(engine: t.Any, smoke: dict[str, t.Any]):
    home = smoke["home"]
    assert _jvms_of(home), "the engine's JVM runs before the stop"
    stopped = _tardy(home, "engine", "stop")
    assert stopped.returncode == 0, stopped.stderr[-2000:]
    assert _jvms_of(home) == []
    assert warm.status(warm.Paths(home)).state is warm.EngineState.STOPPED
    data_home, _, spark = engine.open(home)  # the home is free for this process again
    try:
        landing = data_home.landing
        last = (SMALL_CLOCK - timedelta(days=1)).date()
        assert_prod_equals_recomputation(
            spark, landing.rglob("*.jsonl"), landing, SMALL_CONFIG.start, last
        )
    finally:
        engine.release()
