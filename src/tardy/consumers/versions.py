"""Published versions: what consumers read, named and re-readable byte for byte.

A model tagged ``published`` in its MODEL block (the gold models) is *published* each time
its prod table gets a new Delta version that consumers may read: every promotion publishes
the tables it changed, and ``tardy publish`` (the scheduler's step after ``sqlmesh run``, and
the demo's) publishes every published model whose current Delta version has none yet. A
publication is one row of ``tardy.published_versions``:

* ``table_name@v<version>``: versions count 1, 2, ... per model; ``latest`` is the highest;
* ``physical_table`` and ``delta_version``: what Delta time travel reads again;
* ``produced_by``: the restatement that committed it, or ``run`` (a ``sqlmesh run`` or plan);
* ``changed_days``: the values of the model's time column (days, or a period's first day)
  whose rows differ from the previous publication (every day for the first one, and for a
  new model version, whose rows SQLMesh built in a new table), and
  ``revisions``: for each of them how many earlier publications had changed it (``r0``: first
  published, ``r2``: recomputed twice);
* ``rows`` and ``sha256``: of the version's *deterministic export* (``export_text``), and
  ``day_digests``: each day's rows and digest, of which ``sha256`` is computed.

The deterministic export is CSV (UTF-8, ``\\n`` line ends, a header, minimal quoting): each
value as text (decimals exactly, dates and times in ISO-8601, NULL as ``\\N``), the lines sorted
as text, so the same rows give the same bytes whatever the order Spark returns them in.

A version's hash is computed from *day digests* (docs/versioned-truth.md, "Day digests"): a
day's digest is the SHA-256 of its export lines (the lines whose time column has that day's
text, each with its ``\\n``, in the export's order), kept as ``<rows>:<digest>`` per day in
``day_digests``; ``sha256`` is the SHA-256 of the lines ``<day>,<rows>:<digest>\\n`` in the
order of the days' text. So a publication reads and hashes only the days it changed, and takes
the others' digests from the previous publication: its cost follows the changed days, not the
table. A publication made before day digests (``day_digests`` NULL) keeps its rule: the
SHA-256 of the whole export's bytes.
Delta keeps a version readable until VACUUM removes its files or the log's retention drops
its commit (docs/versioned-truth.md); SQLMesh's janitor drops the physical tables of
snapshots that left prod.
"""

from __future__ import annotations

import csv
import hashlib
import io
import json
import typing as t
from dataclasses import asdict, dataclass, field
from datetime import UTC, date, datetime
from decimal import Decimal
from pathlib import Path
from urllib.parse import urlparse

from tardy.engine.promote import tag as commit_tag
from tardy.errors import InputError, TardyError
from tardy.sql import literal

if t.TYPE_CHECKING:
    import pyarrow as pa
    from pyspark.sql import SparkSession


TABLE = "tardy.published_versions"
LATEST = "latest"
NULL = "\\N"
PROMOTE_TAG = commit_tag("", "promote")  # a promotion's Delta commits: tardy:promote:<id>
TARDY_TAG = PROMOTE_TAG.split(":")[0] + ":"  # tardy's commits: tardy:<action>:<id>
RUN = "run"
VIEW_SUFFIX = "_published"  # gold.daily_sales -> gold_published.daily_sales

DDL = f"""
CREATE TABLE IF NOT EXISTS {TABLE} (
  table_name STRING NOT NULL,
  version INT NOT NULL,
  physical_table STRING NOT NULL,
  delta_version BIGINT NOT NULL,
  time_column STRING NOT NULL,
  produced_by STRING NOT NULL,
  changed_days ARRAY<STRING> NOT NULL,
  revisions MAP<STRING, INT> NOT NULL,
  rows BIGINT NOT NULL,
  sha256 STRING NOT NULL,
  published_at TIMESTAMP NOT NULL,
  day_digests MAP<STRING, STRING>
) USING delta
COMMENT 'tardy: one row per publication of a model tagged published'
"""
# Added to a table created before day digests (its earlier rows keep NULL: the whole export's
# hash).
DAY_DIGESTS_COLUMN = "day_digests"
ADD_DAY_DIGESTS = (
    f"ALTER TABLE {TABLE} ADD COLUMNS ({DAY_DIGESTS_COLUMN} MAP<STRING, STRING> "
    "COMMENT 'per day: <rows>:<sha256 of its export lines>; NULL: sha256 is the export''s')"
)
# The days (time-column values) whose rows differ between two versions, both ways.
CHANGED_DAYS_SQL = """
SELECT DISTINCT CAST({column} AS STRING) AS day FROM (
  (SELECT * FROM {new} EXCEPT ALL SELECT * FROM {old})
  UNION ALL
  (SELECT * FROM {old} EXCEPT ALL SELECT * FROM {new})
)
"""


class VersionNotFound(InputError):
    pass


class HashMismatch(TardyError):
    """A re-export's bytes differ from what was published."""


