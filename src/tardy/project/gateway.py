"""Which of project.yaml's gateways a process uses.

project.yaml renders only the selected gateway: SQLMesh builds an engine adapter for every
gateway of a config when it loads a project, a classic SparkSession (``local``, ``cluster``)
and a Spark Connect session (``connect``) cannot share a process (docs/facts.md, fact 16), and two
classic gateways would share one session (``getOrCreate``). The environment selects it, so
the stock ``sqlmesh`` CLI and ``tardy`` agree (``config.py`` asks :func:`selected`):
``TARDY_GATEWAY``; unset, ``connect`` when ``TARDY_SPARK_REMOTE`` is set (``eval "$(make -s
cluster-up)"``), else ``local``, the embedded default (on the data home's warm engine unless
``TARDY_ENGINE=off``: tardy/runtime/warm.py).
"""

from __future__ import annotations

import os

EMBEDDED_GATEWAY = "local"
GATEWAYS = (EMBEDDED_GATEWAY, "cluster", "connect")
VARIABLE = "TARDY_GATEWAY"
REMOTE_VARIABLE = "TARDY_SPARK_REMOTE"


def select_gateway(gateway: str | None) -> None:
    """Make ``gateway`` the one project.yaml renders, in this process and the processes it
    starts; ``None`` keeps the environment's choice."""
    if gateway is not None:
        os.environ[VARIABLE] = gateway


def selected() -> str:
    """The gateway this process's environment selects (the one rule, used by config.py)."""
    return os.environ.get(VARIABLE) or ("connect" if os.environ.get(REMOTE_VARIABLE) else "local")
