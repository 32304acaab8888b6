"""One restatement at a time: a lock released when its holder dies, however it dies.

Two implementations of one lock (``RestatementLock``), chosen by where the gateway keeps
SQLMesh's state (``for_state``), because the lock must be shared by exactly the processes
that share that state:

- ``FileLock`` (DuckDB state, the embedded default): ``$TARDY_HOME/restatements/LOCK`` held
  with ``flock(LOCK_EX | LOCK_NB)`` on an open file. The kernel arbitrates: two processes can
  never both hold it, and it is released when its holder exits however it exits (``kill -9``
  included), so there is no stale lock to detect, no pid to probe and no takeover race.
  (Before: an ``O_EXCL`` file holding a pid; a file half-written by a crash read as pid -1,
  which ``os.kill`` calls alive, and two processes finding the same stale file could both
  replace it.)
- ``PostgresLock`` (PostgreSQL state, gateways ``connect`` and ``cluster``): a session-level
  advisory lock (``pg_try_advisory_lock(KEY)``) on a dedicated autocommit connection held for
  the lock's lifetime. The server arbitrates, and releases it when that connection ends, so
  when the holder dies however it dies.

While held, the lock records its holder (restatement id, pid, host, since) for messages: in
the file, or in the row of ``tardy.restatement_lock`` in the state database. A clean release
empties it. A record found by the next taker was left by a holder that died holding the
lock: it is returned as the stale holder (``restatement_id`` "unknown" when the crash left
it half-written), and the caller recovers what the log says was interrupted.

Scope: the file lock serialises processes on one host, or hosts sharing a file system whose
locks are coherent (Linux NFSv4 maps ``flock`` to byte-range locks); the PostgreSQL lock
serialises every driver, on any host, whose gateway keeps its state in the same PostgreSQL
database (advisory locks are per database). A client host that vanishes without closing its
TCP connection (power loss, network cut) keeps the PostgreSQL lock until the server's TCP
keepalive gives up on the connection (``tcp_keepalives_idle`` and friends):
docs/concurrency.md, "Several drivers: the lock in PostgreSQL".
"""

from __future__ import annotations

import fcntl
import json
import os
import socket
import time
import typing as t
from collections.abc import Iterator
from contextlib import AbstractContextManager, contextmanager
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from pathlib import Path

from tardy.errors import Refused, TardyError

if t.TYPE_CHECKING:
    from sqlmesh.core.config.connection import ConnectionConfig, PostgresConnectionConfig


class LockedError(Refused):
    """Another restatement holds the lock."""


@dataclass(frozen=True)
class Holder:
    restatement_id: str
    pid: int
    host: str
    since: str


UNKNOWN = Holder("unknown", -1, "", "")


def _me(restatement_id: str) -> Holder:
    return Holder(restatement_id, os.getpid(), socket.gethostname(), datetime.now(UTC).isoformat())


def _refused(current: Holder) -> LockedError:
    return LockedError(
        f"restatement {current.restatement_id} is running (pid {current.pid} on "
        f"{current.host or 'this host'}, since {current.since or 'just now'}); "
        "wait for it to finish"
    )


class RestatementLock(t.Protocol):
    """The restatement lock of one SQLMesh state (a data home's, or a shared database's)."""

    @property
    def identity(self) -> str:
        """What the lock is the lock of: equal for two locks that exclude each other."""
        ...

    def holder(self) -> Holder | None:
        """Who holds the lock now, or None when nobody does."""
        ...

    def exclusive(self, restatement_id: str) -> AbstractContextManager[Holder | None]:
        """Hold the lock for ``restatement_id``; yields the holder that died holding it, if
        any. Raises LockedError when a live process holds it."""
        ...


class UnsupportedState(TardyError):
    """The gateway keeps SQLMesh's state somewhere no restatement lock is built for."""


def for_state(state: ConnectionConfig | None, home: Path) -> RestatementLock:
    """The lock shared by the processes sharing ``state`` (a gateway's ``state_connection``):
    DuckDB state lives in the data home ``home``, so does its lock; PostgreSQL state is shared
    by every driver that names the same database, so the lock lives there too."""
    kind = getattr(state, "type_", None)
    if kind == "duckdb":
        return FileLock(home)
    if kind == "postgres":
        return PostgresLock.of(t.cast("PostgresConnectionConfig", state))
    raise UnsupportedState(
        f"no restatement lock for SQLMesh state of type {kind or 'none'}: give the gateway a "
        "state_connection of type duckdb (one host) or postgres (several drivers)"
    )


