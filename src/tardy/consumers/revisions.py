"""How much restatements moved each published model since first published: the rows a
promoted, not rolled back, restatement changed (``tardy.transaction_changes``), each row's
headline measure as first published against now, per model.

A model's headline measure is the first of its measures (``notes.measures_of``: numeric
columns outside its grain and time column) that ``release_notes.material_measures`` names in
``project.yaml``, else its first measure; a model without one counts rows only. A row a
restatement removed, and no later commit put back, is now 0; a row it added was first
published as 0 (as in the models' status views, ``tardy.consumers.status``).

One statement for every published model (a UNION ALL of one small aggregate each, over the
trail and the model's rows); nothing reads the status views, which only ``tardy publish``
creates.
"""

from __future__ import annotations

import typing as t
from dataclasses import dataclass

from tardy.engine.trail import standing_rows
from tardy.sql import literal

if t.TYPE_CHECKING:
    from pyspark.sql import SparkSession
    from sqlmesh import Context
    from sqlmesh.core.snapshot import Snapshot


@dataclass
class Revisions:
    """How much restatements moved one model's periods since first published; decimals as
    text."""

    model: str = ""
    measure: str | None = None  # the headline measure; None: rows only
    rows: int = 0  # rows restated at least once (removed ones included)
    days: int = 0  # periods (days, or a rollup's first days)
    max_revision: int = 0
    first_published: str = "0"  # the measure over those rows, as first published
    now: str = "0"
    net_change: str = "0"
    gross_change: str = "0"  # the sum of each row's absolute change
    largest_day: str | None = None  # the period whose rows moved most (absolute, summed)
    largest_day_change: str | None = None


# One model's moved rows (``{n}``: its index, so that every name is unique in the statement):
# per row its period, revision and first published measure; now, from the model's rows.
MOVED_SQL = """
per_row_{n} AS (
  SELECT row_key, event_date, COUNT(DISTINCT restatement_id) AS revision, {first} AS first
  FROM ({standing})
  GROUP BY row_key, event_date
), moved_{n} AS (
  SELECT p.event_date, p.revision, p.first, {now} AS now
  FROM per_row_{n} AS p
  LEFT JOIN {table} AS d ON {row_key} = p.row_key
), by_day_{n} AS (
  SELECT event_date, SUM(now - first) AS change FROM moved_{n} GROUP BY event_date
)"""

SUMMARY_SQL = """
SELECT {model} AS model, COUNT(*) AS rows, COUNT(DISTINCT event_date) AS days,
       MAX(revision) AS max_revision, CAST(SUM(first) AS STRING) AS first,
       CAST(SUM(now) AS STRING) AS now, CAST(SUM(now - first) AS STRING) AS net,
       CAST(SUM(ABS(now - first)) AS STRING) AS gross,
       (SELECT MAX_BY(event_date, ABS(change)) FROM by_day_{n}) AS largest_day,
       (SELECT CAST(MAX_BY(change, ABS(change)) AS STRING) FROM by_day_{n}) AS largest_change
FROM moved_{n}"""


def headline_measure(context: Context, snapshot: Snapshot) -> str | None:
    """The measure a model's revisions are summed in (module docstring)."""
    from tardy.consumers.notes import Materiality, measures_of

    measures = measures_of(snapshot)
    judged = Materiality.of(context.config.variables).judged(measures)
    return judged[0] if judged else None


def revisions_sql(context: Context, snapshots: t.Mapping[str, Snapshot]) -> str:
    """The statement summing every model of ``snapshots`` (by name): a row each."""
    from tardy.engine import sqlmesh_api
    from tardy.engine.diff import key_sql

    ctes, selects = [], []
    for n, (name, snapshot) in enumerate(sorted(snapshots.items())):
        measure = headline_measure(context, snapshot)
        if measure:
            kind = (snapshot.model.columns_to_types or {})[measure].sql("spark")
            first = (
                f"CAST(MIN_BY(COALESCE(before[{literal(measure)}], '0'), promoted_at) AS {kind})"
            )
            now = f"COALESCE(d.`{measure}`, CAST(0 AS {kind}))"
        else:  # rows only
            first = now = "CAST(0 AS BIGINT)"
        ctes.append(
            MOVED_SQL.format(
                n=n,
                first=first,
                now=now,
                standing=standing_rows(name),
                table=name,
                row_key=key_sql(sqlmesh_api.grain(snapshot), "d", "d"),
            )
        )
        selects.append(SUMMARY_SQL.format(model=literal(name), n=n))
    return "WITH " + ",".join(ctes) + "\n" + "\nUNION ALL".join(selects)


def revisions(
    context: Context, spark: SparkSession, snapshots: t.Mapping[str, Snapshot]
) -> dict[str, Revisions]:
    """Each model of ``snapshots`` that restatements moved, with its summary (one
    statement)."""
    if not snapshots:
        return {}
    measures = {name: headline_measure(context, s) for name, s in snapshots.items()}
    out = {}
    for row in spark.sql(revisions_sql(context, snapshots)).collect():
        if not row.rows:
            continue
        measure = measures[row.model]
        out[row.model] = Revisions(
            model=row.model,
            measure=measure,
            rows=int(row.rows),
            days=int(row.days),
            max_revision=int(row.max_revision),
            first_published=row.first if measure else "0",
            now=row.now if measure else "0",
            net_change=row.net if measure else "0",
            gross_change=row.gross if measure else "0",
            largest_day=row.largest_day.isoformat() if measure and row.largest_day else None,
            largest_day_change=row.largest_change if measure else None,
        )
    return out
