"""The quarantined records of every declared source, with their review.

The quarantine is what the project's models tagged ``quarantine`` hold (one per source's
bronze table: each keeps the invalid records of its table with the first rule they fail), so
a new source's quarantine is listed by declaring its model, with no Python. A record's
source is the first folder of its landing file; its day is its model's time column, when the
model has one (a store change has none); its age is measured on the feed's own clock, the
latest arrival in bronze, as every lateness figure of tardy is, so a replayed or simulated
feed ages the same way and a feed that stopped does not age its records.

One statement reads every quarantine model and the clock; the reviews are one more read.
"""

from __future__ import annotations

import typing as t
from collections import Counter
from dataclasses import dataclass
from datetime import datetime

from tardy.errors import InputError
from tardy.quarantine.reviews import Decision, Review, latest
from tardy.sql import literal

if t.TYPE_CHECKING:
    from pyspark.sql import SparkSession
    from sqlmesh import Context

TAG = "quarantine"
SHORT_HEX = 6  # the shortest file-hash prefix of a short id


@dataclass(frozen=True)
class Quarantined:
    record_id: str  # <landing file sha256>:<line>
    source: str
    model: str
    reason: str
    day: str | None  # the day it would belong to (its model's time column), if any
    arrival_ts: str
    age_hours: float | None  # on the feed's clock
    raw_record: str
    source_file: str
    decision: Decision | None = None

    @property
    def review(self) -> Review:
        return self.decision.decision if self.decision else Review.OPEN

    @property
    def line(self) -> int:
        return int(self.record_id.rsplit(":", 1)[1])

    def as_dict(self, short_id: str | None = None) -> dict[str, object]:
        return {
            "id": short_id or self.record_id,
            "record_id": self.record_id,
            "source": self.source,
            "model": self.model,
            "reason": self.reason,
            "day": self.day,
            "arrival_ts": self.arrival_ts,
            "age_hours": self.age_hours,
            "review": str(self.review),
            "decision": self.decision.as_dict() if self.decision else None,
            "source_file": self.source_file,
            "raw_record": self.raw_record,
        }


@dataclass(frozen=True)
class Count:
    """One source's quarantined records for one reason: open and reviewed."""

    source: str
    reason: str
    open: int
    reviewed: int
    oldest_open_hours: float | None  # on the feed's clock; None: nothing open


# What tardy reads of a quarantine model; ``arrival_ts``, when the model lacks it (a model
# written before quarantine review), is its record's arrival in bronze (by ``record_id``).
REQUIRED_COLUMNS = ("record_id", "source_file", "reason", "raw_record")
ARRIVAL_COLUMN = "arrival_ts"


def quarantine_models(context: Context) -> dict[str, str | None]:
    """Prod's models tagged ``quarantine``: name -> time column (None: it has none)."""
    return {name: column for name, (column, _) in _tagged(context).items()}


def _tagged(context: Context) -> dict[str, tuple[str | None, set[str]]]:
    """Prod's models tagged ``quarantine``: name -> (time column, its columns)."""
    from tardy.engine.sqlmesh_api import prod_snapshots

    out: dict[str, tuple[str | None, set[str]]] = {}
    for snapshot in prod_snapshots(context).values():
        model = snapshot.model if snapshot.is_model else None
        if model is not None and TAG in model.tags:
            column = model.time_column.column.name if model.time_column else None
            out[model.name] = (column, set(model.columns_to_types or {}))
    return dict(sorted(out.items()))


def checked(context: Context) -> dict[str, tuple[str | None, bool]]:
    """The quarantine models: name -> (time column, whether it has ``arrival_ts``); an
    ``InputError`` names a model that lacks a column tardy reads, and the column."""
    out = {}
    for name, (column, columns) in _tagged(context).items():
        if not columns:  # SQLMesh could not tell its columns: read it as it is
            out[name] = (column, True)
            continue
        for needed in REQUIRED_COLUMNS:
            if needed not in columns:
                raise InputError(
                    f"{name}: a model tagged {TAG} needs the column {needed} (tardy reads "
                    f"{', '.join(REQUIRED_COLUMNS)} and {ARRIVAL_COLUMN}: "
                    "docs/adding-a-source.md)"
                )
        out[name] = (column, ARRIVAL_COLUMN in columns)
    return out


def _records_sql(
    spark: SparkSession, models: dict[str, tuple[str | None, bool]], clock_sql: str
) -> str:
    from tardy.ingest.tables import bronze_tables

    arrived = (
        " UNION ALL ".join(
            f"SELECT record_id, arrival_ts FROM {table.name}"
            for table in bronze_tables()
            if spark.catalog.tableExists(table.name)
        )
        or "SELECT CAST(NULL AS STRING) AS record_id, CAST(NULL AS TIMESTAMP) AS arrival_ts"
    )
    parts = [
        f"SELECT {literal(model)} AS model, q.record_id, q.source_file, q.reason, "
        f"q.raw_record, {'q.arrival_ts' if has_arrival else 'b.arrival_ts'}, "
        f"CAST({f'q.`{column}`' if column else 'NULL'} AS STRING) AS day "
        f"FROM {model} AS q"
        + ("" if has_arrival else f" LEFT JOIN ({arrived}) AS b ON b.record_id = q.record_id")
        for model, (column, has_arrival) in models.items()
    ]
    return (
        f"WITH clock AS ({clock_sql}) SELECT q.*, clock.now FROM ("
        + " UNION ALL ".join(parts)
        + ") AS q CROSS JOIN clock"
    )


