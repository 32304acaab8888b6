"""The change trail: one row per key a promotion (or its rollback) added, removed or changed.

``tardy.transaction_changes`` is an append-only Delta table. Every promotion appends, for every
restated model, one row per grain key and period (the diff's unit: the grain plus the time
column) whose row it added, removed or changed: ``model``, ``row_key`` (the grain's values
joined by ``|``; silver's is the transaction id), ``event_date`` (the row's period: its time
column), ``change``, ``restatement_id``, ``reason``, ``actor``, ``before`` and ``after`` (the
whole rows as maps of column to text; NULL for an added or removed row) and ``promoted_at``.
``action`` says which step wrote it: ``promoted``, or ``rolled_back`` for the reverse rows a
rollback (or the discard of a half-done promotion) appends, with before and after swapped.

How each append stays exact under kill -9 and retries:

* A promotion's rows are the changed keys of the days the promotion commits (the commit
  copies exactly those days of the staged table): prod at its version before the promotion
  against the staged table. When the promotion follows its staging in the same process, the
  diff has found them already (``results.TableDiff.changes``, up to a few hundred keys a table);
  otherwise, or for a table with more, they are compared again here. They are appended in
  one write (one Delta commit) after the promotion's intent
  and *before* its first table commit, while that version is still prod's current one: its
  snapshot is cached, where time travel to an older version rebuilds one (about 1 s a table,
  docs/report.md). The append is skipped when rows of that restatement and action exist, so
  a promotion resumed after a kill (its staged tables are kept until it is logged promoted)
  writes them once; a promotion that has just logged its intent knows there are none. A
  half-done promotion that is discarded instead gets the reverse rows.
* A rollback's rows are the promotion's rows reversed (one ``INSERT ... SELECT`` from the trail
  itself), since a rollback restores exactly the versions before the promotion.
"""

from __future__ import annotations

import typing as t
from enum import StrEnum

from tardy.engine import delta
from tardy.engine.diff import compare_sql
from tardy.sql import literal

if t.TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

    from tardy.engine.results import Change
    from tardy.engine.stage import StagedTable

TRAIL_TABLE = "tardy.transaction_changes"


class TrailAction(StrEnum):
    """Which step appended a trail row."""

    PROMOTED = "promoted"
    ROLLED_BACK = "rolled_back"  # a rollback, or the discard of a half-done promotion


PROMOTED, ROLLED_BACK = TrailAction.PROMOTED, TrailAction.ROLLED_BACK


def standing_rows(model: str) -> str:
    """The trail's rows of ``model`` that prod still reflects: promoted by a restatement that
    was not rolled back (a ``SELECT *``)."""
    return (
        f"SELECT * FROM {TRAIL_TABLE} WHERE model = {literal(model)} "
        f"AND action = {literal(PROMOTED)} AND restatement_id NOT IN "
        f"(SELECT restatement_id FROM {TRAIL_TABLE} WHERE action = {literal(ROLLED_BACK)})"
    )


TRAIL_DDL = f"""
CREATE TABLE IF NOT EXISTS {TRAIL_TABLE} (
  model STRING NOT NULL,
  row_key STRING NOT NULL,
  event_date DATE,
  change STRING NOT NULL,
  action STRING NOT NULL,
  restatement_id STRING NOT NULL,
  reason STRING NOT NULL,
  actor STRING NOT NULL,
  before MAP<STRING, STRING>,
  after MAP<STRING, STRING>,
  promoted_at TIMESTAMP NOT NULL
) USING delta
TBLPROPERTIES ('delta.appendOnly' = 'true')
COMMENT 'tardy: one row per key a restatement added, removed or changed (and its reversal)'
"""

_MAP = "'map<string,string>'"


def ensure_trail(spark: SparkSession) -> None:
    if not spark.catalog.tableExists(TRAIL_TABLE):
        spark.sql("CREATE SCHEMA IF NOT EXISTS tardy")
        spark.sql(TRAIL_DDL)


def _written(spark: SparkSession, restatement_id: str, action: TrailAction) -> bool:
    return (
        delta.query(
            spark,
            f"SELECT 1 FROM {TRAIL_TABLE} WHERE restatement_id = {literal(restatement_id)} "
            f"AND action = {literal(action)} LIMIT 1",
        ).first()
        is not None
    )


