"""Out of one process (issue 13): the same project on gateways `connect` and `cluster` of a
real local cluster (`tardy.cluster`: PostgreSQL, a Spark standalone master and a worker,
a Spark Connect server), compared with the embedded `local` gateway on the same landing files.

The oracle is the `local` gateway: an independent engine (its own Derby metastore and DuckDB
state) fed the same files; the per-model content hashes (`tardy fingerprint`) must be equal
after the plan, after `sqlmesh run` absorbed in-grace data, after the restatement of the
closed days, and after its rollback. The `local` story is a template (``homes.Template``,
``reference``): built once per content hash in the worker's warm engine, while the cluster
boots, with the stock `sqlmesh run` as a real process; its checkpoints are kept as the
template's facts, so no flow runs twice and a second `make test` reuses them.

On `connect`, every command is a fresh CLI process (`tardy`, stock `sqlmesh`), as a user runs
them, and two client processes with their own data homes share the lakehouse: two ingests of
the same delivery at once commit each file once (the ledger), and of two restatements started
together one is refused by the lock. On `cluster` (the driver in the client, executors on the
workers, metastore and state in PostgreSQL) the story runs once in one client process, up to
the promotion. The cluster runs on ports of its own, so a developer's `make cluster-up` is not
disturbed.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
import typing as t
import urllib.request
from concurrent.futures import Future, ThreadPoolExecutor
from datetime import UTC, date, datetime
from pathlib import Path

import pytest
from children import cli_in_process, exports_of, late_sales
from homes import Template

from tardy.home import project_root
from tardy.simulate import SimulationConfig, simulate

SQLMESH = str(Path(sys.executable).parent / "sqlmesh")
FEED = SimulationConfig(seed=13, stores=2, days=11, transactions_per_store_day=30)
THROUGH = datetime(2026, 1, 12, tzinfo=UTC)  # the simulated feed's last arrival
PLANNED_AT = "2026-01-11"  # execution time of the plan: days through 2026-01-10 built
RUN_THROUGH = "2026-01-11"  # `sqlmesh run --end`: builds 2026-01-11 (inclusive)
FIRST_DELIVERY_BEFORE = "arrival_ts=20260111T000000Z"  # landing dirs sort by arrival
LATE_DIR = "arrival_ts=20260111T010000Z"
# Ports of this test's cluster (a developer's runs on the defaults), and one standalone worker
# instead of two (executors off the driver is what it shows; fewer JVMs on CI's 2 cores).
PORTS = {
    "TARDY_SPARK_WORKERS": "1",
    "TARDY_PG_PORT": "25433",
    "TARDY_SPARK_MASTER_PORT": "27077",
    "TARDY_SPARK_MASTER_UI_PORT": "28080",
    "TARDY_SPARK_WORKER_PORT": "27078",
    "TARDY_SPARK_WORKER_UI_PORT": "28081",
    "TARDY_SPARK_CONNECT_PORT": "25002",
}
CLUSTER_VARIABLES = ("TARDY_GATEWAY", "TARDY_SPARK_REMOTE", "TARDY_SPARK_MASTER", "TARDY_PG_")


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
    """The feed: simulated sales and store changes through THROUGH, and sales for two closed
    days arriving late."""
    simulate(FEED, landing, through=THROUGH)
    late = landing / "pos" / LATE_DIR
    late.mkdir()
    (late / "late.jsonl").write_text(late_sales("C13", date(2026, 1, 1)))
    return landing


@pytest.fixture(scope="module")
def landing(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return make_feed(tmp_path_factory.mktemp("feed") / "landing")


@pytest.fixture(scope="module")
def cluster_started() -> t.Iterator[Future[dict[str, str]]]:
    """`python -m tardy.cluster up` on this test's ports, started in a thread as soon as the
    module needs the cluster or the reference: it boots while the reference is built."""
    home = Path(tempfile.mkdtemp(prefix="tardy-test-cluster-"))
    home.chmod(0o711)  # PostgreSQL runs as user postgres: its home is open to traversal
    env = {**base_env(home), **PORTS}
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


CLUSTER_CLI = (sys.executable, "-m", "tardy.cluster")


def cluster_up(env: dict[str, str]) -> dict[str, str]:
    up = run(env, *CLUSTER_CLI, "up")
    return {**env, **exports_of(up.stdout)}


@pytest.fixture(scope="module")
def cluster(cluster_started: Future[dict[str, str]], local: dict[str, t.Any]) -> dict[str, str]:
    """The cluster's exports (after the reference: it is built while the cluster boots)."""
    return cluster_started.result(timeout=1800)


