"""The warm engine's rules without an engine: the fast tier's guards of
``integration/test_warm_engine`` (long tier: real engines started, killed, stopped).

Which engine a command may use is decided from the data home's files and the processes they
name (``tardy.runtime.warm``): a record whose processes are gone or answer for something else is
stale, never reused; one start at a time (the start lock); an engine in use is not stopped
without ``--force``; idleness counts from the last use once no live client is left; the
engine's secret is its owner's file. Each check here reads or writes those files and the
process table of this machine (a ``sleep`` stands for a recycled pid); no JVM starts.
"""

from __future__ import annotations

import json
import os
import subprocess
import time
from pathlib import Path

import pytest

from tardy.runtime import record as engine_record
from tardy.runtime import warm


def _record(at: Path, **fields: object) -> engine_record.Record:
    values: dict[str, object] = {
        "home": str(at),
        "supervisor_pid": 2**22 + 7,  # beyond pid_max's default: no such process
        "server_pid": 2**22 + 8,
        "port": 1,
        "started_at": time.time(),
        "settings_digest": warm.settings_digest({"spark.master": "local[2]"}),
        "idle_seconds": 1800.0,
    } | fields
    record = engine_record.Record(**values)  # type: ignore[arg-type]
    paths = warm.Paths(at)
    paths.dir.mkdir(parents=True, exist_ok=True)
    paths.record.write_text(json.dumps(values))
    return record


def _client(paths: warm.Paths, pid: int, name: str = "a") -> None:
    paths.clients.mkdir(parents=True, exist_ok=True)
    (paths.clients / f"{name}.json").write_text(
        json.dumps({"pid": pid, "session_id": f"s-{name}", "command": "tardy status"})
    )


def test_no_record_is_a_stopped_engine(tmp_path: Path) -> None:
    status = warm.status(warm.Paths(tmp_path))
    assert status.state is warm.EngineState.STOPPED and status.record is None


def test_an_engine_whose_processes_died_is_stale_and_never_reused(tmp_path: Path) -> None:
    record = _record(tmp_path)
    paths = warm.Paths(tmp_path)
    assert warm.read(paths) == record  # the record reads back whole ...
    assert warm.live_record(paths) is None  # ... but names no live process of this home
    assert warm.status(paths).state is warm.EngineState.STALE
    assert warm.server_pids(tmp_path) == set()


def test_a_recycled_pid_or_another_homes_record_is_not_this_homes_engine(
    tmp_path: Path,
) -> None:
    bystander = subprocess.Popen(["sleep", "60"])  # a live process that is no engine
    try:
        _record(tmp_path, supervisor_pid=bystander.pid, server_pid=bystander.pid)
        paths = warm.Paths(tmp_path)
        assert warm.live_record(paths) is None
        assert warm.status(paths).state is warm.EngineState.STALE
        assert warm.processes(paths) == ([], [])  # nothing of this home runs
    finally:
        bystander.kill()
        bystander.wait()
    other = tmp_path / "other"
    _record(other, home=str(tmp_path))
    assert warm.live_record(warm.Paths(other)) is None


def test_other_spark_settings_make_another_engine(tmp_path: Path) -> None:
    one = warm.settings_digest({"spark.master": "local[2]", "spark.driver.memory": "4g"})
    assert one == warm.settings_digest({"spark.driver.memory": "4g", "spark.master": "local[2]"})
    assert one != warm.settings_digest({"spark.master": "local[2]", "spark.driver.memory": "8g"})


def test_one_start_at_a_time(tmp_path: Path) -> None:
    """The start lock: while one command starts the engine, another waits, and gives up
    naming the home and the log after its bound (a race of first uses starts one engine)."""
    paths = warm.Paths(tmp_path)
    with warm._start_lock(paths):
        started = time.monotonic()
        with pytest.raises(warm.EngineError, match=str(tmp_path)), warm._start_lock(paths, 0.5):
            pass
        assert time.monotonic() - started >= 0.5
    with warm._start_lock(paths, 0.5):  # released: the next one takes it at once
        pass


def test_an_engine_in_use_is_stopped_only_with_force(tmp_path: Path) -> None:
    paths = warm.Paths(tmp_path)
    _record(tmp_path)
    _client(paths, os.getpid())  # this process, a live client of it
    with pytest.raises(warm.EngineInUse, match=f"pid {os.getpid()}"):
        warm.stop(paths, force=False)
    assert paths.record.is_file()  # nothing was stopped
    assert warm.stop(paths, timeout=1.0) is not None  # --force
    assert not paths.record.exists()


def test_idleness_counts_from_the_last_use_once_no_live_client_is_left(tmp_path: Path) -> None:
    paths = warm.Paths(tmp_path)
    warm.touch(paths.last_used)
    past = time.time() - 120
    os.utime(paths.last_used, (past, past))
    _client(paths, os.getpid(), "live")
    assert warm.idle_for(paths) is None  # in use
    (paths.clients / "live.json").unlink()
    _client(paths, 2**22 + 9, "dead")  # a client that died: it does not keep the engine busy
    idle = warm.idle_for(paths)
    assert idle is not None and 119 <= idle < 180
    assert warm._seconds(warm.IDLE_VARIABLE, 5.0) in (5.0, warm.idle_seconds())
    os.environ[warm.IDLE_VARIABLE] = "2m"
    try:
        assert warm.idle_seconds() == 120.0
        os.environ[warm.IDLE_VARIABLE] = "soon"
        with pytest.raises(warm.EngineError, match=warm.IDLE_VARIABLE):
            warm.idle_seconds()
    finally:
        os.environ.pop(warm.IDLE_VARIABLE)


def test_the_engines_secret_is_its_owners_file(tmp_path: Path) -> None:
    from tardy.runtime.private import secret

    paths = warm.Paths(tmp_path)
    paths.dir.mkdir(mode=0o700)
    token = secret(paths.token)
    assert len(token) >= 40 and secret(paths.token) == token  # made once, kept
    assert paths.token.stat().st_mode & 0o777 == 0o600
    assert token not in engine_record.session_url(1, "x", "s") and engine_record.HOST == "localhost"
