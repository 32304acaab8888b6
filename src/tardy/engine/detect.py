"""Detect: the closed intervals late bronze rows change, and the arrival watermark.

``detect`` looks at the bronze rows added since the last restatement (the watermark: a bronze
Delta version; the first time, every row), and keeps only what prod does not reflect yet:
a transaction whose expected winning record or version count differs from its prod silver
row, an invalid row missing from the quarantine. The days they change are split into those
the next ``sqlmesh run`` recomputes anyway (inside the grace window) and closed days, whose
downstream closure (daily day, week, month, the 28 days of features that include the day)
is the change manifest.

Detection compares bronze with the two models that read it (the sales source's rules: the
silver model's own macros decide validity, key and precedence); everything downstream of
them comes from the DAG (``tardy.engine.closure``). ``tardy.engine.machine`` stages the
manifest's root intervals and cascades only what changed, then advances the watermark.
"""

from __future__ import annotations

import typing as t
from dataclasses import asdict, dataclass, field
from datetime import UTC, date, datetime, timedelta

from sqlglot import exp

from tardy.engine import delta, dimension, sqlmesh_api
from tardy.engine.closure import Closure, days_of, ranges
from tardy.ingest.tables import BRONZE_TABLE
from tardy.key_index import (
    KEY_INDEX_TABLE,
    KeySet,
    key_date_expression,
    records_of_literal_keys,
)
from tardy.sql import in_list

if t.TYPE_CHECKING:
    from pyspark.sql import SparkSession
    from sqlmesh import Context
    from sqlmesh.core.snapshot import Snapshot

QUARANTINE_TAG = "quarantine"  # the model of a source's invalid rows (its MODEL block's tags)
WATERMARK_TABLE = "tardy.arrival_watermarks"
WATERMARK_DDL = f"""
CREATE TABLE IF NOT EXISTS {WATERMARK_TABLE} (
  bronze_version BIGINT NOT NULL,
  arrival_watermark TIMESTAMP,
  advanced_at TIMESTAMP NOT NULL,
  reason STRING NOT NULL,
  source_versions MAP<STRING, BIGINT>
) USING delta
TBLPROPERTIES ('delta.appendOnly' = 'true')
"""
# The versions of the other bronze tables prod reflects (a dimension's: ``tardy.engine.
# dimension``), added to watermark tables created before it.
SOURCE_VERSIONS_COLUMN = "source_versions"