# --- the file lock (DuckDB state in the data home) ---------------------------------------


def lock_path(home: Path) -> Path:
    return home / "restatements" / "LOCK"


def _read(fd: int) -> Holder | None:
    """The holder recorded in the lock file; None when empty, UNKNOWN when half-written."""
    data = os.pread(fd, 4096, 0)
    if not data.strip():
        return None
    try:
        return Holder(**json.loads(data))
    except (ValueError, TypeError):
        return UNKNOWN


def _write(fd: int, holder: Holder | None) -> None:
    os.ftruncate(fd, 0)
    if holder is not None:
        os.pwrite(fd, json.dumps(asdict(holder)).encode(), 0)
    os.fsync(fd)


def _open(home: Path) -> int:
    path = lock_path(home)
    path.parent.mkdir(parents=True, exist_ok=True)
    return os.open(path, os.O_RDWR | os.O_CREAT, 0o644)  # not inherited by children


def holder(home: Path) -> Holder | None:
    """Who holds the data home's file lock now, or None when nobody does."""
    if not lock_path(home).exists():
        return None
    fd = _open(home)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
        except BlockingIOError:
            return _read(fd) or UNKNOWN  # held; its record may not be written yet
        fcntl.flock(fd, fcntl.LOCK_UN)
        return None
    finally:
        os.close(fd)


@contextmanager
def exclusive(home: Path, restatement_id: str) -> Iterator[Holder | None]:
    """Hold the data home's file lock for ``restatement_id``; yields the holder that died
    holding it, if any.

    Raises LockedError when a live process holds it.
    """
    fd = _open(home)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise _refused(_read(fd) or UNKNOWN) from None
        stale = _read(fd)
        _write(fd, _me(restatement_id))
        try:
            yield stale
        finally:
            _write(fd, None)
    finally:
        os.close(fd)  # releases the lock


@dataclass(frozen=True)
class FileLock:
    """The lock of a data home whose SQLMesh state is its own DuckDB file."""

    home: Path

    @property
    def identity(self) -> str:
        return f"file:{lock_path(self.home)}"

    def holder(self) -> Holder | None:
        return holder(self.home)

    def exclusive(self, restatement_id: str) -> AbstractContextManager[Holder | None]:
        return exclusive(self.home, restatement_id)


# --- the PostgreSQL lock (state shared by several drivers) -------------------------------

# The advisory lock's key: b"tardyRST" as a big-endian bigint. Advisory locks are scoped to
# the database, so one fixed key gives each state database its own restatement lock.
KEY = int.from_bytes(b"tardyRST", "big")
# How pg_locks shows a bigint advisory key: high and low 32 bits, objsubid 1.
_CLASSID, _OBJID = KEY >> 32, KEY & 0xFFFFFFFF
TABLE = "tardy.restatement_lock"
# A refused taker waits this long for the holder's row (written just after it took the lock).
HOLDER_WAIT = 5.0
APPLICATION_NAME = "tardy restatement lock"  # how the lock's connection shows in pg_stat_activity

_CREATE = f"""
CREATE SCHEMA IF NOT EXISTS tardy;
CREATE TABLE IF NOT EXISTS {TABLE} (
    key bigint PRIMARY KEY,
    restatement_id text NOT NULL,
    pid integer NOT NULL,
    host text NOT NULL,
    since text NOT NULL,
    backend_pid integer NOT NULL
)
"""
# The server process holding the advisory lock now (no row: nobody holds it).
_LOCKED_BY = """
SELECT pid FROM pg_locks
WHERE locktype = 'advisory' AND granted AND mode = 'ExclusiveLock'
  AND database = (SELECT oid FROM pg_database WHERE datname = current_database())
  AND classid = %s AND objid = %s AND objsubid = 1
"""


