"""The steward's decisions: rows of ``tardy.quarantine_reviews``, an append-only Delta table
of the data home (who, when, which record, what decision, why).

A decision is never edited: a later one *supersedes* it (``supersedes`` names the review it
replaces), and a record's review is its latest row. Appended in one statement each, so a
decision is there whole or not at all.
"""

from __future__ import annotations

import typing as t
import uuid
from dataclasses import asdict, dataclass
from datetime import UTC, datetime
from enum import StrEnum

if t.TYPE_CHECKING:
    from pyspark.sql import SparkSession

REVIEWS_TABLE = "tardy.quarantine_reviews"

REVIEWS_DDL = f"""
CREATE TABLE IF NOT EXISTS {REVIEWS_TABLE} (
  review_id STRING NOT NULL,
  record_id STRING NOT NULL,
  source_system STRING NOT NULL,
  decision STRING NOT NULL,
  reason STRING NOT NULL,
  duplicate_of STRING,
  steward_file STRING,
  steward STRING NOT NULL,
  decided_at TIMESTAMP NOT NULL,
  supersedes STRING
) USING delta
TBLPROPERTIES ('delta.appendOnly' = 'true')
COMMENT 'tardy: the stewards decisions on quarantined records (append-only; the latest row of
a record is its review)'
"""
_COLUMNS = (
    "review_id STRING, record_id STRING, source_system STRING, decision STRING, "
    "reason STRING, duplicate_of STRING, steward_file STRING, steward STRING, "
    "decided_at TIMESTAMP, supersedes STRING"
)


class Review(StrEnum):
    """A quarantined record's review state: open until a steward decides."""

    OPEN = "open"
    REJECTED = "rejected"  # invalid for good: the source system's owner is told
    DUPLICATE = "duplicate"  # a replay of another record (``duplicate_of``)
    FIXED = "fixed"  # a steward record with the fixed values landed (``steward_file``)


@dataclass(frozen=True)
class Decision:
    review_id: str
    record_id: str
    source_system: str
    decision: Review
    reason: str
    steward: str
    decided_at: datetime  # naive UTC, as Spark returns it
    duplicate_of: str | None = None
    steward_file: str | None = None  # relative to the landing root
    supersedes: str | None = None

    @classmethod
    def new(
        cls,
        record_id: str,
        source_system: str,
        decision: Review,
        reason: str,
        steward: str,
        **more: t.Any,
    ) -> Decision:
        now = datetime.now(UTC).replace(tzinfo=None)
        review_id = f"rv-{now:%Y%m%d%H%M%S}-{uuid.uuid4().hex[:8]}"
        return cls(review_id, record_id, source_system, decision, reason, steward, now, **more)

    def as_dict(self) -> dict[str, object]:
        out = asdict(self)
        out["decision"] = str(self.decision)
        out["decided_at"] = self.decided_at.isoformat() + "Z"
        return out


_ensured: set[int] = set()  # the sessions the table was created in (one DDL per process)


def ensure_table(spark: SparkSession) -> None:
    if id(spark) not in _ensured:
        spark.sql("CREATE SCHEMA IF NOT EXISTS tardy")
        spark.sql(REVIEWS_DDL)
        _ensured.add(id(spark))


def latest(spark: SparkSession) -> dict[str, Decision]:
    """Each reviewed record's latest decision (one read; no table yet: none)."""
    if not spark.catalog.tableExists(REVIEWS_TABLE):
        return {}
    out: dict[str, Decision] = {}
    rows = spark.table(REVIEWS_TABLE).collect()
    for row in sorted(rows, key=lambda r: (r.decided_at, r.review_id)):
        raw = row.asDict()
        out[row.record_id] = Decision(**{**raw, "decision": Review(raw["decision"])})
    return out


def steward_files(spark: SparkSession) -> set[str]:
    """Every steward file a decision names (superseded ones included)."""
    if not spark.catalog.tableExists(REVIEWS_TABLE):
        return set()
    rows = spark.table(REVIEWS_TABLE).where("steward_file IS NOT NULL").collect()
    return {str(row.steward_file) for row in rows}


def append(spark: SparkSession, *decisions: Decision) -> None:
    """Append ``decisions`` in one commit."""
    ensure_table(spark)
    rows = [
        (
            d.review_id,
            d.record_id,
            d.source_system,
            str(d.decision),
            d.reason,
            d.duplicate_of,
            d.steward_file,
            d.steward,
            d.decided_at.replace(tzinfo=UTC),  # PySpark reads naive times as local ones
            d.supersedes,
        )
        for d in decisions
    ]
    frame = spark.createDataFrame(rows, schema=_COLUMNS)
    frame.write.format("delta").mode("append").saveAsTable(REVIEWS_TABLE)
