"""Data homes for the integration tests: one warm Spark engine per pytest worker, and
templates built once per content hash and copied per test (docs/testing.md).

- :class:`Engine` keeps one JVM for the whole worker and opens one data home at a time in
  it: switching homes stops the SparkSession, shuts down the old home's Derby database and
  closes its DuckDB state, then opens the new home's (about 5 s, against 20-25 s for a fresh
  process, whose JIT starts cold). :meth:`Engine.release` frees the home for real processes
  (``tardy`` under a kill, two commands racing, the stock ``sqlmesh`` CLI): only tests whose
  subject is the process start one.
- :class:`Template` is a starting state (a simulated feed ingested, prod planned, ...) built
  once in the warm engine under ``.tardy/test-templates/<name>-<digest>/`` and copied per test
  with :func:`tardy.project.homecopy.copy_home` (``cp -a`` + the metastore's absolute locations
  rewritten). The digest covers the project (models, macros, audits, config), tardy's code,
  this file and the builder's module: a change to any of them builds the template again; an
  unchanged tree reuses it across runs (``make test`` a second time).
"""

from __future__ import annotations

import contextlib
import fcntl
import gc
import hashlib
import inspect
import json
import os
import shutil
import typing as t
from dataclasses import dataclass
from pathlib import Path

from tardy.project.home import DataHome, project_root
from tardy.project.homecopy import copy_home

if t.TYPE_CHECKING:
    from pyspark.sql import SparkSession
    from sqlmesh import Context

# What a template's content depends on, relative to the project root.
PROJECT_INPUTS = (
    "config.py",
    "project.yaml",
    "external_models.yaml",
    "sources.yaml",
    "constraints.txt",
    "models",
    "macros",
    "audits",
    "python_models",
    "src/tardy",
)
COMPLETE = ".template-complete"
FACTS = "template-facts.json"


def templates_root() -> Path:
    """``$TARDY_TEST_TEMPLATES``, else ``.tardy/test-templates`` in the project (``make clean``
    removes it)."""
    configured = os.environ.get("TARDY_TEST_TEMPLATES")
    return Path(configured) if configured else project_root() / ".tardy" / "test-templates"


class Engine:
    """The worker's Spark engine: one JVM, one data home open at a time."""

    def __init__(self) -> None:
        self.home: DataHome | None = None
        self.context: Context | None = None
        self.spark: SparkSession | None = None

    def open(self, root: Path) -> tuple[DataHome, Context, SparkSession]:
        """Open the data home at ``root`` (created if missing) in this process; the home, a
        loaded ``Context`` and its SparkSession. Already open: the same objects."""
        from tardy.project.context import open_context, spark_of
        from tardy.project.home import activate

        root = root.resolve()
        if self.home is None or self.home.root != root:
            self.release()
            os.environ["TARDY_HOME"] = str(root)
            self.home = activate()
            self.context = open_context()
            self.spark = spark_of(self.context)
            # getOrCreate hands back a session still active in the JVM, with its static
            # settings: a module that loaded a context outside the engine (which starts Spark)
            # and never stopped it would leave every later home reading its metastore.
            metastore = self.spark.sparkContext.getConf().get(
                "spark.hadoop.javax.jdo.option.ConnectionURL", ""
            )
            assert f"databaseName={root}/metastore_db;" in metastore, (
                f"the worker's SparkSession reads another home's metastore ({metastore}): a "
                "module started Spark outside homes.Engine and left it running"
            )
        assert self.context is not None and self.spark is not None
        return self.home, self.context, self.spark

    def release(self) -> None:
        """Close the open home so that another process can open it: SQLMesh's state (every
        DuckDB connection of the process), the SparkSession and the home's Derby database.
        The JVM stays up for the next :meth:`open`."""
        if self.home is None:
            return
        home, self.home = self.home, None
        if self.context is not None:
            self.context.close()
        self.context = None
        if self.spark is not None:
            self.spark.stop()
        self.spark = None
        _shut(home.root)

    @contextlib.contextmanager
    def foreign(self, root: Path) -> t.Iterator[None]:
        """For a command run in this process on a project or home the engine did not open (a
        copy of the project, say): the open home is released first, and the SparkSession and
        Derby database that the command started for ``root`` are closed after it, so that the
        next :meth:`open` gets a session of its own home."""
        from pyspark.sql import SparkSession

        self.release()
        try:
            yield
        finally:
            session = SparkSession.getActiveSession()
            if session is not None:
                session.stop()
            _shut(root.resolve())


