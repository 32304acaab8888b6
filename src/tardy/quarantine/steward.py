"""The steward's three decisions on a quarantined record: reject it, mark it a duplicate of
another record, or fix it (``tardy.quarantine.fixes``). Each is a row of the review table
(``tardy.quarantine.reviews``); bronze is never edited.

The CLI takes the restatement lock first (``tardy.engine.restate.hold``), so of two stewards
deciding at once one decides and the other is refused (exit 3); a record that has a decision
refuses another unless it ``supersede``s it (``AlreadyDecided``, exit 3).
"""

from __future__ import annotations

import contextlib
import json
import typing as t
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path

from tardy.engine.log import actor
from tardy.engine.promote import failpoint
from tardy.errors import InputError, Refused
from tardy.project.home import activate
from tardy.project.sources import declared
from tardy.quarantine import fixes
from tardy.quarantine.listing import Listing, Quarantined, read, resolve
from tardy.quarantine.reviews import Decision, Review, append, steward_files
from tardy.sql import literal

if t.TYPE_CHECKING:
    from pyspark.sql import SparkSession
    from sqlmesh import Context

LOCK_NAME = "quarantine-review"  # the lock holder's name while a steward decides


class AlreadyDecided(Refused):
    """The record has a decision: ``--supersede`` replaces it (nothing was written)."""


@dataclass(frozen=True)
class Decided:
    decisions: list[Decision]
    fix: fixes.Fix | None = None
    completed: bool = False  # a fix interrupted before its decision, completed now
    notified: list[str] = field(default_factory=list)  # owners told (rejections)

    def as_dict(self) -> dict[str, object]:
        return {
            "decisions": [d.as_dict() for d in self.decisions],
            "steward_file": self.fix.source_file if self.fix else None,
            "completed_interrupted_fix": self.completed,
            "notified": self.notified,
        }


def _open(found: Quarantined, supersede: bool) -> str | None:
    """The review ``found``'s new decision supersedes; refused when it has one and
    ``supersede`` is not given."""
    if found.decision is None:
        return None
    if not supersede:
        d = found.decision
        raise AlreadyDecided(
            f"{found.record_id} is already {d.decision} ({d.review_id}, by {d.steward} at "
            f"{d.decided_at:%Y-%m-%d %H:%M}Z: {d.reason}); --supersede replaces that decision"
        )
    return found.decision.review_id


def awaits(decisions: t.Sequence[Decision]) -> dict[str, object]:
    """What a held rejection event waits for: its decisions' commit to the review table."""
    return {"review_ids": sorted(d.review_id for d in decisions)}


def settle_rejected(listing: Listing, context: Context) -> int:
    """Announce the rejections a killed ``tardy quarantine reject`` committed and never
    announced (their held events): each whose decisions the review table holds is released,
    the others dropped. No statement: ``listing`` holds every record's decision."""
    from tardy.outbox import held as held_events
    from tardy.outbox import notifications

    orphans = held_events.orphans(activate().root, notifications.EventKind.QUARANTINE_REJECTED)
    decided = {r.decision.review_id for r in listing.records if r.decision is not None}
    targets = notifications.targets_of(context.config)
    released = 0
    for held in orphans:
        if set(held.awaits["review_ids"]) <= decided:
            held.release(targets=targets)
            released += 1
        else:
            held.drop()
    return released


def _reason(reason: str | None) -> str:
    if not reason or not reason.strip():
        raise InputError("a decision needs --reason TEXT (kept in the review table)")
    return reason.strip()


