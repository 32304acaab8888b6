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
``pyspark/jars``: ``tardy.runtime.jars``), except PostgreSQL's JDBC driver, which Spark's own
resolver fetches from Maven Central into ``cluster/jars/`` once (``POSTGRES_JDBC``).

Run: ``python -m tardy.cluster up|down|status`` (``make cluster-up`` ...). ``up`` is
idempotent (a running component is kept, a stale pid file is discarded) and prints the
``export NAME=value`` lines a shell needs on stdout; its progress goes to stderr, so
``eval "$(python -m tardy.cluster up)"`` works.

The modules: ``settings`` (directories, ports, components), ``processes`` (pid files, start,
wait, stop), ``postgres``, ``spark`` (master and workers), ``connect`` (the Connect server and
PostgreSQL's JDBC driver); here the cluster as a whole and the command line (``__main__``).
"""

from __future__ import annotations

import os
import shlex
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TextIO

from tardy.cluster.connect import (
    POSTGRES_JDBC,
    client_url,
    fetch_postgres_jdbc,
    jar_name,
    start_connect,
)
from tardy.cluster.postgres import (
    create_database,
    create_databases,
    init_postgres,
    install_postgres,
    postgres_password,
    start_postgres,
    stop_postgres,
)
from tardy.cluster.processes import cmdline, live_pid, state_of, terminate
from tardy.cluster.settings import (
    HOST,
    METASTORE_DATABASE,
    POSTGRES_USER,
    STATE_DATABASE,
    ClusterError,
    Settings,
    components,
)
from tardy.cluster.spark import start_master, start_worker


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

    if settings.workers:
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
            terminate(pid)
        component.pid_file.unlink(missing_ok=True)


def leftovers(settings: Settings) -> list[str]:
    """Processes still running whose command line names this cluster's directory."""
    mine = str(settings.root)
    found = []
    for proc in Path("/proc").iterdir():
        if proc.name.isdigit() and int(proc.name) != os.getpid():
            line = cmdline(int(proc.name))
            if mine in line and "tardy.cluster" not in line:
                found.append(f"{proc.name} {line[:160]}")
    return found


def exports(settings: Settings, *, postgres_only: bool = False) -> dict[str, str]:
    """What a shell needs to use the cluster: the variables gateways `connect` and `cluster`
    of project.yaml read (README, "Running on a cluster")."""
    spark = {
        "TARDY_SPARK_REMOTE": client_url(settings),  # the token in it
        "TARDY_SPARK_MASTER": settings.master_url,
        "TARDY_SPARK_DRIVER_HOST": HOST,
        "TARDY_WAREHOUSE": str(settings.warehouse),
        "TARDY_METASTORE_URL": settings.metastore_url,
        "TARDY_METASTORE_JARS": str(settings.jars / jar_name(POSTGRES_JDBC)),
        "TARDY_SPARK_CORES_MAX": str(max(settings.workers, 1)),  # one executor per worker
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
                print(f"export {name}={shlex.quote(value)}")
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