# Rendered with the silver model's own macros: one definition of validity, key and precedence.
# {bronze_keys}, {silver_keys} and {quarantine_ids} restrict the three table reads to the
# touched keys and the new invalid records: semi-joins on ``touched`` in general, literal
# lists when the new rows are few (``_key_filters``), which let Spark prune bronze's
# partitions and Delta skip prod silver's files.
CHANGES_SQL = """
WITH new_rows AS (
  SELECT record_id, @natural_key() AS k, @invalid_reason() AS reason,
         @report_date() AS report_date
  FROM {new_rows}
), touched AS (
  SELECT DISTINCT k FROM new_rows WHERE reason IS NULL
), versions AS (
  -- Every record of the touched keys, validated after the key match (as in the model).
  SELECT @natural_key() AS k, record_id, record_type, arrival_ts,
         CAST(event_ts AS DATE) AS event_date, @invalid_reason() IS NULL AS is_valid
  FROM {bronze}
  WHERE {bronze_keys}
), ranked AS (
  SELECT *, @version_rank(k, is_valid) AS rn,
         COUNT(CASE WHEN is_valid THEN 1 END) OVER (PARTITION BY k) AS n
  FROM versions
), expected AS (
  SELECT k, record_type <> 'void' AS present, event_date, record_id, n
  FROM ranked
  WHERE rn = 1 AND is_valid
), prod AS (
  SELECT s.transaction_id AS k, s.event_date, s.source_record_id, s.version_count
  FROM {silver} AS s
  WHERE {silver_keys}
)
SELECT 'silver' AS kind, e.k, CASE WHEN e.present THEN e.event_date END AS new_day,
       p.event_date AS old_day
FROM expected AS e LEFT JOIN prod AS p ON e.k = p.k
WHERE NOT (
  (NOT e.present AND p.k IS NULL)
  OR (e.present AND p.k IS NOT NULL AND e.event_date = p.event_date
      AND e.record_id = p.source_record_id AND e.n = p.version_count)
)
UNION ALL
SELECT 'quarantine' AS kind, n.record_id AS k, n.report_date AS new_day, NULL AS old_day
FROM new_rows AS n
LEFT ANTI JOIN (SELECT record_id FROM {quarantine} WHERE {quarantine_ids}) AS q
  ON n.record_id = q.record_id
WHERE n.reason IS NOT NULL
"""
SEMI_JOIN_FILTERS = {
    # Every bronze record of the touched keys, read through the key index (only the
    # bronze partitions that hold them: docs/key-lookups.md).
    "bronze_keys": "@records_of_keys(touched, k)",
    "silver_keys": "s.transaction_id IN (SELECT k FROM touched)",
    "quarantine_ids": "record_id IN (SELECT record_id FROM new_rows WHERE reason IS NOT NULL)",
}
# The new rows are summarised in Python and their keys inlined as literals up to this many;
# beyond it the semi-joins of SEMI_JOIN_FILTERS read the same rows.
MAX_INLINED_ROWS = 5_000
# {key_date} is ``tardy.key_index``'s rule over ``k`` (the silver model's macros, which
# render this, do not include ``@key_date``).
NEW_ROWS_SQL = """
SELECT record_id, k, {key_date} AS key_date, is_valid
FROM (
  SELECT record_id, @natural_key() AS k, @invalid_reason() IS NULL AS is_valid
  FROM {new_rows}
)
"""
# The arrival dates of bronze holding records of each of the (few, literal) keys: the key
# index read in the keys' own partitions only (static partition pruning; docs/key-lookups.md).
ARRIVAL_DATES_SQL = """
SELECT DISTINCT natural_key, arrival_date FROM {key_index} WHERE {key_dates} AND {keys}
"""


@dataclass(frozen=True)
class KeyFilters:
    """CHANGES_SQL's literal filters, and where the touched keys' records are."""

    filters: dict[str, str]
    arrival_dates: dict[str, frozenset[date]]  # by touched key

    def key_set(self, keys: t.Iterable[str]) -> KeySet:
        keys = frozenset(keys)
        dates = frozenset(d for k in keys for d in self.arrival_dates.get(k, ()))
        return KeySet(keys, dates)


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
    # knew them as literals (at most MAX_INLINED_ROWS new rows). Not part of the report (it
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
        ``tardy.recorded``)."""
        return cls(**raw)

    @property
    def is_empty(self) -> bool:
        return not any(self.impacted.values())


def ensure_watermark_table(spark: SparkSession) -> None:
    if spark.catalog.tableExists(WATERMARK_TABLE):  # a catalog lookup, not a statement
        if SOURCE_VERSIONS_COLUMN not in spark.table(WATERMARK_TABLE).schema.fieldNames():
            try:
                spark.sql(
                    f"ALTER TABLE {WATERMARK_TABLE} "
                    f"ADD COLUMNS ({SOURCE_VERSIONS_COLUMN} MAP<STRING, BIGINT>)"
                )
            except Exception:  # another process added it first
                if SOURCE_VERSIONS_COLUMN not in spark.table(WATERMARK_TABLE).schema.fieldNames():
                    raise
        return
    spark.sql("CREATE SCHEMA IF NOT EXISTS tardy")
    spark.sql(WATERMARK_DDL)


def watermark(spark: SparkSession) -> tuple[int | None, str | None]:
    """The arrival watermark: (bronze version, latest arrival) prod reflects, or (None, None)
    when it was never set."""
    row = spark.sql(
        f"SELECT bronze_version, arrival_watermark FROM {WATERMARK_TABLE} "
        "ORDER BY advanced_at DESC, bronze_version DESC LIMIT 1"
    ).first()
    if row is None or row.bronze_version < 0:  # never set, or rolled back to the start
        return None, None
    stamp = row.arrival_watermark.isoformat() if row.arrival_watermark else None
    return int(row.bronze_version), stamp


def source_watermarks(spark: SparkSession) -> dict[str, int]:
    """The versions of the dimensions' bronze tables prod reflects (empty: never recorded)."""
    row = spark.sql(
        f"SELECT {SOURCE_VERSIONS_COLUMN} AS v FROM {WATERMARK_TABLE} "
        "ORDER BY advanced_at DESC, bronze_version DESC LIMIT 1"
    ).first()
    return {} if row is None or row.v is None else {k: int(v) for k, v in row.v.items()}


