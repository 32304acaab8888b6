"""The cluster's standalone Spark: the PySpark distribution's ``spark-class`` running a master
and its workers, each waited for until its log says it is ready.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

from tardy.cluster.processes import live_pid, port_open, spawn, wait_until
from tardy.cluster.settings import (
    HOST,
    MASTER_CLASS,
    WORKER_CLASS,
    ClusterError,
    Component,
    Settings,
)


def spark_home() -> Path:
    import pyspark

    return Path(pyspark.__file__).parent


def spark_env(settings: Settings) -> dict[str, str]:
    env = dict(os.environ)
    env.update(
        SPARK_HOME=str(spark_home()),
        SPARK_LOCAL_IP=HOST,
        SPARK_LOCAL_DIRS=str(settings.root / "tmp"),
        SPARK_LOG_DIR=str(settings.logs),
        SPARK_CONF_DIR=str(settings.root / "conf"),
        PYSPARK_PYTHON=sys.executable,
        TZ="UTC",
    )
    env.pop("SPARK_REMOTE", None)
    env.pop("SPARK_CONNECT_MODE_ENABLED", None)
    return env


def _log_contains(log: Path, text: str, since: int) -> bool:
    try:
        with log.open("rb") as handle:
            handle.seek(since)
            return text.encode() in handle.read()
    except OSError:
        return False


def start_spark(
    settings: Settings,
    component: Component,
    argv: list[str],
    timeout: float,
    ready_line: str | None = None,
) -> None:
    if live_pid(component) is not None:
        return
    if port_open(component.port):
        raise ClusterError(
            f"port {component.port} for {component.name} is taken by another program "
            "(set its port variable, see docs/cluster.md)"
        )
    since = component.log.stat().st_size if component.log.exists() else 0
    process = spawn(component, argv, spark_env(settings))

    def ready() -> bool:
        if not port_open(component.port):
            return False
        return ready_line is None or _log_contains(component.log, ready_line, since)

    # Alive by the child's exit status: while spark-class execs java, /proc/<pid>/cmdline
    # can read empty for a moment.
    wait_until(component, ready, lambda: process.poll() is None, timeout)


def start_master(settings: Settings, component: Component) -> None:
    argv = [
        str(spark_home() / "bin" / "spark-class"),
        MASTER_CLASS,
        "--host",
        HOST,
        "--port",
        str(settings.master_port),
        "--webui-port",
        str(settings.master_ui_port),
    ]
    start_spark(settings, component, argv, timeout=60, ready_line="I have been elected leader")


def start_worker(settings: Settings, component: Component, index: int) -> None:
    work = settings.root / component.name
    work.mkdir(parents=True, exist_ok=True)
    argv = [
        str(spark_home() / "bin" / "spark-class"),
        WORKER_CLASS,
        "--host",
        HOST,
        "--port",
        str(component.port),
        "--webui-port",
        str(settings.worker_ui_port + index - 1),
        "--cores",
        str(settings.worker_cores),
        "--memory",
        settings.worker_memory,
        "--work-dir",
        str(work),
        settings.master_url,
    ]
    start_spark(
        settings, component, argv, timeout=60, ready_line="Successfully registered with master"
    )
