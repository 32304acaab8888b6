"""The data home's warm engine (``tardy.runtime.warm``): its lifecycle, seen from real processes.

The engine is a process of its own, so these tests start real ones: ``tardy engine`` and
``config.py`` (what the stock ``sqlmesh`` and every ``tardy`` command load first) in fresh
data homes, with ``TARDY_ENGINE`` on (the rest of the suite keeps Spark in-process). No
project is built here: what is checked is which engine a command gets, that its secret keeps
other clients out, that a dead one is replaced and an idle one stops, and that a client
killed mid-statement, even in the engine's first statement, leaves nothing running or
waiting behind it.
"""

from __future__ import annotations

import contextlib
import json
import os
import random
import signal
import subprocess
import sys
import time
import typing as t
from pathlib import Path

import pytest
from children import connect_asks
from proc_table import command_lines

from tardy.project.home import project_root
from tardy.runtime import warm
from tardy.runtime.processes import alive

# Long tier: every test starts, kills or stops real engines. Fast guards: unit/test_warm_rules
# (the same rules on the engine's files), test_cli_smoke (one engine: its token, its stop).
pytestmark = pytest.mark.long

BIN = Path(sys.executable).parent
# config.py, as SQLMesh loads it: the engine's URL this process got (the token replaced).
CONFIG_LOAD = (
    "import re, runpy; url = runpy.run_path('config.py')['config']"
    ".gateways['local'].connection.config['spark.remote']; "
    "print(re.sub(';token=[^;]*', '', url))"
)


def _env(home: Path, **extra: str) -> dict[str, str]:
    return {**os.environ, "TARDY_HOME": str(home), "TARDY_ENGINE": "on", **extra}


def _run(home: Path, *argv: str, **extra: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        argv,
        cwd=project_root(),
        env=_env(home, **extra),
        capture_output=True,
        text=True,
        timeout=300,
    )


def _engine(home: Path, action: str = "status", **extra: str) -> dict[str, t.Any]:
    done = _run(home, str(BIN / "tardy"), "engine", action, "--json", **extra)
    assert done.returncode == 0, done.stderr[-2000:]
    return json.loads(done.stdout)


def _processes_of(home: Path) -> list[int]:
    """Every live process whose command line names the home's engine (supervisor or server)."""
    paths = warm.Paths(home)
    return [
        pid
        for pid, cmdline in command_lines().items()
        if (
            str(paths.server_conf) in cmdline
            or (warm.SUPERVISOR in cmdline and str(home) in cmdline)
        )
        and alive(pid)
    ]


def _stop(home: Path) -> None:
    _engine(home, "stop")
    assert _processes_of(home) == []


@pytest.fixture
def homes(tmp_path: Path) -> t.Iterator[list[Path]]:
    made: list[Path] = []
    yield made
    for home in made:  # whatever a failed assertion left running
        warm.stop(warm.Paths(home), timeout=5)


def _sending(home: Path, script: str) -> subprocess.Popen[str]:
    """A client process running ``script``, once it printed "sending" (its statement next)."""
    client = subprocess.Popen(
        [sys.executable, "-c", script],
        cwd=project_root(),
        env=_env(home),
        stdout=subprocess.PIPE,
        text=True,
    )
    assert client.stdout is not None
    assert client.stdout.readline().strip() == "sending"
    return client


def _home(homes: list[Path], root: Path, name: str) -> Path:
    home = root / name
    home.mkdir()
    homes.append(home)
    return home