@dataclass(frozen=True)
class Publication:
    table_name: str
    version: int
    physical_table: str
    delta_version: int
    time_column: str  # the model's: what ``changed_days`` and ``tardy show --day`` name
    produced_by: str
    changed_days: list[str]
    revisions: dict[str, int]
    rows: int
    sha256: str
    published_at: str
    # day -> "<rows>:<sha256>" (``day_digests``); None: published before day digests, its
    # sha256 is the whole export's.
    day_digests: dict[str, str] | None = None

    @property
    def name(self) -> str:
        return f"{self.table_name}@v{self.version}"

    @property
    def restatement_id(self) -> str | None:
        """The restatement it comes from: the one a promotion committed (``produced_by`` is
        its id) or rolled back (``rollback:<id>``); None for a run (``_producer``'s rule)."""
        if self.produced_by == RUN:
            return None
        return self.produced_by.split(":", 1)[1] if ":" in self.produced_by else self.produced_by

    @property
    def restated(self) -> bool:
        """Whether a restatement's promotion produced it (not a run, not a rollback)."""
        return self.restatement_id == self.produced_by

    def as_dict(self) -> dict[str, object]:
        return {**asdict(self), "name": self.name}


@dataclass
class Published:
    """What one ``publish`` call published, and its Spark statements."""

    publications: list[Publication] = field(default_factory=list)
    statements: int = 0
    seconds: float = 0.0

    def as_dict(self) -> dict[str, object]:
        return {
            "published": [p.as_dict() for p in self.publications],
            "statements": self.statements,
            "seconds": self.seconds,
        }


def ensure_table(spark: SparkSession) -> None:
    """Create the publications table when it is missing, add ``day_digests`` to one created
    before it (an analysis of the table when it is current: no statement)."""
    from pyspark.errors import AnalysisException

    try:
        columns = spark.table(TABLE).columns
    except AnalysisException:
        spark.sql("CREATE SCHEMA IF NOT EXISTS tardy")
        spark.sql(DDL)
        return
    if DAY_DIGESTS_COLUMN not in columns:
        spark.sql(ADD_DAY_DIGESTS)


def as_text(value: object) -> str:
    if value is None:
        return NULL
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, datetime | date):
        return value.isoformat()
    if isinstance(value, int | str | Decimal):
        return str(value)
    if isinstance(value, float):
        return repr(value)
    return json.dumps(value, sort_keys=True, default=str)


def read_version(
    spark: SparkSession, physical_table: str, delta_version: int, where: str = ""
) -> pa.Table:
    """One Delta version of a table (its rows where ``where``, a SQL condition), read by
    time travel as a DataFrame: one plan on Spark Connect, where a ``spark.sql`` query is two
    (docs/engine.md, "One plan a read")."""
    frame = (
        spark.read.format("delta").option("versionAsOf", int(delta_version)).table(physical_table)
    )
    return (frame.where(where) if where else frame).toArrow()


def as_rows(arrow: pa.Table) -> tuple[list[str], list[tuple[str, ...]]]:
    """The columns and the rows, as text sorted, of a read (``read_version``)."""
    rows = sorted(tuple(as_text(v) for v in row.values()) for row in arrow.to_pylist())
    return arrow.column_names, rows


def read_rows(
    spark: SparkSession, physical_table: str, delta_version: int, where: str = ""
) -> tuple[list[str], list[tuple[str, ...]]]:
    """The columns and the rows, as text sorted, of one Delta version of a table (one
    statement)."""
    return as_rows(read_version(spark, physical_table, delta_version, where))


def export_text(spark: SparkSession, physical_table: str, delta_version: int) -> tuple[str, int]:
    """The deterministic CSV of one Delta version of a table, and its row count (one
    statement)."""
    columns, rows = read_rows(spark, physical_table, delta_version)
    return csv_text(columns, rows), len(rows)


def csv_text(columns: list[str], rows: list[tuple[str, ...]]) -> str:
    """The deterministic CSV of ``rows`` (text, sorted: ``read_rows``) under a header."""
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(columns)
    writer.writerows(rows)
    return out.getvalue()