def deliver(landing: Path, home: Path, first: bool) -> None:
    """Copy the first delivery (arrivals before 2026-01-11) or the rest into ``home``: every
    source system's batches (sales and store changes)."""
    for batch in sorted(landing.glob("*/arrival_ts=*")):
        if (batch.name < FIRST_DELIVERY_BEFORE) == first:
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
) -> dict[str, t.Any]:
    """The story of :func:`flow` in this process (``tardy`` commands in-process, the plan and
    the run through SQLMesh's Python API, or the run as the stock CLI when ``stock_run`` is
    given), with the same checkpoints. ``context()`` gives the home's open ``Context``."""

    def cli_json(*argv: str) -> t.Any:
        code, out, err = cli_in_process(*argv, "--json")
        assert code == 0, (argv, out[-2000:], err[-2000:])
        return json.loads(out)

    deliver(landing, home, first=True)
    seen: dict[str, t.Any] = {}
    plan = context().plan  # the home is open before the first in-process command
    cli_json("ingest")
    plan("prod", execution_time=PLANNED_AT, auto_apply=True, no_prompts=True, skip_tests=True)
    seen["planned"] = cli_json("fingerprint")
    deliver(landing, home, first=False)
    seen["ingests"] = [cli_json("ingest")]
    seen["rows"] = cli_json("summary")["rows"]
    if stock_run is None:
        context().run(end=RUN_THROUGH)
    else:
        stock_run()
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


@pytest.fixture(scope="module")
def local(
    engine: t.Any,
    cluster_started: Future[dict[str, str]],
    tmp_path_factory: pytest.TempPathFactory,
) -> dict[str, t.Any]:
    """The `local` reference's checkpoints (the template's facts), built while the cluster
    boots."""
    for variable in CLUSTER_VARIABLES:
        assert not any(k.startswith(variable) for k in os.environ), variable
    return REFERENCE.copy_to(engine, tmp_path_factory.mktemp("reference") / "home")


@pytest.fixture(scope="module")
def connected(
    cluster: dict[str, str], landing: Path, tmp_path_factory: pytest.TempPathFactory
) -> dict[str, t.Any]:
    """The story on `connect`, by two clients with their own data homes."""
    one, two = (
        {**cluster, "TARDY_GATEWAY": "connect", "TARDY_HOME": str(tmp_path_factory.mktemp(n))}
        for n in ("client-1", "client-2")
    )
    return flow(one, landing, second=two)


def test_connect_gateway_matches_local_and_serialises_two_clients(
    cluster: dict[str, str],
    landing: Path,
    connected: dict[str, t.Any],
    local: dict[str, t.Any],
) -> None:
    seen, one = connected, connected["env"]
    for checkpoint in CHECKPOINTS:
        assert seen[checkpoint] == local[checkpoint], checkpoint
    # It ran on the cluster: the tables are in its warehouse, none in the clients' homes.
    warehouse = Path(cluster["TARDY_WAREHOUSE"])
    assert (warehouse / "bronze.db").is_dir()
    assert not (Path(one["TARDY_HOME"]) / "metastore_db").exists()
    assert not (Path(one["TARDY_HOME"]) / "warehouse").exists()

    # The ledger: both clients ingested the same delivery at once. Every file is in bronze
    # (reported by one client or both: two MERGEs that do not overlap both report the files,
    # the later inserting nothing) and every record once: bronze's row count equals local's
    # ("rows", above; silver would not show a duplicate, it keeps one record per key).
    delivered = {
        f"{source}/{p.parent.name}/{p.name}"
        for source in ("pos", "store_master")  # store changes go to bronze.store_changes
        for p in (landing / source).glob("*/*.jsonl")
        if p.parent.name >= FIRST_DELIVERY_BEFORE
    }
    reported = {f["source_file"] for r in seen["ingests"] for f in r["ingested"]}
    assert reported == delivered, seen["ingests"]
    assert all(r["files_refused"] == 0 for r in seen["ingests"]), seen["ingests"]

    # The lock: of the two restatements started together, the other was refused (exit 3),
    # naming the winner.
    refused = [r for r in seen["restates"] if r[0] != 0]
    assert [code for code, _, _ in refused] == [3], seen["restates"]
    assert seen["restatement"]["restatement_id"] in refused[0][2], refused[0][2]

    # The meter over Connect: the client timed each plan it had executed, labelled by its SQL.
    labels = assert_metered(seen["restatement"])
    assert any(label.split()[0] in SQL_VERBS for label in labels), labels


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


