"""Review a staged restatement: per model and interval, prod (before) against staged (after).

For each restated interval: row counts and the sum of every DECIMAL column before and after,
and the keys (the model's grain) added, removed and changed (same key, different row hash),
with a few examples of each. Rendered as a Rich table, as Markdown (a pull-request comment
body) and as JSON.

One read of each table: a single query returns, per interval and day, the counts and sums
before and after; the days with any added, removed or changed key are the model's *changed
days*, the only ones staging cascades to its children and promotion commits. The queries of
several tables can run as one statement (``diff_tables``: the models no other staged model
reads, diffed together after the last write).

The circuit breaker reads the same per-day numbers for one model and measure
(``tardy.project.headline.breaker_target``): the config variables
``restatement_breaker_model`` / ``restatement_breaker_measure`` when set, else the project's
headline model and its own (DECIMAL) measure, else its row counts only. A closed day whose
measure or row count moves by more than the threshold stops the restatement unless
``--accept-large-change`` is given.
"""

from __future__ import annotations

import typing as t
from decimal import Decimal

from tardy.engine import delta
from tardy.engine.results import (
    Breaker,
    BreakerTrip,
    Change,
    DayChange,
    IntervalDiff,
    TableDiff,
)

if t.TYPE_CHECKING:
    from pyspark.sql import SparkSession
    from pyspark.sql.types import StructField, StructType

    from tardy.engine.stage import StagedTable

EXAMPLES = 5


DIFF_SQL = """
SELECT *, CASE
    WHEN _in_before IS NULL THEN 'added'
    WHEN _in_after IS NULL THEN 'removed'
    WHEN _hash_before <> _hash_after THEN 'changed'
  END AS _kind
FROM (
  SELECT b._present AS _in_before, a._present AS _in_after,
         b._row_hash AS _hash_before, a._row_hash AS _hash_after, {key} AS _key,
         {time} AS _time, {interval} AS _interval{measures}{rows}{texts}
  FROM (SELECT *, xxhash64({columns}) AS _row_hash, 1 AS _present FROM {before}
        WHERE {where}) AS b
  FULL OUTER JOIN
       (SELECT *, xxhash64({columns}) AS _row_hash, 1 AS _present FROM {after}
        WHERE {where}) AS a
    ON {join}
)
"""
KINDS = ("added", "removed", "changed")
COUNTS = ", ".join(
    f"COUNT(CASE WHEN _kind = '{kind}' THEN 1 END) AS {kind}, "
    f"slice(sort_array(collect_list(CASE WHEN _kind = '{kind}' THEN _key END)), 1, "
    f"{EXAMPLES}) AS examples_{kind}"
    for kind in KINDS
)
# A day's changed rows the diff hands to the change trail (``TableDiff.changes``): at most
# this many per day, and per table ``CHANGES_KEPT`` in all; a table with more has the trail
# compare prod with its staged rows again at promotion (``trail.record_promotion``).
CHANGES_PER_DAY = 50
CHANGES_KEPT = 500
# One query per table for all its intervals: per interval and day, the counts, the sums,
# the first few keys of each kind and the changed rows as the trail records them (so the
# diff reads prod and the staged table once); the tables' queries are one statement
# (``diff_tables``).
COUNTS_SQL = """
SELECT {table} AS _table, _interval, _time, COUNT(_in_before) AS rows_before,
       COUNT(_in_after) AS rows_after, {counts}, {sums_before} AS _sums_before,
       {sums_after} AS _sums_after,
       slice(collect_list(CASE WHEN _kind IS NOT NULL THEN named_struct(
         'row_key', _row_key, 'change', _kind, 'before', _before, 'after', _after) END),
         1, {per_day}) AS _changes,
       {after_rows} AS _after_rows
FROM ({diff}) AS _diff
GROUP BY _interval, _time
"""
# A changed day's rows after, each value as the text the deterministic export writes
# (``tardy.consumers.versions.as_text`` of the value Arrow reads): a published model's day
# digests of the version its promotion commits are these rows' (no read of that version).
AFTER_ROWS = "CASE WHEN COUNT(_kind) > 0 THEN collect_list(_after_text) END"
NO_ROWS = "CAST(NULL AS ARRAY<ARRAY<STRING>>)"
NULL_TEXT = "\\\\N"  # the export's NULL, \N, as a Spark SQL string literal's body
# The Spark types whose ``CAST(... AS STRING)`` is that text: integers, strings, booleans,
# dates, and decimals of a scale up to 6 (Python writes a smaller one's tiny values
# in exponent notation, ``0E-8``). A table with any other column type (timestamps,
# floating point, nested types) has its digests computed from a read of the version.
EXACT_TEXT = {"string", "varchar", "char", "integer", "long", "short", "byte", "boolean", "date"}
MAX_TEXT_SCALE = 6


