"""SQLMesh's configuration of this project: the stock `sqlmesh` CLI and `tardy` load it.

The settings are project.yaml's. This file only decides where Spark runs, per data home
($TARDY_HOME, default .tardy/): on the embedded default it finds or starts the data home's
warm engine, a local Spark Connect server (tardy/warm.py; `tardy engine status`), so every
command after the first starts in about a second. TARDY_ENGINE=off keeps Spark in-process.
"""

from tardy.project import sqlmesh_config

config = sqlmesh_config()
