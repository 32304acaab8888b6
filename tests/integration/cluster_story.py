"""The cluster story, shared by the fast tier's smoke (``test_cluster_smoke``) and the long
tier's full stories (``test_on_cluster``): a real local cluster booted on a test's own ports
(``booted``), the simulated feed and its late delivery, and the story of ingest -> plan ->
late data -> [run] -> detect -> restate -> [rollback] with the models' content hashes after
each step, as CLI processes (``flow``) or in one process (``flow_here``).

Run as a script in a client process of a gateway (``python cluster_story.py flow LANDING
[--no-run]``): the story up to the promotion, its checkpoints as JSON on the last line;
``python cluster_story.py ingest LANDING``: the first delivery ingested, then bronze's row
counts and what a read costs (the fast tier's smoke); ``python cluster_story.py writes``:
silver's Delta writes.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time
import typing as t
from collections.abc import Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from datetime import UTC, date, datetime
from pathlib import Path

from children import SMALL, SMALL_CLOCK, SMALL_CONFIG, cli_in_process, exports_of, late_sales
from homes import Template

from tardy.project.home import project_root
from tardy.simulate import simulate

SQLMESH = str(Path(sys.executable).parent / "sqlmesh")
# The feed is the `small` template's (its first delivery is the template's landing folder, and
# the smoke's oracle starts from a copy of it), delivered on until THROUGH.
FEED = SMALL_CONFIG
THROUGH = datetime(2026, 1, 12, tzinfo=UTC)  # the simulated feed's last arrival
PLANNED_AT = SMALL_CLOCK.date().isoformat()  # the plan's execution time: days before it built
RUN_THROUGH = "2026-01-11"  # `sqlmesh run --end`: builds 2026-01-11 (inclusive)
# The first delivery: the batches delivered at or before the plan (landing dirs sort by
# arrival), as the `small` template's `simulate(..., through=SMALL_CLOCK)` wrote them.
FIRST_DELIVERY_THROUGH = f"arrival_ts={SMALL_CLOCK:%Y%m%dT%H%M%SZ}"
LATE_DIR = "arrival_ts=20260111T010000Z"
CLUSTER_VARIABLES = ("TARDY_GATEWAY", "TARDY_SPARK_REMOTE", "TARDY_SPARK_MASTER", "TARDY_PG_")
CLUSTER_CLI = (sys.executable, "-m", "tardy.cluster")


def base_env(home: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(CLUSTER_VARIABLES)}
    return {**env, "TARDY_HOME": str(home)}


def run(env: dict[str, str], *argv: str, ok: bool = True) -> subprocess.CompletedProcess[str]:
    done = subprocess.run(
        list(argv), cwd=project_root(), env=env, capture_output=True, text=True, timeout=900
    )
    if ok:
        assert done.returncode == 0, f"{argv}: {done.stdout[-2000:]}\n{done.stderr[-4000:]}"
    return done


def tardy(env: dict[str, str], *argv: str, ok: bool = True) -> subprocess.CompletedProcess[str]:
    return run(env, sys.executable, "-m", "tardy.cli", *argv, ok=ok)


def tardy_json(env: dict[str, str], *argv: str) -> t.Any:
    return json.loads(tardy(env, *argv, "--json").stdout)


def start(env: dict[str, str], *argv: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "tardy.cli", *argv],
        cwd=project_root(),
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def make_feed(landing: Path) -> Path:
    """The feed: the `small` template's simulated sales and store changes, delivered on
    through THROUGH, and sales for two closed days arriving late."""
    simulate(FEED, landing, through=THROUGH)
    late = landing / "pos" / LATE_DIR
    late.mkdir()
    (late / "late.jsonl").write_text(late_sales("C13", date(2026, 1, 1)))
    return landing


@contextlib.contextmanager
def booted(ports: dict[str, str]) -> Iterator[Future[dict[str, str]]]:
    """``python -m tardy.cluster up`` on ``ports`` in a throwaway home, started in a thread:
    the caller builds its reference while the cluster boots, then takes the cluster's
    exports from the future. Stopped at the end, and checked that nothing is left running."""
    home = Path(tempfile.mkdtemp(prefix="tardy-test-cluster-"))
    home.chmod(0o711)  # PostgreSQL runs as user postgres: its home is open to traversal
    env = {**base_env(home), **ports}
    with ThreadPoolExecutor(max_workers=1) as pool:
        started = pool.submit(cluster_up, env)
        try:
            yield started
        finally:
            started.exception()  # wait for the boot to end, whatever it did
            run(env, *CLUSTER_CLI, "down")
            left = subprocess.run(["pgrep", "-f", str(home)], capture_output=True, text=True)
            shutil.rmtree(home)
            assert not left.stdout.strip(), f"left running: {left.stdout}"


ARGV_LEAKS = "TARDY_TEST_ARGV_LEAKS"  # cluster_up's finding: command lines with the password


def cluster_up(env: dict[str, str]) -> dict[str, str]:
    """``up``, while a thread reads every process's command line (``/proc/*/cmdline``, as any
    local user can) for the PostgreSQL role's password once its 0600 file exists: the
    command lines that held it are returned under ``ARGV_LEAKS`` (JSON)."""
    password_file = Path(env["TARDY_HOME"]) / "cluster" / "postgres-password"
    leaks: list[str] = []
    done = threading.Event()

    def watch() -> None:
        seen = 0
        while not done.is_set():
            secret = password_file.read_text().strip() if password_file.exists() else ""
            for cmdline in Path("/proc").glob("[0-9]*/cmdline"):
                try:
                    argv = cmdline.read_bytes().decode(errors="replace").replace("\0", " ")
                except OSError:
                    continue
                seen += 1
                if secret and secret in argv:
                    leaks.append(argv[:300].replace(secret, "<password>"))
            time.sleep(0.01)
        assert seen, "the watcher read no command line"

    watcher = threading.Thread(target=watch, daemon=True)
    watcher.start()
    try:
        up = run(env, *CLUSTER_CLI, "up")
    finally:
        done.set()
        watcher.join()
    assert password_file.exists(), "up wrote no password file"
    return {**env, **exports_of(up.stdout), ARGV_LEAKS: json.dumps(leaks)}


def deliver(landing: Path, home: Path, first: bool) -> None:
    """Copy the first delivery (arrivals through 2026-01-11 00:00) or the rest into
    ``home``: every source system's batches (sales and store changes)."""
    for batch in sorted(landing.glob("*/arrival_ts=*")):
        if (batch.name <= FIRST_DELIVERY_THROUGH) == first:
            shutil.copytree(batch, home / "landing" / batch.parent.name / batch.name)