def bronze_version(spark: SparkSession) -> int:
    return delta.version(spark, BRONZE_TABLE)


@dataclass(frozen=True)
class FactModels:
    """The two models that read the sales source (``BRONZE_TABLE``), from the DAG and their
    metadata: its winners (``silver``, keyed by its grain) and its invalid rows
    (``quarantine``, tagged ``quarantine``)."""

    silver: str
    key: str
    quarantine: str


def fact_models(snapshots: t.Iterable[Snapshot]) -> FactModels:
    readers = [
        s
        for s in snapshots
        if s.is_model and BRONZE_TABLE in {dimension.plain_name(p.name) for p in s.parents}
    ]
    quarantine = [s for s in readers if QUARANTINE_TAG in s.model.tags]
    silver = [s for s in readers if QUARANTINE_TAG not in s.model.tags]
    if len(quarantine) != 1 or len(silver) != 1:
        raise ValueError(
            f"{BRONZE_TABLE} must be read by one model tagged {QUARANTINE_TAG!r} and one "
            f"other, found {sorted(s.model.name for s in readers)} in prod (after a change "
            "to the models' tags, `sqlmesh plan` applies it)"
        )
    (winners,) = silver
    return FactModels(winners.model.name, sqlmesh_api.grain(winners)[0], quarantine[0].model.name)


def _render(context: Context, facts: FactModels, sql: str) -> str:
    return sqlmesh_api.render_macros(context, facts.silver, sql)


def _key_filters(
    context: Context, facts: FactModels, spark: SparkSession, new_rows: str
) -> KeyFilters | None:
    """Literal filters for CHANGES_SQL from the (few) new rows, or None when there are more
    than MAX_INLINED_ROWS.

    The new rows come from a materialised change feed, which carries no statistics, so
    Spark plans no dynamic partition pruning for the semi-joins (measured: detect read all of
    bronze on a year of history). With literals instead, one small statement reads the key
    index in the keys' partitions for the arrival dates holding their records, and bronze is
    read in those partitions only; prod silver's files are skipped by their statistics.
    Exact for the same reason as ``@records_of_keys``: the index covers every bronze row.
    """
    key_date = key_date_expression(exp.column("k")).sql("spark")
    sql = NEW_ROWS_SQL.format(new_rows=new_rows, key_date=key_date)
    rows = spark.sql(_render(context, facts, sql) + f" LIMIT {MAX_INLINED_ROWS + 1}").collect()
    if len(rows) > MAX_INLINED_ROWS:
        return None
    valid = [r for r in rows if r.is_valid and r.k is not None]
    touched = {r.k for r in valid}
    invalid = {r.record_id for r in rows if not r.is_valid}
    located: dict[str, set[date]] = {}
    if touched:
        lookup = ARRIVAL_DATES_SQL.format(
            key_index=KEY_INDEX_TABLE,
            key_dates=in_list("key_date", {r.key_date for r in valid}),
            keys=in_list("natural_key", touched),
        )
        for row in spark.sql(lookup).collect():
            located.setdefault(row.natural_key, set()).add(row.arrival_date)
    arrival_dates = {d for dates in located.values() for d in dates}
    bronze_keys = records_of_literal_keys(touched, (d.isoformat() for d in arrival_dates))
    filters = {
        "bronze_keys": bronze_keys.sql("spark"),
        "silver_keys": in_list(f"s.{facts.key}", touched),
        "quarantine_ids": in_list("record_id", invalid),
    }
    return KeyFilters(filters, {k: frozenset(dates) for k, dates in located.items()})