_CHANGES_SCHEMA = (
    "model STRING, row_key STRING, event_date DATE, change STRING, before STRING, after STRING"
)


def record_promotion(
    spark: SparkSession,
    restatement_id: str,
    reason: str,
    actor: str,
    tables: list[StagedTable],
    grains: dict[str, list[str]],
    known: dict[str, list[Change]] | None = None,
    *,
    first: bool = False,
) -> bool:
    """Append the promotion's rows (idempotent unless ``first``: the caller has just logged
    the intent, so none can exist): for each staged table with changed days, the changed
    keys ``known`` from its diff, else prod at its version before the promotion against the
    staged table over those days (what the promotion commits). Returns whether it appended
    (False: already there, or nothing changed)."""
    ensure_trail(spark)
    committed = [table for table in tables if table.changed]
    if not committed or (not first and _written(spark, restatement_id, PROMOTED)):
        return False
    known = known or {}
    found = [
        (table.model, c["row_key"], c["event_date"], c["change"], c["before"], c["after"])
        for table in committed
        for c in known.get(table.model, [])
    ]
    parts: list[DataFrame] = [spark.createDataFrame(found, _CHANGES_SCHEMA)] if found else []
    selects = []
    for table in committed:
        if table.model in known:
            continue
        grain = grains.get(table.model) or []
        compared = compare_sql(
            spark,
            f"{table.prod_table} VERSION AS OF {table.version_before}",
            table.staged_table,
            table,
            grain,
            spans=table.changed,
            measures=False,
            rows=True,
        )
        selects.append(
            f"""
            SELECT {literal(table.model)} AS model, _row_key AS row_key,
                   CAST(_time AS DATE) AS event_date, _kind AS change,
                   _before AS before, _after AS after
            FROM ({compared}) WHERE _kind IS NOT NULL"""
        )
    if selects:
        parts.append(spark.sql(" UNION ALL ".join(selects)))
    if not parts:
        return False
    changes = parts[0] if len(parts) == 1 else parts[0].unionByName(parts[1])
    changes.selectExpr(
        "model",
        "row_key",
        "event_date",
        "change",
        f"{literal(PROMOTED)} AS action",
        f"{literal(restatement_id)} AS restatement_id",
        f"{literal(reason)} AS reason",
        f"{literal(actor)} AS actor",
        f"from_json(before, {_MAP}) AS before",
        f"from_json(after, {_MAP}) AS after",
        "current_timestamp() AS promoted_at",
    ).write.format("delta").mode("append").saveAsTable(TRAIL_TABLE)
    return True


def record_rollback(spark: SparkSession, restatement_id: str, reason: str, actor: str) -> bool:
    """Append the reverse of the promotion's rows, with the rollback's reason (idempotent);
    False when already there or the promotion recorded none."""
    ensure_trail(spark)
    rid = literal(restatement_id)
    if not _written(spark, restatement_id, PROMOTED) or _written(
        spark, restatement_id, ROLLED_BACK
    ):
        return False
    spark.sql(
        f"""
        INSERT INTO {TRAIL_TABLE}
        SELECT model, row_key, event_date,
               CASE change WHEN 'added' THEN 'removed' WHEN 'removed' THEN 'added'
                           ELSE change END,
               {literal(ROLLED_BACK)}, restatement_id, {literal(reason)}, {literal(actor)},
               after, before, current_timestamp()
        FROM {TRAIL_TABLE}
        WHERE restatement_id = {rid} AND action = {literal(PROMOTED)}
        """
    )
    return True


def changes(
    spark: SparkSession, restatement_id: str | None = None, row_key: str | None = None
) -> list[dict[str, t.Any]]:
    """Trail rows, oldest first, of one restatement and/or one row key."""
    if not spark.catalog.tableExists(TRAIL_TABLE):
        return []
    where = [
        f"{column} = {literal(value)}"
        for column, value in (("restatement_id", restatement_id), ("row_key", row_key))
        if value is not None
    ]
    query = f"SELECT * FROM {TRAIL_TABLE}" + (f" WHERE {' AND '.join(where)}" if where else "")
    rows = delta.query(spark, query + " ORDER BY promoted_at, model, event_date, row_key").collect()
    return [row.asDict(recursive=True) for row in rows]