def key_sql(columns: list[str], left: str = "a", right: str = "b") -> str:
    """A row's key as one string: the columns' values joined by ``|`` (NULL as 'NULL'), read
    from whichever side of a full outer join holds the row (``left=right``: one table)."""
    return " || '|' || ".join(
        f"COALESCE(CAST(COALESCE({left}.`{c}`, {right}.`{c}`) AS STRING), 'NULL')" for c in columns
    )


def compare_sql(
    spark: SparkSession,
    before: str,
    after: str,
    table: StagedTable,
    grain: list[str],
    *,
    spans: list[list[str]] | None = None,
    measures: bool | t.Sequence[str] = True,
    rows: bool = False,
    texts: bool = False,
) -> str:
    """``before`` against ``after`` (tables, or a table ``VERSION AS OF`` one version) over
    ``spans`` of ``table``'s time column (default: its evaluated intervals), joined on the
    grain plus the time column: one row per key and period, with ``_kind`` added / removed /
    changed (NULL: equal), ``_key``, ``_time`` and ``_interval`` (the index of the interval);
    with ``measures`` every DECIMAL column of both sides (``b_<c>``, ``a_<c>``; or the
    columns ``measures`` names), with ``rows``
    both whole rows of a changed key as JSON (``_before``, ``_after``; NULL for the side it
    is missing from, and both NULL for an equal row) and the grain's key (``_row_key``), with
    ``texts`` the after side's row as the export's text (``_after_text``: an array in column
    order; NULL where the after side has no row)."""
    schema = spark.table(table.prod_table).schema
    columns = [f.name for f in schema.fields]
    if isinstance(measures, bool):
        decimals = [
            f.name for f in schema.fields if measures and f.dataType.typeName() == "decimal"
        ]
    else:
        decimals = list(measures)
    spans = table.intervals if spans is None else spans
    # The grain plus the time column: prod may hold a key on two days of a range (a late
    # correction moved it after the old day was closed: what the restatement fixes), and a
    # join on the grain alone would count such rows twice.
    keys = grain or columns
    if table.time_column not in keys:
        keys = [*keys, table.time_column]
    time = f"COALESCE(a.`{table.time_column}`, b.`{table.time_column}`)"
    listed = ", ".join(f"`{c}`" for c in columns)
    return DIFF_SQL.format(
        key=key_sql(keys),
        time=time,
        interval="CASE "
        + " ".join(
            f"WHEN {time} BETWEEN DATE'{first}' AND DATE'{last}' THEN {i}"
            for i, (first, last) in enumerate(spans)
        )
        + " END",
        measures="".join(f", b.`{c}` AS `b_{c}`, a.`{c}` AS `a_{c}`" for c in decimals),
        rows=(
            f", {_changed_row('b', columns)} AS _before, {_changed_row('a', columns)} AS _after"
            f", {key_sql(grain or keys)} AS _row_key"
        )
        if rows
        else "",
        texts=f", {after_text(schema)} AS _after_text" if texts else "",
        columns=listed,
        before=before,
        after=after,
        where=table.predicate(spans),
        join=" AND ".join(f"b.`{k}` <=> a.`{k}`" for k in keys),
    )


