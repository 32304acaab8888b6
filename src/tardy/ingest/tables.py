"""The tables ingest writes: the append-only bronze tables (``bronze.pos_events`` for sales,
``bronze.store_changes`` for store changes: one ``BronzeTable`` each, picked by source system)
and the file ledger ``bronze.ingest_ledger``.
"""

from __future__ import annotations

from dataclasses import dataclass

from pyspark.sql import SparkSession

from tardy.key_index import ensure_key_index
from tardy.landing import STORE_MASTER_SOURCE

BRONZE_TABLE = "bronze.pos_events"
STORE_CHANGES_TABLE = "bronze.store_changes"
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
    of that list is named ``<ts_field>_raw``. ``key_index``: its rows are indexed in
    ``bronze.pos_event_keys`` (``tardy.key_index``) before each commit.
    """

    name: str
    fields: tuple[str, ...]
    ts_field: str
    key_index: bool = False

    def column(self, field_name: str) -> str:
        return f"{field_name}_raw" if field_name == self.ts_field else field_name

    @property
    def columns(self) -> tuple[str, ...]:
        """Column names in DDL order (``bronze_rows`` yields its tuples in this order)."""
        meta = tuple(c.split(" ", 1)[0] for c in _META_COLUMNS)
        return (*meta, self.ts_field, "raw_record", "parse_error", *map(self.column, self.fields))

    @property
    def ddl(self) -> str:
        columns = [
            *_META_COLUMNS,
            f"{self.ts_field} TIMESTAMP",
            "raw_record STRING NOT NULL",
            "parse_error STRING",
            *(f"{self.column(name)} STRING" for name in self.fields),
        ]
        body = ",\n".join(f"  {column}" for column in columns)
        return (
            f"\nCREATE TABLE IF NOT EXISTS {self.name} (\n{body}\n) USING delta\n"
            "PARTITIONED BY (arrival_date)\n"
            "TBLPROPERTIES ('delta.appendOnly' = 'true', 'delta.enableChangeDataFeed' = 'true')\n"
        )


POS_EVENTS = BronzeTable(
    BRONZE_TABLE,
    (
        "transaction_id",
        "record_type",
        "store_id",
        "product_id",
        "quantity",
        "unit_price",
        "discount",
        "event_ts",
        "corrects_transaction_id",
    ),
    ts_field="event_ts",
    key_index=True,
)
STORE_CHANGES = BronzeTable(
    STORE_CHANGES_TABLE,
    (
        "store_id",
        "effective_ts",
        "region",
        "format",
        "manager",
        "change_id",
        "is_correction",
    ),
    ts_field="effective_ts",
)
BRONZE_TABLES = (POS_EVENTS, STORE_CHANGES)
FIELDS = POS_EVENTS.fields
BRONZE_DDL = POS_EVENTS.ddl
STORE_CHANGES_DDL = STORE_CHANGES.ddl


def table_of(source_system: str) -> BronzeTable:
    """The bronze table of a source system: ``store_master`` files are store changes, every
    other source system is sales."""
    return STORE_CHANGES if source_system == STORE_MASTER_SOURCE else POS_EVENTS


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
    spark.sql("CREATE SCHEMA IF NOT EXISTS bronze")
    for table in BRONZE_TABLES:
        spark.sql(table.ddl)
    spark.sql(LEDGER_DDL)
    ensure_key_index(spark, BRONZE_TABLE)  # before any append: it must cover all of bronze
