"""What the engine's steps return, for the layers above to read and render: the change
manifest (``detect``), the staged-against-prod review (``diff``) and the day spans both are
written in (``[[first, last], ...]``). Plain data and pure functions of it: no Spark, no
SQLMesh, so rendering reads a result without importing the engine's internals
(``docs/architecture.md``, "Layers")."""

from __future__ import annotations

import typing as t
from collections.abc import Iterable
from dataclasses import asdict, dataclass, field
from datetime import date, timedelta
from decimal import Decimal

from tardy.key_index import KeySet


def ranges(days: Iterable[date]) -> list[list[str]]:
    """The smallest set of closed [first, last] day ranges covering ``days``."""
    out: list[list[date]] = []
    for day in sorted(set(days)):
        if out and day == out[-1][1] + timedelta(days=1):
            out[-1][1] = day
        else:
            out.append([day, day])
    return [[first.isoformat(), last.isoformat()] for first, last in out]


def days_of(spans: Iterable[list[str]]) -> set[date]:
    """Every day of the ranges ``[[first, last], ...]``."""
    out = set()
    for first, last in spans:
        day, end = date.fromisoformat(first), date.fromisoformat(last)
        while day <= end:
            out.add(day)
            day += timedelta(days=1)
    return out


class Totals(t.TypedDict):
    """A model's rows and sums (decimal text, by column) before and after, over all its
    restated intervals."""

    rows_before: int
    rows_after: int
    sums_before: dict[str, str]
    sums_after: dict[str, str]


@dataclass
class IntervalDiff:
    model: str
    interval: list[str]
    rows_before: int
    rows_after: int
    sums_before: dict[str, str]
    sums_after: dict[str, str]
    keys_added: int
    keys_removed: int
    keys_changed: int
    examples: dict[str, list[str]] = field(default_factory=dict)

    @property
    def unchanged(self) -> bool:
        return not (self.keys_added or self.keys_removed or self.keys_changed)


@dataclass
class BreakerTrip:
    day: str
    measure: str
    before: str
    after: str
    change: float | None  # relative change; None when before is 0 and after is not


@dataclass(frozen=True)
class Breaker:
    """What the circuit breaker watches: one model's rows and one measure, per day."""

    model: str | None
    measure: str | None  # None: the model's row count only
    threshold: float


@dataclass
class DayChange:
    """One day of a model, before and after (``diff_table``): its rows, the sums (decimal
    text) of its DECIMAL columns and of the measures a release note shows, and the keys
    added, removed and changed. A release note of the version a promotion commits reads
    these (``tardy.consumers.notes``): the diff compared the same rows."""

    day: date
    rows_before: int
    rows_after: int
    sums_before: dict[str, str]
    sums_after: dict[str, str]
    added: int = 0
    removed: int = 0
    changed: int = 0
    # A changed day of a published model: its rows after, each value as the deterministic
    # export's text (``tardy.engine.diff.after_text``), unsorted; None when not read.
    after: list[tuple[str, ...]] | None = field(default=None, repr=False)

    @property
    def changed_keys(self) -> int:
        return self.added + self.removed + self.changed


class Change(t.TypedDict):
    """One changed key as the change trail records it (``trail.record_promotion``): the
    grain's key, its day, ``added`` / ``removed`` / ``changed``, both rows as JSON."""

    row_key: str
    event_date: date
    change: str
    before: str | None
    after: str | None


@dataclass
class TableDiff:
    intervals: list[IntervalDiff]
    days: list[DayChange]
    # Every changed key's rows, for the change trail; None when there were more than the
    # diff keeps (``CHANGES_PER_DAY``, ``CHANGES_KEPT``).
    changes: list[Change] | None = None

    @property
    def changed_days(self) -> set[date]:
        return {d.day for d in self.days if d.changed_keys}

    def changed(self) -> list[DayChange]:
        """The days with an added, removed or changed key, in day order."""
        return sorted((d for d in self.days if d.changed_keys), key=lambda d: d.day)


