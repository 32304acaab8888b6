"""Late facts: the days the new records of a fact source change, found by re-running the
models that read it.

A *fact source* is a bronze table that declared sources land in (``sources.yaml``) and that
no dimension reads (``tardy.engine.dimension``). The models reading it (its *readers*, from
the DAG) say in their MODEL block what detection needs: a one-column grain that is either
the source's natural key (its declaration's ``natural_key``: one winner per key, like a
silver model) or the bronze record id (one row per record, like a quarantine), and a time
column. No model, table or source name is written here.

Detection reads the records added since the version prod reflects (Delta's change data
feed) and, per reader, the grain values they touch: their natural keys, or their record
ids. It evaluates the reader's own query (SQLMesh's rendering, over every day) with the
bronze table replaced by the records of those keys only (every record of a touched key,
whenever it arrived: through the key index when the source has one) and compares the rows
with prod's rows of the same keys, column by column. The days (time column) of the rows that
differ, on either side, are the reader's changed days: a new winner's day and the old
winner's day when a correction moves a sale, a voided sale's day, a new invalid record's
day in the quarantine. Exact when a reader's rows of a key depend only on the records of
that key, which is what its grain says (docs/adding-a-source.md).

Cost: one statement for the new records (materialised), one for their keys, one key index
lookup when the source has the index, and one comparison for all readers of the source.
Without a watermark (every record is new: a home whose prod was built but never restated)
the readers' queries run unrestricted and the comparison returns aggregates only: per
reader its days and its number of differing keys.
"""

from __future__ import annotations

import typing as t
from dataclasses import dataclass, field
from datetime import date

from sqlglot import exp, parse_one

from tardy.engine import delta, sqlmesh_api
from tardy.engine.dimension import plain_name
from tardy.errors import InputError
from tardy.ingest.tables import BronzeTable
from tardy.key_index import KEY_RESTRICTION_VARIABLE, KeyIndex, KeySet, key_date_expression
from tardy.sql import date_list, in_list

if t.TYPE_CHECKING:
    from pyspark.sql import SparkSession
    from sqlmesh import Context
    from sqlmesh.core.snapshot import Snapshot

    from tardy.project.sources import Sources

RECORD_ID = "record_id"  # every bronze table's row id (``tardy.ingest.tables``)
# The re-evaluated query covers every day from the reader's first computed one: a record may
# move a key to any day, and prod holds no row after its last computed day (such a day is
# absorbed by the next run, ``tardy.engine.detect``).
LAST_DAY = "9999-12-30"
# The new records are summarised in Python and their keys inlined as literals up to this
# many (Spark prunes bronze's partitions and Delta skips prod's files with literal lists);
# beyond it, semi-joins on the new records read the same rows.
MAX_INLINED_ROWS = 5_000


class FactSourceError(InputError):
    """A model reads a fact source without the metadata detection needs."""


@dataclass(frozen=True)
class Reader:
    """A model reading a fact source: by natural key, or one row per bronze record."""

    snapshot: Snapshot
    grain: str
    by_record: bool

    @property
    def name(self) -> str:
        return self.snapshot.model.name


@dataclass(frozen=True)
class FactSource:
    table: str  # the bronze table (Spark name)
    natural_key: str  # Spark SQL over its columns, the declaration's macros expanded
    key_index: KeyIndex | None
    readers: tuple[Reader, ...]
    columns: tuple[str, ...] = ()  # the bronze table's columns
    fields: tuple[str, ...] = ()  # its columns holding a record's own fields

    def first_copies(self, where: str, is_new: str) -> str:
        """A query of the bronze records matching ``where`` but the new ones (``is_new``, a
        predicate) that repeat a record of the same natural key verbatim: the same fields
        (or, unparseable, the same line), arrived again in another file. What prod was
        computed from plus what the new records change: a verbatim resend alone changes no
        reader's rows, whether or not its model keeps a version's first arrival."""
        if not self.fields:
            return f"SELECT * FROM {self.table} WHERE {where}"
        same = ", ".join(
            [
                f"({self.natural_key})",
                *(f"`{c}`" for c in self.fields),
                "parse_error",
                "CASE WHEN parse_error IS NOT NULL THEN raw_record END",
            ]
        )
        columns = ", ".join(f"`{c}`" for c in self.columns)
        return (
            f"SELECT {columns} FROM (SELECT *, ROW_NUMBER() OVER (PARTITION BY {same} "
            f"ORDER BY _tardy_new, arrival_ts, {RECORD_ID}) AS _tardy_copy FROM (SELECT *, "
            f"{is_new} AS _tardy_new FROM {self.table} WHERE {where})) "
            "WHERE NOT _tardy_new OR _tardy_copy = 1"
        )