@dataclass(frozen=True)
class PostgresLock:
    """The lock of a SQLMesh state kept in PostgreSQL, held in that same database."""

    host: str
    port: int
    user: str
    database: str
    password: str = field(repr=False)
    connect_timeout: int = 10
    sslmode: str | None = None
    keepalives_idle: int | None = None
    role: str | None = None

    @classmethod
    def of(cls, state: PostgresConnectionConfig) -> PostgresLock:
        """The lock of the database SQLMesh's state connection names (one copy of its
        settings: project.yaml's ``state_connection``)."""
        return cls(
            host=state.host,
            port=state.port,
            user=state.user,
            database=state.database,
            password=state.password,
            connect_timeout=state.connect_timeout,
            sslmode=state.sslmode,
            keepalives_idle=state.keepalives_idle,
            role=state.role,
        )

    @property
    def identity(self) -> str:
        return f"postgresql://{self.host}:{self.port}/{self.database}"

    def _connect(self) -> t.Any:
        """A new autocommit connection: the advisory lock lives exactly as long as it does."""
        import psycopg2  # the `cluster` extra

        optional: dict[str, t.Any] = {
            "sslmode": self.sslmode,
            "keepalives_idle": self.keepalives_idle,
        }
        connection = psycopg2.connect(
            host=self.host,
            port=self.port,
            user=self.user,
            password=self.password,
            dbname=self.database,
            connect_timeout=self.connect_timeout,
            application_name=APPLICATION_NAME,
            **{name: value for name, value in optional.items() if value is not None},
        )
        connection.autocommit = True
        if self.role:
            with connection.cursor() as cursor:
                cursor.execute(f'SET ROLE "{self.role}"')
        return connection

    @staticmethod
    def _current(cursor: t.Any) -> Holder | None:
        """The live holder: its row if the lock's current server process wrote it, UNKNOWN
        when the holder has not written its row yet (a row there is a dead holder's)."""
        cursor.execute(_LOCKED_BY, (_CLASSID, _OBJID))
        locked_by = cursor.fetchone()
        if locked_by is None:
            return None
        cursor.execute("SELECT to_regclass(%s) IS NOT NULL", (TABLE,))
        if not cursor.fetchone()[0]:
            return UNKNOWN
        cursor.execute(
            f"SELECT restatement_id, pid, host, since FROM {TABLE} "
            "WHERE key = %s AND backend_pid = %s",
            (KEY, locked_by[0]),
        )
        row = cursor.fetchone()
        return Holder(*row) if row else UNKNOWN

    def _awaited(self, cursor: t.Any) -> Holder:
        """The live holder for a refusal. It writes its row just after it takes the lock (the
        first taker of a state database also creates the table): a refusal in between waits
        up to ``HOLDER_WAIT`` seconds for the row rather than name "unknown"."""
        deadline = time.monotonic() + HOLDER_WAIT
        while True:
            current = self._current(cursor) or UNKNOWN
            if current is not UNKNOWN or time.monotonic() >= deadline:
                return current
            time.sleep(0.05)

    def holder(self) -> Holder | None:
        connection = self._connect()
        try:
            with connection.cursor() as cursor:
                return self._current(cursor)
        finally:
            connection.close()

    @contextmanager
    def exclusive(self, restatement_id: str) -> Iterator[Holder | None]:
        import psycopg2

        connection = self._connect()
        try:
            with connection.cursor() as cursor:
                cursor.execute("SELECT pg_try_advisory_lock(%s)", (KEY,))
                if not cursor.fetchone()[0]:
                    raise _refused(self._awaited(cursor))
                cursor.execute(_CREATE)  # under the lock: no two takers race to create it
                cursor.execute(
                    f"SELECT restatement_id, pid, host, since FROM {TABLE} WHERE key = %s",
                    (KEY,),
                )
                row = cursor.fetchone()
                stale = Holder(*row) if row else None
                me = _me(restatement_id)
                cursor.execute(
                    f"INSERT INTO {TABLE} VALUES (%s, %s, %s, %s, %s, pg_backend_pid()) "
                    "ON CONFLICT (key) DO UPDATE SET restatement_id = EXCLUDED.restatement_id,"
                    " pid = EXCLUDED.pid, host = EXCLUDED.host, since = EXCLUDED.since,"
                    " backend_pid = EXCLUDED.backend_pid",
                    (KEY, me.restatement_id, me.pid, me.host, me.since),
                )
            try:
                yield stale
            finally:
                try:
                    with connection.cursor() as cursor:
                        cursor.execute(f"DELETE FROM {TABLE} WHERE key = %s", (KEY,))
                        cursor.execute("SELECT pg_advisory_unlock(%s)", (KEY,))
                except (psycopg2.OperationalError, psycopg2.InterfaceError):
                    # The connection is gone, and the lock with it: the row stays and the
                    # next taker gets it as a dead holder's (docs/concurrency.md).
                    pass
        finally:
            connection.close()  # releases the lock, if anything above did not
