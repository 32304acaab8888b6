"""Recorded answers: ``tardy status`` and ``tardy detect`` recompute nothing that has not
changed since a command last computed it.

Both commands only read, and what they answer is a function of three things: the project
(its files, and tardy's own code), SQLMesh's state, and the Delta tables of the warehouse.
The *state key* hashes all three without Spark or SQLMesh, from the file system alone:

* the project and tardy's code: each file's path, size and modification time, and the
  installed versions of SQLMesh, PySpark and delta-spark;
* SQLMesh's state: the same of the DuckDB state database and its write-ahead log;
* the warehouse: per table directory, the newest commit of its ``_delta_log``. Delta versions
  only grow, so one table's key is the same before and after a read exactly when nothing
  committed to it in between; a table created or dropped adds or removes its directory.

A command that computed an answer records it under the key it read before it began, and
only when the key is still the same after it finished (nothing committed meanwhile). A later
command whose key is the same answers from the record in a fraction of a second; any commit,
plan, run, edit or upgrade changes the key and the next command computes again. Only the
embedded ``local`` gateway records (a local warehouse and a DuckDB state): the cluster
gateways' state lives in PostgreSQL, whose changes no file shows. ``--fresh`` recomputes.

The record is ``$TARDY_HOME/recorded/answers.json``, replaced atomically; it names its data
home, so a copied home never answers from its source's record.
"""

from __future__ import annotations

import hashlib
import json
import os
import tempfile
import typing as t
from dataclasses import dataclass
from datetime import UTC, datetime
from enum import StrEnum
from importlib import metadata
from pathlib import Path
from urllib.parse import urlparse

import tardy
from tardy.project.gateway import EMBEDDED_GATEWAY
from tardy.project.home import SETTINGS_FILE, project_root

if t.TYPE_CHECKING:
    from pyspark.sql import SparkSession
    from sqlmesh import Context

FORMAT = 1
RECORD = Path("recorded") / "answers.json"
# What SQLMesh reads of the project (``models/python_models.py`` loads ``python_models/``);
# missing parts are skipped.
PROJECT_PARTS = (
    "config.py",
    SETTINGS_FILE,
    "external_models.yaml",
    "sources.yaml",
    "models",
    "python_models",
    "macros",
    "audits",
    "seeds",
    "signals",
)
DELTA_LOG = "_delta_log"
LIBRARIES = ("sqlmesh", "pyspark", "delta-spark")


class Answer(StrEnum):
    STATUS = "status"
    DETECT = "detect"
    VARIABLES = "variables"  # the project's config variables the answers were judged by
    BASELINE = "baseline"  # what `status --check` judges against each source's history


class Source(StrEnum):
    RECORDED = "recorded"
    COMPUTED = "computed"


@dataclass(frozen=True)
class Inputs:
    """Where a data home's answers come from: what the state key reads."""

    home: Path
    warehouse: Path
    state_files: tuple[Path, ...]

    def as_dict(self) -> dict[str, object]:
        return {
            "home": str(self.home),
            "warehouse": str(self.warehouse),
            "state_files": [str(p) for p in self.state_files],
        }

    @classmethod
    def from_dict(cls, raw: dict[str, t.Any]) -> Inputs:
        return cls(
            Path(raw["home"]), Path(raw["warehouse"]), tuple(Path(p) for p in raw["state_files"])
        )


@dataclass(frozen=True)
class Recorded:
    """Answers recorded under one state key."""

    key: str
    recorded_at: str
    answers: dict[str, t.Any]

    def provenance(self, source: Source) -> dict[str, str]:
        return {"source": str(source), "recorded_at": self.recorded_at, "state_key": self.key}


def _stat_lines(path: Path) -> t.Iterator[str]:
    """``path size mtime_ns`` for a file, or for every file under a folder, sorted."""
    if path.is_file():
        st = path.stat()
        yield f"{path} {st.st_size} {st.st_mtime_ns}"
    elif path.is_dir():
        for child in sorted(p for p in path.rglob("*") if p.is_file()):
            yield from _stat_lines(child)
    else:
        yield f"{path} absent"


def _newest_commit(log: Path) -> str:
    """The newest commit file of a ``_delta_log`` (versions are zero-padded: names sort)."""
    commits = [e.name for e in os.scandir(log) if e.name.endswith(".json")]
    return max(commits, default="none")


