"""The data home's warm engine: one local Spark Connect server per data home, started on use.

On the embedded default (gateway ``local``), the first command of a data home that needs Spark
(``tardy`` or the stock ``sqlmesh``, both through ``config.py``) starts a Spark Connect server
in the background: ``local[*]``, Delta, the data home's warehouse and Derby metastore and the
``local`` gateway's own Spark settings (``project.yaml``). Every later command of that home
talks to it instead of paying a JVM, Spark, the metastore and Delta's first access again
(docs/warm-engine.md).

Under ``$TARDY_HOME/engine/``:

- ``engine.json``: the running engine (supervisor and server pids, port, data home, settings
  digest), written when it is ready and removed when it stops;
- ``token`` (mode 0600): the secret a client must present (``spark.connect.authenticate.
  token``, docs/facts.md, fact 26); ``server.conf`` (0600): the server's properties, the
  token among them, so that neither appears on a command line;
- ``start.lock``: two commands racing to start the engine start one;
- ``clients/<pid>.json``: the processes using it and their Spark Connect session ids. The
  engine stops itself after ``TARDY_ENGINE_IDLE`` seconds (default 1800) with no live
  client; a client that died (``kill -9``) has its session's operations interrupted before
  any later command of the home reads a table, so a statement it left running cannot commit
  behind a recovery's back (docs/facts.md, fact 24).

The server's log is ``$TARDY_HOME/logs/engine.log``. ``TARDY_ENGINE=off`` (``tardy
--no-engine``) keeps the in-process SparkSession of earlier versions.

The supervisor a client starts is ``python -m tardy.runtime.warm_server serve``
(``tardy.runtime.warm_server``); users call ``tardy engine status|start|stop``.
"""

from __future__ import annotations

import atexit
import contextlib
import fcntl
import hashlib
import json
import os
import subprocess
import sys
import time
import typing as t
import uuid
from collections.abc import Iterator, Mapping
from dataclasses import asdict, dataclass
from enum import Enum
from pathlib import Path

from tardy.errors import Refused, TardyError
from tardy.runtime.private import secret, write_private
from tardy.runtime.processes import alive, argv_of, port_answers, stop_group
from tardy.runtime.record import Record, session_url

if t.TYPE_CHECKING:
    from tardy.runtime.watchdog import Probe

ENGINE_VARIABLE = "TARDY_ENGINE"
IDLE_VARIABLE = "TARDY_ENGINE_IDLE"
DEFAULT_IDLE = 1800.0
PROBE_VARIABLE = "TARDY_ENGINE_PROBE_TIMEOUT"
# A catalog call answers in 0.05-0.2 s on a healthy engine, also beside a running job (the
# catalog's lock is held for metastore calls only); far longer means the metastore is stuck
# (docs/warm-engine.md, "The watchdog").
DEFAULT_PROBE_TIMEOUT = 20.0
BIND = "127.0.0.1"
SERVER_CLASS = "org.apache.spark.sql.connect.service.SparkConnectServer"
SUPERVISOR = "tardy.runtime.warm_server"
START_TIMEOUT = 180.0
POLL = 2.0

# What the server needs beyond the `local` gateway's own Spark settings: a client cannot set
# `partitionOverwriteMode` over Connect (SQLMesh tries through `sparkContext`: docs/facts.md,
# fact 19), and SQLMesh's classic sessions ask for the Hive catalog, which the Derby
# metastore serves.
SERVER_SETTINGS = {
    "spark.sql.sources.partitionOverwriteMode": "dynamic",
    "spark.sql.catalogImplementation": "hive",
    # No connection pool for the Derby metastore: an interrupt inside a pooled call cost the
    # pool that connection for good, and an empty pool left the next catalog call waiting
    # with no bound (docs/warm-engine.md, "A client killed inside a later metastore call").
    "spark.hadoop.datanucleus.connectionPoolingType": "None",
}
# The client's settings, not the server's.
CLIENT_ONLY = ("spark.master", "spark.app.name")


