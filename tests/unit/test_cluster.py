"""tardy.cluster without starting anything: settings from the environment, pid files, exports.

The cluster itself (processes, ports, Spark Connect) is exercised by `make cluster-up` and
bench/cluster_smoke.py (docs/cluster.md); an integration test in CI is issue 13's next step.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tardy.cluster import exports, leftovers, status_rows
from tardy.cluster.connect import connect_conf
from tardy.cluster.processes import live_pid
from tardy.cluster.settings import MASTER_CLASS, ClusterError, Settings, components


@pytest.fixture
def settings(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Settings:
    monkeypatch.setenv("TARDY_HOME", str(tmp_path))
    for name in (
        "TARDY_PG_PORT",
        "TARDY_SPARK_CONNECT_PORT",
        "TARDY_SPARK_MASTER_PORT",
        "TARDY_SPARK_WORKERS",
    ):
        monkeypatch.delenv(name, raising=False)
    return Settings.from_env()


def test_everything_lives_under_the_data_home_with_default_ports(
    settings: Settings, tmp_path: Path
) -> None:
    assert settings.root == tmp_path.resolve() / "cluster"
    parts = components(settings)
    assert [c.name for c in parts] == ["postgres", "master", "worker-1", "worker-2", "connect"]
    assert [c.port for c in parts] == [5433, 7077, 7078, 7079, 15002]
    for component in parts:
        assert settings.root in component.log.parents
        assert settings.root in component.pid_file.parents


def test_ports_come_from_the_environment(
    settings: Settings, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("TARDY_SPARK_CONNECT_PORT", "25002")
    monkeypatch.setenv("TARDY_PG_PORT", "25432")
    changed = Settings.from_env()
    assert changed.remote_url == "sc://localhost:25002"
    assert exports(changed)["TARDY_PG_PORT"] == "25432"
    monkeypatch.setenv("TARDY_PG_PORT", "five")
    with pytest.raises(ClusterError, match="TARDY_PG_PORT"):
        Settings.from_env()


def test_without_workers_the_connect_server_runs_its_own_executors(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("TARDY_HOME", str(tmp_path))
    monkeypatch.setenv("TARDY_SPARK_WORKERS", "0")
    alone = Settings.from_env()
    assert [c.name for c in components(alone)] == ["postgres", "connect"]
    assert alone.master_url == f"local[{alone.worker_cores}]"
    assert exports(alone)["TARDY_SPARK_MASTER"] == alone.master_url
    assert connect_conf(alone, "secret", Path("/jars/postgresql.jar"))["spark.cores.max"] == "1"


def test_a_stale_pid_file_counts_as_stopped(settings: Settings) -> None:
    master = components(settings)[1]
    master.pid_file.parent.mkdir(parents=True)
    assert live_pid(master) is None  # no pid file
    master.pid_file.write_text("garbage\n")
    assert live_pid(master) is None
    # A live process that is not a Spark master (a recycled pid): stale too.
    master.pid_file.write_text(f"{os.getpid()}\n")
    assert live_pid(master) is None
    sleeper = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)", MASTER_CLASS])
    try:
        master.pid_file.write_text(f"{sleeper.pid}\n")
        # Until the child has exec'd, its command line is this process's (a fork): wait for it.
        cmdline = Path(f"/proc/{sleeper.pid}/cmdline")
        deadline = time.monotonic() + 20
        while MASTER_CLASS.encode() not in cmdline.read_bytes() and time.monotonic() < deadline:
            time.sleep(0.05)
        assert live_pid(master) == sleeper.pid
    finally:
        sleeper.kill()
        sleeper.wait()
    assert live_pid(master) is None


def test_the_connect_server_gets_delta_the_session_settings_and_a_postgres_metastore(
    settings: Settings,
) -> None:
    conf = connect_conf(settings, "secret", Path("/jars/postgresql.jar"))
    assert conf["spark.sql.extensions"] == "io.delta.sql.DeltaSparkSessionExtension"
    assert conf["spark.sql.sources.partitionOverwriteMode"] == "dynamic"
    assert conf["spark.sql.shuffle.partitions"] == "4"
    assert conf["spark.hadoop.javax.jdo.option.ConnectionURL"].startswith("jdbc:postgresql://")
    assert conf["spark.hadoop.datanucleus.schema.autoCreateConstraints"] == "false"
    assert conf["spark.connect.grpc.binding.address"] == "127.0.0.1"


def test_status_of_a_cluster_never_started(settings: Settings) -> None:
    rows = list(status_rows(settings))
    assert {row[1] for row in rows} == {"stopped"}
    assert leftovers(settings) == []