def reject(
    context: Context,
    spark: SparkSession,
    ids: t.Sequence[str],
    reason: str,
    supersede: bool = False,
) -> Decided:
    """Reject the records ``ids`` name, in one commit, and tell their sources' owners."""
    from tardy.outbox import held as held_events
    from tardy.outbox import notifications

    why, steward = _reason(reason), actor()
    listing = read(context, spark)
    settle_rejected(listing, context)
    found = list({r.record_id: r for r in (resolve(listing.records, i) for i in ids)}.values())
    decisions = [
        Decision.new(
            r.record_id, r.source, Review.REJECTED, why, steward, supersedes=_open(r, supersede)
        )
        for r in found
    ]
    owners = declared().sources
    events = []
    for source in sorted({r.source for r in found}):
        owner = owners[source].owner if source in owners else None
        mine = [r.record_id for r in found if r.source == source]
        events.append(notifications.rejected(source, owner, mine, why, steward))
    settings = context.config.variables.get("notifications")
    targets = notifications.targets_of(context.config)
    home = activate().root
    with contextlib.ExitStack() as stack:
        held = [
            stack.enter_context(held_events.hold(home, settings, event, awaits(decisions)))
            for event in events
        ]
        append(spark, *decisions)
        failpoint("announce", 0)  # test hook: the rejections committed, their events held
        for each in held:
            each.release(targets=targets)
    told = sorted({str(e.detail["owner"]) for e in events if e.detail.get("owner")})
    return Decided(decisions, notified=told)


def duplicate(
    context: Context,
    spark: SparkSession,
    given: str,
    of: str,
    reason: str | None = None,
    supersede: bool = False,
) -> Decided:
    """Mark a quarantined record a replay of ``of``, a record of its source's bronze table."""
    listing = read(context, spark)
    settle_rejected(listing, context)
    found = resolve(listing.records, given)
    original = _bronze_record(context, spark, found.source, of, listing)
    if original == found.record_id:
        raise InputError(f"{given}: a record cannot duplicate itself")
    why = reason.strip() if reason and reason.strip() else f"a replay of {original}"
    decision = Decision.new(
        found.record_id,
        found.source,
        Review.DUPLICATE,
        why,
        actor(),
        duplicate_of=original,
        supersedes=_open(found, supersede),
    )
    append(spark, decision)
    return Decided([decision])


# The record ``given`` names among a source's bronze records, with what makes it a valid
# original: parsed, and the latest record key of its natural key (a later correction, another
# record key of the same natural key, supersedes it; a verbatim resend keeps the key).
ORIGINAL_SQL = """
WITH keyed AS (
  SELECT record_id, line_number, parse_error, arrival_ts,
         CONCAT_WS('|', {key}) AS record_key, {natural_key} AS natural_key
  FROM {bronze} WHERE source_system = {source}
), latest AS (
  SELECT natural_key, MAX_BY(record_key, STRUCT(arrival_ts, record_id)) AS latest_key
  FROM keyed WHERE parse_error IS NULL GROUP BY natural_key
)
SELECT k.record_id, k.parse_error, k.record_key, l.latest_key
FROM keyed k LEFT JOIN latest l ON k.natural_key <=> l.natural_key
WHERE startswith(k.record_id, {prefix}) AND k.line_number = {line}
"""


def original(
    spark: SparkSession,
    bronze: str,
    source: str,
    key: t.Sequence[str],
    natural_key: str,
    given: str,
) -> t.Any:
    """The row of ``source``'s records in ``bronze`` that ``given`` (``<file sha256 or its
    first 6+>:<line>``) names, refused unless it is parsed and the latest record key of its
    ``natural_key`` (SQL over the columns; ``key``: the record key's fields)."""
    prefix, sep, line = given.strip().rpartition(":")
    if not sep or not line.isdigit() or len(prefix) < 6:
        raise InputError(f"--of {given!r}: expected <file sha256 or its first 6+>:<line>")
    rows = spark.sql(
        ORIGINAL_SQL.format(
            key=", ".join(f"CAST(`{k}` AS STRING)" for k in key),
            natural_key=natural_key,
            bronze=bronze,
            source=literal(source),
            prefix=literal(prefix),
            line=int(line),
        )
    ).collect()
    if len(rows) != 1:
        problem = "no record" if not rows else f"{len(rows)} records"
        raise InputError(f"--of {given}: {problem} of source {source} with this id")
    (row,) = rows
    if row.parse_error is not None:
        raise InputError(
            f"--of {given}: {row.record_id} is not a valid record of source {source} "
            f"(unparsed: {row.parse_error}): a duplicate names the valid record it replays"
        )
    if row.latest_key != row.record_key:
        raise InputError(
            f"--of {given}: {row.record_id} is superseded by a later correction "
            f"(record {row.latest_key}): name the record that stands"
        )
    return row