class EngineError(TardyError):
    """The data home's engine did not start or stop; the message names its log."""


class EngineState(Enum):
    RUNNING = "running"
    STOPPED = "stopped"
    STALE = "stale"  # a record whose processes are gone, or answer for another data home
    WEDGED = "wedged"  # its processes live and its port answers, a catalog call does not


def enabled() -> bool:
    """Whether commands of the embedded default use the warm engine (``TARDY_ENGINE``)."""
    return os.environ.get(ENGINE_VARIABLE, "on").strip().lower() not in ("off", "0", "false")


def _seconds(variable: str, default: float) -> float:
    raw = os.environ.get(variable, "").strip().lower()
    if not raw:
        return default
    scale = {"s": 1, "m": 60, "h": 3600}.get(raw[-1], 1)
    try:
        return float(raw.rstrip("smh")) * scale
    except ValueError as error:
        raise EngineError(
            f"{variable}={raw!r}: give seconds, or a number with s, m or h"
        ) from error


def idle_seconds() -> float:
    return _seconds(IDLE_VARIABLE, DEFAULT_IDLE)


def probe_timeout() -> float:
    """How long a probe's catalog call may take before the engine counts as wedged."""
    return _seconds(PROBE_VARIABLE, DEFAULT_PROBE_TIMEOUT)


@dataclass(frozen=True)
class Paths:
    """Where a data home keeps its engine's files."""

    home: Path

    @property
    def dir(self) -> Path:
        return self.home / "engine"

    @property
    def record(self) -> Path:
        return self.dir / "engine.json"

    @property
    def token(self) -> Path:
        return self.dir / "token"

    @property
    def server_conf(self) -> Path:
        return self.dir / "server.conf"

    @property
    def start_lock(self) -> Path:
        return self.dir / "start.lock"

    @property
    def clients(self) -> Path:
        return self.dir / "clients"

    @property
    def last_used(self) -> Path:
        return self.dir / "last_used"

    @property
    def log(self) -> Path:
        return self.home / "logs" / "engine.log"


@dataclass(frozen=True)
class Client:
    pid: int
    session_id: str
    command: str


@dataclass(frozen=True)
class Status:
    state: EngineState
    record: Record | None
    clients: list[Client]
    idle_for: float | None
    log: Path
    probe: Probe | None = None

    def as_dict(self) -> dict[str, object]:
        return {
            "state": self.state.value,
            "pid": self.record.server_pid if self.record else None,
            "supervisor_pid": self.record.supervisor_pid if self.record else None,
            "port": self.record.port if self.record else None,
            "url": self.record.url if self.record else None,
            "started_at": self.record.started_at if self.record else None,
            "idle_stop_seconds": self.record.idle_seconds if self.record else None,
            "idle_for_seconds": self.idle_for,
            "clients": [asdict(c) for c in self.clients],
            "log": str(self.log),
            "probe": asdict(self.probe) if self.probe else None,
        }


def _is_supervisor(pid: int, paths: Paths) -> bool:
    argv = argv_of(pid)
    return SUPERVISOR in argv and "serve" in argv and str(paths.home) in argv and alive(pid)


def _is_server(pid: int, paths: Paths) -> bool:
    argv = argv_of(pid)
    return SERVER_CLASS in argv and str(paths.server_conf) in argv and alive(pid)


# --- the record -------------------------------------------------------------------------


def read(paths: Paths) -> Record | None:
    try:
        return Record(**json.loads(paths.record.read_text()))
    except (OSError, ValueError, TypeError):
        return None


def _is_ours(record: Record, paths: Paths) -> bool:
    """The record's processes are alive and are this data home's: the supervisor names the
    home on its command line, the server reads this home's ``server.conf``, and the port
    answers (a recycled pid or a reused port is another program)."""
    return (
        record.home == str(paths.home)
        and _is_supervisor(record.supervisor_pid, paths)
        and _is_server(record.server_pid, paths)
        and port_answers(BIND, record.port)
    )


