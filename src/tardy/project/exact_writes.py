"""Exact interval writes for SQLMesh's Spark adapter on Delta Lake.

Stock SQLMesh writes an interval of an INCREMENTAL_BY_TIME_RANGE model on Spark with
``INSERT OVERWRITE`` in dynamic-partition mode: partitions the new result does not touch keep
their old rows, so an interval whose recomputed result is empty (a voided day, a correction
that moved a transaction to another day) keeps stale rows (``docs/facts.md``, fact 2).

Delta supports ``INSERT INTO t REPLACE WHERE <predicate> SELECT ...``: one atomic commit that
deletes every row matching the interval predicate and inserts the new result, and that
rejects new rows outside the predicate. SQLMesh already implements that strategy for its
Databricks adapter (``InsertOverwriteStrategy.REPLACE_WHERE``); ``enable`` selects it for the
vanilla Spark adapter too. It is a class attribute, read at every write, so it covers
``sqlmesh plan``, ``sqlmesh run`` and restatements alike, in the CLI (``macros/exact_writes.py``
calls ``enable`` whenever SQLMesh loads the project) and in ``tardy``.
"""

from __future__ import annotations

from sqlmesh.core.engine_adapter.shared import InsertOverwriteStrategy
from sqlmesh.core.engine_adapter.spark import SparkEngineAdapter

STRATEGY = InsertOverwriteStrategy.REPLACE_WHERE


def enable() -> None:
    """Make every Spark engine adapter of this process write intervals with REPLACE WHERE."""
    SparkEngineAdapter.INSERT_OVERWRITE_STRATEGY = STRATEGY


def is_enabled() -> bool:
    return SparkEngineAdapter.INSERT_OVERWRITE_STRATEGY is STRATEGY
