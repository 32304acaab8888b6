"""Two ingests of the same landing files at the same time: every landing line once in bronze.

On a data home of its own, opened in the worker's warm engine (``children.in_own_home``),
it lands a few batches, then runs two
`ingest` calls on the same files at once, from two threads of one Spark session (the embedded
Derby metastore admits one process per data home; on a shared metastore the same Delta
commit protocol arbitrates between processes). Three rounds, each with new files.
"""

from __future__ import annotations

import threading
from datetime import UTC, datetime, timedelta
from pathlib import Path

from children import in_own_home

from tardy.simulate import SimulationConfig

BRONZE_TABLE = "bronze.pos_events"  # sources.yaml: pos and partner land here
STORE_CHANGES_TABLE = "bronze.store_changes"  # sources.yaml: store_master

CONFIG = SimulationConfig(seed=5, stores=2, days=6, transactions_per_store_day=15)
START = datetime.combine(CONFIG.start, datetime.min.time(), UTC)


def race() -> list:
    """Child: three rounds of two simultaneous ingests; what each round found."""
    from tardy.ingest import ingest
    from tardy.ingest.tables import LEDGER_TABLE, ensure_tables
    from tardy.project.context import open_context, spark_of
    from tardy.project.home import activate
    from tardy.simulate import simulate

    home = activate()
    spark = spark_of(open_context(load=False))
    ensure_tables(spark)
    rounds = []
    for day in (2, 4, 7):
        simulate(CONFIG, home.landing, through=START + timedelta(days=day))
        barrier = threading.Barrier(2)
        results: list[object] = [None, None]

        def run(slot: int, barrier: threading.Barrier = barrier, out: list = results) -> None:
            barrier.wait()
            try:
                out[slot] = ingest(spark, home.landing)
            except Exception as error:  # reported, and fails the test
                out[slot] = error

        threads = [threading.Thread(target=run, args=(slot,)) for slot in (0, 1)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        errors = [f"{type(r).__name__}: {r}" for r in results if isinstance(r, Exception)]
        files = sorted(home.landing.rglob("*.jsonl"))
        lines = {
            (path.relative_to(home.landing).as_posix(), n)
            for path in files
            for n in range(1, len(path.read_bytes().splitlines()) + 1)
        }
        # Sales lines in bronze.pos_events, store_master lines in bronze.store_changes.
        bronze = spark.sql(
            "SELECT source_file, line_number, COUNT(*) AS n FROM ("
            f"SELECT source_file, line_number FROM {BRONZE_TABLE} UNION ALL "
            f"SELECT source_file, line_number FROM {STORE_CHANGES_TABLE}"
            ") GROUP BY source_file, line_number"
        ).collect()
        ledger = spark.sql(
            f"SELECT file_sha256, COUNT(*) AS n FROM {LEDGER_TABLE} GROUP BY file_sha256"
        ).collect()
        rounds.append(
            {
                "errors": errors,
                "lines": len(lines),
                "bronze_lines": len(bronze),
                "bronze_missing": len(lines - {(r.source_file, r.line_number) for r in bronze}),
                "bronze_twice": sum(1 for r in bronze if r.n > 1),
                "ledger_files": len(ledger),
                "ledger_twice": sum(1 for r in ledger if r.n > 1),
                "landing_files": len(files),
                "ingested_by_each": [
                    sorted(i["source_file"] for i in r.ingested)
                    for r in results
                    if not isinstance(r, Exception)
                ],
            }
        )
    return rounds


def test_two_ingests_of_the_same_files_at_once_keep_every_line_exactly_once(
    engine, tmp_path: Path
) -> None:
    rounds = in_own_home(engine, tmp_path / "home", race)
    landed = 0
    for number, found in enumerate(rounds):
        assert found["errors"] == [], (number, found)
        assert found["landing_files"] > landed, number  # each round lands new files
        landed = found["landing_files"]
        assert found["bronze_lines"] == found["lines"] > 0, (number, found)
        assert found["bronze_missing"] == 0 and found["bronze_twice"] == 0, (number, found)
        assert found["ledger_files"] == found["landing_files"], (number, found)
        assert found["ledger_twice"] == 0, (number, found)
        first, second = found["ingested_by_each"]
        assert not set(first) & set(second), (number, "a file was ingested by both")