def live_record(paths: Paths) -> Record | None:
    record = read(paths)
    return record if record is not None and _is_ours(record, paths) else None


def server_pids(home: Path) -> set[int]:
    """The pids of the data home's running engine (its JVM holds the Derby metastore)."""
    record = live_record(Paths(home))
    return {record.server_pid, record.supervisor_pid} if record else set()


def settings_digest(settings: Mapping[str, str]) -> str:
    return hashlib.sha256(json.dumps(dict(settings), sort_keys=True).encode()).hexdigest()[:16]


# --- clients ----------------------------------------------------------------------------


def clients(paths: Paths) -> list[Client]:
    found = []
    for file in sorted(paths.clients.glob("*.json")):
        try:
            found.append(Client(**json.loads(file.read_text())))
        except (OSError, ValueError, TypeError):
            continue
    return found


def touch(path: Path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.touch()


def idle_for(paths: Paths) -> float | None:
    """Seconds since the engine was last used, or None while a live client uses it."""
    if any(alive(c.pid) for c in clients(paths)):
        return None
    try:
        return max(0.0, time.time() - paths.last_used.stat().st_mtime)
    except OSError:
        return 0.0


def reap_dead_clients(paths: Paths, record: Record) -> list[str]:
    """Interrupt and release the sessions of clients that died without saying goodbye (a
    ``kill -9`` mid-statement leaves its operation running on the server: docs/facts.md, fact
    24), and forget them. Returns the interrupted operation ids."""
    dead = [c for c in clients(paths) if not alive(c.pid)]
    if not dead:
        return []
    from pyspark.sql.connect.client import SparkConnectClient

    token = paths.token.read_text().strip()
    interrupted: list[str] = []
    for client in dead:
        url = session_url(record.port, token, client.session_id)
        connection = SparkConnectClient(url)
        try:
            interrupted += connection.interrupt_all() or []
            _wait_for_operations(connection)
            connection.release_session()
        except Exception:  # the session is already gone: nothing of it can still run
            pass
        finally:
            connection.close()
        (paths.clients / f"{client.pid}.json").unlink(missing_ok=True)
    return interrupted


def _wait_for_operations(connection: object, timeout: float = 60.0) -> None:
    """Interrupt again until an interrupt finds nothing left to stop (an operation queued
    behind the first is stopped too). It does not wait for an interrupted statement to
    unwind: one that raced its own commit has committed under its tag, which a resume finds
    (docs/warm-engine.md, "Kill -9 and late commits")."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if not connection.interrupt_all():  # type: ignore[attr-defined]
            return
        time.sleep(0.2)


@dataclass
class _Session:
    pid: int
    session_id: str
    paths: Paths


_session: _Session | None = None
# (this process, the engine's server pid, its port) of each engine this process's probe
# found answering.
_answered: set[tuple[int, int, int]] = set()


def _unregister() -> None:
    session = _session
    if session is None or session.pid != os.getpid():
        return
    (session.paths.clients / f"{session.pid}.json").unlink(missing_ok=True)
    with contextlib.suppress(OSError):
        touch(session.paths.last_used)


def _register(paths: Paths) -> str:
    """This process's session id on the engine, recorded under ``clients/`` (one per
    process: a child inherits the environment, never the session)."""
    global _session
    if _session is None or _session.pid != os.getpid() or _session.paths != paths:
        _session = _Session(os.getpid(), str(uuid.uuid4()), paths)
        argv = " ".join(Path(a).name if "/" in a else a for a in sys.argv)[:120]
        write_private(
            paths.clients / f"{os.getpid()}.json",
            json.dumps(asdict(Client(os.getpid(), _session.session_id, argv))),
        )
        touch(paths.last_used)
        atexit.register(_unregister)
    return _session.session_id


# --- start, connect, stop ---------------------------------------------------------------


@contextlib.contextmanager
def _start_lock(paths: Paths, timeout: float = START_TIMEOUT + 30) -> Iterator[None]:
    paths.dir.mkdir(mode=0o700, parents=True, exist_ok=True)
    with paths.start_lock.open("a") as handle:
        deadline = time.monotonic() + timeout
        while True:
            try:
                fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if time.monotonic() > deadline:
                    raise EngineError(
                        f"another command has been starting the engine of {paths.home} "
                        f"for {timeout:.0f} s; see {paths.log}"
                    ) from None
                time.sleep(0.2)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def processes(paths: Paths) -> tuple[list[int], list[int]]:
    """The live supervisors and servers of this data home, found by their command lines
    (``tardy.runtime.warm_server serve <home>``; ``--properties-file
    <home>/engine/server.conf``), whatever a record says: a record can be stale, lost or
    another home's."""
    pids = [int(p.name) for p in Path("/proc").iterdir() if p.name.isdigit()]
    return (
        [pid for pid in pids if _is_supervisor(pid, paths)],
        [pid for pid in pids if _is_server(pid, paths)],
    )


