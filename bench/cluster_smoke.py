"""Smoke test of the local cluster (`make cluster-up`): over Spark Connect, create a Delta
table in the Hive metastore, `INSERT ... REPLACE WHERE` into it, read it back, and check on the
master's web UI that the work ran on the standalone workers. Not part of `make test`.

Run: ``python bench/cluster_smoke.py [URL] [http://localhost:8080]`` (URL: ``$TARDY_SPARK_REMOTE``,
which ``eval "$(make -s cluster-up)"`` sets, the token in it).
"""

from __future__ import annotations

import json
import os
import sys
import time
import urllib.request


def main(remote: str, master_ui: str) -> int:
    from pyspark.sql import SparkSession

    started = time.monotonic()
    spark = SparkSession.builder.remote(remote).getOrCreate()
    print(f"connected in {time.monotonic() - started:.2f} s; Spark {spark.version}")
    for key in (
        "spark.sql.extensions",
        "spark.sql.catalog.spark_catalog",
        "spark.sql.catalogImplementation",
        "spark.sql.sources.partitionOverwriteMode",
        "spark.sql.shuffle.partitions",
        "spark.databricks.delta.snapshotPartitions",
    ):
        print(f"  {key} = {spark.conf.get(key)}")

    spark.sql("CREATE SCHEMA IF NOT EXISTS cluster_smoke")
    spark.sql("DROP TABLE IF EXISTS cluster_smoke.sales")
    spark.sql(
        "CREATE TABLE cluster_smoke.sales (day DATE, store STRING, amount DECIMAL(10, 2)) "
        "USING delta PARTITIONED BY (day)"
    )
    spark.sql(
        "INSERT INTO cluster_smoke.sales VALUES (DATE'2026-01-01', 'a', 1.00), "
        "(DATE'2026-01-01', 'b', 2.00), (DATE'2026-01-02', 'a', 3.00)"
    )
    # The recomputed day holds one row: store b's row must go (the hole of docs/facts.md, fact 2).
    spark.sql(
        "INSERT INTO cluster_smoke.sales REPLACE WHERE day = DATE'2026-01-01' "
        "SELECT DATE'2026-01-01', 'a', 10.00"
    )
    rows = [
        (str(r.day), r.store, str(r.amount))
        for r in spark.sql("SELECT * FROM cluster_smoke.sales ORDER BY day, store").collect()
    ]
    print(f"rows after REPLACE WHERE: {rows}")
    assert rows == [("2026-01-01", "a", "10.00"), ("2026-01-02", "a", "3.00")], rows
    for h in spark.sql("DESCRIBE HISTORY cluster_smoke.sales").collect():
        print(f"  v{h.version} {h.operation} {dict(h.operationParameters)}")
    location = spark.sql("DESCRIBE DETAIL cluster_smoke.sales").first()
    print(f"format {location.format}, location {location.location}")

    total = spark.range(0, 1_000_000, numPartitions=8).selectExpr("sum(id) AS s").first().s
    print(f"sum over 8 partitions: {total}")
    master = json.load(urllib.request.urlopen(f"{master_ui}/json/"))
    for w in master["workers"]:
        print(
            f"worker {w['id']} {w['state']} cores {w['coresused']}/{w['cores']} "
            f"memory {w['memoryused']}/{w['memory']} MiB"
        )
    for app in master["activeapps"]:
        print(f"app {app['id']} {app['name']} {app['state']} cores {app['cores']}")
    spark.stop()
    return 0


if __name__ == "__main__":
    args = sys.argv[1:]
    sys.exit(
        main(
            args[0] if args else os.environ["TARDY_SPARK_REMOTE"],
            args[1] if len(args) > 1 else "http://localhost:8080",
        )
    )
