"""Late dimension changes: the days whose as-of join a change of a slowly changing dimension
alters.

A *dimension* is a model that declares the columns bounding a version's validity with the
tag ``validity=<valid_from>,<valid_to>`` in its MODEL block; its key is its grain
without ``valid_from``; it reads bronze tables only (its parents outside the project). Its
children join it as of their event time, and the attributes that matter are the columns the
children read from it (SQLMesh's rendered queries; a manager-only change does not alter a
revenue-by-region join).

Detection runs the dimension's own query (its rules live once, in the model) at two versions
of each bronze table it reads: the version prod reflects (the arrival watermark's
``source_versions``) and the current one. Per key, the validity timelines are compared
segment by segment; where the attributes differ (a version added, removed, moved, or its
attributes changed), the instants ``[from, to)`` are an *altered window*. The altered days are
the calendar days those windows touch, mapped to each child (clipped to the child's computed
range, like any closure). A duplicate or a change that alters nothing the children read
alters no window.

Bootstrap: a bronze table the watermark has never recorded is compared from its version as
of the creation of the children's prod tables (``bootstrap_version``): every interval a child
has computed read the dimension at that version or later, so a change committed since then is
found; one committed before is reflected everywhere already.
"""

from __future__ import annotations

import typing as t
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import date, datetime, timedelta

from sqlglot import exp

from tardy.engine import delta, sqlmesh_api

if t.TYPE_CHECKING:
    from pyspark.sql import SparkSession
    from sqlmesh import Context
    from sqlmesh.core.snapshot import Snapshot

VALIDITY_TAG = "validity"
_OPEN = datetime.max  # an open valid_to


@dataclass(frozen=True)
class Dimension:
    """A slowly changing dimension model and what detection needs of it."""

    snapshot: Snapshot
    key: tuple[str, ...]
    valid_from: str
    valid_to: str
    sources: tuple[str, ...]  # bronze tables it reads (Spark names)
    children: tuple[Snapshot, ...]

    @property
    def name(self) -> str:
        return self.snapshot.model.name


@dataclass
class Window:
    """Instants ``[start, end)`` of one key where the as-of attributes differ."""

    key: tuple[t.Any, ...]
    start: datetime
    end: datetime | None  # None: still open

    def as_dict(self) -> dict[str, str | None]:
        return {
            "key": ", ".join(str(part) for part in self.key),
            "from": self.start.isoformat(),
            "to": None if self.end is None else self.end.isoformat(),
        }

    def days(self, last: date) -> set[date]:
        """The calendar days the window touches, up to ``last`` for an open one."""
        first = self.start.date()
        final = last if self.end is None else (self.end - timedelta(microseconds=1)).date()
        return {first + timedelta(days=i) for i in range((final - first).days + 1)}


@dataclass
class Altered:
    """What detection found for one dimension."""

    dimension: str
    versions: dict[str, int]  # bronze table -> version read now
    since: dict[str, int | None]  # bronze table -> version prod reflects (None: empty)
    windows: list[Window] = field(default_factory=list)
    days: dict[str, set[date]] = field(default_factory=dict)  # child -> days

    @property
    def keys(self) -> set[tuple[t.Any, ...]]:
        return {w.key for w in self.windows}


def dimensions(context: Context, snapshots: list[Snapshot]) -> list[Dimension]:
    """The project's dimensions (models tagged ``validity=...``), upstream first."""
    out = []
    by_fqn = {s.name: s for s in snapshots}
    for snapshot in snapshots:
        tag = sqlmesh_api.tag_value(snapshot, VALIDITY_TAG)
        if not tag:
            continue
        valid_from, _, valid_to = (part.strip() for part in tag.partition(","))
        key = tuple(c for c in sqlmesh_api.grain(snapshot) if c != valid_from)
        sources = tuple(
            plain_name(parent.name) for parent in snapshot.parents if parent.name not in by_fqn
        )
        children = tuple(
            other for other in snapshots if snapshot.name in {p.name for p in other.parents}
        )
        out.append(Dimension(snapshot, key, valid_from, valid_to, sources, children))
    return out


def plain_name(table: str | exp.Table) -> str:
    """``schema.table``, the way the watermark records a bronze table."""
    table = exp.to_table(table) if isinstance(table, str) else table
    return f"{table.db}.{table.name}"


def columns_read(child: Snapshot, parent: Snapshot) -> set[str]:
    """The columns of ``parent`` that ``child``'s query reads (every column of it when the
    query cannot be read: a Python model)."""
    model = child.model
    if not hasattr(model, "render_query"):
        return set(parent.model.columns_to_types or {})
    query = model.render_query()
    if query is None:
        return set(parent.model.columns_to_types or {})
    target = exp.to_table(parent.name)
    aliases = {
        table.alias_or_name
        for table in query.find_all(exp.Table)
        if table.name == target.name and table.db == target.db
    }
    # SQLMesh qualifies every column of a rendered query with its table's alias.
    return {column.name for column in query.find_all(exp.Column) if column.table in aliases}