def _stop_all(paths: Paths, timeout: float) -> None:
    """Stop every supervisor of the home (each stops its server), then any server left."""
    supervisors, _ = processes(paths)
    for pid in supervisors:
        stop_group(pid, timeout=timeout)
    for pid in processes(paths)[1]:
        stop_group(pid, timeout=timeout)


def _clear_stale(paths: Paths) -> None:
    """Stop what is left of this home's engine (a supervisor whose server died, a server
    whose supervisor was killed) and remove the record."""
    _stop_all(paths, timeout=10)
    paths.record.unlink(missing_ok=True)


def start(paths: Paths, settings: Mapping[str, str]) -> Record:
    """The home's running engine with these settings, started (once, under the start lock)
    when none runs; a stale one is stopped and replaced, never reused."""
    digest = settings_digest({**settings, **SERVER_SETTINGS})
    record = live_record(paths)
    if record is not None and record.settings_digest == digest:
        return record
    with _start_lock(paths):
        record = live_record(paths)
        if record is not None and record.settings_digest == digest:
            return record
        if record is not None and any(alive(c.pid) for c in clients(paths)):
            raise EngineError(
                f"the engine of {paths.home} runs other Spark settings and is in use; "
                "run `tardy engine stop` once its commands are done, or TARDY_ENGINE=off"
            )
        _clear_stale(paths)
        return _spawn_supervisor(paths, settings, digest)


def _spawn_supervisor(paths: Paths, settings: Mapping[str, str], digest: str) -> Record:
    secret(paths.token)
    write_private(paths.dir / "settings.json", json.dumps(dict(settings), sort_keys=True))
    paths.log.parent.mkdir(parents=True, exist_ok=True)
    env = dict(os.environ)
    env.pop("SPARK_REMOTE", None)
    env.pop("SPARK_CONNECT_MODE_ENABLED", None)
    with paths.log.open("ab") as log:
        process = subprocess.Popen(
            [sys.executable, "-m", SUPERVISOR, "serve", str(paths.home), digest],
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
            env=env,
            start_new_session=True,
        )
    deadline = time.monotonic() + START_TIMEOUT
    while time.monotonic() < deadline:
        record = live_record(paths)
        if record is not None and record.supervisor_pid == process.pid:
            return record
        if process.poll() is not None:
            break
        time.sleep(0.2)
    else:
        stop_group(process.pid)
    raise EngineError(f"the engine of {paths.home} did not start; log {paths.log}:\n{_tail(paths)}")


def _tail(paths: Paths, lines: int = 15) -> str:
    try:
        return "\n".join(paths.log.read_text(errors="replace").splitlines()[-lines:])
    except OSError:
        return "(no log)"