def test_first_use_under_a_race_starts_one_engine_that_only_its_owner_can_use(
    homes: list[Path], tmp_path: Path
) -> None:
    home = _home(homes, tmp_path, "a")
    racers = [
        subprocess.Popen(
            [sys.executable, "-c", CONFIG_LOAD],
            cwd=project_root(),
            env=_env(home),
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for _ in range(3)
    ]
    urls = []
    for racer in racers:
        out, errors = racer.communicate(timeout=300)
        assert racer.returncode == 0, errors[-2000:]
        urls.append(out.strip().splitlines()[-1])
    status = _engine(home)
    assert status["state"] == "running"
    assert len(_processes_of(home)) == 2  # one supervisor, one server: one engine
    # The same server for all three, each with a session of its own.
    assert {u.split("/;")[0] for u in urls} == {status["url"]}
    assert len({u.split("session_id=")[1] for u in urls}) == 3
    # Loopback only, and only with the data home's secret, which no command line shows.
    paths = warm.Paths(home)
    assert (paths.token.stat().st_mode & 0o777) == 0o600
    assert (paths.server_conf.stat().st_mode & 0o777) == 0o600
    token = paths.token.read_text().strip()
    server = Path(f"/proc/{status['pid']}/cmdline").read_bytes().decode(errors="replace")
    assert token not in server
    assert _listening(status["port"]) == {"127.0.0.1"}
    url = status["url"]
    for refused in (f"{url}/;token=not-the-secret", url.replace("localhost", "127.0.0.1")):
        done = connect_asks(refused)
        assert done.returncode != 0 and "42" not in done.stdout, refused
    done = connect_asks(f"{url}/;token={token}")
    assert done.stdout.strip() == "42", done.stderr[-2000:]

    # A command using the engine keeps `tardy engine stop` from pulling it away; --force
    # stops it anyway.
    holder = subprocess.Popen(
        [sys.executable, "-c", CONFIG_LOAD + "; import time; time.sleep(120)"],
        cwd=project_root(), env=_env(home), stdout=subprocess.DEVNULL,
    )  # fmt: skip
    try:
        registered = paths.clients / f"{holder.pid}.json"
        deadline = time.monotonic() + 60
        while not registered.exists() and time.monotonic() < deadline:
            time.sleep(0.2)
        refused = _run(home, str(BIN / "tardy"), "engine", "stop")
        assert refused.returncode == 3, refused.stderr[-2000:]
        assert f"pid {holder.pid}" in refused.stderr
        assert _engine(home)["pid"] == status["pid"]
        forced = _run(home, str(BIN / "tardy"), "engine", "stop", "--force")
        assert forced.returncode == 0, forced.stderr[-2000:]
        assert _processes_of(home) == []
    finally:
        holder.kill()
    assert _engine(home)["state"] == "stopped"


def _listening(port: int) -> set[str]:
    """The addresses a TCP port listens on (``/proc/net/tcp*``, state 0A = LISTEN; an
    IPv4-mapped IPv6 address as its IPv4 form, any other IPv6 one raw)."""
    found = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        for line in Path(table).read_text().splitlines()[1:]:
            local, state = line.split()[1], line.split()[3]
            address, hex_port = local.rsplit(":", 1)
            if state != "0A" or int(hex_port, 16) != port:
                continue
            if len(address) == 32 and address.startswith("0000000000000000FFFF0000"):
                address = address[24:]
            if len(address) == 8:  # little-endian IPv4
                address = ".".join(str(int(address[i : i + 2], 16)) for i in (6, 4, 2, 0))
            found.add(address)
    return found


def test_dead_and_stale_engines_are_replaced_and_homes_get_engines_of_their_own(
    homes: list[Path], tmp_path: Path
) -> None:
    first, second = _home(homes, tmp_path, "first"), _home(homes, tmp_path, "second")
    a = _engine(first, "start")
    b = _engine(second, "start")
    assert a["port"] != b["port"] and a["pid"] != b["pid"]

    # An engine killed -9 is never reused: the next command starts another.
    os.kill(a["pid"], signal.SIGKILL)
    replaced = _engine(first, "start")
    assert replaced["state"] == "running" and replaced["pid"] != a["pid"]
    assert _engine(second)["pid"] == b["pid"]  # the other home's engine is untouched

    # A record naming a port nobody listens on and processes that are not an engine (a live
    # unrelated one among them) is stale: ignored, and the unrelated process left alone.
    _stop(first)
    bystander = subprocess.Popen(["sleep", "300"])
    try:
        paths = warm.Paths(first)
        paths.record.write_text(
            json.dumps(
                {
                    "home": str(first),
                    "supervisor_pid": bystander.pid,
                    "server_pid": bystander.pid,
                    "port": b["port"] + 1,
                    "started_at": 0.0,
                    "settings_digest": "x",
                    "idle_seconds": 1800.0,
                }
            )
        )
        assert _engine(first)["state"] == "stale"
        fresh = _engine(first, "start")
        assert fresh["state"] == "running" and fresh["pid"] != bystander.pid
        assert bystander.poll() is None
    finally:
        bystander.kill()
    # Another data home's record copied here (a home copied with its engine files) is stale.
    paths.record.write_text(warm.Paths(second).record.read_text())
    assert _engine(first)["state"] == "stale"
    _stop(second)
    _stop(first)


def test_an_idle_engine_stops_by_itself(homes: list[Path], tmp_path: Path) -> None:
    home = _home(homes, tmp_path, "idle")
    started = _engine(home, "start", TARDY_ENGINE_IDLE="3s")
    assert started["idle_stop_seconds"] == 3.0
    deadline = time.monotonic() + 60
    while _processes_of(home) and time.monotonic() < deadline:
        time.sleep(0.5)
    assert _processes_of(home) == []
    assert _engine(home)["state"] == "stopped"


SLOW_INSERT = """
import runpy
from pyspark.sql import SparkSession
from pyspark.sql.functions import udf

config = runpy.run_path("config.py")["config"]  # registers this process and its session
spark = SparkSession.builder.remote(
    config.gateways["local"].connection.config["spark.remote"]
).getOrCreate()
spark.sql("CREATE TABLE IF NOT EXISTS slow (id BIGINT) USING delta")


@udf("bigint")
def slowly(i):
    import time

    time.sleep(1)
    return i


print("sending", flush=True)
spark.range(0, 20, 1, 1).select(slowly("id").alias("id")).write.mode("append").saveAsTable("slow")
print("committed", flush=True)
"""
HISTORY_LATER = """
import runpy, time
from pyspark.sql import SparkSession

config = runpy.run_path("config.py")["config"]  # reaps the dead client first
spark = SparkSession.builder.remote(
    config.gateways["local"].connection.config["spark.remote"]
).getOrCreate()
time.sleep(25)  # past the moment the killed write would have committed
print(spark.sql("DESCRIBE HISTORY slow").count())
"""


@pytest.mark.parametrize("how", [signal.SIGKILL, signal.SIGINT], ids=["kill-9", "ctrl-c"])
def test_a_client_killed_mid_statement_leaves_nothing_running(
    homes: list[Path], tmp_path: Path, how: signal.Signals
) -> None:
    """A 20-second write whose client is killed -9 (or interrupted, as Ctrl-C does) four
    seconds in: on a server, the statement would go on and commit ~16 s later (docs/facts.md,
    fact 24). Killed, the engine interrupts the dead client's session before the next
    command of the home reads anything; interrupted, PySpark's client interrupts its own
    operation before it exits (and its record is gone, so nothing is left to reap). Either
    way the table keeps its one version."""
    home = _home(homes, tmp_path, f"killed-{how.name}")
    writer = _sending(home, SLOW_INSERT)
    paths = warm.Paths(home)
    assert (paths.clients / f"{writer.pid}.json").exists()
    time.sleep(4)
    writer.send_signal(how)
    writer.wait(timeout=60)
    done = _run(home, sys.executable, "-c", HISTORY_LATER)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.strip().splitlines()[-1] == "1"  # CREATE TABLE only: no late commit
    assert not (paths.clients / f"{writer.pid}.json").exists()
    _stop(home)


FIRST_STATEMENT = """
import runpy
from pyspark.sql import SparkSession

config = runpy.run_path("config.py")["config"]  # starts the engine: this home has none
spark = SparkSession.builder.remote(
    config.gateways["local"].connection.config["spark.remote"]
).getOrCreate()
print("sending", flush=True)
spark.sql("CREATE TABLE IF NOT EXISTS first (id BIGINT) USING delta")
"""
NEXT_STATEMENT = """
import runpy
from pyspark.sql import SparkSession

config = runpy.run_path("config.py")["config"]  # reaps the dead client first
spark = SparkSession.builder.remote(
    config.gateways["local"].connection.config["spark.remote"]
).getOrCreate()
print(spark.sql("SHOW TABLES").count())
"""


def _next_command(home: Path, seconds: float, **extra: str) -> subprocess.CompletedProcess[str]:
    """The next command of the home (reap, probe, ``SHOW TABLES``), which must answer within
    ``seconds`` and succeed."""
    try:
        done = subprocess.run(
            [sys.executable, "-c", NEXT_STATEMENT],
            cwd=project_root(),
            env=_env(home, **extra),
            capture_output=True,
            text=True,
            timeout=seconds,
        )
    except subprocess.TimeoutExpired:
        pytest.fail(f"the next command waited {seconds:.0f} s on the engine: it is wedged")
    assert done.returncode == 0, done.stderr[-2000:]
    return done


def test_a_client_killed_in_the_engines_first_statement_leaves_the_engine_usable(
    homes: list[Path], tmp_path: Path
) -> None:
    """The first statement on a new engine used to open the metastore (Derby through a
    connection pool); a client killed there had that statement interrupted by the next
    command's reaping, the pool lost its first connection, and every later catalog call
    waited for good (chaos, seed 7). The supervisor now opens the metastore before it
    records the engine, so the next command answers."""
    home = _home(homes, tmp_path, "first")
    client = _sending(home, FIRST_STATEMENT)
    time.sleep(0.5)
    client.kill()
    client.wait()
    done = _next_command(home, 120)
    assert done.stdout.strip().splitlines()[-1] in {"0", "1"}
    _stop(home)


# Enough tables that one `SHOW TABLE EXTENDED` (a metastore call per table) outlasts the
# moment the next command, or the supervisor's poll, reaps the killed client (~2 s).
CATALOG_TABLES = 300
MAKE_TABLES = f"""
import runpy
from pyspark.sql import SparkSession

config = runpy.run_path("config.py")["config"]
spark = SparkSession.builder.remote(
    config.gateways["local"].connection.config["spark.remote"]
).getOrCreate()
for i in range({CATALOG_TABLES}):
    spark.sql(f"CREATE TABLE IF NOT EXISTS t{{i}} (id BIGINT, s STRING) USING parquet")
"""
# One statement made of many small metastore calls, sent again and again: a client killed
# at any moment leaves one running, and the reap interrupts it inside one of those calls.
CATALOG_CALLS = """
import runpy
from pyspark.sql import SparkSession

config = runpy.run_path("config.py")["config"]
spark = SparkSession.builder.remote(
    config.gateways["local"].connection.config["spark.remote"]
).getOrCreate()
print("sending", flush=True)
while True:
    spark.sql("SHOW TABLE EXTENDED IN default LIKE '*'").collect()
"""


def test_clients_killed_inside_metastore_calls_never_wedge_the_engine(
    homes: list[Path], tmp_path: Path
) -> None:
    """An interrupt that lands inside a pooled metastore call used to cost the pool a
    connection for good; once the pool was empty the next catalog call waited for one with
    no bound, holding the catalog's lock, and every later command of the home waited behind
    it (chaos, seed 7, trial 4). Six rounds of three clients killed together inside such
    calls, on one engine (measured with the pool: 2 of 8 rounds hung): each next command
    answers within 60 s, on the same engine (the watchdog had nothing to restart)."""
    home = _home(homes, tmp_path, "catalog")
    made = _run(home, sys.executable, "-c", MAKE_TABLES)
    assert made.returncode == 0, made.stderr[-2000:]
    paths = warm.Paths(home)
    engine = warm.live_record(paths)
    assert engine is not None
    rnd = random.Random(48)
    for round_ in range(6):
        clients = [_sending(home, CATALOG_CALLS) for _ in range(3)]
        time.sleep(rnd.uniform(0.3, 1.5))
        for client in clients:
            client.kill()
            client.wait()
        answered = _next_command(home, 60).stdout.strip().splitlines()[-1]
        assert answered == str(CATALOG_TABLES), f"round {round_}"
        record = warm.live_record(paths)
        assert record is not None and record.server_pid == engine.server_pid, f"round {round_}"
    assert "wedged" not in paths.log.read_text(errors="replace")
    _stop(home)


def test_a_wedged_engine_is_reported_and_restarted_by_the_next_command(
    homes: list[Path], tmp_path: Path
) -> None:
    """The watchdog: an engine whose port answers but whose catalog does not (its server
    stopped with SIGSTOP, as a stuck metastore looks from outside) is reported wedged by
    `tardy engine status`, and the next command restarts it with one line saying so and
    answers within 60 s."""
    home = _home(homes, tmp_path, "wedged")
    started = _engine(home, "start")
    os.kill(started["pid"], signal.SIGSTOP)
    try:
        status = _engine(home, TARDY_ENGINE_PROBE_TIMEOUT="3")
        assert status["state"] == "wedged", status
        assert status["probe"]["error"] and status["pid"] == started["pid"]
        done = _next_command(home, 60, TARDY_ENGINE_PROBE_TIMEOUT="5")
    finally:
        with contextlib.suppress(ProcessLookupError):  # the restart killed it
            os.kill(started["pid"], signal.SIGCONT)
    assert done.stdout.strip().splitlines()[-1] == "0"
    notices = [line for line in done.stderr.splitlines() if "restarting it" in line]
    assert len(notices) == 1, done.stderr[-2000:]
    after = _engine(home)
    assert after["state"] == "running" and after["pid"] != started["pid"]
    assert not alive(started["pid"])
    _stop(home)
