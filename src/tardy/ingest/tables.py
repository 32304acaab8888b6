"""The tables ingest writes: the append-only bronze tables (one ``BronzeTable`` per table the
declared sources land in, ``tardy.project.sources``) and the file ledger ``bronze.ingest_ledger``.
"""

from __future__ import annotations

from dataclasses import dataclass

from pyspark.sql import SparkSession

from tardy.key_index import KeyIndex
from tardy.project.sources import Sources, declared, path

LEDGER_TABLE = "bronze.ingest_ledger"
# The columns every bronze table opens with (before its timestamp, raw_record, parse_error).
_META_COLUMNS = (
    "record_id STRING NOT NULL",
    "source_system STRING NOT NULL",
    "source_file STRING NOT NULL",
    "file_sha256 STRING NOT NULL",
    "line_number INT NOT NULL",
    "ingestion_id STRING NOT NULL",
    "ingested_at TIMESTAMP NOT NULL",
    "arrival_ts TIMESTAMP NOT NULL",
    "arrival_date DATE NOT NULL",
)


@dataclass(frozen=True)
class BronzeTable:
    """One append-only bronze table and the landing records it holds.

    Its columns: ``_META_COLUMNS``, then ``<ts_field> TIMESTAMP`` (the record's ``ts_field``
    parsed by ``parse_event_ts``), ``raw_record``, ``parse_error``, then one STRING column per
    record field in ``fields`` order, holding the field's JSON text; the ``ts_field`` column
    of that list is named ``<ts_field>_raw``. ``key_index``: where its rows are indexed
    (``tardy.key_index``) before each commit, None without an index.
    """

    name: str
    fields: tuple[str, ...]
    ts_field: str
    key_index: KeyIndex | None = None

    def column(self, field_name: str) -> str:
        return f"{field_name}_raw" if field_name == self.ts_field else field_name

    @property
    def columns(self) -> tuple[str, ...]:
        """Column names in DDL order (``bronze_rows`` yields its tuples in this order)."""
        meta = tuple(c.split(" ", 1)[0] for c in _META_COLUMNS)
        return (*meta, self.ts_field, "raw_record", "parse_error", *map(self.column, self.fields))

    @property
    def column_definitions(self) -> list[str]:
        """``<name> <TYPE>[ NOT NULL]`` per column, in DDL order."""
        return [
            *_META_COLUMNS,
            f"{self.ts_field} TIMESTAMP",
            "raw_record STRING NOT NULL",
            "parse_error STRING",
            *(f"{self.column(name)} STRING" for name in self.fields),
        ]

    @property
    def schema(self) -> str:
        """The columns as a DataFrame schema string (nullable: a row to check, not to keep)."""
        return ", ".join(c.removesuffix(" NOT NULL") for c in self.column_definitions)

    @property
    def ddl(self) -> str:
        body = ",\n".join(f"  {column}" for column in self.column_definitions)
        return (
            f"\nCREATE TABLE IF NOT EXISTS {self.name} (\n{body}\n) USING delta\n"
            "PARTITIONED BY (arrival_date)\n"
            "TBLPROPERTIES ('delta.appendOnly' = 'true', 'delta.enableChangeDataFeed' = 'true')\n"
        )


def bronze_tables(sources: Sources | None = None) -> tuple[BronzeTable, ...]:
    """One ``BronzeTable`` per bronze table the declared sources land in (``sources.yaml``),
    in declaration order."""
    sources = sources or declared()
    return tuple(
        BronzeTable(table, first.fields, first.event_time, first.index)
        for table, (first, *_) in sources.by_bronze().items()
    )


def main_table(sources: Sources | None = None) -> str:
    """The bronze table of the first declared source (``tardy status``'s pending age)."""
    sources = sources or declared()
    return next(iter(sources.sources.values())).bronze


def arrivals(spark: SparkSession, sources: Sources | None = None) -> str:
    """Every declared bronze table's records as one query: ``source_system``,
    ``arrival_date``, ``arrival_ts`` and ``event_ts`` (each table's parsed event time). A
    table not created yet (no ingest since its source was declared) holds no record."""
    tables = [t for t in bronze_tables(sources) if spark.catalog.tableExists(t.name)]
    if not tables:
        return (
            "SELECT CAST(NULL AS STRING) AS source_system, CAST(NULL AS DATE) AS arrival_date, "
            "CAST(NULL AS TIMESTAMP) AS arrival_ts, CAST(NULL AS TIMESTAMP) AS event_ts "
            "WHERE FALSE"
        )
    return " UNION ALL ".join(
        f"SELECT source_system, arrival_date, arrival_ts, {t.ts_field} AS event_ts FROM {t.name}"
        for t in tables
    )


def undeclared(source_system: str) -> str:
    """Why a file of an undeclared landing folder is refused."""
    return (
        f"landing folder {source_system!r} is declared by no source ({path()}): left "
        "untouched, declare it to ingest it"
    )


def table_of(source_system: str, sources: Sources | None = None) -> BronzeTable | None:
    """The bronze table of a landing folder, None when no source declares it."""
    sources = sources or declared()
    source = sources.get(source_system)
    if source is None:
        return None
    return next(t for t in bronze_tables(sources) if t.name == source.bronze)


LEDGER_DDL = f"""
CREATE TABLE IF NOT EXISTS {LEDGER_TABLE} (
  file_sha256 STRING NOT NULL,
  source_system STRING NOT NULL,
  source_file STRING NOT NULL,
  arrival_ts TIMESTAMP NOT NULL,
  rows BIGINT NOT NULL,
  ingestion_id STRING NOT NULL,
  ingested_at TIMESTAMP NOT NULL
) USING delta
TBLPROPERTIES ('delta.appendOnly' = 'true')
"""


def ensure_tables(spark: SparkSession) -> None:
    tables = bronze_tables()
    for schema in sorted({t.name.split(".")[0] for t in tables} | {"bronze"}):
        spark.sql(f"CREATE SCHEMA IF NOT EXISTS {schema}")
    for table in tables:
        spark.sql(table.ddl)
    spark.sql(LEDGER_DDL)
    for table in tables:  # before any append: the index must cover all of its table
        if table.key_index is not None:
            table.key_index.ensure(spark, table.name)
