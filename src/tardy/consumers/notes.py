"""Release notes: what each published version changed, for the people who read the numbers.

Every publication (``tardy.consumers.publish.publish``) writes
``$TARDY_HOME/releases/<table>/v<N>.json`` and ``v<N>.md``: the version and the one it
supersedes, who produced it (a restatement with its reason and actor, a rollback, or a run),
each changed day with its revision, the rows added, removed and changed there (by the model's
grain, as the restatement's diff counts them: ``tardy.engine.diff.compare_sql``) and each
measure's total before and after, per day and over the changed days; whether the change is
*material*; and until when the superseded version stays readable.

The measures are the model's numeric columns outside its grain and time column (its
metadata, never a list in Python). A change is material when, on some changed day, the row
count or the total of a measure ``release_notes.material_measures`` names (every measure of
a model that has none of them) moves by at least ``release_notes.material_change`` of its
value before (``project.yaml``; a day that appears or disappears always is).

Cost: none for a version a promotion committed right on the one it supersedes, in the
process that staged it: the restatement's diff compared the same rows by the same rule, and
its days (``engine.results.DayChange``) are the note's. Otherwise one statement for all the
versions one publication call made (each compared with the version it supersedes over its
changed days only, by time travel), and one log read per restatement that produced them. A
note is a pure function of the two versions: one a killed process never wrote is composed
again when asked for (``note_of``), equal.
"""

from __future__ import annotations

import json
import os
import typing as t
from dataclasses import asdict, dataclass, field
from datetime import date, datetime, timedelta
from decimal import Decimal
from pathlib import Path

from tardy.engine import delta, sqlmesh_api
from tardy.engine.diff import compare_sql, sums_map
from tardy.engine.results import DayChange, measure_of
from tardy.engine.stage import StagedTable
from tardy.project import headline

if t.TYPE_CHECKING:
    from pyspark.sql import SparkSession
    from sqlmesh import Context
    from sqlmesh.core.snapshot import Snapshot

    from tardy.consumers.versions import Publication

RELEASES = "releases"
DEFAULT_MATERIAL_CHANGE = 0.01
# Delta's defaults (the project sets neither table property): a VACUUM removes the files a
# commit replaced once they are older than the first; log cleanup drops commits older than
# the second (docs/versioned-truth.md).
DELETED_FILE_RETENTION = timedelta(days=7)
LOG_RETENTION = timedelta(days=30)

NOTE_SQL = """
SELECT {table} AS _table, CAST(_time AS STRING) AS day, COUNT(_in_before) AS rows_before,
       COUNT(_in_after) AS rows_after, COUNT(CASE WHEN _kind = 'added' THEN 1 END) AS added,
       COUNT(CASE WHEN _kind = 'removed' THEN 1 END) AS removed,
       COUNT(CASE WHEN _kind = 'changed' THEN 1 END) AS changed,
       {sums_before} AS _sums_before, {sums_after} AS _sums_after
FROM ({compare}) AS _compare
GROUP BY _time
"""


@dataclass(frozen=True)
class Materiality:
    """``release_notes.material_change`` of ``project.yaml``: the relative move of a day's
    measure total (or row count) from which a change is material."""

    threshold: float = DEFAULT_MATERIAL_CHANGE
    measures: tuple[str, ...] = ()  # the ones judged; none named: every measure

    @classmethod
    def of(cls, variables: t.Mapping[str, t.Any]) -> Materiality:
        settings = variables.get("release_notes") or {}
        return cls(
            float(settings.get("material_change", DEFAULT_MATERIAL_CHANGE)),
            tuple(settings.get("material_measures") or ()),
        )

    def judged(self, measures: list[str]) -> list[str]:
        """Which of a model's measures decide materiality."""
        named = [m for m in measures if m in self.measures]
        return named or measures

    def moved(self, before: str, after: str) -> bool:
        old, new = Decimal(before), Decimal(after)
        if old == 0:
            return new != 0
        return abs(new - old) / abs(old) >= Decimal(str(self.threshold))


@dataclass
class DayNote:
    day: str
    revision: int
    rows_before: int
    rows_after: int
    added: int
    removed: int
    changed: int
    measures: dict[str, list[str]]  # measure -> [before, after] (decimal text)
    material: bool = False


