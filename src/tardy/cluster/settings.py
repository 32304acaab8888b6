"""Where the local cluster lives and what it is made of: its directories and ports (from the
environment), and its components (name, port, log, pid file).
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from tardy.errors import TardyError
from tardy.project.home import data_home

HOST = "127.0.0.1"
POSTGRES_USER = "tardy"
STATE_DATABASE = "sqlmesh_state"
METASTORE_DATABASE = "metastore"
WORKERS = 2
CONNECT_CLASS = "org.apache.spark.sql.connect.service.SparkConnectServer"
MASTER_CLASS = "org.apache.spark.deploy.master.Master"
WORKER_CLASS = "org.apache.spark.deploy.worker.Worker"


class ClusterError(TardyError):
    """A component did not start or stop; the message names its log."""


def _env_int(name: str, default: int) -> int:
    raw = os.environ.get(name)
    if not raw:
        return default
    try:
        return int(raw)
    except ValueError as error:
        raise ClusterError(f"{name}={raw!r} is not a port number") from error


@dataclass(frozen=True)
class Settings:
    """Where the cluster lives and its ports (environment variables, with defaults)."""

    root: Path
    postgres_port: int
    master_port: int
    master_ui_port: int
    worker_port: int
    worker_ui_port: int
    connect_port: int
    workers: int
    worker_cores: int
    worker_memory: str
    executor_memory: str
    driver_memory: str

    @classmethod
    def from_env(cls) -> Settings:
        return cls(
            root=data_home().root / "cluster",
            postgres_port=_env_int("TARDY_PG_PORT", 5433),
            master_port=_env_int("TARDY_SPARK_MASTER_PORT", 7077),
            master_ui_port=_env_int("TARDY_SPARK_MASTER_UI_PORT", 8080),
            worker_port=_env_int("TARDY_SPARK_WORKER_PORT", 7078),
            worker_ui_port=_env_int("TARDY_SPARK_WORKER_UI_PORT", 8081),
            connect_port=_env_int("TARDY_SPARK_CONNECT_PORT", 15002),
            # Two standalone workers (the test suite runs one: fewer JVMs on its 2 cores).
            workers=_env_int("TARDY_SPARK_WORKERS", WORKERS),
            # Two applications at once (the Connect server's, a `cluster` gateway driver's):
            # each takes one core and one executor's memory on every worker.
            worker_cores=_env_int("TARDY_SPARK_WORKER_CORES", 2),
            worker_memory=os.environ.get("TARDY_SPARK_WORKER_MEMORY", "2g"),
            executor_memory=os.environ.get("TARDY_SPARK_EXECUTOR_MEMORY", "768m"),
            driver_memory=os.environ.get("TARDY_SPARK_CONNECT_MEMORY", "1g"),
        )

    @property
    def logs(self) -> Path:
        return self.root / "logs"

    @property
    def run(self) -> Path:
        return self.root / "run"

    @property
    def postgres_dir(self) -> Path:
        return self.root / "postgres"

    @property
    def postgres_data(self) -> Path:
        return self.postgres_dir / "data"

    @property
    def postgres_socket_dir(self) -> Path:
        return self.postgres_dir / "socket"

    @property
    def password_file(self) -> Path:
        return self.root / "postgres-password"

    @property
    def connect_token_file(self) -> Path:
        return self.root / "connect-token"

    @property
    def connect_conf_file(self) -> Path:
        return self.run / "connect.conf"

    @property
    def jars(self) -> Path:
        return self.root / "jars"

    @property
    def warehouse(self) -> Path:
        return self.root / "warehouse"

    @property
    def master_url(self) -> str:
        """The standalone master's URL; with no workers (``TARDY_SPARK_WORKERS=0``: the
        Connect server alone, as the fast tier's smoke runs it) the server's own local
        executors."""
        if self.workers == 0:
            return f"local[{self.worker_cores}]"
        return f"spark://{HOST}:{self.master_port}"

    @property
    def metastore_url(self) -> str:
        return f"jdbc:postgresql://{HOST}:{self.postgres_port}/{METASTORE_DATABASE}"

    @property
    def remote_url(self) -> str:
        """The Connect server's address; a client adds the token (``connect.client_url``)."""
        return f"sc://localhost:{self.connect_port}"


@dataclass(frozen=True)
class Component:
    """One process of the cluster: how to recognise, start and reach it."""

    name: str
    port: int
    log: Path
    pid_file: Path
    marker: str  # a string of its command line: a pid file naming another process is stale


def components(settings: Settings) -> list[Component]:
    logs, run = settings.logs, settings.run
    parts = [
        Component(
            "postgres",
            settings.postgres_port,
            logs / "postgres.log",
            settings.postgres_data / "postmaster.pid",
            "postgres",
        )
    ]
    if settings.workers:  # else the Connect server runs its executors itself
        parts.append(
            Component(
                "master",
                settings.master_port,
                logs / "master.log",
                run / "master.pid",
                MASTER_CLASS,
            )
        )
    for i in range(1, settings.workers + 1):
        parts.append(
            Component(
                f"worker-{i}",
                settings.worker_port + i - 1,
                logs / f"worker-{i}.log",
                run / f"worker-{i}.pid",
                WORKER_CLASS,
            )
        )
    parts.append(
        Component(
            "connect",
            settings.connect_port,
            logs / "connect.log",
            run / "connect.pid",
            CONNECT_CLASS,
        )
    )
    return parts
