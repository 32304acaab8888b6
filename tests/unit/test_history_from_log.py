"""Tables' commits read from their Delta logs (``delta.History``), against Delta's own
``DESCRIBE HISTORY`` as the oracle: the same versions, operations and tags, and the catalog's
answer for a table whose files are not in the data home."""

from __future__ import annotations

import shutil
import typing as t
from pathlib import Path

SCHEMA = "history_from_log"


def described(spark: t.Any, table: str, after: int) -> list[tuple[int, str, str | None]]:
    rows = spark.sql(f"DESCRIBE HISTORY {table}").collect()
    return sorted((int(r.version), r.operation, r.userMetadata) for r in rows if r.version > after)


def test_history_reads_the_log_as_describe_history_does(
    spark: t.Any, data_home: t.Any, tmp_path: Path
) -> None:
    from tardy.engine import delta

    inside, outside = f"{SCHEMA}.inside", f"{SCHEMA}.outside"
    spark.sql(f"CREATE SCHEMA IF NOT EXISTS {SCHEMA}")
    try:
        spark.sql(
            f"CREATE OR REPLACE TABLE {inside} (d DATE, x INT) USING delta PARTITIONED BY (d)"
        )
        spark.sql(
            f"CREATE OR REPLACE TABLE {outside} (x INT) USING delta LOCATION '{tmp_path / 'o'}'"
        )
        spark.sql(f"INSERT INTO {inside} VALUES (DATE'2026-01-01', 1), (DATE'2026-01-02', 2)")
        with delta.tagged_commits(spark, "tardy:promote:r1"):
            delta.replace_where(
                spark, inside, "d = DATE'2026-01-02'", "SELECT DATE'2026-01-02' AS d, 3 AS x"
            )
            spark.sql(f"INSERT INTO {outside} VALUES (1)")
        spark.sql(f"DELETE FROM {inside} WHERE x = 1")

        history = delta.History.of(spark, [inside, outside, f"{SCHEMA}.missing"], data_home.root)
        # Read from files: the table in the home only (the other's folder is not the home's).
        assert set(history.locations) == {inside}
        assert history.locations[inside].name == "_delta_log"
        for table in (inside, outside):
            for after in (-1, 0, 1):
                got = [
                    (c.version, c.operation, c.userMetadata) for c in history.after(table, after)
                ]
                assert got == described(spark, table, after), (table, after)
            latest = described(spark, table, -1)[-1]
            commit = history.latest(table)
            assert (commit.version, commit.operation, commit.userMetadata) == latest
        assert history.version(inside) == 3
        assert [c.userMetadata for c in history.after(inside, 1)] == ["tardy:promote:r1", None]
        assert history.after(inside, 3) == []

        # A commit file Delta's log cleanup deleted: the history is the catalog's answer.
        cleaned = tmp_path / "cleaned" / "_delta_log"
        shutil.copytree(history.locations[inside], cleaned)
        (cleaned / f"{1:020d}.json").unlink()
        partial = delta.History(spark, {inside: cleaned})
        for after in (0, 1):
            got = [(c.version, c.operation, c.userMetadata) for c in partial.after(inside, after)]
            assert got == described(spark, inside, after), after
    finally:
        spark.sql(f"DROP SCHEMA IF EXISTS {SCHEMA} CASCADE")