@dataclass
class Note:
    table: str
    version: int
    supersedes: int | None
    published_at: str
    produced_by: str
    restatement_id: str | None
    reason: str | None
    actor: str | None
    days: list[DayNote]
    added: int
    removed: int
    changed: int
    measures: dict[str, list[str]]  # over the changed days: measure -> [before, after]
    material: bool
    material_change: float
    material_measures: list[str]
    superseded_readable_until: str | None  # a date; None: nothing superseded
    superseded_retention: str
    compared: bool  # False: rows only (a first version, or columns that differ)
    files: dict[str, str] = field(default_factory=dict)

    def as_dict(self) -> dict[str, t.Any]:
        return asdict(self)


def measures_of(snapshot: Snapshot) -> list[str]:
    """The model's numeric columns outside its grain and time column, in its column order
    but its own measure first (``tardy.project.headline.measures_of``)."""
    return list(headline.measures_of(snapshot.model))


def folder(home: Path, table_name: str) -> Path:
    return home / RELEASES / table_name


def compose(
    context: Context,
    spark: SparkSession,
    new: list[Publication],
    superseded: dict[str, Publication],
    *,
    compared: t.Mapping[str, list[DayChange]] | None = None,
    producers: t.Mapping[str, tuple[str, str]] | None = None,
) -> list[Note]:
    """The notes of the ``new`` publications, each against the publication it supersedes
    (``superseded``, by table): one statement compares them all, one log read per producer.

    A promotion passes what it already knows: per table whose version it committed right on
    the superseded one, its changed days as the restatement's diff compared them
    (``compared``: the same rows, by the same rule, so no statement of its own), and the
    reason and actor of the restatement that produced them (``producers``, by restatement
    id: no log read)."""
    from tardy.engine.sqlmesh_api import published_snapshots

    snapshots = published_snapshots(context) if new else {}
    materiality = Materiality.of(context.config.variables)
    parts: list[str] = []
    measures: dict[str, list[str]] = {}
    per_day: dict[int, list[dict[str, t.Any]]] = {}
    for index, publication in enumerate(new):
        last = superseded.get(publication.table_name)
        snapshot = snapshots.get(publication.table_name)
        measures[publication.table_name] = mine = measures_of(snapshot) if snapshot else []
        if last is None or not publication.changed_days or snapshot is None:
            continue
        known = _known(publication, (compared or {}).get(publication.table_name), mine)
        if known is not None:
            per_day[index] = known
            continue
        if not _same_columns(spark, last.physical_table, publication.physical_table):
            continue
        parts.append(_comparison(spark, index, publication, last, snapshot, mine))
    if parts:
        for row in delta.query(spark, " UNION ALL ".join(parts)).collect():
            per_day.setdefault(row["_table"], []).append(row.asDict())
    given = dict(producers or {})
    who = {**_producers(spark, [p for p in new if p.restatement_id not in given]), **given}
    notes = []
    for index, publication in enumerate(new):
        restatement_id = publication.restatement_id
        note = _note(
            publication,
            superseded.get(publication.table_name),
            per_day.get(index),
            measures[publication.table_name],
            materiality,
            who.get(restatement_id) if restatement_id else None,
        )
        notes.append(note)
    return notes


def _known(
    publication: Publication, days: list[DayChange] | None, measures: list[str]
) -> list[dict[str, t.Any]] | None:
    """The rows ``NOTE_SQL`` would return for ``publication``, from the diff's days of the
    promotion that committed it (None: not known, or not every day or measure of the note:
    then it compares the two versions itself)."""
    if days is None:
        return None
    rows = {
        day.day.isoformat(): day
        for day in days
        if isinstance(day.day, date) and not isinstance(day.day, datetime)
    }
    if sorted(rows) != sorted(publication.changed_days) or any(
        m not in day.sums_before for day in days for m in measures
    ):
        return None
    return [
        {
            "day": text,
            "rows_before": day.rows_before,
            "rows_after": day.rows_after,
            "added": day.added,
            "removed": day.removed,
            "changed": day.changed,
            "_sums_before": day.sums_before,
            "_sums_after": day.sums_after,
        }
        for text, day in rows.items()
    ]


def _same_columns(spark: SparkSession, old: str, new: str) -> bool:
    """Both physical tables exist with the same columns (an analysis each, no job)."""
    if old == new:
        return True
    try:
        return spark.table(old).schema.fieldNames() == spark.table(new).schema.fieldNames()
    except Exception:  # noqa: BLE001 - a table the janitor dropped: compare rows only
        return False


