"""Open the SQLMesh project on its configured gateway, with exact Delta interval writes.

SQLMesh reads the project's configuration from ``config.py``, which calls
:func:`sqlmesh_config`: ``project.yaml`` rendered for the selected gateway, on the embedded
default through the data home's warm engine (``tardy.runtime.warm``) unless ``TARDY_ENGINE=off``.
The SparkSession is the one SQLMesh builds from it (``getOrCreate``): tardy's own work
(ingest, summaries, fingerprints) runs in that same session, so a process holds one Spark
session and one configuration, whatever the gateway.
"""

from __future__ import annotations

import contextlib
import logging
import os
import typing as t
from pathlib import Path

from tardy.project import exact_writes, gateway
from tardy.project.gateway import EMBEDDED_GATEWAY, select_gateway
from tardy.project.home import SETTINGS_FILE, activate, project_root
from tardy.project.session import quiet_connect, utc_process
from tardy.runtime import warm

if t.TYPE_CHECKING:
    from pyspark.sql import SparkSession
    from sqlmesh import Context
    from sqlmesh.core.config import Config


def quiet_logs() -> None:
    """Keep py4j's and SQLMesh's Python loggers from drowning progress output; on a Spark
    Connect gateway, gRPC's INFO lines ("skipping fork() handlers" whenever the process
    starts another) and PySpark's warning that the client cannot set the static
    ``spark.sql.catalogImplementation`` SQLMesh asks for (the server's is ``hive``)."""
    for name in ("py4j", "py4j.clientserver", "sqlmesh", "sqlglot"):
        logging.getLogger(name).setLevel(logging.ERROR)
    # PySpark logs a failed statement's query context as a JSON line on stderr before it
    # raises; the error itself reaches the command, which says it in one line.
    logging.getLogger("SQLQueryContextLogger").setLevel(logging.CRITICAL)
    os.environ.setdefault("PYSPARK_PIN_THREAD", "true")
    quiet_connect()


# SQLMesh's warning that DuckDB state is not for production: true, and said once in the
# README for the embedded default, where it is the chosen design; kept for other gateways.
STATE_WARNING = "not recommended for storing SQLMesh state"
JVM_LOG = "spark-driver.log"


def jvm_output_to(log: Path) -> None:
    """The Spark driver JVM this process launches writes its stdout and stderr to ``log``
    (appended) instead of the terminal: its start-up banner lines, and anything log4j prints,
    stay out of tardy's output and out of ``--json``. PySpark's ``launch_gateway`` takes
    ``popen_kwargs`` for exactly this; ``SparkContext`` calls it without, so the name it
    calls is rebound to a wrapper that passes them. Idempotent."""
    from pyspark import java_gateway
    from pyspark.core import context as spark_context

    def launch(conf: t.Any = None, popen_kwargs: dict[str, t.Any] | None = None) -> t.Any:
        output = log.open("ab")
        return java_gateway.launch_gateway(
            conf, {"stdout": output, "stderr": output, **(popen_kwargs or {})}
        )

    spark_context.launch_gateway = launch


def open_context(
    gateway: str | None = None, *, load: bool = True, progress_to_stderr: bool = False
) -> Context:
    """A ``sqlmesh.Context`` for this project and data home, its settings checked against
    its models when it is loaded (``tardy.project.headline.check_settings``).

    ``progress_to_stderr`` sends SQLMesh's progress output to stderr, keeping stdout for a
    command's JSON. The Spark JVM's own output goes to ``$TARDY_HOME/logs/spark-driver.log``
    (``jvm_output_to``).
    """
    home = activate()
    select_gateway(gateway)
    utc_process()
    quiet_logs()
    exact_writes.enable()
    jvm_output_to(home.logs / JVM_LOG)
    # SQLMesh's default console outside its own CLI prints nothing; its CI console ignores the
    # stream it is given. A terminal console on the chosen stream shows plans and progress.
    from rich.console import Console
    from sqlmesh import Context
    from sqlmesh.core.console import TerminalConsole, set_console

    class _Console(TerminalConsole):
        def log_warning(self, short_message: str, *args: t.Any, **kwargs: t.Any) -> None:
            if STATE_WARNING in short_message and gateway in (None, EMBEDDED_GATEWAY):
                return
            super().log_warning(short_message, *args, **kwargs)

    set_console(_Console(console=Console(stderr=progress_to_stderr)))

    context = Context(paths=str(project_root()), gateway=gateway, load=load)
    if load:
        from tardy.project.headline import check_settings

        check_settings(context)  # a setting that names nothing stops here, in one line
    return context


