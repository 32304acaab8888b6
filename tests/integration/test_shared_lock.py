"""The restatement lock in PostgreSQL, with real processes and a real server.

Drivers on several hosts each have their own ``TARDY_HOME`` and share SQLMesh's state in
PostgreSQL: here, client processes with different data homes and one throwaway server
(``python -m tardy.cluster up postgres``; it installs PostgreSQL when absent). Each test gets
its own state database (``tardy.cluster database NAME``), so no holder record leaks from one
test to the next. The children choose the lock as the CLI does: from the gateway's
``state_connection`` in project.yaml (``connect``, PostgreSQL state).
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import typing as t
from collections.abc import Iterator
from pathlib import Path
from types import SimpleNamespace

import pytest
from children import exports_of

from tardy.runtime import lock

if t.TYPE_CHECKING:
    from sqlmesh.core.config.connection import ConnectionConfig

SRC = str(Path(__file__).resolve().parents[2] / "src")

# A process that takes the gateway's lock, says so, then holds it for `hold` seconds (or until
# killed): with `exclusive` it prints the stale holder it got; with `hold` (the CLI's way,
# backend chosen by `tardy.engine.restate.hold`) it prints "-".
HOLD = """
import sys, time
from tardy.engine.restate import hold, restatement_lock
from tardy.runtime.lock import LockedError
from tardy.project.context import load_config
how, rid, start, hold_for = sys.argv[1], sys.argv[2], float(sys.argv[3]), float(sys.argv[4])
time.sleep(max(0.0, start - time.time()))
try:
    if how == "hold":
        with hold(rid):
            print("won", "-", flush=True)
            time.sleep(hold_for)
    else:
        with restatement_lock(load_config()).exclusive(rid) as stale:
            print("won", stale.restatement_id if stale else "-", stale.pid if stale else "-",
                  flush=True)
            time.sleep(hold_for)
except LockedError as error:
    print("refused", error, flush=True)
"""


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


@pytest.fixture(scope="module")
def postgres() -> Iterator[dict[str, str]]:
    """A PostgreSQL server for this module: the ``TARDY_PG_*`` variables ``up`` exports.

    Its home is made with ``mkdtemp`` under /tmp and opened to traversal: the server runs as
    the ``postgres`` user (we run as root), which cannot enter pytest's 0700 directories."""
    home = Path(tempfile.mkdtemp(prefix="tardy-shared-lock-"))
    home.chmod(0o711)
    env = {
        **os.environ,
        "PYTHONPATH": SRC,
        "TARDY_HOME": str(home),
        "TARDY_PG_PORT": str(_free_port()),
    }
    cluster = [sys.executable, "-m", "tardy.cluster"]
    up = subprocess.run([*cluster, "up", "postgres"], env=env, capture_output=True, text=True)
    try:
        assert up.returncode == 0, up.stderr
        exported = exports_of(up.stdout)
        assert exported["TARDY_PG_PORT"] == env["TARDY_PG_PORT"]
        yield {**exported, "_CLUSTER_HOME": str(home)}
    finally:
        down = subprocess.run([*cluster, "down"], env=env, capture_output=True, text=True)
        shutil.rmtree(home, ignore_errors=True)
        assert down.returncode == 0, down.stderr


def _database(postgres: dict[str, str], name: str) -> None:
    env = {**os.environ, "PYTHONPATH": SRC, "TARDY_HOME": postgres["_CLUSTER_HOME"]}
    env["TARDY_PG_PORT"] = postgres["TARDY_PG_PORT"]
    done = subprocess.run(
        [sys.executable, "-m", "tardy.cluster", "database", name],
        env=env,
        capture_output=True,
        text=True,
    )
    assert done.returncode == 0, done.stderr


def _gateway_env(postgres: dict[str, str], home: Path, database: str) -> dict[str, str]:
    """The environment of a driver of gateway ``connect`` with its own data home ``home``
    and SQLMesh state in ``database`` (the Connect URL is never dialled: no Spark here)."""
    settings = {k: v for k, v in postgres.items() if not k.startswith("_")}
    return {
        **os.environ,
        **settings,
        "PYTHONPATH": SRC,
        "TARDY_HOME": str(home),
        "TARDY_SPARK_REMOTE": "sc://127.0.0.1:1",
        "TARDY_GATEWAY": "connect",
        "TARDY_STATE_DATABASE": database,
    }


class Driver:
    """Where one driver host runs: its own data home, the shared state database."""

    def __init__(self, postgres: dict[str, str], home: Path, database: str) -> None:
        self.env = _gateway_env(postgres, home, database)

    def spawn(
        self, rid: str, how: str = "exclusive", start: float = 0.0, hold: float = 60.0
    ) -> subprocess.Popen[str]:
        return subprocess.Popen(
            [sys.executable, "-c", HOLD, how, rid, str(start), str(hold)],
            stdout=subprocess.PIPE,
            text=True,
            env=self.env,
            cwd="/",
        )

    def lock(self) -> lock.PostgresLock:
        """The lock of this driver's state database, to look at from the test process."""
        return lock.PostgresLock(
            host=self.env["TARDY_PG_HOST"],
            port=int(self.env["TARDY_PG_PORT"]),
            user=self.env["TARDY_PG_USER"],
            database=self.env["TARDY_STATE_DATABASE"],
            password=self.env["TARDY_PG_PASSWORD"],
        )