def _clock_sql(spark: SparkSession, clock: datetime | None) -> str:
    from tardy.ingest.tables import arrivals

    if clock is not None:
        return f"SELECT TIMESTAMP {literal(clock.strftime('%Y-%m-%d %H:%M:%S'))} AS now"
    return f"SELECT MAX(arrival_ts) AS now FROM ({arrivals(spark)})"


@dataclass(frozen=True)
class Listing:
    records: list[Quarantined]  # by source, day and record
    clock: datetime | None  # the feed's clock (naive UTC); None: nothing quarantined

    def select(
        self, source: str | None = None, reason: str | None = None, open_only: bool = False
    ) -> list[Quarantined]:
        """The records of ``source``, for ``reason``, only the open ones."""
        return [
            r
            for r in self.records
            if (source is None or r.source == source)
            and (reason is None or r.reason == reason)
            and not (open_only and r.review != Review.OPEN)
        ]


def read(context: Context, spark: SparkSession, clock: datetime | None = None) -> Listing:
    """Every quarantined record with its review; ``clock``: the feed's clock when the
    caller read it already (``tardy status``)."""
    models = checked(context)
    if not models:
        return Listing([], clock)
    decisions = latest(spark)
    found, now = [], clock
    for row in spark.sql(_records_sql(spark, models, _clock_sql(spark, clock))).collect():
        now = row.now
        age = (now - row.arrival_ts).total_seconds() / 3600 if now and row.arrival_ts else None
        found.append(
            Quarantined(
                record_id=row.record_id,
                source=row.source_file.split("/", 1)[0],
                model=row.model,
                reason=row.reason,
                day=row.day,
                arrival_ts=row.arrival_ts.isoformat() if row.arrival_ts else "",
                age_hours=None if age is None else round(age, 1),
                raw_record=row.raw_record,
                source_file=row.source_file,
                decision=decisions.get(row.record_id),
            )
        )
    return Listing(sorted(found, key=lambda r: (r.source, r.day or "", r.record_id)), now)


def counts(found: t.Iterable[Quarantined]) -> list[Count]:
    """Open and reviewed records per source and reason, with the oldest open one's age."""
    opened: Counter[tuple[str, str]] = Counter()
    reviewed: Counter[tuple[str, str]] = Counter()
    oldest: dict[tuple[str, str], float] = {}
    for record in found:
        key = (record.source, record.reason)
        if record.review == Review.OPEN:
            opened[key] += 1
            if record.age_hours is not None:
                oldest[key] = max(oldest.get(key, 0.0), record.age_hours)
        else:
            reviewed[key] += 1
    return [
        Count(
            source,
            reason,
            opened[(source, reason)],
            reviewed[(source, reason)],
            oldest.get((source, reason)),
        )
        for source, reason in sorted({*opened, *reviewed})
    ]


def short_ids(found: t.Sequence[Quarantined]) -> dict[str, str]:
    """record id -> its short id, ``<hash prefix>:<line>``: the shortest prefix of at least
    ``SHORT_HEX`` characters that names one record among ``found``."""
    out = {}
    for record in found:
        sha, line = record.record_id.rsplit(":", 1)
        size = SHORT_HEX
        while size < len(sha) and any(
            other.record_id != record.record_id
            and other.record_id.startswith(sha[:size])
            and other.record_id.endswith(f":{line}")
            for other in found
        ):
            size += 1
        out[record.record_id] = f"{sha[:size]}:{line}"
    return out


def resolve(found: t.Sequence[Quarantined], given: str) -> Quarantined:
    """The quarantined record ``given`` names: its record id or a short id (a prefix of its
    file's hash, ``:`` and its line). A clear error when none or several match."""
    prefix, sep, line = given.strip().rpartition(":")
    if not sep or not prefix or not line.isdigit() or len(prefix) < SHORT_HEX:
        raise InputError(
            f"{given!r} is not a record id: <file sha256 or its first {SHORT_HEX}+ "
            "characters>:<line>, as `tardy quarantine` lists it"
        )
    matches = [
        r for r in found if r.record_id.startswith(prefix) and r.record_id.endswith(f":{line}")
    ]
    if not matches:
        raise InputError(f"{given}: no quarantined record has this id (`tardy quarantine --all`)")
    if len(matches) > 1:
        names = ", ".join(m.record_id for m in matches)
        raise InputError(f"{given}: names {len(matches)} records ({names}): give more of it")
    return matches[0]
