"""Delta settings for small tables, measured on this engine (safety at the stock price, design 5).

On a data home of its own ($TARDY_HOME, which must be named ``delta-settings``), on the
project's own session (the warm engine when it is on): a small tardy-like table (a few
columns, one row a commit, as the restatement log, the versions store and the lateness
series are written) appended to ``COMMITS`` times with Delta's default
``delta.checkpointInterval`` (10) and with ``CHECKPOINT_INTERVAL``; each append's seconds,
the mean and the checkpoint commits' (every 10th) apart. Then the three time zones a commit's
checksum verification looks at (``allFilesInCrc.verificationMode.forceOnNonUTC``): the
session's, the driver JVM's and the process's. No timing is asserted; it prints a table.

Run: ``TARDY_HOME=.tardy/delta-settings .venv/bin/python bench/delta_settings.py``
"""

from __future__ import annotations

import os
import shutil
import statistics
import sys
import time
import typing as t
from pathlib import Path

if t.TYPE_CHECKING:
    from pyspark.sql import SparkSession

COMMITS = 30
CHECKPOINT_INTERVAL = 100
TABLE = "tardy_bench.small_{name}"


def appends(spark: SparkSession, name: str, interval: int | None) -> list[float]:
    """Seconds of each of ``COMMITS`` one-row appends to a fresh table."""
    table = TABLE.format(name=name)
    spark.sql(f"DROP TABLE IF EXISTS {table}")
    properties = f" TBLPROPERTIES ('delta.checkpointInterval' = '{interval}')" if interval else ""
    spark.sql(
        f"CREATE TABLE {table} (id STRING, at TIMESTAMP, detail STRING) USING delta{properties}"
    )
    seconds = []
    for i in range(COMMITS):
        started = time.perf_counter()
        spark.sql(f"INSERT INTO {table} VALUES ('r{i}', current_timestamp(), '{'x' * 200}')")
        seconds.append(time.perf_counter() - started)
    return seconds


def main() -> int:
    home = Path(os.environ.get("TARDY_HOME", ""))
    if home.name != "delta-settings":
        print("TARDY_HOME must name a folder called delta-settings (it is emptied)")
        return 2
    shutil.rmtree(home, ignore_errors=True)
    home.mkdir(parents=True)
    from tardy.project.context import open_context, spark_of

    spark = spark_of(open_context())
    spark.sql("CREATE SCHEMA IF NOT EXISTS tardy_bench")
    rows = []
    # The default twice, before and after the other: the first table pays the JVM's warm-up.
    for name, interval in (
        ("default", None),
        ("sparse", CHECKPOINT_INTERVAL),
        ("default_again", None),
    ):
        seconds = appends(spark, name, interval)
        # Commit v = i + 1 (the CREATE is version 0): Delta checkpoints when v % 10 == 0.
        checkpoints = [s for i, s in enumerate(seconds) if (i + 1) % 10 == 0]
        others = [s for i, s in enumerate(seconds) if (i + 1) % 10 != 0]
        label = f"{name}: checkpointInterval {interval or '10 (default)'}"
        rows.append((label, sum(seconds), statistics.mean(others), statistics.mean(checkpoints)))
    print(f"\n{COMMITS} one-row appends to a small Delta table:\n")
    print("| table | sum | mean, other commits | mean, every 10th commit |")
    print("|---|---:|---:|---:|")
    for label, total, other, tenth in rows:
        print(f"| {label} | {total:.1f} s | {other:.2f} s | {tenth:.2f} s |")
    jvm = spark.sql(
        "SELECT java_method('java.lang.System', 'getProperty', 'user.timezone') AS tz"
    ).first()
    print(
        f"\ntime zones: session {spark.conf.get('spark.sql.session.timeZone')}, driver JVM "
        f"{jvm.tz if jvm else '?'}, process {os.environ.get('TZ', time.tzname[0])}"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