NEW_ROWS_VIEW = "_tardy_new_bronze_rows"


def _changes(
    context: Context, facts: FactModels, spark: SparkSession, since: int | None, until: int
) -> tuple[list[t.Any], KeyFilters | None]:
    """The rows of CHANGES_SQL for the bronze rows added after version ``since`` through
    version ``until``, and the literal key filters when the new rows were few enough.

    Bronze is append-only with Delta's change data feed on, so the new rows are read from
    the files the later commits added (``table_changes``); a bronze table created before
    the feed was switched on falls back to an anti-join with the old version. The new rows
    are materialised first (``localCheckpoint``): measured on Delta 4.4, a query that reads
    ``table_changes(bronze)`` *and* bronze itself gets every bronze row from the feed.
    """
    from pyspark.errors import PySparkException

    tables = dict(bronze=BRONZE_TABLE, silver=facts.silver, quarantine=facts.quarantine)
    if since is None:
        sql = CHANGES_SQL.format(new_rows=BRONZE_TABLE, **tables, **SEMI_JOIN_FILTERS)
        return spark.sql(_render(context, facts, sql)).collect(), None
    try:
        new = spark.sql(f"SELECT * FROM table_changes('{BRONZE_TABLE}', {since + 1}, {until})")
        new = new.drop("_change_type", "_commit_version", "_commit_timestamp").localCheckpoint()
    except PySparkException:
        new = spark.sql(
            f"SELECT b.* FROM {BRONZE_TABLE} VERSION AS OF {until} AS b LEFT ANTI JOIN "
            f"(SELECT record_id FROM {BRONZE_TABLE} VERSION AS OF {since}) AS o "
            "ON b.record_id = o.record_id"
        ).localCheckpoint()
    new.createOrReplaceTempView(NEW_ROWS_VIEW)
    try:
        literal = _key_filters(context, facts, spark, NEW_ROWS_VIEW)
        filters = literal.filters if literal else SEMI_JOIN_FILTERS
        sql = CHANGES_SQL.format(new_rows=NEW_ROWS_VIEW, **tables, **filters)
        return spark.sql(_render(context, facts, sql)).collect(), literal
    finally:
        spark.catalog.dropTempView(NEW_ROWS_VIEW)