@pytest.fixture
def database(postgres: dict[str, str], request: pytest.FixtureRequest) -> str:
    name = "state_" + request.node.name.removeprefix("test_")[:40]
    _database(postgres, name)
    return name


@pytest.fixture
def drivers(postgres: dict[str, str], database: str, tmp_path: Path) -> tuple[Driver, Driver]:
    """Two driver hosts: different data homes, one state database."""
    return Driver(postgres, tmp_path / "host-a", database), Driver(
        postgres, tmp_path / "host-b", database
    )


def _stop(process: subprocess.Popen[str]) -> None:
    if process.poll() is None:
        process.kill()
    process.communicate(timeout=30)


def test_a_driver_with_another_data_home_is_refused_naming_the_holder(
    drivers: tuple[Driver, Driver],
) -> None:
    a, b = drivers
    first = a.spawn("first", how="hold")  # the CLI's way: tardy.engine.restate.hold
    try:
        assert first.stdout.readline().split() == ["won", "-"]
        second = b.spawn("second", how="hold", hold=0)
        out = second.communicate(timeout=60)[0]
        assert out.startswith(
            f"refused restatement first is running (pid {first.pid} on {socket.gethostname()}, "
            "since "
        ), out
        assert out.rstrip().endswith("; wait for it to finish"), out
        current = b.lock().holder()
        assert current is not None and (current.restatement_id, current.pid) == (
            "first",
            first.pid,
        )
        # the lock's connection is recognisable on the server
        assert "tardy restatement lock" in _application_names(b.lock())
    finally:
        _stop(first)
    assert b.lock().holder() is None


def _application_names(held: lock.PostgresLock) -> list[str]:
    connection = held._connect()
    try:
        with connection.cursor() as cursor:
            cursor.execute(
                "SELECT application_name FROM pg_stat_activity WHERE pid <> pg_backend_pid()"
            )
            return [row[0] for row in cursor.fetchall()]
    finally:
        connection.close()


# Long tier: a driver process killed -9. Its fast guard: unit/test_lock (the file lock's holder
# killed), test_a_clean_release_leaves_no_stale_record.
@pytest.mark.long
def test_kill_9_of_the_holder_releases_the_lock_and_leaves_its_record_stale(
    drivers: tuple[Driver, Driver],
) -> None:
    a, b = drivers
    killed = a.spawn("killed")
    try:
        assert killed.stdout.readline().split() == ["won", "-", "-"]
        refused = b.spawn("next", hold=0).communicate(timeout=60)[0]
        assert refused.startswith(f"refused restatement killed is running (pid {killed.pid}"), (
            refused
        )
        os.kill(killed.pid, signal.SIGKILL)
        killed.wait()
        # the server notices the closed connection and drops its lock: poll briefly
        deadline = time.monotonic() + 10
        while b.lock().holder() is not None and time.monotonic() < deadline:
            time.sleep(0.1)
        taker = b.spawn("next", hold=60)
        try:
            assert taker.stdout.readline().split() == ["won", "killed", str(killed.pid)]
            current = a.lock().holder()
            assert current is not None and (current.restatement_id, current.pid) == (
                "next",
                taker.pid,
            )
        finally:
            _stop(taker)
    finally:
        _stop(killed)


def test_a_clean_release_leaves_no_stale_record(drivers: tuple[Driver, Driver]) -> None:
    a, b = drivers
    first = a.spawn("first", hold=0)
    assert first.communicate(timeout=60)[0].split() == ["won", "-", "-"]
    assert first.returncode == 0
    assert b.lock().holder() is None
    second = b.spawn("second", hold=0)
    assert second.communicate(timeout=60)[0].split() == ["won", "-", "-"]


# Long tier: a race of two processes. Its fast guard: the first test (a second driver refused
# while one holds the lock).
@pytest.mark.long
def test_drivers_racing_at_one_instant_never_both_win(drivers: tuple[Driver, Driver]) -> None:
    a, b = drivers
    # Every racer is up by `start` and tries at that instant; the winner holds long enough
    # that a racer slowed by a loaded machine still tries while it holds (with 3 s this test
    # failed once in six runs under load 5 on 2 cores, its output not kept; presumably a
    # racer that started after the release).
    start = time.time() + 5.0
    racers = [(a if i % 2 else b).spawn(f"racer-{i}", start=start, hold=15.0) for i in range(6)]
    results = [racer.communicate(timeout=60)[0].split() for racer in racers]
    assert sum(result[0] == "won" for result in results) == 1, results
    assert sum(result[0] == "refused" for result in results) == len(racers) - 1, results