@dataclass
class Diff:
    restatement_id: str
    intervals: list[IntervalDiff]
    threshold: float
    breaker: list[BreakerTrip]
    breaker_model: str | None = None

    def as_dict(self) -> dict[str, object]:
        return asdict(self)

    def totals(self) -> dict[str, Totals]:
        """Per model: rows and sums before/after over all its restated intervals."""
        out: dict[str, Totals] = {}
        for item in self.intervals:
            total = out.setdefault(
                item.model,
                Totals(rows_before=0, rows_after=0, sums_before={}, sums_after={}),
            )
            total["rows_before"] += item.rows_before
            total["rows_after"] += item.rows_after
            for sums, values in (
                (total["sums_before"], item.sums_before),
                (total["sums_after"], item.sums_after),
            ):
                for column, value in values.items():
                    sums[column] = str(Decimal(sums.get(column, "0")) + Decimal(value))
        return out

    def markdown(self) -> str:
        lines = [
            f"### tardy restatement `{self.restatement_id}`",
            "",
            "| model | interval | rows before | rows after | sum before | sum after "
            "| keys added | keys removed | keys changed |",
            "|---|---|--:|--:|--:|--:|--:|--:|--:|",
        ]
        for item in self.intervals:
            measure = measure_of(item.sums_before)
            before = f"{measure} {item.sums_before[measure]}" if measure else ""
            after = f"{measure} {item.sums_after.get(measure, '')}" if measure else ""
            lines.append(
                f"| `{item.model}` | {item.interval[0]}..{item.interval[1]} "
                f"| {item.rows_before:,} | {item.rows_after:,} | {before} | {after} "
                f"| {item.keys_added:,} | {item.keys_removed:,} | {item.keys_changed:,} |"
            )
        examples = [
            f"- `{item.model}` {item.interval[0]}..{item.interval[1]} {kind}: "
            + ", ".join(f"`{key}`" for key in keys)
            for item in self.intervals
            for kind, keys in item.examples.items()
            if keys
        ]
        if examples:
            lines += ["", "<details><summary>Example keys</summary>", "", *examples, "</details>"]
        lines.append("")
        if self.breaker:
            lines.append(
                f"**Circuit breaker**: {len(self.breaker)} closed day(s) of `{self.breaker_model}` "
                f"change by more than {self.threshold:.0%}:"
            )
            lines += [
                f"- {trip.day} {trip.measure}: {trip.before} → {trip.after}"
                f" ({'new' if trip.change is None else f'{trip.change:+.1%}'})"
                for trip in self.breaker
            ]
        else:
            lines.append(
                f"Circuit breaker: no closed day of `{self.breaker_model}` changes by more than "
                f"{self.threshold:.0%}."
            )
        return "\n".join(lines) + "\n"


def measure_of(sums: dict[str, str]) -> str | None:
    """The measure a model's sums show: the first (the diff puts the model's own first:
    ``tardy.project.headline``)."""
    return next(iter(sums), None)


@dataclass
class Manifest:
    arrival_watermark: str | None
    previous_watermark: str | None
    bronze_version: int
    since_bronze_version: int | None
    late_rows: int
    impacted: dict[str, list[list[str]]]
    absorbed_by_next_run: dict[str, list[list[str]]]
    reasons: dict[str, str]
    # The days detection found per model reading bronze; ``impacted`` is their closure over
    # the DAG if every reached day changed (staging cascades only the days that do).
    roots: dict[str, list[list[str]]] = field(default_factory=dict)
    stock_commands: list[str] = field(default_factory=list)
    # Per model reading bronze by natural key: the keys whose rows changed, when detection
    # knew them as literals (``facts.MAX_INLINED_ROWS``). Not part of the report (it
    # can hold thousands of keys): only staging reads it, in the same process.
    keys: dict[str, KeySet] = field(default_factory=dict, repr=False)
    # A named restatement's selection (``tardy.engine.named``): models, start, end; None for
    # a detected one. Not a log column (the log's manifest is schema 2): the named models'
    # ``reasons`` say it there.
    named: dict[str, object] | None = None
    # The dimensions' bronze tables (``tardy.engine.dimension``): the versions read now, and
    # those prod reflected (the watermark's ``source_versions``).
    source_versions: dict[str, int] = field(default_factory=dict)
    since_source_versions: dict[str, int] = field(default_factory=dict)
    # Per dimension: the validity windows late changes alter, ``{"key", "from", "to"}`` (ISO
    # instants, ``to`` None while open). Not a log column: the children's ``reasons`` count
    # them there.
    altered: dict[str, list[dict[str, str | None]]] = field(default_factory=dict)

    def as_dict(self) -> dict[str, object]:
        out = asdict(self)
        del out["keys"]
        return out

    @classmethod
    def from_dict(cls, raw: dict[str, t.Any]) -> Manifest:
        """The inverse of ``as_dict``, without the keys (a recorded manifest:
        ``tardy.cli.recorded``)."""
        return cls(**raw)

    @property
    def is_empty(self) -> bool:
        return not any(self.impacted.values())