@dataclass
class Changes:
    """What a fact source's new records change, per reader (model name)."""

    days: dict[str, set[date]] = field(default_factory=dict)
    counts: dict[str, int] = field(default_factory=dict)  # grain values whose rows differ
    # The natural-key readers' changed keys, when they were known as literals.
    keys: dict[str, KeySet] = field(default_factory=dict)


def fact_sources(
    context: Context,
    snapshots: t.Iterable[Snapshot],
    sources: Sources,
    dimension_tables: t.Collection[str],
) -> list[FactSource]:
    """The fact sources that prod's models read, in declaration order."""
    from sqlmesh.core.model import SqlModel

    snapshots = list(snapshots)
    out = []
    for table, declared in sources.by_bronze().items():
        if table in dimension_tables:
            continue
        readers = []
        for snapshot in snapshots:
            if not snapshot.is_model or table not in {plain_name(p.name) for p in snapshot.parents}:
                continue
            grain = sqlmesh_api.grain(snapshot)
            if len(grain) != 1 or not isinstance(snapshot.model, SqlModel):
                raise FactSourceError(
                    f"{snapshot.model.name} reads {table}: a model reading a fact source must "
                    f"be a SQL model with a one-column grain (the natural key, or "
                    f"{RECORD_ID}), found grain {grain or 'none'}"
                )
            readers.append(Reader(snapshot, grain[0], grain[0] == RECORD_ID))
        if not readers:
            continue
        keyed = [r for r in readers if not r.by_record] or readers
        natural_key = sqlmesh_api.render_macros(context, keyed[0].name, declared[0].natural_key_sql)
        bronze = BronzeTable(table, declared[0].fields, declared[0].event_time)
        out.append(
            FactSource(
                table,
                natural_key,
                declared[0].index,
                tuple(readers),
                bronze.columns,
                tuple(map(bronze.column, bronze.fields)),
            )
        )
    return out


def project_fact_sources(context: Context, snapshots: t.Sequence[Snapshot]) -> list[FactSource]:
    """``fact_sources`` of the project: its declared bronze tables but its dimensions', read
    by its models computed by intervals."""
    from tardy.engine import dimension
    from tardy.project.sources import declared

    dimension_tables = {
        table for dim in dimension.dimensions(context, list(snapshots)) for table in dim.sources
    }
    return fact_sources(
        context,
        [s for s in snapshots if sqlmesh_api.has_intervals(s)],
        declared(),
        dimension_tables,
    )


def changes(
    context: Context,
    spark: SparkSession,
    source: FactSource,
    since: int | None,
    until: int,
) -> Changes:
    """What the records added to ``source`` after version ``since`` (None: every record)
    through ``until`` change in its readers' prod rows."""
    from pyspark.errors import PySparkException

    views: list[str] = []
    stem = "_tardy_" + source.table.replace(".", "_")

    def view(name: str, sql: str) -> str:
        spark.sql(sql).createOrReplaceTempView(stem + name)
        views.append(stem + name)
        return stem + name

    table = source.table
    try:
        new: str | None = None  # every record
        if since is not None:
            try:
                frame = spark.sql(f"SELECT * FROM table_changes('{table}', {since + 1}, {until})")
                frame = frame.drop("_change_type", "_commit_version", "_commit_timestamp")
            except PySparkException:  # a table created before its change data feed
                frame = spark.sql(
                    f"SELECT b.* FROM {table} VERSION AS OF {until} AS b LEFT ANTI JOIN "
                    f"(SELECT {RECORD_ID} FROM {table} VERSION AS OF {since}) AS o "
                    f"ON b.{RECORD_ID} = o.{RECORD_ID}"
                )
            # Materialised: measured on Delta 4.4, a query that reads table_changes(bronze)
            # *and* bronze itself gets every bronze row from the feed.
            frame.localCheckpoint().createOrReplaceTempView(stem + "_new")
            views.append(stem + "_new")
            new = stem + "_new"
        return _compare(context, spark, source, new, view)
    finally:
        for name in views:
            spark.catalog.dropTempView(name)


