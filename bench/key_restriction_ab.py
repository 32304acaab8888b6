"""Key-restricted vs interval staging of silver, A/B on one data home, in one process.

Usage (on a home `make bench --scale small` built, e.g. its year home):

    TARDY_HOME=.tardy/bench/h40 .venv/bin/python bench/key_restriction_ab.py --days 1 10

For each k: lands 3 fresh late sales on each of k scattered closed days, then alternates
``tardy restate --no-promote`` with the key path (as built) and with the interval path
(``stage.key_restriction`` forced to None) ROUNDS times each, discarding each staged
restatement (the watermark stays, so both arms see the same new rows), then promotes once.
Prints the seconds and Spark statements of every step per arm; checks that both arms staged
the same rows (the staged silver table's content hash).

Status (session 7): written and linted, NOT yet run (no quiet machine before the deadline).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import typing as t
from contextlib import nullcontext
from datetime import date, timedelta
from pathlib import Path
from unittest import mock

sys.path.insert(0, str(Path(__file__).resolve().parent))

from restate_bench import late_sales, scattered  # noqa: E402

ROUNDS = 2


def staged_silver_hash(context: t.Any, spark: t.Any) -> tuple[int, int]:
    from tardy.engine.sqlmesh_api import prod_snapshots, spark_name

    silver = prod_snapshots(context)["silver.sales_transactions"]
    table = spark_name(silver.table_name(is_deployable=False))
    row = spark.sql(
        f"SELECT COUNT(*), SUM(CAST(xxhash64(*) AS DECIMAL(38, 0))) FROM {table}"
    ).first()
    return int(row[0]), int(row[1] or 0)


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--days", type=int, nargs="+", default=[1, 10])
    args = parser.parse_args()
    from tardy.engine import sqlmesh_api
    from tardy.ingest import ingest
    from tardy.ingest.landing import arrival_dir_name
    from tardy.project.context import open_context, spark_of
    from tardy.requests import restatements as restatement

    context = open_context()
    spark = spark_of(context)
    root = Path(os.environ["TARDY_HOME"]).resolve()
    silver = sqlmesh_api.prod_snapshots(context)["silver.sales_transactions"]
    first = sqlmesh_api.first_computed_day(silver)
    last = sqlmesh_api.last_computed_day(silver)
    assert first and last
    days_built = (last - first).days + 1
    clock = max(
        r.m for r in spark.sql("SELECT MAX(arrival_ts) AS m FROM bronze.pos_events").collect()
    )
    results: dict[str, t.Any] = {}
    for n, k in enumerate(args.days):
        days: list[date] = (
            [last - timedelta(days=10)] if k == 1 else scattered(first, days_built, k)
        )
        folder = root / "landing" / "pos" / arrival_dir_name(clock + timedelta(minutes=n + 1))
        folder.mkdir(parents=True, exist_ok=True)
        path = folder / f"ab-{k}.jsonl"
        path.write_text(late_sales(f"ab{k}", days))
        ingest(spark, root / "landing", [path])
        arms: dict[str, list[dict[str, t.Any]]] = {"key": [], "interval": []}
        hashes: dict[str, set[tuple[int, int]]] = {"key": set(), "interval": set()}
        for _ in range(ROUNDS):
            for arm in ("key", "interval"):
                patch = (
                    mock.patch.object(restatement, "key_restriction", lambda *a: None)
                    if arm == "interval"
                    else nullcontext()
                )
                with patch:
                    outcome = restatement.restate(
                        context, spark, f"ab {arm} k={k}", promote=False, accept_large_change=True
                    )
                hashes[arm].add(staged_silver_hash(context, spark))
                restatement.discard(context, spark, outcome.restatement_id)
                row = {
                    "seconds": {s: round(v, 2) for s, v in outcome.seconds.items()},
                    "statements": dict(outcome.statements),
                }
                arms[arm].append(row)
                print(f"k={k} {arm}: {json.dumps(row)}", flush=True)
        assert hashes["key"] == hashes["interval"] and len(hashes["key"]) == 1, hashes
        restatement.restate(context, spark, f"ab k={k}: promoted", accept_large_change=True)
        results[f"k{k}"] = {"days": [d.isoformat() for d in days], **arms}
    print(json.dumps(results, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
