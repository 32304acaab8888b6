"""A local cluster on loopback: PostgreSQL, a Spark standalone master, two workers, Spark Connect.

One concept: the processes a team's shared engine would run, started on this machine under
``$TARDY_HOME/cluster/`` (data, pid files, logs), so the ``connect`` and ``cluster`` ways of
running the project can be tried and tested without a real cluster.

- ``postgres``: PostgreSQL (Debian's binaries) with databases ``sqlmesh_state`` (SQLMesh's
  state) and ``metastore`` (the Hive metastore's); ready when ``pg_ctl -w`` returns;
- ``master``: ``spark-class org.apache.spark.deploy.master.Master``; ready when elected leader;
- ``worker-1``, ``worker-2``: ``spark-class ...worker.Worker``, 2 cores and 2 GiB each (room
  for one executor of the Connect server and one of a ``cluster`` gateway driver); ready when
  registered with the master;
- ``connect``: ``SparkConnectServer`` submitted to the master, with Delta's extension and
  catalog and a Hive metastore in the PostgreSQL; ready when its port accepts.

Everything comes from the PySpark distribution of this virtualenv (Delta's jars are already in
``pyspark/jars``: ``tardy.jars``), except PostgreSQL's JDBC driver, which Spark's own resolver
fetches from Maven Central into ``cluster/jars/`` once (``POSTGRES_JDBC``).

Run: ``python -m tardy.cluster up|down|status`` (``make cluster-up`` ...). ``up`` is
idempotent (a running component is kept, a stale pid file is discarded) and prints the
``export NAME=value`` lines a shell needs on stdout; its progress goes to stderr, so
``eval "$(python -m tardy.cluster up)"`` works.
"""

from __future__ import annotations

import os
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TextIO

from tardy import jvm
from tardy.errors import TardyError
from tardy.home import data_home

HOST = "127.0.0.1"
POSTGRES_JDBC = "org.postgresql:postgresql:42.7.14"
POSTGRES_USER = "tardy"
STATE_DATABASE = "sqlmesh_state"
METASTORE_DATABASE = "metastore"
WORKERS = 2
CONNECT_CLASS = "org.apache.spark.sql.connect.service.SparkConnectServer"
MASTER_CLASS = "org.apache.spark.deploy.master.Master"
WORKER_CLASS = "org.apache.spark.deploy.worker.Worker"

# Session settings the `local` gateway gives its own driver (project.yaml), given here to the
# Connect server: a Connect client cannot set `partitionOverwriteMode` (SQLMesh tries through
# `sparkContext`), and untuned shuffle and Delta snapshot partitions triple a small write.
SESSION_SETTINGS = {
    "spark.sql.extensions": "io.delta.sql.DeltaSparkSessionExtension",
    "spark.sql.catalog.spark_catalog": "org.apache.spark.sql.delta.catalog.DeltaCatalog",
    "spark.sql.sources.default": "delta",
    "spark.sql.session.timeZone": "UTC",
    "spark.sql.shuffle.partitions": "4",
    "spark.databricks.delta.snapshotPartitions": "2",
    "spark.sql.sources.partitionOverwriteMode": "dynamic",
    "spark.databricks.delta.schema.autoMerge.enabled": "false",
}


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
    def jars(self) -> Path:
        return self.root / "jars"

    @property
    def warehouse(self) -> Path:
        return self.root / "warehouse"

    @property
    def master_url(self) -> str:
        return f"spark://{HOST}:{self.master_port}"

    @property
    def metastore_url(self) -> str:
        return f"jdbc:postgresql://{HOST}:{self.postgres_port}/{METASTORE_DATABASE}"

    @property
    def remote_url(self) -> str:
        return f"sc://localhost:{self.connect_port}"


@dataclass(frozen=True)
class Component:
    """One process of the cluster: how to recognise, start and reach it."""

    name: str
    port: int
    log: Path
    pid_file: Path
    marker: str  # a string of its command line: a pid file naming another process is stale


@dataclass(frozen=True)
class ComponentState:
    component: Component
    pid: int | None

    @property
    def running(self) -> bool:
        return self.pid is not None and port_open(self.component.port)

    @property
    def state(self) -> str:
        if self.pid is None:
            return "stopped"
        return "running" if port_open(self.component.port) else "starting (port closed)"