def exact_text(field: StructField) -> bool:
    """Spark writes the column's values as the deterministic export does (``EXACT_TEXT``)."""
    from pyspark.sql.types import DecimalType

    kind = field.dataType
    if isinstance(kind, DecimalType):
        return kind.scale <= MAX_TEXT_SCALE
    return kind.typeName() in EXACT_TEXT


def after_text(schema: StructType) -> str:
    """The after side's row as an array of the export's text of each column (NULL: no row
    after). Only for a table whose every column has an exact text (``exact_text``)."""
    assert all(exact_text(f) for f in schema.fields), schema
    # As prod's type first: promotion's insert casts the staged rows to prod's columns.
    values = ", ".join(
        f"COALESCE(CAST(CAST(a.`{f.name}` AS {f.dataType.simpleString()}) AS STRING), "
        f"'{NULL_TEXT}')"
        for f in schema.fields
    )
    return f"CASE WHEN a._present IS NULL THEN NULL ELSE array({values}) END"


def _changed_row(side: str, columns: list[str]) -> str:
    """One side's row as JSON of its columns as text (decimals keep their scale), only for a
    key whose rows differ and that the side holds (else NULL: no JSON for equal rows)."""
    named = ", ".join(f"'{c}', CAST({side}.`{c}` AS STRING)" for c in columns)
    return (
        f"CASE WHEN {side}._present IS NULL OR b._row_hash <=> a._row_hash THEN NULL "
        f"ELSE to_json(named_struct({named})) END"
    )


def diff_table(
    spark: SparkSession,
    staged: StagedTable,
    grain: list[str],
    measures: t.Sequence[str] = (),
    published: bool = False,
) -> TableDiff:
    """Prod against staged over the evaluated intervals of one table: one read of each."""
    texts = {staged.model} if published else set()
    return diff_tables(spark, [(staged, grain)], {staged.model: measures}, texts)[0]


def diff_tables(
    spark: SparkSession,
    tables: list[tuple[StagedTable, list[str]]],
    measures: t.Mapping[str, t.Sequence[str]] | None = None,
    published: t.Collection[str] = (),
) -> list[TableDiff]:
    """``diff_table`` of each (staged table, grain), all in one statement (each table's
    sums as a map: the tables' columns differ). Each interval sums the table's DECIMAL
    columns; each day also the columns ``measures`` names for its model (a release note's
    measures), and a ``published`` model's changed days their rows after as the export's
    text, when its columns have one (``DayChange.after``)."""
    if not tables:
        return []
    parts = []
    decimals: list[list[str]] = []
    summed: list[list[str]] = []
    for index, (staged, grain) in enumerate(tables):
        schema = spark.table(staged.prod_table).schema
        columns = [f.name for f in schema.fields if f.dataType.typeName() == "decimal"]
        columns.sort(key=lambda name: name != staged.measure)  # the model's own measure first
        decimals.append(columns)
        extra = (measures or {}).get(staged.model, ())
        summed.append(mine := [*columns, *(m for m in extra if m not in columns)])
        texts = staged.model in published and all(exact_text(f) for f in schema.fields)
        parts.append(
            COUNTS_SQL.format(
                table=index,
                counts=COUNTS,
                sums_before=sums_map("b", mine),
                sums_after=sums_map("a", mine),
                per_day=CHANGES_PER_DAY + 1,
                after_rows=AFTER_ROWS if texts else NO_ROWS,
                diff=compare_sql(
                    spark,
                    staged.prod_table,
                    staged.staged_table,
                    staged,
                    grain,
                    measures=mine,
                    rows=True,
                    texts=texts,
                ),
            )
        )
    rows: list[list[dict[str, t.Any]]] = [[] for _ in tables]
    for row in delta.query(spark, " UNION ALL ".join(parts)).collect():
        rows[row["_table"]].append(row.asDict())
    return [
        _table_diff(staged, columns, sums, mine)
        for (staged, _), columns, sums, mine in zip(tables, decimals, summed, rows, strict=True)
    ]


