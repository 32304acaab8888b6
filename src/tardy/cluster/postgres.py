"""The cluster's PostgreSQL (Debian's binaries): installed when absent, initialised once,
started and stopped with ``pg_ctl``, with the ``tardy`` role and its databases (SQLMesh's state,
the Hive metastore's).
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

from tardy.cluster.processes import live_pid, port_open, tail, wait_until
from tardy.cluster.settings import (
    HOST,
    METASTORE_DATABASE,
    POSTGRES_USER,
    STATE_DATABASE,
    ClusterError,
    Component,
    Settings,
)
from tardy.runtime.private import secret


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


def _run(argv: list[str], what: str, log: Path | None = None, stdin: str | None = None) -> str:
    done = subprocess.run(argv, capture_output=True, text=True, cwd="/", input=stdin)
    if done.returncode != 0:
        where = f"; log {log}:\n{tail(log)}" if log else ""
        raise ClusterError(f"{what} failed ({done.returncode}): {done.stderr.strip()}{where}")
    return done.stdout


def postgres_password(settings: Settings) -> str:
    """The ``tardy`` role's password: generated once, kept in a 0600 file of the cluster."""
    return secret(settings.password_file, make="hex")  # hex: safe in a JDBC URL


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


def _psql(settings: Settings, sql: str, database: str = "postgres", what: str = "") -> str:
    """Run ``sql`` as the server's superuser over its local socket. The SQL goes to psql on
    its standard input, never on its command line (``/proc/<pid>/cmdline`` is readable by
    every local user, and a role's password is in the SQL); ``what`` names it in an error."""
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
        "-tA",
        "-f",
        "-",
    ]
    return _run(_as_postgres(argv), f"psql {what or repr(sql[:40])}", stdin=sql).strip()


def create_databases(settings: Settings, password: str) -> None:
    """The ``tardy`` role and its databases for SQLMesh's state and the Hive metastore."""
    role = _psql(settings, f"SELECT 1 FROM pg_roles WHERE rolname = '{POSTGRES_USER}'")
    verb = "ALTER" if role == "1" else "CREATE"
    sql = f"{verb} ROLE {POSTGRES_USER} LOGIN PASSWORD '{password}'"
    _psql(settings, sql, what=f"{verb} ROLE {POSTGRES_USER}")  # the password never in an error
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