def _shut(root: Path) -> None:
    """Close what this process holds of the home at ``root`` once its session is stopped:
    every DuckDB connection (SQLMesh's state) and the home's Derby database."""
    from pyspark import SparkContext
    from sqlmesh.core.config.connection import BaseDuckDBConnectionConfig

    # SQLMesh keeps one DuckDB adapter per data file for the process; a Context that was
    # never closed (a command that failed as it loaded) leaves its state's open there.
    cached = BaseDuckDBConnectionConfig._data_file_to_adapter
    for key in [key for key in cached if key.startswith(f"{root}/")]:
        cached.pop(key).close()
    _close_duckdb_connections()
    gateway = SparkContext._gateway
    metastore = root / "metastore_db"
    if gateway is not None and metastore.is_dir():
        url = f"jdbc:derby:;databaseName={metastore};shutdown=true"
        try:  # Derby reports a completed shutdown as an exception (SQLState 08006)
            gateway.jvm.java.sql.DriverManager.getConnection(url)
        except Exception as shutdown:  # noqa: BLE001
            if not any(s in str(shutdown) for s in ("08006", "shutdown", "not found")):
                raise
    from tardy.runtime.busy import _lock_holders

    for name in ("state.duckdb", "metastore_db/dbex.lck", "metastore_db/db.lck"):
        held = _lock_holders(root / name) & {os.getpid(), _jvm_pid()}
        assert not held, f"{name} of {root} is still held by this worker after release"


def _jvm_pid() -> int:
    from pyspark import SparkContext

    gateway = SparkContext._gateway
    if gateway is None:
        return -1
    return int(gateway.jvm.java.lang.ProcessHandle.current().pid())


def _close_duckdb_connections() -> None:
    """SQLMesh's Contexts (the CLI's, in-process, included) keep DuckDB connections that
    hold the state file's lock until collected: close every one of this process."""
    import duckdb

    gc.collect()
    for obj in gc.get_objects():
        if isinstance(obj, duckdb.DuckDBPyConnection):
            with contextlib.suppress(duckdb.Error):
                obj.close()


def _digest(paths: t.Iterable[Path]) -> str:
    digest = hashlib.sha256()
    root = project_root()
    for path in sorted(paths):
        if "__pycache__" in path.parts or not path.is_file():
            continue
        digest.update(str(path.relative_to(root)).encode() + b"\0")
        digest.update(path.read_bytes() + b"\0")
    return digest.hexdigest()[:16]


def project_digest(*extra: Path) -> str:
    root = project_root()
    files: list[Path] = [Path(__file__).resolve(), *extra]
    for name in PROJECT_INPUTS:
        path = root / name
        files += sorted(path.rglob("*")) if path.is_dir() else [path]
    return _digest(files)


Builder = t.Callable[[Engine, Path], dict[str, t.Any]]


@dataclass(frozen=True)
class Template:
    """A named starting state: ``build(engine, root)`` makes it in the empty data home
    ``root``, opening it in the warm engine (and releasing it where a real process must run
    there), and returns facts about it (JSON), which every copy is given back."""

    name: str
    build: Builder

    @property
    def path(self) -> Path:
        source = Path(inspect.getfile(self.build)).resolve()
        return templates_root() / f"{self.name}-{project_digest(source)}"

    def ensure(self, engine: Engine) -> Path:
        """The template's directory, built first unless a complete one exists (one builder
        at a time across the pytest workers: a file lock per template name)."""
        path = self.path
        if (path / COMPLETE).is_file():
            return path
        path.parent.mkdir(parents=True, exist_ok=True)
        with open(path.parent / f"{self.name}.lock", "w") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            if not (path / COMPLETE).is_file():
                for stale in path.parent.glob(f"{self.name}-*"):
                    shutil.rmtree(stale)  # other digests, or a build that was interrupted
                try:
                    facts = self.build(engine, path)
                finally:
                    engine.release()
                (path / FACTS).write_text(json.dumps(facts, default=str))
                (path / COMPLETE).write_text(self.name)
        return path

    def copy_to(self, engine: Engine, target: Path) -> dict[str, t.Any]:
        """A copy of the template at ``target`` (a new path); the template's facts."""
        source = self.ensure(engine)
        copy_home(source, target)
        (target / COMPLETE).unlink()
        return json.loads((target / FACTS).read_text())