def fingerprints(env: dict[str, str]) -> dict[str, t.Any]:
    return tardy_json(env, "fingerprint")


def flow(
    env: dict[str, str],
    landing: Path,
    second: dict[str, str] | None = None,
    *,
    rollback: bool = True,
) -> dict[str, t.Any]:
    """simulate's files -> ingest -> plan -> late data -> run -> restate -> rollback, with the
    models' content hashes after each step. With ``second`` (another client's environment,
    its own data home, the same lakehouse): the late delivery is ingested by both clients at
    once, and both start a restatement at once. Without ``rollback``, it stops after the
    promotion."""
    home = Path(env["TARDY_HOME"])
    deliver(landing, home, first=True)
    seen: dict[str, t.Any] = {"env": env}
    tardy(env, "ingest")
    run(env, SQLMESH, "plan", "--auto-apply", "--no-prompts", "--skip-tests",
        "--execution-time", PLANNED_AT)  # fmt: skip
    seen["planned"] = fingerprints(env)

    clients = [env] if second is None else [env, second]
    for client in clients:
        deliver(landing, Path(client["TARDY_HOME"]), first=False)
    ingests = [start(client, "ingest", "--json") for client in clients]
    seen["ingests"] = [json.loads(p.communicate(timeout=900)[0]) for p in ingests]
    assert all(p.returncode == 0 for p in ingests)

    seen["rows"] = tardy_json(env, "summary")["rows"]  # bronze's rows: each record once
    run(env, SQLMESH, "run", "--end", RUN_THROUGH)
    seen["run"] = fingerprints(env)

    manifest = tardy_json(env, "detect")
    seen["detect"] = {key: manifest[key] for key in DETECTED}

    restates = [start(c, "restate", "--reason", "late sales", "--json") for c in clients]
    seen["restates"] = []
    for process in restates:
        out, err = process.communicate(timeout=900)
        seen["restates"].append((process.returncode, out, err))
    won = [json.loads(out) for code, out, _ in seen["restates"] if code == 0]
    assert len(won) == 1, seen["restates"]
    seen["restatement"] = won[0]
    seen["promoted"] = fingerprints(env)
    if not rollback:
        return seen

    # The rollback from the other client (any client sees the shared log and tables).
    tardy(clients[-1], "rollback", won[0]["restatement_id"], "--reason", "check")
    seen["rolled_back"] = fingerprints(env)
    status = tardy_json(env, "status")
    seen["status"] = {key: status[key] for key in STATUS}
    return seen