def _comparison(
    spark: SparkSession,
    index: int,
    publication: Publication,
    last: Publication,
    snapshot: Snapshot,
    measures: list[str],
) -> str:
    """The per-day counts and sums of one version against the one it supersedes, over the
    changed days (``compare_sql``: the diff's rule for added, removed and changed rows)."""
    after = f"{publication.physical_table} VERSION AS OF {int(publication.delta_version)}"
    days = [[day, day] for day in publication.changed_days]
    table = StagedTable(
        model=publication.table_name,
        prod_table=publication.physical_table,
        staged_table=after,
        time_column=publication.time_column,
        version_before=last.delta_version,
        intervals=days,
        snapshot_version="",
    )
    before = f"{last.physical_table} VERSION AS OF {int(last.delta_version)}"
    compare = compare_sql(
        spark, before, after, table, sqlmesh_api.grain(snapshot), measures=measures
    )
    return NOTE_SQL.format(
        table=index,
        sums_before=sums_map("b", measures),
        sums_after=sums_map("a", measures),
        compare=compare,
    )


def _producers(spark: SparkSession, new: list[Publication]) -> dict[str, tuple[str, str]]:
    """Per restatement that produced a version: its reason and actor, from its log (its
    last entry: a rollback's reason is the rollback's)."""
    from tardy.engine import log

    out = {}
    for restatement_id in {p.restatement_id for p in new} - {None}:
        assert restatement_id is not None
        entries = log.entries(spark, restatement_id)
        if entries:
            out[restatement_id] = (entries[-1]["reason"], entries[-1]["actor"])
    return out


def _note(
    publication: Publication,
    last: Publication | None,
    rows: list[dict[str, t.Any]] | None,
    measures: list[str],
    materiality: Materiality,
    producer: tuple[str, str] | None,
) -> Note:
    days = [
        _day(publication, row, measures, materiality) for row in sorted(rows or [], key=_day_of)
    ]
    if rows is None:  # no comparison: the day digests' row counts
        before = (last.day_digests or {}) if last else {}
        after = publication.day_digests or {}
        days = [
            DayNote(
                day=day,
                revision=publication.revisions.get(day, 0),
                rows_before=_rows(before.get(day)),
                rows_after=_rows(after.get(day)),
                added=0,
                removed=0,
                changed=0,
                measures={},
                material=last is not None and _rows(before.get(day)) != _rows(after.get(day)),
            )
            for day in publication.changed_days
        ]
    totals = {
        m: [
            str(sum((Decimal(d.measures[m][0]) for d in days), Decimal(0))),
            str(sum((Decimal(d.measures[m][1]) for d in days), Decimal(0))),
        ]
        for m in measures
        if days and all(m in d.measures for d in days)
    }
    restatement_id = publication.restatement_id
    readable_until, retention = _retention(publication, last)
    return Note(
        table=publication.table_name,
        version=publication.version,
        supersedes=last.version if last else None,
        published_at=publication.published_at,
        produced_by=publication.produced_by,
        restatement_id=restatement_id,
        reason=producer[0] if producer else None,
        actor=producer[1] if producer else None,
        days=days,
        added=sum(d.added for d in days),
        removed=sum(d.removed for d in days),
        changed=sum(d.changed for d in days),
        measures=totals,
        material=any(d.material for d in days),
        material_change=materiality.threshold,
        material_measures=materiality.judged(measures),
        superseded_readable_until=readable_until,
        superseded_retention=retention,
        compared=rows is not None,
    )


def _day_of(row: dict[str, t.Any]) -> str:
    return str(row["day"])


def _rows(digest: str | None) -> int:
    return int(digest.split(":", 1)[0]) if digest else 0


def _day(
    publication: Publication,
    row: dict[str, t.Any],
    measures: list[str],
    materiality: Materiality,
) -> DayNote:
    sums = {
        m: [row["_sums_before"].get(m) or "0", row["_sums_after"].get(m) or "0"] for m in measures
    }
    before, after = int(row["rows_before"]), int(row["rows_after"])
    moved = [materiality.moved(*sums[m]) for m in materiality.judged(measures)]
    return DayNote(
        day=str(row["day"]),
        revision=publication.revisions.get(str(row["day"]), 0),
        rows_before=before,
        rows_after=after,
        added=int(row["added"]),
        removed=int(row["removed"]),
        changed=int(row["changed"]),
        measures=sums,
        material=materiality.moved(str(before), str(after)) or any(moved),
    )


def _retention(publication: Publication, last: Publication | None) -> tuple[str | None, str]:
    """Until when the superseded version stays readable, and why."""
    if last is None:
        return None, "nothing superseded: the first version"
    published = datetime.fromisoformat(publication.published_at)
    if last.physical_table != publication.physical_table:
        return None, (
            f"v{last.version} lives in the model's previous table, readable until SQLMesh's "
            "janitor drops it (the snapshot's TTL after it left prod)"
        )
    until = (published + DELETED_FILE_RETENTION).date().isoformat()
    return until, (
        f"v{last.version} stays readable at least until {until}: a VACUUM with Delta's "
        f"default retention ({DELETED_FILE_RETENTION.days} days) may then remove the files "
        f"this version replaced; without one, until log cleanup drops its commit "
        f"({LOG_RETENTION.days} days)"
    )