@dataclass(frozen=True)
class _Restriction:
    """How the readers are restricted to the touched keys: the bronze rows each reads, the
    filter on its prod rows, and the render variables."""

    # A query of the natural keys' records, and one of the new records (the by-record
    # readers' records); None: every record of the source, the readers' queries unchanged.
    records: str | None
    new: str | None
    keyed_filter: str  # on a natural-key reader's grain column, ``{grain}`` to fill
    record_filter: str
    variables: dict[str, t.Any] | None
    # Per touched key (literal keys only), the arrival dates of its records (empty without
    # the key index).
    located: dict[str, frozenset[date]] | None

    def key_set(self, keys: t.Iterable[str]) -> KeySet | None:
        if self.located is None:
            return None
        keys = frozenset(keys)
        return KeySet(keys, frozenset(d for k in keys for d in self.located.get(k, ())))


def _compare(
    context: Context,
    spark: SparkSession,
    source: FactSource,
    new: str | None,
    view: t.Callable[[str, str], str],
) -> Changes:
    restriction = _restriction(spark, source, new, view)
    renderer = sqlmesh_api.Renderer.for_prod(context, date.today())
    parts, ctes, readers = [], [], []
    for i, reader in enumerate(source.readers):
        first = sqlmesh_api.first_computed_day(reader.snapshot)
        if first is None:  # nothing in prod yet: the next run computes it all
            continue
        records = restriction.new if reader.by_record else restriction.records
        variables = None if reader.by_record else restriction.variables
        (query,) = renderer.rows(reader.snapshot, first.isoformat(), LAST_DAY, variables)
        if not isinstance(query, exp.Query):
            raise FactSourceError(f"{reader.name}: a fact source's reader must be a SQL model")
        if records is not None:
            query = _reading(query, source.table, records)
        columns = ", ".join(f"`{c}`" for c in reader.snapshot.model.columns_to_types or {})
        where = (
            restriction.record_filter
            if reader.by_record
            else restriction.keyed_filter.format(grain=f"`{reader.grain}`")
        )
        prod = sqlmesh_api.spark_name(reader.name)
        ctes += [
            f"fresh_{i} AS (SELECT {columns} FROM ({query.sql('spark')}) AS q)",
            f"prod_{i} AS (SELECT {columns} FROM {prod} WHERE {where})",
        ]
        key = f"CAST(`{reader.grain}` AS STRING)"
        day = f"CAST(`{sqlmesh_api.time_column(reader.snapshot)}` AS DATE)"
        for a, b in (("fresh", "prod"), ("prod", "fresh")):
            parts.append(
                f"SELECT {i} AS reader, {key} AS k, {day} AS day "
                f"FROM (SELECT * FROM {a}_{i} EXCEPT ALL SELECT * FROM {b}_{i})"
            )
        readers.append(reader)
    out = Changes()
    if not parts:
        return out
    differing = "WITH " + ",\n".join(ctes) + ",\ndiffering AS (" + "\nUNION ALL\n".join(parts)
    if restriction.located is None:
        # The keys are not wanted (too many to list): per reader, its days and the number of
        # its differing keys, aggregated where the rows are. Without a watermark every row
        # of every reader is compared, and the differing rows are not bounded.
        sql = (
            f"{differing})\nSELECT reader, day, COUNT(DISTINCT k) AS n, GROUPING(day) AS every "
            "FROM differing GROUP BY GROUPING SETS ((reader, day), (reader))"
        )
        rows = delta.query(spark, sql).collect()
        for i, reader in enumerate(source.readers):
            if reader in readers:
                mine = [r for r in rows if r.reader == i]
                out.days[reader.name] = {r.day for r in mine if not r.every and r.day is not None}
                out.counts[reader.name] = sum(r.n for r in mine if r.every)
        return out
    rows = delta.query(spark, f"{differing})\nSELECT * FROM differing").collect()
    for i, reader in enumerate(source.readers):
        if reader not in readers:
            continue
        mine = [r for r in rows if r.reader == i]
        out.days[reader.name] = {r.day for r in mine if r.day is not None}
        out.counts[reader.name] = len({r.k for r in mine if r.k is not None})
        key_set = restriction.key_set(r.k for r in mine)
        if not reader.by_record and key_set is not None and source.key_index:
            out.keys[reader.name] = key_set
    return out