def connect(home: Path, settings: Mapping[str, str]) -> str:
    """The Spark Connect URL this process uses for the home: the engine is started if none
    runs, clients that died have their operations interrupted first, the engine answers a
    probe (a wedged one is restarted once, with a line saying so), and this process is
    registered with its own session id. The URL carries the token: it lives in this
    process's memory only (SQLMesh restores the environment after loading a config, so a
    variable set here would be gone when the session connects)."""
    paths = Paths(home)
    url = _client_url(paths, start(paths, settings))
    if url is None:  # it was wedged and is stopped: a fresh one, which must answer
        url = _client_url(paths, start(paths, settings), restart=False)
    if url is None:
        raise EngineError(
            f"the engine of {paths.home} was restarted and still does not answer a catalog "
            f"call; see {paths.log}"
        )
    return url


def attach(home: Path) -> str | None:
    """Like ``connect``, for the home's running engine only (None when none runs, or when it
    was wedged and is now stopped), whatever its settings: for the commands that only read
    or append tables (``tardy.project.session``), whose fallback starts a fresh one."""
    paths = Paths(home)
    record = live_record(paths)
    return None if record is None else _client_url(paths, record)


def _client_url(paths: Paths, record: Record, *, restart: bool = True) -> str | None:
    """Reap dead clients, register this process, probe the engine over this process's
    session (its first statement, bounded), and its URL with the token; None when the
    engine did not answer the probe and was stopped (``restart``) so that the caller starts
    a fresh one."""
    from tardy.runtime.watchdog import notice, probe

    reap_dead_clients(paths, record)
    token = paths.token.read_text().strip()
    session_id = _register(paths)
    engine = (os.getpid(), record.server_pid, record.port)
    if engine in _answered:  # a process loads the config more than once: probe once
        return session_url(record.port, token, session_id)
    checked = probe(record, token, session_id, probe_timeout())
    if checked.answered:
        _answered.add(engine)
        return session_url(record.port, token, session_id)
    if not restart:
        return None
    notice(
        f"the engine of {paths.home} did not answer a catalog call ({checked.error}); "
        "restarting it (its tables and metastore are on disk) and going on"
    )
    _log(paths, f"wedged: {checked.statement} from pid {os.getpid()}: {checked.error}; restarted")
    stop(paths, timeout=5)  # a wedged JVM's shutdown hooks may wait on the stuck lock
    return None


def _log(paths: Paths, line: str) -> None:
    """A line of the engine's own log (``logs/engine.log``), for what a client did to it."""
    with contextlib.suppress(OSError), paths.log.open("a") as log:
        log.write(f"tardy engine: {line}\n")


class EngineInUse(Refused):
    """``tardy engine stop`` while commands use the engine: nothing was stopped."""


def stop(paths: Paths, timeout: float = 30.0, *, force: bool = True) -> Record | None:
    """Stop the home's engine (supervisor, server and its executors); the record it had.
    Without ``force``, refuses while a live command uses it (its statements would fail)."""
    with _start_lock(paths):
        record = read(paths)
        users = [c for c in clients(paths) if alive(c.pid)] if record else []
        if users and not force:
            raise EngineInUse(
                "the engine is in use by "
                + ", ".join(f"pid {c.pid} ({c.command})" for c in users)
                + ": stop it once they are done, or with --force (their statements fail)"
            )
        _stop_all(paths, timeout)
        paths.record.unlink(missing_ok=True)
        return record


def status(paths: Paths) -> Status:
    """The engine's state; a running one is probed (a catalog call on a session of its own,
    bounded), so that a wedged engine reads as wedged, not idle."""
    record = read(paths)
    if record is None:
        return Status(EngineState.STOPPED, None, [], None, paths.log)
    if not _is_ours(record, paths):
        return Status(EngineState.STALE, record, [], None, paths.log)
    live = [c for c in clients(paths) if alive(c.pid)]
    from tardy.runtime.watchdog import probe

    token = paths.token.read_text().strip()
    checked = probe(record, token, str(uuid.uuid4()), probe_timeout(), release=True)
    state = EngineState.RUNNING if checked.answered else EngineState.WEDGED
    return Status(state, record, live, idle_for(paths), paths.log, checked)
