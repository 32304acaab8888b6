"""A steward's fix: a new landing record, never an edit of bronze.

``tardy quarantine fix ID --set FIELD=VALUE`` writes the original record with the fixed
fields, and its provenance under ``_steward`` (who, which record, why, what was set), as
``landing/<source>/arrival_ts=<clock>/steward-<file hash>-<line>-<content hash>.jsonl``.
``tardy ingest`` lands it like any correction, so ``detect`` and ``restate`` absorb it into
the closed day it belongs to. The arrival folder is the feed's clock (its latest arrival),
like every age tardy measures, so a simulated or replayed feed is not skewed by wall time.

Before anything is written the fixed record is checked by the source's own rules: the line
is made into its bronze row exactly as ingest would (``parsing.bronze_row``) and the
source's ``rules`` macro (``sources.yaml``), rendered as its quarantine model renders it,
is evaluated on it in one statement; a fix that fails a rule is refused naming the rule.

The file appears whole or not at all: it is written beside its name, flushed, then renamed.
A process killed after the rename and before its decision was appended leaves a file ingest
lands once; the next fix of that record finds it (``pending``) and appends the decision.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import typing as t
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

from tardy.errors import InputError
from tardy.ingest.discovery import LandingFile
from tardy.ingest.landing import arrival_dir_name
from tardy.ingest.parsing import bronze_row
from tardy.ingest.tables import table_of

if t.TYPE_CHECKING:
    from pyspark.sql import SparkSession
    from sqlmesh import Context

    from tardy.project.sources import Source
    from tardy.quarantine.listing import Quarantined

PROVENANCE = "_steward"
PREFIX = "steward-"
_NUMBER = re.compile(r"^-?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?$")
_INTEGER = re.compile(r"^-?(0|[1-9][0-9]*)$")


class FixRefused(InputError):
    """The fixed record fails one of its source's rules: nothing was written."""


class _Number(str):
    """A JSON number kept as the text it was written with (``1.50`` stays ``1.50``)."""


def _dump(value: object) -> str:
    if isinstance(value, _Number):
        return str(value)
    if isinstance(value, dict):
        return "{" + ",".join(f"{json.dumps(k)}:{_dump(v)}" for k, v in value.items()) + "}"
    if isinstance(value, list):
        return "[" + ",".join(_dump(v) for v in value) + "]"
    return json.dumps(value, ensure_ascii=False)


def typed(source: Source, field: str, text: str) -> object:
    """``text`` as the JSON value of ``field``, by its type in ``sources.yaml``."""
    kind = source.record.get(field)
    if kind is None:
        raise InputError(
            f"source {source.name!r} has no field {field!r} (its fields: "
            f"{', '.join(source.record)})"
        )
    if kind == "integer":
        if not _INTEGER.match(text.strip()):
            raise InputError(f"{field}: {text!r} is not an integer")
        return _Number(text.strip())
    if kind == "number":
        if not _NUMBER.match(text.strip()):
            raise InputError(f"{field}: {text!r} is not a JSON number")
        return _Number(text.strip())
    if kind == "boolean":
        if text.strip() not in ("true", "false"):
            raise InputError(f"{field}: {text!r} is not true or false")
        return text.strip() == "true"
    return text  # string, timestamp (an ISO-8601 string)


def parse_sets(source: Source, sets: t.Sequence[str]) -> dict[str, object]:
    """``FIELD=VALUE`` arguments, each typed by the source's declaration."""
    out: dict[str, object] = {}
    for item in sets:
        field, sep, value = item.partition("=")
        if not sep or not field:
            raise InputError(f"--set {item!r}: expected FIELD=VALUE")
        out[field.strip()] = typed(source, field.strip(), value)
    if not out:
        raise InputError("a fix needs at least one --set FIELD=VALUE")
    return out


@dataclass(frozen=True)
class Fix:
    original: str  # the quarantined record's id
    source: str
    text: str  # the steward record, one JSON line
    path: Path  # where it lands
    source_file: str  # relative to the landing root
    arrival: datetime  # aware UTC