def detect(context: Context, spark: SparkSession) -> Manifest:
    ensure_watermark_table(spark)
    grace = int(context.config.variables["grace_days"])
    since, previous = watermark(spark)
    version = bronze_version(spark)
    # Bronze is append-only: its latest arrival is in the partitions from the previous one on.
    newer = f"WHERE arrival_date >= DATE'{previous[:10]}'" if previous else ""
    arrival = spark.sql(
        f"SELECT MAX(arrival_ts) AS m FROM {BRONZE_TABLE} VERSION AS OF {version} {newer}"
    )
    latest = delta.single_row(arrival).m
    closure = Closure(context, sqlmesh_api.model_snapshots(context))
    facts = fact_models(closure.snapshots.values())
    changes, literal = (
        _changes(context, facts, spark, since, version) if since != version else ([], None)
    )
    found = {
        facts.silver: {
            d for r in changes if r.kind == "silver" for d in (r.new_day, r.old_day) if d
        },
        facts.quarantine: {r.new_day for r in changes if r.kind == "quarantine"},
    }
    roots: dict[str, set[date]] = {}
    absorbed: dict[str, list[list[str]]] = {}
    for model, days in found.items():
        # The next `sqlmesh run` recomputes the last grace_days of the model's intervals.
        end = sqlmesh_api.last_computed_day(closure.snapshots[model])
        closed = {d for d in days if end is not None and d <= end - timedelta(days=grace)}
        roots[model] = closed
        absorbed[model] = ranges(days - closed)
    reasons: dict[str, str] = {}
    since_sources = source_watermarks(spark)
    source_versions: dict[str, int] = {}
    windows: dict[str, list[dict[str, str | None]]] = {}
    commands = stock_commands(closure, roots)
    for dim in dimension.dimensions(context, sqlmesh_api.model_snapshots(context)):
        altered = dimension.detect(context, spark, dim, since_sources)
        for child, days in altered.days.items():
            end = sqlmesh_api.last_computed_day(closure.snapshots[child])
            closed = {d for d in days if end is not None and d <= end - timedelta(days=grace)}
            roots[child] = roots.get(child, set()) | closed
            for source in dim.sources:
                commands += stock_commands(closure, {child: closed}, source)
            absorbed[child] = ranges(days_of(absorbed.get(child, [])) | (days - closed))
            reasons[child] = (
                f"{len(altered.windows)} validity window(s) of {len(altered.keys)} key(s) of "
                f"{dim.name} that late changes alter (its as-of join)"
            )
        # The dimension's watermark advances even when some altered days are inside the grace
        # window: SQLMesh's lookback makes the next run, whenever it comes, recompute them
        # (it moves the start of the missing intervals back by the lookback). Held back, the
        # same windows would be found again and again (detection compares bronze versions,
        # not prod's rows as the sales rule does).
        source_versions.update(altered.versions)
        if altered.windows:
            windows[dim.name] = [w.as_dict() for w in altered.windows]
    reached = closure.downstream(roots)
    reasons |= {
        facts.silver: f"{sum(r.kind == 'silver' for r in changes)} transactions whose prod "
        "row differs from their bronze records (new versions, duplicates, corrections, voids)",
        facts.quarantine: f"{sum(r.kind == 'quarantine' for r in changes)} invalid rows "
        "missing from the quarantine",
    }
    for model in reached:
        if model not in reasons:
            parents = ", ".join(closure.parents(model))
            reasons[model] = f"the intervals that read an impacted day of {parents}"
    manifest = Manifest(
        arrival_watermark=latest.isoformat() if latest else None,
        previous_watermark=previous,
        bronze_version=version,
        since_bronze_version=since,
        late_rows=len(changes),
        impacted={model: ranges(days) for model, days in reached.items()},
        absorbed_by_next_run=absorbed,
        reasons=reasons,
        roots={model: ranges(days) for model, days in roots.items()},
        source_versions=source_versions,
        since_source_versions=since_sources,
        altered=windows,
    )
    if literal is not None:  # the changed keys are known: staging may restrict silver to them
        manifest.keys[facts.silver] = literal.key_set(r.k for r in changes if r.kind == "silver")
    manifest.stock_commands = list(dict.fromkeys(commands))
    return manifest


def stock_commands(
    closure: Closure, roots: dict[str, set[date]], source: str = BRONZE_TABLE
) -> list[str]:
    """The stock restatements covering the same changes: per range of root days, one hull
    from the earliest to the latest day any model's closure reaches, restating what reads
    ``source``."""
    commands = []
    for model, days in roots.items():
        for span in ranges(days):
            reached = closure.downstream({model: days_of([span])})
            every = [d for model_days in reached.values() for d in model_days]
            commands.append(
                f"sqlmesh plan --restate-model {source} --start {min(every)} --end {max(every)}"
            )
    return list(dict.fromkeys(commands))


def advance_watermark(
    spark: SparkSession,
    version: int,
    arrival_watermark: str | None,
    reason: str,
    source_versions: dict[str, int] | None = None,
) -> None:
    """Record that prod reflects bronze up to ``version`` (-1: nothing yet), and the
    dimensions' bronze tables up to ``source_versions`` (None or a missing table: never
    recorded)."""
    ensure_watermark_table(spark)
    stamp = datetime.fromisoformat(arrival_watermark) if arrival_watermark else None
    spark.createDataFrame(
        [(version, stamp, datetime.now(UTC), reason, source_versions or None)],
        schema=spark.table(WATERMARK_TABLE).schema,
    ).write.format("delta").mode("append").saveAsTable(WATERMARK_TABLE)
