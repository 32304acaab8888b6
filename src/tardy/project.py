"""Open the SQLMesh project on its configured gateway, with exact Delta interval writes.

The SparkSession is the one SQLMesh builds from ``config.yaml`` (``getOrCreate``): tardy's
own work (ingest, summaries, fingerprints) runs in that same session, so a process holds
one Spark driver and one configuration, whatever the gateway.
"""

from __future__ import annotations

import logging
import os
import time
import typing as t

from tardy import exact_writes
from tardy.home import activate, project_root

if t.TYPE_CHECKING:
    from pyspark.sql import SparkSession
    from sqlmesh import Context


def utc_process() -> None:
    """Every timestamp in tardy is UTC; PySpark turns TIMESTAMPs into naive datetimes in the
    process's local zone, so the process runs in UTC whatever the machine's zone is."""
    os.environ["TZ"] = "UTC"
    time.tzset()


def quiet_logs() -> None:
    """Keep py4j's and SQLMesh's Python loggers from drowning progress output."""
    for name in ("py4j", "py4j.clientserver", "sqlmesh", "sqlglot"):
        logging.getLogger(name).setLevel(logging.ERROR)
    os.environ.setdefault("PYSPARK_PIN_THREAD", "true")


def open_context(
    gateway: str | None = None, *, load: bool = True, progress_to_stderr: bool = False
) -> Context:
    """A ``sqlmesh.Context`` for this project and data home.

    ``progress_to_stderr`` sends SQLMesh's progress output to stderr, keeping stdout for a
    command's JSON.
    """
    activate()
    utc_process()
    quiet_logs()
    exact_writes.enable()
    # SQLMesh's default console outside its own CLI prints nothing; its CI console ignores the
    # stream it is given. A terminal console on the chosen stream shows plans and progress.
    from rich.console import Console
    from sqlmesh import Context
    from sqlmesh.core.console import TerminalConsole, set_console

    set_console(TerminalConsole(console=Console(stderr=progress_to_stderr)))

    return Context(paths=str(project_root()), gateway=gateway, load=load)


def spark_of(context: Context) -> SparkSession:
    """The SparkSession behind the context's engine adapter (created on first use)."""
    adapter = context.engine_adapter
    spark = getattr(adapter, "spark", None)
    if spark is None:
        raise RuntimeError(f"gateway {context.selected_gateway!r} is not a Spark connection")
    return spark
