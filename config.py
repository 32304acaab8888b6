"""SQLMesh's configuration of this project: the stock `sqlmesh` CLI and `tardy` load it.

The settings are project.yaml's. This file only decides where Spark runs, per data home
($TARDY_HOME, default .tardy/): on the embedded default it finds or starts the data home's
warm engine, a local Spark Connect server (tardy/runtime/warm.py; `tardy engine status`), so no
command after the first starts a JVM of its own. TARDY_ENGINE=off keeps Spark in-process.
"""

from pathlib import Path

from tardy.project.context import sqlmesh_config

config = sqlmesh_config(Path(__file__).parent)
