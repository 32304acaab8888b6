"""The declared landing sources (``sources.yaml`` in the project root): one entry per folder
under ``landing/``, read by ``tardy ingest`` (which bronze table, which fields, which one is
the event time), by ``tardy status --check`` (each source's lateness tier) and by whatever
else needs to know a source, so that adding a source is a declaration, not Python.

A declaration is checked whole when it is loaded: a malformed one is refused with the file,
the source and the field named (``SourcesError``). Sources that land in one bronze table
must declare the same record, event time and key: they are one table's rows.
"""

from __future__ import annotations

import os
import re
import typing as t
from dataclasses import dataclass
from pathlib import Path

from tardy.errors import InputError
from tardy.key_index import DEFAULT_SUFFIX, KeyIndex
from tardy.project.home import project_root

FILE_NAME = "sources.yaml"
FILE_VARIABLE = "TARDY_SOURCES"  # another declaration file (e.g. a test's copy)
JSON_TYPES = ("string", "integer", "number", "boolean", "timestamp")
_NAME = re.compile(r"^[a-z][a-z0-9_]*$")
_TABLE = re.compile(r"^[a-z][a-z0-9_]*\.[a-z][a-z0-9_]*$")
_KEYS = {
    "cadence_hours",
    "description",
    "bronze",
    "record",
    "event_time",
    "key",
    "key_index",
    "natural_key",
    "rules",
    "lateness",
    "owner",
}


class SourcesError(InputError):
    """A malformed source declaration (the message names the file, source and field)."""


@dataclass(frozen=True)
class Source:
    name: str  # its folder under landing/
    bronze: str
    record: dict[str, str]  # field -> JSON type, in declaration order
    event_time: str
    key: tuple[str, ...]
    key_index: str | None  # the key index table of its bronze table, None: no index
    rules: str
    lateness: str
    description: str = ""
    natural_key: str | None = None  # SQL over the bronze columns (macros allowed)
    owner: str | None = None  # whom its alerts page first: the source system's team
    cadence_hours: float | None = None  # the longest normal gap between arrivals (else fitted)

    @property
    def natural_key_sql(self) -> str:
        """The key a record belongs to, as SQL over its bronze columns: the declared
        ``natural_key`` (e.g. the record it corrects, else its own id), else its one key
        field."""
        if self.natural_key:
            return self.natural_key
        if len(self.key) != 1:
            raise SourcesError(
                f"source {self.name!r}: field 'natural_key': required with a key of "
                f"{len(self.key)} fields ({', '.join(self.key)})"
            )
        return self.key[0]

    @property
    def index(self) -> KeyIndex | None:
        """Its bronze table's key index (``tardy.key_index``), None without one."""
        return None if self.key_index is None else KeyIndex(self.key_index, self.natural_key_sql)

    @property
    def fields(self) -> tuple[str, ...]:
        return tuple(self.record)


@dataclass(frozen=True)
class Sources:
    path: Path
    sources: dict[str, Source]

    def get(self, name: str) -> Source | None:
        return self.sources.get(name)

    def tiers(self) -> dict[str, str]:
        """Each source's lateness tier."""
        return {s.name: s.lateness for s in self.sources.values()}

    def owners(self) -> dict[str, str | None]:
        """Each source's owner (None: not declared)."""
        return {s.name: s.owner for s in self.sources.values()}

    def cadences(self) -> dict[str, float]:
        """The declared arrival cadences (``cadence_hours``), by source."""
        return {s.name: s.cadence_hours for s in self.sources.values() if s.cadence_hours}

    def by_bronze(self) -> dict[str, list[Source]]:
        """The sources of each bronze table, in declaration order."""
        out: dict[str, list[Source]] = {}
        for source in self.sources.values():
            out.setdefault(source.bronze, []).append(source)
        return out


def path() -> Path:
    raw = os.environ.get(FILE_VARIABLE)
    return Path(raw).resolve() if raw else project_root() / FILE_NAME


_cache: dict[tuple[Path, int], Sources] = {}


def declared() -> Sources:
    """The project's declarations (or ``$TARDY_SOURCES``'), loaded once per file version."""
    file = path()
    try:
        stamp = file.stat().st_mtime_ns
    except OSError:
        stamp = -1  # load() says why it cannot be read
    key = (file, stamp)
    if key not in _cache:
        _cache.clear()
        _cache[key] = load(file)
    return _cache[key]


