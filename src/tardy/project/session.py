"""A Spark session for the commands that need no SQLMesh project (``tardy log``, ``tardy
ingest``): on the embedded default with the data home's warm engine running, a Spark
Connect session to it, without importing SQLMesh or loading the project (about 2 s of a
fresh process: docs/warm-engine.md); otherwise the project's own session.

Also the process settings every session of tardy gets: UTC, and the Connect client quiet.
"""

from __future__ import annotations

import os
import time
import typing as t
import warnings

from tardy.project import gateway
from tardy.project.home import activate
from tardy.runtime import warm

if t.TYPE_CHECKING:
    from pyspark.sql import SparkSession


def utc_process() -> None:
    """Every timestamp in tardy is UTC; PySpark turns TIMESTAMPs into naive datetimes in the
    process's local zone, so the process runs in UTC whatever the machine's zone is."""
    os.environ["TZ"] = "UTC"
    time.tzset()


def quiet_connect() -> None:
    """The Spark Connect client's noise, for tardy and the stock ``sqlmesh`` alike."""
    os.environ.setdefault("GRPC_VERBOSITY", "ERROR")
    warnings.filterwarnings("ignore", message=r"Failed to set spark\.sql\.catalogImplementation")


def engine_session() -> SparkSession | None:
    """A session on the data home's running warm engine (the selected gateway is the
    embedded default and the engine is on), or None: then the caller opens the project."""
    if gateway.selected() != gateway.EMBEDDED_GATEWAY or not warm.enabled():
        return None
    url = warm.attach(activate().root)
    if url is None:
        return None
    utc_process()
    quiet_connect()
    from pyspark.sql import SparkSession

    return SparkSession.builder.remote(url).getOrCreate()