def _bronze_record(
    context: Context, spark: SparkSession, source: str, given: str, listing: Listing
) -> str:
    """The record id of ``source``'s bronze records that ``given`` names, refused unless it
    is a valid original: of the same source, parsed, not quarantined, not superseded by a
    correction (one read of the source's bronze records)."""
    from tardy.engine import facts, sqlmesh_api

    declaration = declared().get(source)
    if declaration is None:
        raise InputError(f"source {source!r} is not declared in sources.yaml")
    keyed = {
        f.table: f.natural_key
        for f in facts.project_fact_sources(context, sqlmesh_api.model_snapshots(context))
    }
    natural_key = keyed.get(declaration.bronze, declaration.natural_key_sql)
    quarantined = {r.record_id for r in listing.records}
    row = original(spark, declaration.bronze, source, declaration.key, natural_key, given)
    if row.record_id in quarantined:
        raise InputError(
            f"--of {given}: {row.record_id} is not a valid record of source {source} "
            "(quarantined): a duplicate names the valid record it replays"
        )
    return str(row.record_id)


def fix(
    context: Context,
    spark: SparkSession,
    given: str,
    sets: t.Sequence[str],
    reason: str,
    supersede: bool = False,
) -> Decided:
    """Write a steward record with the fixed values (checked by the source's rules) into
    its source's landing folder, and its decision; or complete an interrupted fix."""
    home = activate()
    listing = read(context, spark)
    settle_rejected(listing, context)
    found = resolve(listing.records, given)
    landed = fixes.pending(home.landing, found, steward_files(spark))
    if landed is not None:
        return _complete(spark, home.landing, found, landed)
    why, steward = _reason(reason), actor()
    source = declared().get(found.source)
    if source is None:
        raise InputError(f"{found.record_id}: source {found.source!r} is not declared")
    supersedes = _open(found, supersede)
    values = fixes.parse_sets(source, sets)
    provenance = {
        "steward": steward,
        "original": found.record_id,
        "reason": why,
        "set": {item.partition("=")[0].strip(): item.partition("=")[2] for item in sets},
    }
    if listing.clock is None:  # a record was found, so bronze has an arrival
        raise InputError("bronze has no arrival time: the feed's clock is unknown")
    planned = fixes.plan_fix(
        home.landing, found, fixes.fixed_line(found, values, provenance), listing.clock
    )
    rule = fixes.failing_rule(context, spark, source, planned)
    if rule is not None:
        raise fixes.FixRefused(
            f"{found.record_id}: the fixed record fails rule {rule} of source {source.name} "
            f"(@{source.rules}); nothing was written"
        )
    fixes.write(planned)
    decision = Decision.new(
        found.record_id,
        found.source,
        Review.FIXED,
        why,
        steward,
        steward_file=planned.source_file,
        supersedes=supersedes,
    )
    append(spark, decision)
    return Decided([decision], fix=planned)


def _complete(spark: SparkSession, landing: Path, found: Quarantined, landed: Path) -> Decided:
    """The decision of a steward file a killed fix left without one (its provenance)."""
    text = landed.read_text(encoding="utf-8").rstrip("\n")
    provenance = json.loads(text).get(fixes.PROVENANCE, {})
    relative = landed.relative_to(landing).as_posix()
    decision = Decision.new(
        found.record_id,
        found.source,
        Review.FIXED,
        str(provenance.get("reason") or "a fix completed"),
        str(provenance.get("steward") or actor()),
        steward_file=relative,
        supersedes=found.decision.review_id if found.decision else None,
    )
    append(spark, decision)
    planned = fixes.Fix(found.record_id, found.source, text, landed, relative, _arrival(landed))
    return Decided([decision], fix=planned, completed=True)


def _arrival(path: Path) -> datetime:
    from tardy.ingest.landing import parse_arrival_dir

    return parse_arrival_dir(path.parent.name)