def _restriction(
    spark: SparkSession, source: FactSource, new: str | None, view: t.Callable[[str, str], str]
) -> _Restriction:
    """The restriction to the keys the new records touch: literal lists when the new records
    are at most MAX_INLINED_ROWS, else semi-joins on them; none when every record is new."""
    if new is None:
        return _Restriction(None, None, "TRUE", "TRUE", variables=None, located=None)
    key = source.natural_key
    rows = delta.query(
        spark,
        f"SELECT {RECORD_ID}, k, {key_date_expression(exp.column('k')).sql('spark')} AS key_date "
        f"FROM (SELECT {RECORD_ID}, {key} AS k FROM {new}) LIMIT {MAX_INLINED_ROWS + 1}",
    ).collect()
    if len(rows) > MAX_INLINED_ROWS:
        keys = view("_keys", f"SELECT DISTINCT {key} AS k FROM {new} WHERE {key} IS NOT NULL")
        records = f"({key}) IN (SELECT k FROM {keys})"
        if source.key_index is not None:
            key_date = key_date_expression(exp.column("k")).sql("spark")
            records += (
                f" AND arrival_date IN (SELECT arrival_date FROM {source.key_index.table} "
                f"WHERE key_date IN (SELECT {key_date} FROM {keys}) "
                f"AND natural_key IN (SELECT k FROM {keys}))"
            )
        return _Restriction(
            records=source.first_copies(records, f"{RECORD_ID} IN (SELECT {RECORD_ID} FROM {new})"),
            new=f"SELECT * FROM {new}",
            keyed_filter=f"{{grain}} IN (SELECT k FROM {keys})",
            record_filter=f"{RECORD_ID} IN (SELECT {RECORD_ID} FROM {new})",
            variables=None,
            located=None,
        )
    touched = {r.k for r in rows if r.k is not None}
    located: dict[str, set[date]] = {}
    if source.key_index is not None and touched:
        # The index read in the keys' own partitions only (static partition pruning).
        lookup = source.key_index.arrival_dates_sql(
            in_list("key_date", {r.key_date for r in rows if r.k is not None}),
            in_list("natural_key", touched),
        )
        for row in delta.query(spark, lookup).collect():
            located.setdefault(row.natural_key, set()).add(row.arrival_date)
    dates = {d for found in located.values() for d in found}
    records = in_list(f"({key})", touched)
    if source.key_index:
        records = f"{date_list('arrival_date', dates)} AND {records}"
    new_ids = in_list(RECORD_ID, {r[RECORD_ID] for r in rows})
    return _Restriction(
        records=source.first_copies(records, new_ids),
        new=f"SELECT * FROM {new}",
        keyed_filter=_keyed_literal(touched),
        record_filter=new_ids,
        variables=(
            {KEY_RESTRICTION_VARIABLE: KeySet(frozenset(touched), frozenset(dates)).variable()}
            if source.key_index
            else None
        ),
        located={k: frozenset(located.get(k, ())) for k in touched},
    )


def _keyed_literal(keys: set[str]) -> str:
    """``{grain} IN (<keys>)``, with the literals' braces escaped for ``str.format``."""
    listed = in_list("GRAIN", keys)
    return listed.replace("{", "{{").replace("}", "}}").replace("GRAIN", "{grain}", 1)


def _reading(query: exp.Query, table: str, records: str) -> exp.Query:
    """``query`` with every read of the bronze ``table`` replaced by the subquery ``records``
    (Spark SQL), under the table's own name or alias, so the query's qualified columns still
    resolve. A subquery, not a view: creating a view is a statement of its own."""
    target = exp.to_table(table)
    subquery = parse_one(records, dialect="spark")

    def swap(node: exp.Expr) -> exp.Expr:
        if isinstance(node, exp.Table) and node.name == target.name and node.db == target.db:
            alias = node.args.get("alias") or exp.TableAlias(this=exp.to_identifier(node.name))
            return exp.Subquery(this=subquery.copy(), alias=alias.copy())
        return node  # (transform does not descend into a replacement)

    return t.cast(exp.Query, query.transform(swap))