def bootstrap_version(spark: SparkSession, source: str, children: t.Iterable[str]) -> int | None:
    """The source's version as of the earliest creation of the children's prod tables (None:
    the source did not exist then: compare from empty)."""
    created = [
        delta.single_row(spark.sql(f"DESCRIBE HISTORY {child}").agg({"timestamp": "min"}))[0]
        for child in children
    ]
    history = spark.sql(f"DESCRIBE HISTORY {source}")  # a command: filtered as a DataFrame
    row = history.where(history.timestamp <= min(created)).agg({"version": "max"}).first()
    return None if row is None or row[0] is None else int(row[0])


def _at_versions(query: exp.Query, versions: Mapping[str, int | None]) -> exp.Query | None:
    """The dimension's query reading each bronze table at ``versions`` (None: the table as
    empty: the query returns nothing)."""
    if any(v is None for v in versions.values()):
        return None
    query = query.copy()
    for table in query.find_all(exp.Table):
        name = plain_name(table)
        if name in versions:
            table.set(
                "version",
                exp.Version(
                    this="VERSION", kind="AS OF", expression=exp.Literal.number(versions[name])
                ),
            )
    return query


def _timelines(
    spark: SparkSession, dimension: Dimension, query: exp.Query | None, attributes: list[str]
) -> dict[tuple[t.Any, ...], list[tuple[datetime, datetime, tuple[t.Any, ...]]]]:
    """Per key, its versions as (from, to, attributes), ordered by from."""
    if query is None:
        return {}
    columns = [*dimension.key, dimension.valid_from, dimension.valid_to, *attributes]
    listed = ", ".join(f"`{c}`" for c in columns)
    rows = delta.query(spark, f"SELECT {listed} FROM ({query.sql('spark')}) AS _d").collect()
    out: dict[tuple[t.Any, ...], list[tuple[datetime, datetime, tuple[t.Any, ...]]]] = {}
    n = len(dimension.key)
    for row in rows:
        values = tuple(row)
        key, start, end, attrs = values[:n], values[n], values[n + 1], values[n + 2 :]
        out.setdefault(key, []).append((start, end or _OPEN, attrs))
    for versions in out.values():
        versions.sort(key=lambda v: v[0])
    return out


def _value_at(
    versions: list[tuple[datetime, datetime, tuple[t.Any, ...]]], instant: datetime
) -> tuple[t.Any, ...] | None:
    for start, end, attrs in versions:
        if start <= instant < end:
            return attrs
    return None


def altered_windows(
    old: dict[tuple[t.Any, ...], list[tuple[datetime, datetime, tuple[t.Any, ...]]]],
    new: dict[tuple[t.Any, ...], list[tuple[datetime, datetime, tuple[t.Any, ...]]]],
) -> list[Window]:
    """Per key, the maximal ``[start, end)`` where the attributes valid at an instant differ
    between the two timelines (no version counts as a value of its own)."""
    windows = []
    for key in sorted(set(old) | set(new), key=repr):
        before, after = old.get(key, []), new.get(key, [])
        points = sorted({p for v in before + after for p in (v[0], v[1]) if p != _OPEN})
        current: Window | None = None
        for i, point in enumerate(points):
            end = points[i + 1] if i + 1 < len(points) else None
            differs = _value_at(before, point) != _value_at(after, point)
            if differs and current is None:
                current = Window(key, point, end)
            elif differs and current is not None:
                current.end = end
            elif current is not None:
                windows.append(current)
                current = None
        if current is not None:
            windows.append(current)
    return windows


def detect(
    context: Context,
    spark: SparkSession,
    history: delta.History,
    dimension: Dimension,
    since: dict[str, int],
) -> Altered:
    """The windows and child days the dimension's bronze changes since ``since`` alter
    (``history``: where its bronze tables' versions are read)."""
    versions = {source: history.version(source) for source in dimension.sources}
    before: dict[str, int | None] = {}
    for source in dimension.sources:
        if source in since:
            before[source] = since[source]
        else:
            before[source] = bootstrap_version(
                spark,
                source,
                [
                    sqlmesh_api.spark_name(child.table_name(is_deployable=True))
                    for child in dimension.children
                ],
            )
    altered = Altered(dimension.name, versions, before)
    if before == versions:
        return altered
    attributes = sorted(
        set().union(*(columns_read(child, dimension.snapshot) for child in dimension.children))
        - {*dimension.key, dimension.valid_from, dimension.valid_to}
    )
    query = dimension.snapshot.model.render_query_or_raise()
    old = _timelines(spark, dimension, _at_versions(query, before), attributes)
    new = _timelines(spark, dimension, _at_versions(query, versions), attributes)
    altered.windows = altered_windows(old, new)
    for child in dimension.children:
        last = sqlmesh_api.last_computed_day(child)
        if last is None:
            continue
        first = sqlmesh_api.first_computed_day(child)
        days = {d for w in altered.windows for d in w.days(last)}
        altered.days[child.model.name] = {
            d for d in days if (first is None or d >= first) and d <= last
        }
    return altered