# What must be equal on every gateway: content hashes after each step, what detect found
# (bronze versions differ: two clients ingest in two commits), what status says at the end.
CHECKPOINTS = ("planned", "rows", "run", "detect", "promoted", "rolled_back", "status")
# The `cluster` gateway runs the same code as `local` through another deployment: in `make
# test` its story runs in one client process and stops after the promotion (CI time: each
# process is a driver application of ~30 s); `make cluster-story` (TARDY_CLUSTER_STORY=full)
# runs every command as a process of its own, through the rollback and status.
CLUSTER_CHECKPOINTS = CHECKPOINTS[:5]
FULL_STORY = os.environ.get("TARDY_CLUSTER_STORY") == "full"
DETECTED = ("arrival_watermark", "late_rows", "impacted", "absorbed_by_next_run")
SQL_VERBS = {"CREATE", "INSERT", "SELECT", "WITH", "MERGE", "DELETE", "DROP", "DESCRIBE"}
STATUS = ("data_watermark", "last_final_day", "pending_final", "sources", "revisions")


def flow_here(
    home: Path,
    landing: Path,
    context: t.Callable[[], t.Any],
    stock_run: t.Callable[[], None] | None = None,
    *,
    rollback: bool = True,
    with_run: bool = True,
    planned: bool = False,
) -> dict[str, t.Any]:
    """The story of :func:`flow` in this process (``tardy`` commands in-process, the plan and
    the run through SQLMesh's Python API, or the run as the stock CLI when ``stock_run`` is
    given), with the same checkpoints. ``context()`` gives the home's open ``Context``.
    Without ``with_run`` (the smoke), the late delivery is restated right after its ingest:
    no ``sqlmesh run`` absorbs its in-grace day first. With ``planned`` (the smoke's oracle,
    a copy of the `small` template), the first delivery is ingested and planned already."""

    def cli_json(*argv: str) -> t.Any:
        code, out, err = cli_in_process(*argv, "--json")
        assert code == 0, (argv, out[-2000:], err[-2000:])
        return json.loads(out)

    seen: dict[str, t.Any] = {}
    plan = context().plan  # the home is open before the first in-process command
    if not planned:
        deliver(landing, home, first=True)
        cli_json("ingest")
        plan("prod", execution_time=PLANNED_AT, auto_apply=True, no_prompts=True, skip_tests=True)
    seen["planned"] = cli_json("fingerprint")
    deliver(landing, home, first=False)
    seen["ingests"] = [cli_json("ingest")]
    seen["rows"] = cli_json("summary")["rows"]
    if not with_run:
        pass
    elif stock_run is None:
        context().run(end=RUN_THROUGH)
    else:
        stock_run()
    if with_run:
        seen["run"] = cli_json("fingerprint")
    manifest = cli_json("detect")
    seen["detect"] = {key: manifest[key] for key in DETECTED}
    seen["restatement"] = cli_json("restate", "--reason", "late sales")
    seen["promoted"] = cli_json("fingerprint")
    if not rollback:
        return seen
    code, out, err = cli_in_process(
        "rollback", seen["restatement"]["restatement_id"], "--reason", "check"
    )
    assert code == 0, (out[-2000:], err[-2000:])
    seen["rolled_back"] = cli_json("fingerprint")
    status = cli_json("status")
    seen["status"] = {key: status[key] for key in STATUS}
    return seen


def assert_metered(restatement: dict[str, t.Any]) -> list[str]:
    """The restatement's slowest statements, slowest first, each within its step's seconds
    (the meter's clock around the step), and every step's statements within the step;
    returns their labels."""
    slowest, seconds = restatement["slowest"], restatement["seconds"]
    assert 0 < len(slowest) <= 5, restatement
    assert [s["seconds"] for s in slowest] == sorted((s["seconds"] for s in slowest), reverse=True)
    for statement in slowest:
        assert 0 < statement["seconds"] <= seconds[statement["step"]] + 0.01, statement
        assert statement["statement"], statement
    for step, own in restatement["statement_seconds"].items():
        assert 0 <= own <= seconds[step] + 0.01, (step, own, seconds)
    return [s["statement"] for s in slowest]


