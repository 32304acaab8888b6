"""A class-data-sharing archive that shortens every Spark driver's start.

Every ``tardy`` command, ``sqlmesh`` call and test child starts its own JVM, which loads and
verifies thousands of classes of Spark, Delta, Hive and Derby before its first query. JDK 17
can dump the classes one run loaded into an archive (``-XX:ArchiveClassesAtExit``) that later
JVMs map instead of parsing and verifying the jars again (``-XX:SharedArchiveFile``).
Measured (``docs/jvm-archive.md``): a process that opens the project and reads a few Delta
tables 30-33 s -> 23-26 s, and 6 CPU-seconds less per process.

``make setup`` builds the archive for this virtualenv (its classpath is PySpark's jars, Delta's
included: ``tardy.runtime.jars``) with ``python -m tardy.runtime.jvm archive``;
``tardy.project.home.activate`` hands its options to ``project.yaml`` through
``TARDY_JVM_ARCHIVE``. A missing archive changes nothing; a stale one (jars replaced since) is
ignored by the JVM, and its warning is turned off so that it never lands in a command's JSON
output.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
import textwrap
from pathlib import Path

ARCHIVE = Path(sys.prefix) / "tardy-classes.jsa"
ARCHIVE_VARIABLE = "TARDY_JVM_ARCHIVE"
QUIET = "-Xlog:cds=off -Xlog:cds+dynamic=off"
# The small-data profile (``TARDY_SPARK_CODEGEN=false``: the test suite, CI). On a few thousand
# rows the JIT, not the queries, is most of a JVM's CPU (C2 alone 46 % of a 3-minute test's
# driver): C2 compiles only the hottest methods (10x its default thresholds) and the Serial
# collector runs in the allocating thread. The archive maps under it (``test_jvm``).
TUNING_VARIABLE = "TARDY_JVM_TUNING"
SMALL_DATA = (
    "-XX:+UseSerialGC -XX:Tier4InvocationThreshold=50000 -XX:Tier4MinInvocationThreshold=6000 "
    "-XX:Tier4CompileThreshold=150000 -XX:Tier4BackEdgeThreshold=400000"
)

# What the archive learns from: a driver configured as project.yaml's gateway, its metastore,
# Delta writes (insert, REPLACE WHERE, MERGE), reads, history and a clone.
TRAINING = textwrap.dedent(
    """
    from tardy.project.context import open_context, spark_of
    spark = spark_of(open_context())
    spark.sql("CREATE SCHEMA IF NOT EXISTS warm")
    spark.sql("CREATE TABLE warm.t (k BIGINT, d DATE, v DECIMAL(18, 2)) USING delta "
              "PARTITIONED BY (d)")
    spark.sql("INSERT INTO warm.t VALUES (1, DATE'2026-01-01', 1.5), (2, DATE'2026-01-02', 2)")
    spark.sql("INSERT INTO warm.t REPLACE WHERE d = DATE'2026-01-01' "
              "SELECT 3, DATE'2026-01-01', 3.5")
    spark.sql("MERGE INTO warm.t USING (SELECT 2 AS k) s ON warm.t.k = s.k "
              "WHEN NOT MATCHED THEN INSERT (k, d, v) VALUES (s.k, DATE'2026-01-03', 0)")
    spark.sql("SELECT d, count(*), sum(v) FROM warm.t GROUP BY d ORDER BY d").collect()
    spark.sql("DESCRIBE HISTORY warm.t").collect()
    spark.sql("CREATE TABLE warm.c SHALLOW CLONE warm.t VERSION AS OF 1")
    spark.sql("SELECT * FROM warm.c EXCEPT ALL SELECT * FROM warm.t").collect()
    spark.sql("CREATE OR REPLACE VIEW warm.v AS SELECT * FROM warm.t")
    spark.table("warm.v").toPandas()
    from pyspark import SparkContext
    jvm = SparkContext._gateway.proc  # the driver dumps the archive when it exits
    spark.stop()
    jvm.stdin.close()
    jvm.wait(timeout=300)
    """
)


def options() -> str:
    """The driver's JVM options that use the archive, or nothing when there is none."""
    if not ARCHIVE.is_file():
        return ""
    return f"-XX:SharedArchiveFile={ARCHIVE} {QUIET}"


def small_data() -> bool:
    """The small-data profile is on (``project.yaml`` turns off generated code with it)."""
    return os.environ.get("TARDY_SPARK_CODEGEN", "true") == "false"


def tuning() -> str:
    """The JVM options of the drivers and executors tardy configures: the small-data profile
    when it is on, none otherwise."""
    return SMALL_DATA if small_data() else ""


def build_archive() -> Path:
    """Run the training in a throw-away data home with ``-XX:ArchiveClassesAtExit`` and move
    the archive in place when the JVM has written it (at its exit)."""
    ARCHIVE.unlink(missing_ok=True)
    with tempfile.TemporaryDirectory(prefix="tardy-jvm-") as tmp:
        dumped = Path(tmp) / "classes.jsa"
        env = {
            **os.environ,
            "TARDY_HOME": str(Path(tmp) / "home"),
            ARCHIVE_VARIABLE: f"-XX:ArchiveClassesAtExit={dumped} {QUIET}",
            "TARDY_JVM_OPTIONS": "",
            "TARDY_ENGINE": "off",  # the training's driver is this child's own JVM
        }
        done = subprocess.run(
            [sys.executable, "-c", TRAINING], env=env, capture_output=True, text=True
        )
        if done.returncode != 0 or not dumped.is_file():
            raise RuntimeError(
                f"the JVM class archive was not written ({done.returncode}): {done.stderr[-2000:]}"
            )
        shutil.move(dumped, ARCHIVE)
    return ARCHIVE


def main(argv: list[str]) -> int:
    command = argv[0] if argv else "check"
    if command == "archive":
        archive = build_archive()
        print(f"{archive.stat().st_size / 2**20:.0f} MB (in {archive})")
        return 0
    if command == "check":
        print(f"{ARCHIVE}: {'present' if ARCHIVE.is_file() else 'missing'}")
        return 0 if ARCHIVE.is_file() else 1
    print(f"usage: python -m tardy.runtime.jvm [archive|check], not {command!r}", file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
