"""Publishing: every new prod version of a published model becomes a publication
(``tardy.consumers.versions``, the store), and each fan-out of one follows it: its release
note (``tardy.consumers.notes``), its event in the outbox (``tardy.outbox.notifications``),
the views consumers read (``<schema>_published.<table>``, the final aliases of
``tardy.consumers.aliases``) and, for ``tardy publish``, the models' status views
(``tardy.consumers.status``). The store sits below every module here, so none of them
imports this one."""

from __future__ import annotations

import typing as t
from dataclasses import dataclass
from datetime import UTC, date, datetime

from tardy.consumers import notes, versions
from tardy.consumers.aliases import point_final
from tardy.consumers.status import ensure_status_views
from tardy.engine import delta, sqlmesh_api
from tardy.engine.meter import Meter
from tardy.outbox import notifications
from tardy.project.home import activate
from tardy.sql import in_list

if t.TYPE_CHECKING:
    from pyspark.sql import SparkSession
    from sqlmesh import Context

    from tardy.consumers.notes import Note
    from tardy.consumers.versions import Publication
    from tardy.engine.results import DayChange


@dataclass(frozen=True)
class Commit:
    """A promotion's one commit to a table: the Delta version it replaced, the one it made,
    and the days whose rows it changed (the restatement's diff: it commits only those), as
    that diff compared them when this process staged the restatement (``compared``: what
    the release note says, ``tardy.consumers.notes.compose``)."""

    before: int
    after: int
    days: list[str]
    compared: list[DayChange] | None = None


def _commit_days(
    physical: str, version: int, last: Publication | None, commit: Commit | None
) -> list[str] | None:
    """The days a promotion ``commit`` changed, when it made the version right on the
    previously published one (None otherwise), read with no statement: it replaced exactly
    the days whose rows the diff found different, and nothing else. Comparing with the
    previous version instead needs time travel to it, which rebuilds its snapshot (~1 s a
    table, docs/versioned-truth.md)."""
    if (
        commit is not None
        and last is not None
        and (last.physical_table, last.delta_version) == (physical, commit.before)
        and version == commit.after == commit.before + 1
    ):
        return sorted(commit.days)
    return None


def _digested(
    spark: SparkSession,
    column: str,
    physical: str,
    version: int,
    last: Publication | None,
    commit: Commit | None = None,
) -> tuple[dict[str, str], list[str]]:
    """The version's day digests, and the days whose rows differ from the previous
    publication's: every day for the first one, and for a new model version (a new physical
    table: SQLMesh built it for a code change, whose rows need not even share the old
    columns).

    After a promotion's ``commit`` (``_commit_days``) only its days are hashed, the others'
    digests are the previous publication's: from the rows its diff kept
    (``_known_digests``: no statement), else from one read of those days. Otherwise the
    version is read whole once, and the changed days are those whose digests differ from the
    previous publication's (or, when that one has none, whose rows differ: a comparison of
    the two versions)."""
    days = _commit_days(physical, version, last, commit)
    if days is not None and last is not None and last.day_digests is not None:
        kept = {day: digest for day, digest in last.day_digests.items() if day not in days}
        known = _known_digests(commit, days)
        if known is not None:
            return {**kept, **known}, days
        chosen = in_list(f"CAST(`{column}` AS STRING)", days)
        arrow = versions.read_version(spark, physical, version, chosen)
        # A DATE time column's text is the day's ISO date, as the commit's days are: any other
        # type (none of the project's today) is read whole below.
        if str(arrow.schema.field(column).type) == "date32[day]":
            columns, rows = versions.as_rows(arrow)
            return {**kept, **versions.day_digests(columns, rows, column)}, days
        days = None
    columns, rows = versions.read_rows(spark, physical, version)
    digests = versions.day_digests(columns, rows, column)
    if days is None:
        if last is None or last.physical_table != physical:
            days = sorted(digests)
        elif last.day_digests is not None:
            before = last.day_digests
            days = sorted(d for d in digests.keys() | before if digests.get(d) != before.get(d))
        else:
            old = f"{last.physical_table} VERSION AS OF {last.delta_version}"
            new = f"{physical} VERSION AS OF {version}"
            query = versions.CHANGED_DAYS_SQL.format(column=column, new=new, old=old)
            days = sorted(r.day for r in spark.sql(query).collect() if r.day is not None)
    return digests, [day for day in days if day != versions.NULL]


def _known_digests(commit: Commit | None, days: list[str]) -> dict[str, str] | None:
    """The digests of the commit's ``days`` from its diff's rows after (``Commit.compared``):
    the rows it committed, as the export's text (None: the diff did not keep them, or the
    time column is not a DATE, whose text is the day's ISO date)."""
    if commit is None or commit.compared is None:
        return None
    rows = {
        day.day.isoformat(): day.after
        for day in commit.compared
        if type(day.day) is date and day.after is not None
    }
    if sorted(rows) != days:
        return None
    return {day: versions.day_digest(sorted(mine)) for day, mine in rows.items() if mine}