def silver_writes(spark: t.Any) -> list[dict[str, str]]:
    """The operation parameters of every WRITE in the Delta history of silver's physical
    tables."""
    names = [r.tableName for r in spark.sql("SHOW TABLES IN sqlmesh__silver").collect()]
    writes = []
    for name in (n for n in names if n.startswith("silver__sales_transactions__")):
        for r in spark.sql(f"DESCRIBE HISTORY sqlmesh__silver.{name}").collect():
            if r.operation == "WRITE":
                writes.append(dict(r.operationParameters))
    return writes


def build_reference(engine: t.Any, root: Path) -> dict[str, t.Any]:
    """The `local` gateway's story on the feed, in the warm engine; `sqlmesh run` is the stock
    CLI in a real process (it does not load the project: project.yaml's `before_all` must
    switch its writes to exact intervals)."""
    env = {**base_env(root), "TARDY_GATEWAY": "local"}

    def stock_run() -> None:
        engine.release()
        run(env, SQLMESH, "run", "--end", RUN_THROUGH)

    landing = make_feed(root / "feed")
    seen = flow_here(root, landing, lambda: engine.open(root)[1], stock_run)
    seen["writes"] = silver_writes(engine.open(root)[2])
    return seen


REFERENCE = Template("reference", build_reference)


def build_smoke_reference(engine: t.Any, root: Path) -> dict[str, t.Any]:
    """The smoke's oracle: the `local` gateway's short story (no `sqlmesh run`, no rollback)
    on the same feed, in the warm engine, from a copy of the `small` template (the feed's
    first delivery ingested and planned, as the smoke's client does on `connect`)."""
    SMALL.copy_to(engine, root)
    landing = make_feed(root / "feed")
    return flow_here(
        root,
        landing,
        lambda: engine.open(root)[1],
        rollback=False,
        with_run=False,
        planned=True,
    )


SMOKE_REFERENCE = Template("smoke-reference", build_smoke_reference)


def one_plan_reads(spark: t.Any) -> dict[str, t.Any]:
    """The plans a read costs over this session, metered: ``delta.query`` and ``spark.sql``
    of the same query, and whether both return the same rows (an aggregate and a history
    command)."""
    from tardy.engine import delta
    from tardy.engine.meter import Meter

    out: dict[str, t.Any] = {}
    for name, sql in (
        ("aggregate", "SELECT store_id, COUNT(*) AS n FROM bronze.pos_events GROUP BY store_id"),
        ("history", "DESCRIBE HISTORY bronze.pos_events"),
    ):
        meter = Meter(spark)
        with meter.step("query"):
            lazy = sorted(map(tuple, delta.query(spark, sql).collect()))
        with meter.step("sql"):
            eager = sorted(map(tuple, spark.sql(sql).collect()))
        out[name] = {**meter.statements, "same": lazy == eager, "rows": len(lazy)}
    return out


def bronze_rows(spark: t.Any) -> dict[str, int]:
    """Each bronze table's row count, read through ``delta.query``."""
    from tardy.engine import delta

    tables = [row[1] for row in delta.query(spark, "SHOW TABLES IN bronze").collect()]
    return {
        f"bronze.{table}": delta.query(spark, f"SELECT COUNT(*) FROM bronze.{table}").first()[0]
        for table in sorted(tables)
    }


def ingest_here(home: Path, landing: Path, spark: t.Any) -> dict[str, t.Any]:
    """The feed's first delivery ingested in this process; bronze's rows and the reads."""
    deliver(landing, home, first=True)
    code, out, err = cli_in_process("ingest", "--json")
    assert code == 0, (out[-2000:], err[-2000:])
    return {"ingest": json.loads(out), "rows": bronze_rows(spark), "reads": one_plan_reads(spark)}


if __name__ == "__main__":
    from tardy.project.context import open_context, spark_of

    if sys.argv[1] == "writes":
        print(json.dumps(silver_writes(spark_of(open_context(load=False)))))
    elif sys.argv[1] == "ingest":  # ingest LANDING: the first delivery, then bronze's rows
        from tardy.project.home import activate

        opened = open_context()
        story = ingest_here(activate().root, Path(sys.argv[2]), spark_of(opened))
        print(json.dumps(story, default=str))
    else:  # flow LANDING [--no-run]: the story up to the promotion, in this process
        from tardy.project.home import activate

        opened = open_context()
        story = flow_here(
            activate().root,
            Path(sys.argv[2]),
            lambda: opened,
            rollback=False,
            with_run="--no-run" not in sys.argv[3:],
        )
        story["writes"] = silver_writes(spark_of(opened))
        story["reads"] = one_plan_reads(spark_of(opened))
        print(json.dumps(story, default=str))