def components(settings: Settings) -> list[Component]:
    logs, run = settings.logs, settings.run
    parts = [
        Component(
            "postgres",
            settings.postgres_port,
            logs / "postgres.log",
            settings.postgres_data / "postmaster.pid",
            "postgres",
        ),
        Component(
            "master", settings.master_port, logs / "master.log", run / "master.pid", MASTER_CLASS
        ),
    ]
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


# --- processes -------------------------------------------------------------------------


def port_open(port: int, host: str = HOST) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.settimeout(0.5)
        return sock.connect_ex((host, port)) == 0


def _cmdline(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()
    except OSError:
        return ""


def live_pid(component: Component) -> int | None:
    """The component's pid when its pid file names a live process of that component; a stale
    pid file (no such process, or another program under a recycled pid) counts as none."""
    try:
        pid = int(component.pid_file.read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return None
    return pid if component.marker in _cmdline(pid) else None


def state_of(settings: Settings) -> list[ComponentState]:
    return [ComponentState(c, live_pid(c)) for c in components(settings)]


def _tail(log: Path, lines: int = 15) -> str:
    try:
        return "\n".join(log.read_text(errors="replace").splitlines()[-lines:])
    except OSError:
        return "(no log)"


def wait_until(
    component: Component, ready: Callable[[], bool], alive: Callable[[], bool], timeout: float
) -> None:
    """Poll ``ready`` until true; fail fast with the log's tail if the process died."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if ready():
            return
        if not alive():
            raise ClusterError(
                f"{component.name} exited while starting; log {component.log}:\n"
                + _tail(component.log)
            )
        time.sleep(0.5)
    raise ClusterError(
        f"{component.name} not ready after {timeout:.0f} s (port {component.port}); "
        f"log {component.log}:\n" + _tail(component.log)
    )


def _spawn(component: Component, argv: list[str], env: dict[str, str]) -> subprocess.Popen[bytes]:
    """Start ``argv`` detached (own session: its process group is the component's, executors
    included), output appended to the component's log, and write its pid file."""
    component.log.parent.mkdir(parents=True, exist_ok=True)
    component.pid_file.parent.mkdir(parents=True, exist_ok=True)
    with component.log.open("ab") as log:
        log.write(f"\n=== {time.strftime('%Y-%m-%dT%H:%M:%SZ', time.gmtime())} start\n".encode())
        log.flush()
        process = subprocess.Popen(
            argv,
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
            env=env,
            start_new_session=True,
        )
    component.pid_file.write_text(f"{process.pid}\n")
    return process


def _terminate(pid: int, timeout: float = 20.0) -> None:
    """SIGTERM the process group led by ``pid`` (our spawns lead their own), then SIGKILL."""
    try:
        group = os.getpgid(pid)
    except ProcessLookupError:
        return

    def send(sig: signal.Signals) -> None:
        try:
            if group == pid:
                os.killpg(group, sig)
            else:
                os.kill(pid, sig)
        except ProcessLookupError:
            pass

    send(signal.SIGTERM)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if not Path(f"/proc/{pid}").exists() or _is_zombie(pid):
            break
        time.sleep(0.25)
    else:
        send(signal.SIGKILL)
    if group == pid:  # executors and other members left behind
        send(signal.SIGKILL)


def _is_zombie(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().split(")")[-1].split()[0] == "Z"
    except OSError:
        return True


# --- Spark ------------------------------------------------------------------------------


def spark_home() -> Path:
    import pyspark

    return Path(pyspark.__file__).parent


def _spark_env(settings: Settings) -> dict[str, str]:
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


def _start_spark(
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
    process = _spawn(component, argv, _spark_env(settings))

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
    _start_spark(settings, component, argv, timeout=60, ready_line="I have been elected leader")


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
    _start_spark(
        settings, component, argv, timeout=60, ready_line="Successfully registered with master"
    )


def connect_conf(settings: Settings, password: str, driver_jar: Path) -> dict[str, str]:
    """The Connect server's configuration: the master, Delta, the local gateway's session
    settings, and a Hive metastore whose database is the cluster's PostgreSQL."""
    return {
        "spark.app.name": "tardy-connect",
        "spark.connect.grpc.binding.address": HOST,
        "spark.connect.grpc.binding.port": str(settings.connect_port),
        "spark.driver.host": HOST,
        "spark.driver.bindAddress": HOST,
        "spark.driver.memory": settings.driver_memory,
        "spark.driver.extraClassPath": str(driver_jar),
        "spark.driver.extraJavaOptions": f"-Duser.timezone=UTC {jvm.tuning()}".strip(),
        "spark.executor.extraJavaOptions": f"-Duser.timezone=UTC {jvm.tuning()}".strip(),
        "spark.executor.memory": settings.executor_memory,
        "spark.executor.cores": "1",
        "spark.cores.max": str(settings.workers),
        "spark.ui.enabled": "false",
        "spark.ui.showConsoleProgress": "false",
        "spark.sql.warehouse.dir": str(settings.warehouse),
        "spark.sql.catalogImplementation": "hive",
        "spark.hadoop.javax.jdo.option.ConnectionURL": settings.metastore_url,
        "spark.hadoop.javax.jdo.option.ConnectionDriverName": "org.postgresql.Driver",
        "spark.hadoop.javax.jdo.option.ConnectionUserName": POSTGRES_USER,
        "spark.hadoop.javax.jdo.option.ConnectionPassword": password,
        # The metastore's tables are created in the empty database as first used (the
        # schematool's scripts are not in Spark's jars). Without foreign keys: DataNucleus
        # adds them on a second connection while the first holds the referenced table in an
        # open transaction (the first CREATE TABLE hung on `ALTER TABLE "TBL_PRIVS" ADD
        # CONSTRAINT ... REFERENCES "TBLS"`, PostgreSQL sees no deadlock).
        # (autoCreateAll would switch constraints back on.)
        "spark.hadoop.datanucleus.schema.autoCreateAll": "false",
        "spark.hadoop.datanucleus.schema.autoCreateTables": "true",
        "spark.hadoop.datanucleus.schema.autoCreateColumns": "true",
        "spark.hadoop.datanucleus.schema.autoCreateConstraints": "false",
        "spark.hadoop.hive.metastore.schema.verification": "false",
        **SESSION_SETTINGS,
    }


def start_connect(settings: Settings, component: Component, password: str) -> None:
    driver_jar = postgres_jdbc_jar(settings)
    argv = [
        str(spark_home() / "bin" / "spark-submit"),
        "--master",
        settings.master_url,
        "--class",
        CONNECT_CLASS,
    ]
    for key, value in connect_conf(settings, password, driver_jar).items():
        argv += ["--conf", f"{key}={value}"]
    argv.append("spark-internal")
    _start_spark(settings, component, argv, timeout=180)


# --- PostgreSQL's JDBC driver -----------------------------------------------------------


def _jar_name(coordinate: str) -> str:
    group, artifact, version = coordinate.split(":")
    return f"{group}_{artifact}-{version}.jar"


def postgres_jdbc_jar(settings: Settings) -> Path:
    path = settings.jars / _jar_name(POSTGRES_JDBC)
    if not path.is_file():
        raise ClusterError(f"{path} missing: `python -m tardy.cluster up` fetches it")
    return path


def fetch_postgres_jdbc(settings: Settings) -> Path:
    """PostgreSQL's JDBC driver from Maven Central, resolved by Spark's own Ivy resolver (as
    ``tardy.jars`` fetches Delta), into ``cluster/jars/``. Idempotent; the JVM that resolves
    it writes to ``logs/fetch-jdbc.log``."""
    target = settings.jars / _jar_name(POSTGRES_JDBC)
    if target.is_file():
        return target
    settings.jars.mkdir(parents=True, exist_ok=True)
    log = settings.logs / "fetch-jdbc.log"
    log.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="tardy-ivy-") as ivy:
        # An empty Python application: spark-submit resolves --packages before running it.
        noop = Path(ivy) / "noop.py"
        noop.write_text("")
        argv = [
            str(spark_home() / "bin" / "spark-submit"),
            "--master",
            "local[1]",
            "--conf",
            f"spark.jars.ivy={ivy}",
            "--packages",
            POSTGRES_JDBC,
            str(noop),
        ]
        with log.open("ab") as out:
            subprocess.run(argv, stdout=out, stderr=subprocess.STDOUT, env=_spark_env(settings))
        fetched = Path(ivy) / "jars" / target.name
        if not fetched.is_file():
            raise ClusterError(f"Spark's resolver did not fetch {POSTGRES_JDBC}; log {log}")
        shutil.copy2(fetched, target)
    return target


# --- PostgreSQL -------------------------------------------------------------------------


def postgres_bin() -> Path:
    """Debian's PostgreSQL server binaries (``TARDY_PG_BIN`` overrides)."""
    if env := os.environ.get("TARDY_PG_BIN"):
        return Path(env)
    found = sorted(Path("/usr/lib/postgresql").glob("*/bin/pg_ctl"))
    return found[-1].parent if found else Path("/usr/lib/postgresql/15/bin")


def install_postgres() -> None:
    """Install Debian's ``postgresql`` when its server binaries are absent."""
    if (postgres_bin() / "pg_ctl").is_file():
        return
    env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
    for argv in (
        ["apt-get", "update"],
        ["apt-get", "install", "-y", "--no-install-recommends", "postgresql"],
    ):
        done = subprocess.run(argv, env=env, capture_output=True, text=True)
        if done.returncode != 0:
            raise ClusterError(f"{' '.join(argv)} failed:\n{done.stderr[-2000:]}")
    if not (postgres_bin() / "pg_ctl").is_file():
        raise ClusterError("apt-get installed postgresql but no pg_ctl under /usr/lib/postgresql")


def _as_postgres(argv: list[str]) -> list[str]:
    """initdb and the server refuse to run as root: run them as the ``postgres`` user."""
    return ["runuser", "-u", "postgres", "--", *argv] if os.geteuid() == 0 else argv


def _chown_postgres(path: Path) -> None:
    if os.geteuid() == 0:
        shutil.chown(path, "postgres", "postgres")


def _run(argv: list[str], what: str, log: Path | None = None) -> str:
    done = subprocess.run(argv, capture_output=True, text=True, cwd="/")
    if done.returncode != 0:
        where = f"; log {log}:\n{_tail(log)}" if log else ""
        raise ClusterError(f"{what} failed ({done.returncode}): {done.stderr.strip()}{where}")
    return done.stdout


def postgres_password(settings: Settings) -> str:
    """The ``tardy`` role's password: generated once, kept in a 0600 file of the cluster."""
    path = settings.password_file
    if not path.is_file():
        path.parent.mkdir(parents=True, exist_ok=True)
        path.touch(mode=0o600)
        path.write_text(secrets.token_hex(12) + "\n")
    return path.read_text().strip()


def init_postgres(settings: Settings) -> None:
    """``initdb`` once: local socket trusted for set-up, TCP on loopback by password."""
    if (settings.postgres_data / "PG_VERSION").is_file():
        return
    for path in (settings.postgres_dir, settings.postgres_data, settings.postgres_socket_dir):
        path.mkdir(parents=True, exist_ok=True)
        _chown_postgres(path)
    settings.postgres_data.chmod(0o700)
    if (
        os.geteuid() == 0
        and subprocess.run(_as_postgres(["test", "-w", str(settings.postgres_data)])).returncode
    ):
        raise ClusterError(
            f"PostgreSQL runs as user postgres, which cannot reach {settings.postgres_data}: "
            "a parent directory of TARDY_HOME is closed to other users (chmod o+x it, or "
            "choose a TARDY_HOME under one that is open)"
        )
    _run(
        _as_postgres(
            [
                str(postgres_bin() / "initdb"),
                "-D",
                str(settings.postgres_data),
                "-U",
                "postgres",
                "--auth-local=trust",
                "--auth-host=scram-sha-256",
                "-E",
                "UTF8",
                "--locale=C",
            ]
        ),
        "initdb",
    )


def start_postgres(settings: Settings, component: Component) -> None:
    if live_pid(component) is not None and port_open(component.port):
        return
    if port_open(component.port):
        raise ClusterError(f"port {component.port} for postgres is taken by another program")
    component.log.parent.mkdir(parents=True, exist_ok=True)
    if not component.log.exists():
        component.log.touch()
    _chown_postgres(component.log)
    options = (
        f"-p {settings.postgres_port} -c listen_addresses={HOST} "
        f"-c unix_socket_directories={settings.postgres_socket_dir}"
    )
    _run(
        _as_postgres(
            [
                str(postgres_bin() / "pg_ctl"),
                "-D",
                str(settings.postgres_data),
                "-l",
                str(component.log),
                "-o",
                options,
                "-w",
                "-t",
                "60",
                "start",
            ]
        ),
        "pg_ctl start",
        component.log,
    )
    wait_until(
        component,
        lambda: port_open(component.port),
        lambda: live_pid(component) is not None,
        30,
    )


def _psql(settings: Settings, sql: str, database: str = "postgres") -> str:
    argv = [
        str(postgres_bin() / "psql"),
        "-h",
        str(settings.postgres_socket_dir),
        "-p",
        str(settings.postgres_port),
        "-U",
        "postgres",
        "-d",
        database,
        "-v",
        "ON_ERROR_STOP=1",
        "-tAc",
        sql,
    ]
    return _run(_as_postgres(argv), f"psql {sql[:40]!r}").strip()


def create_databases(settings: Settings, password: str) -> None:
    """The ``tardy`` role and its databases for SQLMesh's state and the Hive metastore."""
    role = _psql(settings, f"SELECT 1 FROM pg_roles WHERE rolname = '{POSTGRES_USER}'")
    verb = "ALTER" if role == "1" else "CREATE"
    _psql(settings, f"{verb} ROLE {POSTGRES_USER} LOGIN PASSWORD '{password}'")
    for database in (STATE_DATABASE, METASTORE_DATABASE):
        create_database(settings, database)


def create_database(settings: Settings, name: str) -> None:
    """An empty database owned by the ``tardy`` role, unless it exists (e.g. a second
    lakehouse's state and metastore on the same server)."""
    if not name.replace("_", "").isalnum():
        raise ClusterError(f"database name {name!r}: letters, digits and _ only")
    if _psql(settings, f"SELECT 1 FROM pg_database WHERE datname = '{name}'") != "1":
        _psql(settings, f"CREATE DATABASE {name} OWNER {POSTGRES_USER}")


def stop_postgres(settings: Settings, component: Component) -> None:
    if live_pid(component) is None:
        return
    pg_ctl = [str(postgres_bin() / "pg_ctl"), "-D", str(settings.postgres_data)]
    _run(_as_postgres([*pg_ctl, "-m", "fast", "-w", "stop"]), "pg_ctl stop", component.log)


# --- the cluster ------------------------------------------------------------------------


def up(
    settings: Settings,
    progress: Callable[[str], None] = lambda _: None,
    *,
    postgres_only: bool = False,
) -> None:
    """Start whatever is not running, in dependency order, each waited for until ready
    (``postgres_only``: only PostgreSQL and its databases)."""
    for path in (settings.root, settings.logs, settings.run, settings.warehouse):
        path.mkdir(parents=True, exist_ok=True)
    parts = {c.name: c for c in components(settings)}
    password = postgres_password(settings)

    progress("postgres")
    install_postgres()
    init_postgres(settings)
    start_postgres(settings, parts["postgres"])
    create_databases(settings, password)
    if postgres_only:
        return

    progress(f"JDBC driver {POSTGRES_JDBC}")
    fetch_postgres_jdbc(settings)

    progress("master")
    start_master(settings, parts["master"])
    for i in range(1, settings.workers + 1):
        progress(f"worker-{i}")
        start_worker(settings, parts[f"worker-{i}"], i)
    progress("connect")
    start_connect(settings, parts["connect"], password)


def down(settings: Settings, progress: Callable[[str], None] = lambda _: None) -> None:
    """Stop every component, clients first; pid files go with their processes."""
    for component in reversed(components(settings)):
        pid = live_pid(component)
        if component.name == "postgres":
            if pid is not None:
                progress(component.name)
                stop_postgres(settings, component)
            continue
        if pid is not None:
            progress(component.name)
            _terminate(pid)
        component.pid_file.unlink(missing_ok=True)


def leftovers(settings: Settings) -> list[str]:
    """Processes still running whose command line names this cluster's directory."""
    mine = str(settings.root)
    found = []
    for proc in Path("/proc").iterdir():
        if proc.name.isdigit() and int(proc.name) != os.getpid():
            line = _cmdline(int(proc.name))
            if mine in line and "tardy.cluster" not in line:
                found.append(f"{proc.name} {line[:160]}")
    return found


def exports(settings: Settings, *, postgres_only: bool = False) -> dict[str, str]:
    """What a shell needs to use the cluster: the variables gateways `connect` and `cluster`
    of project.yaml read (README, "Running on a cluster")."""
    spark = {
        "TARDY_SPARK_REMOTE": settings.remote_url,
        "TARDY_SPARK_MASTER": settings.master_url,
        "TARDY_SPARK_DRIVER_HOST": HOST,
        "TARDY_WAREHOUSE": str(settings.warehouse),
        "TARDY_METASTORE_URL": settings.metastore_url,
        "TARDY_METASTORE_JARS": str(settings.jars / _jar_name(POSTGRES_JDBC)),
        "TARDY_SPARK_CORES_MAX": str(settings.workers),  # one executor per worker
    }
    return {
        **({} if postgres_only else spark),
        "TARDY_PG_HOST": HOST,
        "TARDY_PG_PORT": str(settings.postgres_port),
        "TARDY_PG_USER": POSTGRES_USER,
        "TARDY_PG_PASSWORD": postgres_password(settings),
        "TARDY_STATE_DATABASE": STATE_DATABASE,
        "TARDY_METASTORE_DATABASE": METASTORE_DATABASE,
    }


def status_rows(settings: Settings) -> Iterator[tuple[str, str, str, str, str]]:
    for s in state_of(settings):
        yield (
            s.component.name,
            s.state,
            str(s.pid) if s.pid else "-",
            str(s.component.port),
            str(s.component.log),
        )


# --- CLI edge ---------------------------------------------------------------------------


def _print_status(settings: Settings, stream: TextIO) -> None:
    rows = [("component", "state", "pid", "port", "log"), *status_rows(settings)]
    widths = [max(len(row[i]) for row in rows) for i in range(4)]
    for row in rows:
        cells = [cell.ljust(width) for cell, width in zip(row[:4], widths, strict=True)]
        print("  ".join([*cells, row[4]]), file=stream)


def main(argv: list[str]) -> int:
    command = argv[0] if argv else "status"
    settings = Settings.from_env()

    def progress(step: str) -> None:
        print(f"{command}: {step}", file=sys.stderr, flush=True)

    try:
        if command == "up":
            only = argv[1:] == ["postgres"]
            if argv[1:] and not only:
                raise ClusterError(f"up takes no argument or 'postgres', not {argv[1:]}")
            up(settings, progress, postgres_only=only)
            _print_status(settings, sys.stderr)
            for name, value in exports(settings, postgres_only=only).items():
                print(f"export {name}={value}")
            return 0
        if command == "database" and len(argv) == 2:
            create_database(settings, argv[1])
            print(f"database {argv[1]}: ready", file=sys.stderr)
            return 0
        if command == "down":
            down(settings, progress)
            left = leftovers(settings)
            if left:
                print("still running:\n" + "\n".join(left), file=sys.stderr)
                return 1
            print(f"cluster under {settings.root}: stopped", file=sys.stderr)
            return 0
        if command == "status":
            _print_status(settings, sys.stdout)
            return 0 if all(s.running for s in state_of(settings)) else 3
    except ClusterError as error:
        print(f"cluster {command}: {error}", file=sys.stderr)
        return 1
    print(
        "usage: python -m tardy.cluster up [postgres] | down | status | database NAME;"
        f" not {' '.join(argv)!r}",
        file=sys.stderr,
    )
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