def sums_map(side: str, columns: list[str]) -> str:
    """The sums of ``columns`` on one side of the diff (``b``: before, ``a``: after), as a
    map of column to decimal text."""
    entries = ", ".join(f"'{c}', CAST(SUM(`{side}_{c}`) AS STRING)" for c in columns)
    return f"CAST(map({entries}) AS MAP<STRING, STRING>)"


def _table_diff(
    staged: StagedTable, decimals: list[str], summed: list[str], rows: list[dict[str, t.Any]]
) -> TableDiff:
    """One table's diff from its rows of the counts query (one per interval and day): the
    intervals sum ``decimals``, the days ``summed``."""
    days = [
        DayChange(
            day=row["_time"],
            rows_before=int(row["rows_before"]),
            rows_after=int(row["rows_after"]),
            sums_before={c: row["_sums_before"].get(c) or "0" for c in summed},
            sums_after={c: row["_sums_after"].get(c) or "0" for c in summed},
            added=int(row["added"]),
            removed=int(row["removed"]),
            changed=int(row["changed"]),
            after=None if row["_after_rows"] is None else [tuple(r) for r in row["_after_rows"]],
        )
        for row in rows
    ]
    changes: list[Change] | None = [
        Change(
            row_key=change["row_key"],
            event_date=row["_time"],
            change=change["change"],
            before=change["before"],
            after=change["after"],
        )
        for row in rows
        for change in row["_changes"]
    ]
    if sum(day.changed_keys for day in days) > min(CHANGES_KEPT, len(changes or [])):
        changes = None
    out = []
    for i, (first, last) in enumerate(staged.intervals):
        mine = [row for row in rows if row["_interval"] == i]  # none: the interval is empty
        examples = {
            kind: sorted(key for row in mine for key in row[f"examples_{kind}"])[:EXAMPLES]
            for kind in KINDS
        }
        out.append(
            IntervalDiff(
                model=staged.model,
                interval=[first, last],
                rows_before=sum(int(row["rows_before"]) for row in mine),
                rows_after=sum(int(row["rows_after"]) for row in mine),
                sums_before={c: _total(mine, "_sums_before", c) for c in decimals},
                sums_after={c: _total(mine, "_sums_after", c) for c in decimals},
                keys_added=sum(int(row["added"]) for row in mine),
                keys_removed=sum(int(row["removed"]) for row in mine),
                keys_changed=sum(int(row["changed"]) for row in mine),
                examples={kind: keys for kind, keys in examples.items() if keys},
            )
        )
    return TableDiff(out, days, changes)


def _total(rows: list[dict[str, t.Any]], side: str, column: str) -> str:
    """The sum of ``column`` over ``rows``, from each row's map of sums (``side``)."""
    return str(sum((Decimal(row[side].get(column) or "0") for row in rows), Decimal(0)))


def breaker(table: TableDiff, watch: Breaker) -> list[BreakerTrip]:
    """Days of the watched model whose measure or row count moves by more than the
    threshold (relative), staged against prod."""
    trips = []
    for day in sorted(table.days, key=lambda d: d.day):
        watched = [("rows", Decimal(day.rows_before), Decimal(day.rows_after))]
        if watch.measure is not None:
            watched.append(
                (
                    watch.measure,
                    Decimal(day.sums_before.get(watch.measure, "0")),
                    Decimal(day.sums_after.get(watch.measure, "0")),
                )
            )
        for measure, before, after in watched:
            if before == after:
                continue
            change = None if before == 0 else float((after - before) / abs(before))
            if change is None or abs(change) > watch.threshold:
                trips.append(
                    BreakerTrip(day.day.isoformat(), measure, str(before), str(after), change)
                )
    return trips