def sha256(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


def day_digests(
    columns: list[str], rows: list[tuple[str, ...]], time_column: str
) -> dict[str, str]:
    """Per day (the time column's text) of ``rows`` (text, sorted: ``read_rows``): its
    rows and the SHA-256 of its export lines, as ``<rows>:<sha256>``."""
    index = columns.index(time_column)
    lines: dict[str, list[tuple[str, ...]]] = {}
    for row in rows:
        lines.setdefault(row[index], []).append(row)
    return {day: day_digest(mine) for day, mine in lines.items()}


def day_digest(rows: list[tuple[str, ...]]) -> str:
    """One day's digest, ``<rows>:<sha256>``, of its ``rows`` (text, sorted: ``read_rows``):
    the SHA-256 of their export lines."""
    text = csv_text([], rows).split("\n", 1)[1]  # without the header
    return f"{len(rows)}:{sha256(text)}"


def version_hash(digests: dict[str, str]) -> str:
    """A version's hash from its day digests: the SHA-256 of ``<day>,<rows>:<digest>\\n``
    in the order of the days' text."""
    return sha256("".join(f"{day},{digest}\n" for day, digest in sorted(digests.items())))


def rows_of(digests: dict[str, str]) -> int:
    return sum(int(digest.split(":", 1)[0]) for digest in digests.values())


def readable(spark: SparkSession, publication: Publication) -> bool:
    """Time travel can still read the version: its log replays and every data file it
    holds is on disk (one analysis, no scan). A ``VACUUM`` past the version removes files,
    log retention removes commits, SQLMesh's janitor drops the table."""
    try:
        files = spark.sql(
            f"SELECT * FROM {publication.physical_table} "
            f"VERSION AS OF {int(publication.delta_version)}"
        ).inputFiles()
    except Exception:  # noqa: BLE001 - Spark's and Delta's errors alike mean unreadable
        return False
    local = [urlparse(f) for f in files]
    return all(Path(u.path).exists() for u in local if u.scheme in ("", "file"))


def publications(spark: SparkSession, table_name: str | None = None) -> list[Publication]:
    """Every publication (of one model), oldest first (one statement: a DataFrame, one plan
    on Spark Connect)."""
    ensure_table(spark)
    frame = spark.table(TABLE)
    if table_name:
        frame = frame.where(f"table_name = {literal(table_name)}")
    rows = frame.orderBy("table_name", "version").collect()
    return [
        Publication(
            table_name=r.table_name,
            version=int(r.version),
            physical_table=r.physical_table,
            delta_version=int(r.delta_version),
            time_column=r.time_column,
            produced_by=r.produced_by,
            changed_days=list(r.changed_days),
            revisions=dict(r.revisions),
            rows=int(r.rows),
            sha256=r.sha256,
            published_at=r.published_at.replace(tzinfo=UTC).isoformat(timespec="seconds"),
            day_digests=None if r.day_digests is None else dict(r.day_digests),
        )
        for r in rows
    ]


def view_name(table_name: str) -> str:
    """The view consumers read a model's latest published version through."""
    schema, table = table_name.split(".", 1)
    return f"{schema}{VIEW_SUFFIX}.{table}"


def create_view(spark: SparkSession, name: str, create: str) -> None:
    """Run ``create`` (a ``CREATE OR REPLACE VIEW`` of ``name``), creating the view's schema
    when the creation finds it missing (one statement then, none once it exists)."""
    from pyspark.errors import AnalysisException

    try:
        spark.sql(create)
    except AnalysisException as error:
        if "SCHEMA_NOT_FOUND" not in str(error):
            raise
        spark.sql(f"CREATE SCHEMA IF NOT EXISTS {name.split('.')[0]}")
        spark.sql(create)


def producer(user_metadata: str | None) -> str:
    """Who committed a Delta version: a restatement's id for a promotion's tag, the tag's
    ``<action>:<id>`` for tardy's other commits (a rollback), ``run`` for the rest."""
    tag = user_metadata or ""
    if tag.startswith(PROMOTE_TAG):
        return tag.removeprefix(PROMOTE_TAG)
    return tag.removeprefix(TARDY_TAG) if tag.startswith(TARDY_TAG) else RUN


def append(spark: SparkSession, rows: list[Publication], now: datetime) -> None:
    values = [
        (
            p.table_name,
            p.version,
            p.physical_table,
            p.delta_version,
            p.time_column,
            p.produced_by,
            p.changed_days,
            p.revisions,
            p.rows,
            p.sha256,
            now.replace(tzinfo=None),
            p.day_digests,
        )
        for p in rows
    ]
    schema = spark.table(TABLE).schema
    spark.createDataFrame(values, schema).write.format("delta").mode("append").saveAsTable(TABLE)


def resolve(history: list[Publication], table_name: str, as_of: str | None) -> Publication:
    """The publication ``as_of`` names: ``latest`` (default), ``v3`` or ``TABLE@v3``, a Delta
    version number, or an ISO-8601 UTC time (the latest publication at or before it)."""
    mine = [p for p in history if p.table_name == table_name]
    if not mine:
        raise VersionNotFound(f"{table_name} has no published version (`tardy publish`)")
    spec = (as_of or LATEST).removeprefix(f"{table_name}@")
    found: list[Publication]
    if spec == LATEST:
        found = mine[-1:]
    elif spec.startswith("v") and spec[1:].isdigit():
        found = [p for p in mine if p.version == int(spec[1:])]
    elif spec.isdigit():
        found = [p for p in mine if p.delta_version == int(spec)][-1:]
    else:
        try:
            moment = datetime.fromisoformat(spec.replace("Z", "+00:00"))
        except ValueError as exc:
            raise InputError(
                f"--as-of {as_of!r}: expected latest, v<N>, a Delta version number or an "
                "ISO-8601 UTC time such as 2024-05-01T12:00:00Z"
            ) from exc
        moment = moment if moment.tzinfo else moment.replace(tzinfo=UTC)
        found = [p for p in mine if datetime.fromisoformat(p.published_at) <= moment][-1:]
    if not found:
        raise VersionNotFound(f"{table_name} has no published version {spec}")
    return found[0]