ENGINE_REMOTE_VARIABLE = "TARDY_ENGINE_REMOTE"


def _render_settings(project: Path) -> dict[str, t.Any]:
    from sqlmesh.core.config.loader import load_config_from_yaml

    return load_config_from_yaml(project / SETTINGS_FILE)


def engine_settings(project: Path | None = None) -> dict[str, str]:
    """The Spark settings of the ``local`` gateway, as an in-process driver gets them: what
    the data home's warm engine is started with."""
    with _environ(**{gateway.VARIABLE: EMBEDDED_GATEWAY, ENGINE_REMOTE_VARIABLE: None}):
        rendered = _render_settings(project or project_root())
    config = rendered["gateways"][EMBEDDED_GATEWAY]["connection"]["config"]
    return {key: str(value) for key, value in config.items()}


@contextlib.contextmanager
def _environ(**values: str | None) -> t.Iterator[None]:
    saved = {name: os.environ.get(name) for name in values}
    try:
        for name, value in values.items():
            _set_env(name, value)
        yield
    finally:
        for name, value in saved.items():
            _set_env(name, value)


def _set_env(name: str, value: str | None) -> None:
    if value is None:
        os.environ.pop(name, None)
    else:
        os.environ[name] = value


def sqlmesh_config(project: Path) -> Config:
    """``config.py``'s configuration: the ``project.yaml`` beside it, rendered for the
    selected gateway. On the embedded default with the warm engine on, the data home's
    engine is found or started first and the ``local`` gateway renders as a Spark Connect
    client of it."""
    from sqlmesh.core.config import Config

    home = activate()
    chosen = gateway.selected()
    os.environ[gateway.VARIABLE] = chosen
    remote = None
    if chosen == EMBEDDED_GATEWAY and warm.enabled():
        quiet_connect()
        remote = warm.connect(home.root, engine_settings(project))
    _set_env(ENGINE_REMOTE_VARIABLE, remote)
    return Config.parse_obj(_render_settings(project))


def load_config() -> Config:
    """The project's SQLMesh configuration as a ``Context`` would load it (``config.py``
    with this process's environment), without a Context, a state connection or a Spark
    session: what the CLI reads before it opens the project (the restatement lock's
    backend, ``tardy.engine.restate.hold``). Call after ``activate``, which makes
    ``TARDY_HOME`` absolute for the rendering."""
    from sqlmesh.core.config import Config
    from sqlmesh.core.config.loader import load_configs

    root = project_root()
    return load_configs(None, Config, root)[root]


_configs: dict[Path, Config] = {}


def _config_without_engine() -> Config:
    """The project's config (``config.py`` included), read once per process and project
    without finding or starting an engine: for a command with no Context open."""
    root = project_root()
    if root not in _configs:
        remote = os.environ.get(ENGINE_REMOTE_VARIABLE)
        with _environ(**{warm.ENGINE_VARIABLE: "off", ENGINE_REMOTE_VARIABLE: remote}):
            _configs[root] = load_config()
    return _configs[root]


def notification_targets() -> list[t.Any]:
    """The project's SQLMesh ``notification_targets``, for a command that delivers
    notifications with no Context open (``tardy.outbox.notifications``)."""
    return list(_config_without_engine().notification_targets)


def load_variables() -> dict[str, t.Any]:
    """The project's config variables (``project.yaml``'s ``variables``), for a command that
    runs on the engine with no Context open (``tardy models``)."""
    return dict(_config_without_engine().variables)


def spark_of(context: Context) -> SparkSession:
    """The SparkSession behind the context's engine adapter (created on first use)."""
    adapter = context.engine_adapter
    spark = getattr(adapter, "spark", None)
    if spark is None:
        raise RuntimeError(f"gateway {context.selected_gateway!r} is not a Spark connection")
    return spark