def write(home: Path, notes: list[Note]) -> list[Note]:
    """Each note as ``v<N>.json`` and ``v<N>.md`` under ``releases/<table>/`` (each file
    written whole, then renamed in place)."""
    for note in notes:
        target = folder(home, note.table)
        target.mkdir(parents=True, exist_ok=True)
        note.files = {
            "json": str(target / f"v{note.version}.json"),
            "md": str(target / f"v{note.version}.md"),
        }
        _replace(Path(note.files["json"]), json.dumps(note.as_dict(), indent=2) + "\n")
        _replace(Path(note.files["md"]), markdown(note))
    return notes


def _replace(path: Path, text: str) -> None:
    partial = path.with_name(f".{path.name}.partial")
    partial.write_text(text, encoding="utf-8")
    os.replace(partial, path)


def read(home: Path, table_name: str, version: int) -> dict[str, t.Any] | None:
    path = folder(home, table_name) / f"v{version}.json"
    if not path.exists():
        return None
    return t.cast(dict[str, t.Any], json.loads(path.read_text(encoding="utf-8")))


def note_of(
    context: Context, spark: SparkSession, home: Path, table_name: str, as_of: str | None
) -> dict[str, t.Any]:
    """The note of the version of ``table_name`` that ``as_of`` names (``versions.resolve``):
    its file, or (a process killed before it wrote one) composed again from the two versions
    and written."""
    from tardy.consumers.versions import publications, resolve

    history = publications(spark, table_name)
    mine = resolve(history, table_name, as_of)
    found = read(home, table_name, mine.version)
    if found is not None:
        return found
    earlier = {p.table_name: p for p in history if p.version == mine.version - 1}
    return write(home, compose(context, spark, [mine], earlier))[0].as_dict()


def markdown(note: Note) -> str:
    """The note for people: a heading, who and why, the changed days, the totals."""
    name = f"{note.table} v{note.version}"
    heading = f"# {name}" + (f" (supersedes v{note.supersedes})" if note.supersedes else "")
    if note.restatement_id is None:
        who = "a scheduled run (`sqlmesh run`)"
    else:
        verb = "rollback of" if note.produced_by.startswith("rollback:") else "restatement"
        who = f"{verb} `{note.restatement_id}`"
        if note.reason:
            who += f': "{note.reason}"'
        if note.actor:
            who += f" by {note.actor}"
    lines = [heading, "", f"Published {note.published_at} by {who}.", ""]
    if note.supersedes is None:
        lines += [f"The first version: {len(note.days)} day(s).", ""]
        return "\n".join(lines)
    verdict = "**Material**" if note.material else "Not material"
    lines += [
        f"{verdict}: a change is material when a changed day's row count or "
        f"{', '.join(note.material_measures) or 'measure'} moves by "
        f"{note.material_change:.1%} or more.",
        "",
    ]
    measure = measure_of(dict.fromkeys(note.measures, "")) if note.measures else None
    header = "| day | revision | rows before → after | added | removed | changed |"
    rule = "|---|--:|--:|--:|--:|--:|"
    if measure:
        header += f" {measure} before → after |"
        rule += "--:|"
    lines += [header, rule]
    for day in note.days:
        line = (
            f"| {day.day}{' (material)' if day.material else ''} | {day.revision} "
            f"| {day.rows_before:,} → {day.rows_after:,} | {day.added:,} | {day.removed:,} "
            f"| {day.changed:,} |"
        )
        if measure:
            line += f" {day.measures[measure][0]} → {day.measures[measure][1]} |"
        lines.append(line)
    lines.append("")
    if not note.days:
        lines += ["No day changed.", ""]
    if note.measures:
        lines += ["Over the changed days:", "", "| measure | before | after |", "|---|--:|--:|"]
        lines += [f"| {m} | {b} | {a} |" for m, (b, a) in note.measures.items()]
        lines.append("")
    if not note.compared:
        lines += ["Rows per day only: the two versions' columns differ.", ""]
    lines += [
        f"Rows added {note.added:,}, removed {note.removed:,}, changed {note.changed:,}.",
        "",
        f"The superseded version: {note.superseded_retention}. Read it:",
        "",
        f"    tardy show {note.table} --as-of v{note.supersedes}",
        "",
    ]
    return "\n".join(lines)