@pytest.mark.parametrize("gateway", ["local", "connect"])
def test_stock_commands_write_exact_intervals(
    gateway: str, local: dict[str, t.Any], connected: dict[str, t.Any]
) -> None:
    """Every overwrite of silver carries its interval predicate (`REPLACE WHERE`, tardy's
    `exact_writes`; docs/facts.md, fact 2), the stock `sqlmesh plan` and `sqlmesh run` included:
    `sqlmesh run` does not load the project, so project.yaml's `before_all` switches it."""
    if gateway == "local":
        writes = local["writes"]
    else:  # a Connect client in a process of its own (this one may hold a classic session)
        done = run(connected["env"], sys.executable, __file__, "writes")
        writes = json.loads(done.stdout.strip().splitlines()[-1])
    overwrites = [w for w in writes if w.get("mode") == "Overwrite"]
    assert len(overwrites) >= 3, writes  # plan, run, promotion
    assert all("event_date" in w.get("predicate", "") for w in overwrites), overwrites


def _apps(cluster: dict[str, str]) -> list[dict[str, t.Any]]:
    url = f"http://127.0.0.1:{cluster['TARDY_SPARK_MASTER_UI_PORT']}/json/"
    with urllib.request.urlopen(url, timeout=10) as response:
        state = json.load(response)
    return [*state["activeapps"], *state["completedapps"]]


def test_cluster_gateway_matches_local(
    cluster: dict[str, str],
    landing: Path,
    local: dict[str, t.Any],
    tmp_path_factory: pytest.TempPathFactory,
) -> None:
    """The driver in the client process, executors on the standalone workers; its own
    lakehouse (state and metastore databases, warehouse) on the same PostgreSQL."""
    for database in ("state_cluster", "metastore_cluster"):
        run(cluster, *CLUSTER_CLI, "database", database)
    pg = f"{cluster['TARDY_PG_HOST']}:{cluster['TARDY_PG_PORT']}"
    warehouse = tmp_path_factory.mktemp("cluster-warehouse")
    env = {
        **cluster,
        "TARDY_GATEWAY": "cluster",
        "TARDY_HOME": str(tmp_path_factory.mktemp("cluster-client")),
        "TARDY_STATE_DATABASE": "state_cluster",
        "TARDY_METASTORE_URL": f"jdbc:postgresql://{pg}/metastore_cluster",
        "TARDY_WAREHOUSE": str(warehouse),
    }
    before = {app["id"] for app in _apps(cluster)}
    if FULL_STORY:  # every command a process of its own (an application each), to the rollback
        seen = flow(env, landing)
        checkpoints, commands = CHECKPOINTS, 11  # ingest x2, plan, summary, run, detect, ...
    else:
        done = run(env, sys.executable, __file__, "flow", str(landing))
        seen = json.loads(done.stdout.strip().splitlines()[-1])
        checkpoints, commands = CLUSTER_CHECKPOINTS, 1

    for checkpoint in checkpoints:
        assert seen[checkpoint] == local[checkpoint], checkpoint
    assert (warehouse / "bronze.db").is_dir()
    # Each client process was an application of the master whose executors ran on the workers.
    drivers = [a["id"] for a in _apps(cluster) if a["id"] not in before and a["name"] == "tardy"]
    assert (len(drivers) >= commands) if FULL_STORY else (len(drivers) == commands), drivers
    root = Path(cluster["TARDY_WAREHOUSE"]).parent
    for app in drivers:
        assert list(root.glob(f"worker-*/{app}/*/stderr")), f"no executor of {app}"


def test_the_local_reference_restates_and_rolls_back(local: dict[str, t.Any]) -> None:
    """The oracle's own story has content: the run and the restatement changed prod, and
    the rollback undid exactly the restatement."""
    assert local["restatement"]["status"] == "promoted", local["restatement"]
    assert local["run"] != local["planned"]
    assert local["promoted"] != local["run"]
    assert local["rolled_back"] == local["run"]
    assert local["detect"]["late_rows"] > 0 and local["detect"]["impacted"]
    assert local["status"]["pending_final"], "the rolled-back late data waits again"
    assert_metered(local["restatement"])  # in-process: timed from Spark's status store


if __name__ == "__main__":
    from tardy.project import open_context, spark_of

    if sys.argv[1] == "writes":
        print(json.dumps(silver_writes(spark_of(open_context(load=False)))))
    else:  # flow LANDING: the story up to the promotion, in this process
        from tardy.home import activate

        opened = open_context()
        story = flow_here(activate().root, Path(sys.argv[2]), lambda: opened, rollback=False)
        print(json.dumps(story, default=str))