def load(file: Path | None = None, tiers: t.Iterable[str] | None = None) -> Sources:
    """The declarations of ``file`` (default: ``$TARDY_SOURCES``, else the project's), each
    checked; ``tiers``: the lateness tiers a source may name (None: not checked)."""
    from ruamel.yaml import YAML
    from ruamel.yaml.error import YAMLError

    file = file or path()
    try:
        raw = YAML(typ="safe").load(file.read_text())
    except OSError as exc:
        raise SourcesError(f"{file}: cannot read the source declarations ({exc})") from exc
    except YAMLError as exc:
        raise SourcesError(f"{file}: not YAML ({exc})") from exc
    if not isinstance(raw, dict) or raw.get("version") != 1:
        raise SourcesError(f"{file}: expected a mapping with `version: 1` and `sources:`")
    entries = raw.get("sources")
    if not isinstance(entries, dict) or not entries:
        raise SourcesError(f"{file}: `sources:` must map each landing folder to its source")
    known_tiers = None if tiers is None else set(tiers)
    sources = {
        str(name): _source(file, str(name), body, known_tiers) for name, body in entries.items()
    }
    found = Sources(file, sources)
    for table, sharing in found.by_bronze().items():
        first = sharing[0]
        for other in sharing[1:]:
            for part in ("record", "event_time", "key", "natural_key", "key_index"):
                if getattr(other, part) != getattr(first, part):
                    raise SourcesError(
                        f"{file}: source {other.name!r}: field {part!r} differs from that of "
                        f"source {first.name!r}, which lands in the same bronze table {table}"
                    )
    return found


def _source(file: Path, name: str, body: t.Any, tiers: set[str] | None) -> Source:
    def fail(field: str, problem: str) -> SourcesError:
        return SourcesError(f"{file}: source {name!r}: field {field!r}: {problem}")

    if not _NAME.match(name):
        raise SourcesError(
            f"{file}: source {name!r}: a folder name of lower-case letters, digits and _"
        )
    if not isinstance(body, dict):
        raise SourcesError(f"{file}: source {name!r}: expected a mapping of its fields")
    for field in sorted(set(body) - _KEYS):
        raise fail(field, f"unknown (expected one of {', '.join(sorted(_KEYS))})")
    for field in ("bronze", "record", "event_time", "key", "rules", "lateness"):
        if body.get(field) in (None, "", [], {}):
            raise fail(field, "missing")
    bronze = body["bronze"]
    if not isinstance(bronze, str) or not _TABLE.match(bronze):
        raise fail("bronze", f"expected <schema>.<table>, got {bronze!r}")
    record = body["record"]
    if not isinstance(record, dict):
        raise fail("record", "expected a mapping of JSON field -> JSON type")
    for field, kind in record.items():
        if not isinstance(field, str) or not _NAME.match(field):
            raise fail(f"record.{field}", "a field name of lower-case letters, digits and _")
        if kind not in JSON_TYPES:
            raise fail(f"record.{field}", f"type {kind!r} is not one of {', '.join(JSON_TYPES)}")
    event_time = body["event_time"]
    if record.get(event_time) != "timestamp":
        raise fail("event_time", f"{event_time!r} must be a record field of type timestamp")
    key = body["key"]
    key = [key] if isinstance(key, str) else key
    if not isinstance(key, list) or not all(isinstance(k, str) and k in record for k in key):
        raise fail("key", f"{key!r}: expected record fields (a name or a list of names)")
    key_index = body.get("key_index", False)
    if key_index is True:
        key_index = f"{bronze}{DEFAULT_SUFFIX}"
    elif key_index is False:
        key_index = None
    elif not isinstance(key_index, str) or not _TABLE.match(key_index) or key_index == bronze:
        raise fail(
            "key_index", f"expected true, false or the index's <schema>.<table>, got {key_index!r}"
        )
    natural_key = body.get("natural_key")
    if natural_key is not None and (not isinstance(natural_key, str) or not natural_key.strip()):
        raise fail("natural_key", f"expected a SQL expression or macro call, got {natural_key!r}")
    if key_index and natural_key and "@" in natural_key:
        raise fail(
            "natural_key",
            f"{natural_key!r}: a key-indexed source's natural key is computed by `tardy "
            "ingest`, which expands no macro: write it in Spark SQL over the bronze columns",
        )
    if not isinstance(body["rules"], str):
        raise fail("rules", "expected the name of a silver macro")
    owner = body.get("owner")
    if owner is not None and (not isinstance(owner, str) or not owner.strip()):
        raise fail(
            "owner", f"expected who answers for the source (a team, an address), got {owner!r}"
        )
    cadence = body.get("cadence_hours")
    if cadence is not None and (
        isinstance(cadence, bool) or not isinstance(cadence, int | float) or cadence <= 0
    ):
        raise fail(
            "cadence_hours", f"expected the hours between its arrivals (above 0), got {cadence!r}"
        )
    lateness = body["lateness"]
    if not isinstance(lateness, str) or (tiers is not None and lateness not in tiers):
        allowed = ", ".join(sorted(tiers)) if tiers is not None else "a tier name"
        raise fail("lateness", f"{lateness!r} is not a tier ({allowed})")
    return Source(
        name=name,
        bronze=bronze,
        record={str(k): str(v) for k, v in record.items()},
        event_time=event_time,
        key=tuple(key),
        key_index=key_index,
        rules=body["rules"],
        lateness=lateness,
        description=str(body.get("description") or ""),
        natural_key=natural_key,
        owner=owner,
        cadence_hours=None if cadence is None else float(cadence),
    )