def test_state_databases_have_separate_locks(
    postgres: dict[str, str], drivers: tuple[Driver, Driver], tmp_path: Path
) -> None:
    a, _ = drivers
    _database(postgres, "state_other_lakehouse")
    other = Driver(postgres, tmp_path / "host-c", "state_other_lakehouse")
    first = a.spawn("first")
    try:
        assert first.stdout.readline().split() == ["won", "-", "-"]
        elsewhere = other.spawn("elsewhere", hold=0).communicate(timeout=60)[0]
        assert elsewhere.split() == ["won", "-", "-"], elsewhere
        assert a.lock().identity != other.lock().identity
    finally:
        _stop(first)


def test_hold_nested_in_one_process_keys_its_bookkeeping_on_the_state_database(
    drivers: tuple[Driver, Driver],
) -> None:
    """``hold`` then ``_locked``'s check in one process: a second session would be refused
    (advisory locks are per session), so the nested hold must find the lock held by
    identity; a second data home with the same database is the same lock."""
    a, b = drivers
    code = (
        "import os\n"
        "from tardy.engine import restate\n"
        "from tardy.project.context import load_config\n"
        "with restate.hold('outer'):\n"
        "    with restate.hold('inner'):\n"
        "        print(sorted(restate._held))\n"
        "    os.environ['TARDY_HOME'] = os.environ['OTHER_HOME']\n"
        "    print(restate.restatement_lock(load_config()).identity in restate._held)\n"
    )
    env = {**a.env, "OTHER_HOME": b.env["TARDY_HOME"]}
    done = subprocess.run(
        [sys.executable, "-c", code], env=env, capture_output=True, text=True, cwd="/"
    )
    assert done.returncode == 0, done.stderr
    port, database = a.env["TARDY_PG_PORT"], a.env["TARDY_STATE_DATABASE"]
    assert done.stdout.splitlines() == [
        f"['postgresql://127.0.0.1:{port}/{database}']",
        "True",
    ]


def test_the_backend_follows_the_gateways_state_connection(
    postgres: dict[str, str], tmp_path: Path
) -> None:
    code = (
        "import sys\n"
        "from tardy.engine.restate import restatement_lock\n"
        "from tardy.project.context import load_config\n"
        "config = load_config()\n"
        "for gateway in sys.argv[1:]:\n"
        "    print(restatement_lock(config, None if gateway == '-' else gateway).identity)\n"
    )

    def identities(env: dict[str, str], *gateways: str) -> list[str]:
        done = subprocess.run(
            [sys.executable, "-c", code, *gateways],
            env=env,
            capture_output=True,
            text=True,
            cwd="/",
        )
        assert done.returncode == 0, done.stderr
        return done.stdout.splitlines()

    connect = _gateway_env(postgres, tmp_path / "connect-home", "sqlmesh_state")
    pg = f"postgresql://127.0.0.1:{postgres['TARDY_PG_PORT']}/sqlmesh_state"
    assert identities(connect, "-", "connect") == [pg, pg]

    local = {k: v for k, v in connect.items() if k not in ("TARDY_SPARK_REMOTE", "TARDY_GATEWAY")}
    home = (tmp_path / "local-home").resolve()
    local.update(TARDY_GATEWAY="local", TARDY_HOME=str(home))
    file_lock = f"file:{home}/restatements/LOCK"
    assert identities(local, "-", "local") == [file_lock, file_lock]


def test_other_state_types_have_no_lock(tmp_path: Path) -> None:
    from sqlmesh.core.config.connection import DuckDBConnectionConfig

    assert lock.for_state(DuckDBConnectionConfig(), tmp_path) == lock.FileLock(tmp_path)
    mysql = t.cast("ConnectionConfig", SimpleNamespace(type_="mysql"))
    with pytest.raises(lock.UnsupportedState, match="state of type mysql"):
        lock.for_state(mysql, tmp_path)
    with pytest.raises(lock.UnsupportedState, match="state of type none"):
        lock.for_state(None, tmp_path)


def test_the_cli_on_another_host_is_refused_before_it_opens_the_project(
    drivers: tuple[Driver, Driver],
) -> None:
    """``tardy --gateway connect promote`` takes the PostgreSQL lock before SQLMesh and Spark
    (the Connect URL here is never dialled): exit 3, the holder named, from another home."""
    a, b = drivers
    first = a.spawn("first")
    try:
        assert first.stdout.readline().split() == ["won", "-", "-"]
        done = subprocess.run(
            [sys.executable, "-m", "tardy.cli", "--gateway", "connect", "promote", "other"],
            env={**b.env, "COLUMNS": "300"},
            capture_output=True,
            text=True,
            cwd="/",
            timeout=120,
        )
        assert done.returncode == 3, done.stderr
        assert f"restatement first is running (pid {first.pid} on" in done.stderr, done.stderr
    finally:
        _stop(first)