def publish(
    context: Context,
    spark: SparkSession,
    *,
    restatement_id: str | None = None,
    commits: dict[str, Commit] | None = None,
    all_views: bool = False,
    producer: tuple[str, str] | None = None,
) -> versions.Published:
    """Publish every model tagged ``published`` whose current prod Delta version has no
    publication yet (all of them when none has).

    A promotion passes its ``restatement_id`` and the ``commits`` it made per model; for the
    others the latest commit says who produced the version (a tardy tag: ``rollback:<id>``;
    none: a run). Changed days come from comparing the version's rows with the previous
    publication's, so a run between two publications is counted, or from the promotion's
    commit when it was made right on the previously published version (``_commit_days``);
    then the release note reads the commit's ``compared`` days, and ``producer`` (the
    restatement's reason and actor) saves the note its log read.
    """
    meter = Meter(spark)
    rows: list[Publication] = []
    compared: dict[str, list[DayChange]] = {}
    now = datetime.now(UTC).replace(microsecond=0)
    with meter.step("publish"):
        history = versions.publications(spark)
        latest = {p.table_name: p for p in history}
        for name, snapshot in sorted(sqlmesh_api.published_snapshots(context).items()):
            physical = sqlmesh_api.spark_name(snapshot.table_name(is_deployable=True))
            commit = (commits or {}).get(name)
            if commit is not None:
                version, produced_by = commit.after, restatement_id or versions.RUN
            else:
                head = delta.latest_commit(spark, physical)
                version, produced_by = int(head.version), versions.producer(head.userMetadata)
            last = latest.get(name)
            if last is not None and (last.physical_table, last.delta_version) == (
                physical,
                version,
            ):
                continue
            column = sqlmesh_api.time_column(snapshot)
            digests, days = _digested(spark, column, physical, version, last, commit)
            on_last = _commit_days(physical, version, last, commit) is not None
            if on_last and commit is not None and commit.compared is not None:
                compared[name] = commit.compared
            earlier = [p for p in history if p.table_name == name]
            rows.append(
                versions.Publication(
                    table_name=name,
                    version=(last.version + 1) if last else 1,
                    physical_table=physical,
                    delta_version=version,
                    time_column=column,
                    produced_by=produced_by,
                    changed_days=days,
                    revisions={d: sum(d in p.changed_days for p in earlier) for d in days},
                    rows=versions.rows_of(digests),
                    sha256=versions.version_hash(digests),
                    published_at=now.isoformat(),
                    day_digests=digests,
                )
            )
        if rows:
            versions.append(spark, rows, now)
        producers = {restatement_id: producer} if restatement_id and producer else {}
        written = _release_notes(context, spark, rows, latest, compared, producers)
        _announce(context, history, rows, written)
        pointed = list({**latest, **{p.table_name: p for p in rows}}.values())
        _point_views(spark, pointed if all_views else rows)
        # The final aliases read the published views: created with a model's first publication,
        # recreated by `tardy publish` (a source or grace window changed). The models' status
        # views (``tardy.consumers.status``) only by `tardy publish`: at a promotion's
        # publication they would add 9 statements to the first restatement of every home.
        finals = [p.table_name for p in pointed if all_views or (p in rows and p.version == 1)]
        if finals:
            point_final(context, spark, finals)
        if all_views:
            ensure_status_views(context, spark, [p.table_name for p in pointed])
    return versions.Published(rows, meter.statements["publish"], round(meter.seconds["publish"], 3))


def _release_notes(
    context: Context,
    spark: SparkSession,
    rows: list[Publication],
    superseded: dict[str, Publication],
    compared: dict[str, list[DayChange]],
    producers: dict[str, tuple[str, str]],
) -> dict[str, Note]:
    """Each new version's release note (``tardy.consumers.notes``), written to the data home
    once the publications are appended, by table."""
    if not rows:
        return {}
    composed = notes.compose(
        context, spark, rows, superseded, compared=compared, producers=producers
    )
    return {note.table: note for note in notes.write(activate().root, composed)}


def _announce(
    context: Context,
    history: list[Publication],
    rows: list[Publication],
    written: dict[str, Note],
) -> None:
    """A publication event per new version (``tardy.outbox.notifications``) with its
    release note, kept in the outbox once the note is written; and one for any earlier
    version whose event a killed process never kept (``notifications.announce``'s ledger)."""
    notifications.announce(
        activate().root,
        context.config.variables.get("notifications"),
        known=[published(p) for p in history],
        new=[published(p, written.get(p.table_name)) for p in rows],
        targets=notifications.targets_of(context.config),
    )


def published(publication: Publication, note: Note | None = None) -> notifications.Event:
    """A new published version of a model, with what its release note says (``material``
    None: an event caught up without its note)."""
    days = publication.changed_days
    changed = f"{len(days)} changed day(s), {days[0]}..{days[-1]}" if days else "no changed day"
    material = None if note is None or note.supersedes is None else note.material
    flag = {None: "", True: "; material", False: "; not material"}[material]
    return notifications.Event(
        notifications.EventKind.PUBLICATION,
        f"{publication.name} published ({changed}; produced by {publication.produced_by}{flag})",
        about=f"{publication.name}:{publication.sha256}",
        table=publication.table_name,
        version=publication.version,
        detail={
            "produced_by": publication.produced_by,
            "changed_days": days,
            "revisions": publication.revisions,
            "rows": publication.rows,
            "sha256": publication.sha256,
            "published_at": publication.published_at,
            "material": material,
            "note": note.files.get("md") if note else None,
        },
    )


def _point_views(spark: SparkSession, latest: list[Publication]) -> None:
    """One ``CREATE OR REPLACE VIEW`` per publication: the view reads its Delta version by
    time travel, so a later run does not change it. A view's schema is created when the
    view's creation finds it missing (one statement then, none once it exists)."""
    for p in latest:
        name = versions.view_name(p.table_name)
        versions.create_view(
            spark,
            name,
            f"CREATE OR REPLACE VIEW {name} AS SELECT * FROM "
            f"{p.physical_table} VERSION AS OF {int(p.delta_version)}",
        )
