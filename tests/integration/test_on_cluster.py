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
import sys
import typing as t
import urllib.request
from concurrent.futures import Future
from pathlib import Path

import pytest
from cluster_story import (
    ARGV_LEAKS,
    CHECKPOINTS,
    CLUSTER_CHECKPOINTS,
    CLUSTER_CLI,
    CLUSTER_VARIABLES,
    FIRST_DELIVERY_THROUGH,
    FULL_STORY,
    REFERENCE,
    SQL_VERBS,
    assert_metered,
    booted,
    flow,
    make_feed,
    run,
)

STORY = str(Path(__file__).with_name("cluster_story.py"))
pytestmark = pytest.mark.long  # the fast tier's guard: test_cluster_smoke
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


@pytest.fixture(scope="module")
def cluster_started() -> t.Iterator[Future[dict[str, str]]]:
    """The cluster, booting as soon as the module needs it or the reference."""
    with booted(PORTS) as started:
        yield started


@pytest.fixture(scope="module")
def landing(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return make_feed(tmp_path_factory.mktemp("feed") / "landing")


@pytest.fixture(scope="module")
def cluster(cluster_started: Future[dict[str, str]], local: dict[str, t.Any]) -> dict[str, str]:
    """The cluster's exports (after the reference: it is built while the cluster boots)."""
    return cluster_started.result(timeout=1800)


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


def test_cluster_up_puts_the_postgresql_password_on_no_command_line(
    cluster: dict[str, str],
) -> None:
    """While ``up`` ran, a thread read every process's ``/proc/<pid>/cmdline`` (readable by
    any local user) for the role's password: none held it (psql gets its SQL on stdin;
    spark-submit its settings in a 0600 file)."""
    assert json.loads(cluster[ARGV_LEAKS]) == []


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
        if p.parent.name > FIRST_DELIVERY_THROUGH
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
        done = run(connected["env"], sys.executable, STORY, "writes")
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
        done = run(env, sys.executable, STORY, "flow", str(landing))
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