def delta_tables(warehouse: Path) -> t.Iterator[Path]:
    """Every Delta table directly under the warehouse or one of its ``*.db`` schemas."""
    if not warehouse.is_dir():
        return
    for entry in sorted(os.scandir(warehouse), key=lambda e: e.name):
        path = Path(entry.path)
        if (path / DELTA_LOG).is_dir():
            yield path
        elif entry.is_dir() and entry.name.endswith(".db"):
            for table in sorted(os.scandir(path), key=lambda e: e.name):
                if (Path(table.path) / DELTA_LOG).is_dir():
                    yield Path(table.path)


def code_lines() -> t.Iterator[str]:
    """The project's files, tardy's code and the versions of the libraries that judge."""
    root = project_root()
    for part in PROJECT_PARTS:
        yield from _stat_lines(root / part)
    yield from _stat_lines(Path(tardy.__file__).parent)
    for library in LIBRARIES:
        yield f"{library} {metadata.version(library)}"


def state_key(inputs: Inputs) -> str:
    """The hash of everything the answers read (the module's docstring)."""
    digest = hashlib.sha256()
    lines = [
        *code_lines(),
        *(line for f in inputs.state_files for line in _stat_lines(f)),
        *(
            f"{table} {_newest_commit(table / DELTA_LOG)}"
            for table in delta_tables(inputs.warehouse)
        ),
    ]
    for line in lines:
        digest.update(line.encode() + b"\n")
    return digest.hexdigest()


def inputs_of(context: Context, spark: SparkSession, home: Path) -> Inputs | None:
    """The inputs of a project opened on the ``local`` gateway with a DuckDB state; None
    elsewhere (nothing is recorded there)."""
    if context.selected_gateway != EMBEDDED_GATEWAY:
        return None
    state = context.config.get_state_connection(context.selected_gateway)
    database = getattr(state, "database", None)
    if getattr(state, "type_", None) != "duckdb" or not database:
        return None
    location = urlparse(spark.conf.get("spark.sql.warehouse.dir") or "")
    if location.scheme not in ("", "file"):
        return None
    state_file = Path(database).resolve()
    return Inputs(
        home.resolve(),
        Path(location.path).resolve(),
        (state_file, state_file.with_name(state_file.name + ".wal")),
    )


def _path(home: Path) -> Path:
    return home / RECORD


def _read(home: Path) -> dict[str, t.Any] | None:
    try:
        raw = json.loads(_path(home).read_text())
    except (OSError, ValueError):
        return None
    if raw.get("format") != FORMAT or Path(raw.get("inputs", {}).get("home", "")) != home.resolve():
        return None
    return raw


def lookup(home: Path, gateway: str, answer: Answer) -> Recorded | None:
    """The recorded answer when nothing it read has changed since; None otherwise."""
    if gateway != EMBEDDED_GATEWAY:
        return None
    raw = _read(home)
    if raw is None or answer not in raw["answers"]:
        return None
    key = state_key(Inputs.from_dict(raw["inputs"]))
    if key != raw["key"]:
        return None
    return Recorded(key, raw["recorded_at"], raw["answers"])


class Recording:
    """Records a computation's answers when its inputs did not change while it ran:
    ``begin`` before reading, ``commit`` after."""

    def __init__(self, inputs: Inputs | None) -> None:
        self.inputs = inputs
        self.key = state_key(inputs) if inputs is not None else None

    def commit(self, answers: dict[Answer, t.Any]) -> Recorded | None:
        """Record ``answers`` (merged with answers recorded under the same key); None when
        nothing is recorded (no inputs, or something committed meanwhile)."""
        if self.inputs is None or self.key is None or state_key(self.inputs) != self.key:
            return None
        home = self.inputs.home
        previous = _read(home)
        merged = dict(previous["answers"]) if previous and previous["key"] == self.key else {}
        merged.update({str(name): value for name, value in answers.items()})
        recorded = Recorded(self.key, datetime.now(UTC).isoformat(timespec="seconds"), merged)
        payload = {
            "format": FORMAT,
            "key": recorded.key,
            "recorded_at": recorded.recorded_at,
            "inputs": self.inputs.as_dict(),
            "answers": merged,
        }
        target = _path(home)
        target.parent.mkdir(parents=True, exist_ok=True)
        with tempfile.NamedTemporaryFile(
            "w", dir=target.parent, prefix=".answers-", delete=False
        ) as out:
            json.dump(payload, out, default=str)
        os.replace(out.name, target)
        return recorded