def fixed_line(
    original: Quarantined, values: t.Mapping[str, object], provenance: t.Mapping[str, object]
) -> str:
    """The original record with ``values`` set and its provenance (one JSON line)."""
    try:
        record = json.loads(original.raw_record, parse_float=_Number, parse_int=_Number)
    except ValueError:
        record = None
    record = dict(record) if isinstance(record, dict) else {}  # unparseable: the set values
    record.pop(PROVENANCE, None)
    record.update(values)
    record[PROVENANCE] = dict(provenance)
    return _dump(record)


def plan_fix(landing: Path, original: Quarantined, text: str, clock: datetime) -> Fix:
    """Where ``text`` lands: its source's folder, the feed's clock's arrival folder."""
    sha, line = original.record_id.rsplit(":", 1)
    content = hashlib.sha256(text.encode()).hexdigest()[:12]
    arrival = clock if clock.tzinfo else clock.replace(tzinfo=UTC)
    relative = (
        Path(original.source)
        / arrival_dir_name(arrival)
        / (f"{PREFIX}{sha[:20]}-{line}-{content}.jsonl")
    )
    return Fix(
        original.record_id, original.source, text, landing / relative, relative.as_posix(), arrival
    )


def failing_rule(context: Context, spark: SparkSession, source: Source, fix: Fix) -> str | None:
    """The first rule of ``source`` the fixed record fails, None when it passes (one
    statement: its bronze row, as ingest makes it, under the source's rules macro)."""
    from tardy.engine.sqlmesh_api import render_macros
    from tardy.quarantine.listing import quarantine_models

    table = table_of(source.name)
    if table is None:
        raise InputError(f"source {source.name!r} is not declared in sources.yaml")
    data = (fix.text + "\n").encode()
    landing_file = LandingFile(
        fix.path, source.name, fix.source_file, fix.arrival, hashlib.sha256(data).hexdigest()
    )
    now = datetime.now(UTC).replace(tzinfo=None)
    arrival = fix.arrival.astimezone(UTC).replace(tzinfo=None)
    row = bronze_row(table, landing_file, 1, data.rstrip(b"\n"), "steward-check", now, arrival)
    model = _rules_model(context, source.bronze, quarantine_models(context))
    rule = render_macros(context, model, f"@{source.rules}()")
    # Aware times: PySpark reads a naive datetime in the client's local time zone.
    aware = tuple(v.replace(tzinfo=UTC) if isinstance(v, datetime) else v for v in row)
    spark.createDataFrame([aware], schema=table.schema).createOrReplaceTempView("tardy_steward_fix")
    found = spark.sql(f"SELECT {rule} AS reason FROM tardy_steward_fix").collect()
    return found[0].reason if found else None


def _rules_model(context: Context, bronze: str, models: t.Iterable[str]) -> str:
    """The quarantine model reading ``bronze``: it renders the source's rules macro."""
    from tardy.engine.dimension import plain_name

    for name in models:
        model = context.get_model(name)
        if model is not None and bronze in {plain_name(p) for p in model.depends_on or ()}:
            return name
    raise InputError(f"no model tagged quarantine reads {bronze}: its fixes cannot be checked")


def pending(landing: Path, original: Quarantined, decided: t.Collection[str]) -> Path | None:
    """A steward file of ``original`` that no decision names (``decided``: the files the
    review table names): a fix killed after its file landed and before its decision."""
    sha, line = original.record_id.rsplit(":", 1)
    pattern = f"arrival_ts=*/{PREFIX}{sha[:20]}-{line}-*.jsonl"
    found = [
        path
        for path in (landing / original.source).glob(pattern)
        if path.relative_to(landing).as_posix() not in decided
    ]
    return max(found, key=lambda p: p.stat().st_mtime_ns) if found else None


def write(fix: Fix) -> None:
    """Write the steward file whole or not at all (a temporary name, flushed, renamed)."""
    from tardy.engine.promote import failpoint

    fix.path.parent.mkdir(parents=True, exist_ok=True)
    temporary = fix.path.with_name(f".{fix.path.name}.tmp")
    with open(temporary, "w", encoding="utf-8") as handle:
        handle.write(fix.text + "\n")
        handle.flush()
        os.fsync(handle.fileno())
    failpoint("fix", 0)  # test hook: killed with only the temporary file written
    os.replace(temporary, fix.path)
    failpoint("fix", 1)  # test hook: killed with the file landed, its decision not appended
