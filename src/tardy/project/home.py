"""Where things live: the SQLMesh project root and the data home ``$TARDY_HOME``.

Everything a run writes (Spark warehouse, Derby metastore, SQLMesh state, landing files,
logs) lives under the data home, default ``.tardy/`` in the project root. Two data homes
never share a file; ``project.yaml`` renders its paths from ``TARDY_HOME``, which
:func:`activate` makes absolute before SQLMesh reads the config (``config.py``).
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from tardy.errors import TardyError
from tardy.runtime import jvm

SETTINGS_FILE = "project.yaml"  # SQLMesh's settings, rendered by config.py


class ProjectNotFound(TardyError):
    pass


def project_root() -> Path:
    """The SQLMesh project: ``$TARDY_PROJECT``, else the nearest parent of the cwd holding a
    ``config.py`` and ``models/``, else the checkout this package was installed from."""
    candidates: list[Path] = []
    if env := os.environ.get("TARDY_PROJECT"):
        candidates.append(Path(env))
    cwd = Path.cwd().resolve()
    candidates += [cwd, *cwd.parents, Path(__file__).resolve().parents[3]]
    for path in candidates:
        if (path / "config.py").is_file() and (path / "models").is_dir():
            return path.resolve()
    raise ProjectNotFound(
        "No tardy project found: run from the repository root or set TARDY_PROJECT."
    )


@dataclass(frozen=True)
class DataHome:
    root: Path

    @property
    def landing(self) -> Path:
        return self.root / "landing"

    @property
    def logs(self) -> Path:
        return self.root / "logs"

    @property
    def stage(self) -> Path:
        """A staged restatement's rows tables, one folder per restatement
        (``tardy.engine.stage``)."""
        return self.root / "stage"


def data_home() -> DataHome:
    raw = os.environ.get("TARDY_HOME")
    root = Path(raw) if raw else project_root() / ".tardy"
    if not root.is_absolute():
        root = project_root() / root if not raw else Path.cwd() / root
    return DataHome(root.resolve())


def activate() -> DataHome:
    """Create the data home and export its absolute path for ``project.yaml``."""
    home = data_home()
    for path in (home.root, home.landing, home.logs):
        path.mkdir(parents=True, exist_ok=True)
    os.environ["TARDY_HOME"] = str(home.root)
    log4j = project_root() / "spark-conf" / "log4j2.properties"
    os.environ.setdefault("TARDY_SPARK_LOG4J", str(log4j))
    os.environ.setdefault(jvm.ARCHIVE_VARIABLE, jvm.options())
    os.environ.setdefault(jvm.TUNING_VARIABLE, jvm.tuning())
    return home
