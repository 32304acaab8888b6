"""The cluster smoke: a real local cluster (PostgreSQL and a Spark Connect server running its
own executors; ``tardy.cluster``) booted on ports of its own, while the `local` oracle is
built (from a copy of the `small` template).

Fast tier: the Connect server answers only its owner (its token is in a 0600 file, never on a
command line, nor is PostgreSQL's password; a client with it is answered, one without it or
with a wrong one is refused), and the `connect` gateway, in one client process, ingests the
feed's first delivery (the `small` template's) into bronze with the row counts the `local`
gateway's template holds, a read through ``delta.query`` costing one plan.

Long tier (``make test-long``; on this 2-core machine its client's story took 15-25 min in
CI): the same client plans, ingests a late delivery (sales of closed days and in-grace sales
of the last days), detects and restates it, promoting. Its content hashes after the plan and
after the promotion, bronze's row count and what detect found equal the `local` gateway's on
the same files (the oracle: an independent engine, its own Derby metastore and DuckDB state,
``cluster_story.SMOKE_REFERENCE``); the whole story on `connect` and `cluster` is
``test_on_cluster``'s.
"""

from __future__ import annotations

import json
import subprocess
import sys
import typing as t
from concurrent.futures import Future
from pathlib import Path

import pytest
from children import SMALL, connect_asks
from cluster_story import (
    SMOKE_REFERENCE,
    assert_metered,
    booted,
    bronze_rows,
    make_feed,
    run,
)

# Long tier: a real local cluster (PostgreSQL, a Connect server, client processes). Fast guards:
# unit/test_cluster (its settings), test_cli_smoke (a Connect server's token refusal).
pytestmark = pytest.mark.long

STORY = str(Path(__file__).with_name("cluster_story.py"))
# Ports of its own: neither a developer's cluster (the defaults) nor test_on_cluster's. No
# standalone master or worker: the Connect server runs its own executors (docs/cluster.md),
# three JVMs fewer on the fast tier's 2 cores; test_on_cluster keeps a worker.
PORTS = {
    "TARDY_SPARK_WORKERS": "0",
    "TARDY_PG_PORT": "26433",
    "TARDY_SPARK_MASTER_PORT": "26077",
    "TARDY_SPARK_MASTER_UI_PORT": "26080",
    "TARDY_SPARK_WORKER_PORT": "26078",
    "TARDY_SPARK_WORKER_UI_PORT": "26081",
    "TARDY_SPARK_CONNECT_PORT": "26002",
}
CHECKPOINTS = ("planned", "rows", "detect", "promoted")


@pytest.fixture(scope="module")
def cluster_started() -> t.Iterator[Future[dict[str, str]]]:
    with booted(PORTS) as started:
        yield started


@pytest.fixture(scope="module")
def local(
    engine: t.Any,
    cluster_started: Future[dict[str, str]],
    tmp_path_factory: pytest.TempPathFactory,
) -> dict[str, t.Any]:
    """The oracle's checkpoints (the template's facts), built while the cluster boots."""
    return SMOKE_REFERENCE.copy_to(engine, tmp_path_factory.mktemp("smoke-reference") / "home")


@pytest.fixture(scope="module")
def small_bronze(
    engine: t.Any,
    cluster_started: Future[dict[str, str]],
    tmp_path_factory: pytest.TempPathFactory,
) -> dict[str, int]:
    """The `local` gateway's bronze after the first delivery (the `small` template's), read
    while the cluster boots."""
    home = tmp_path_factory.mktemp("small") / "home"
    SMALL.copy_to(engine, home)
    try:
        return bronze_rows(engine.open(home)[2])
    finally:
        engine.release()


@pytest.fixture(scope="module")
def cluster(cluster_started: Future[dict[str, str]]) -> dict[str, str]:
    return cluster_started.result(timeout=1800)


@pytest.fixture(scope="module")
def connected(cluster: dict[str, str], tmp_path_factory: pytest.TempPathFactory) -> t.Any:
    landing = make_feed(tmp_path_factory.mktemp("feed") / "landing")
    home = tmp_path_factory.mktemp("client")
    env = {**cluster, "TARDY_GATEWAY": "connect", "TARDY_HOME": str(home)}
    done = run(env, sys.executable, STORY, "flow", str(landing), "--no-run")
    return {"home": home, **json.loads(done.stdout.strip().splitlines()[-1])}


def test_connect_ingests_as_local_does(
    small_bronze: dict[str, int],
    cluster: dict[str, str],
    tmp_path_factory: pytest.TempPathFactory,
) -> None:
    """A client over Connect ingests the feed's first delivery: bronze on the cluster holds
    the rows `local`'s `small` template holds. (In the long tier the restatement's client
    below then ingests the same files into the same lakehouse: the ledger on the cluster
    makes that a no-op, as for two clients delivering at once in ``test_on_cluster``.)"""
    landing = make_feed(tmp_path_factory.mktemp("first") / "landing")
    home = tmp_path_factory.mktemp("ingest-client")
    env = {**cluster, "TARDY_GATEWAY": "connect", "TARDY_HOME": str(home)}
    done = run(env, sys.executable, STORY, "ingest", str(landing))
    story = json.loads(done.stdout.strip().splitlines()[-1])
    assert small_bronze["bronze.pos_events"] > 0, small_bronze
    assert story["rows"] == small_bronze
    assert not (home / "metastore_db").exists() and not (home / "warehouse").exists()
    for name, read in story["reads"].items():
        assert read["same"] and read["rows"] > 0, (name, read)
        assert read["query"] == 1, (name, read)
    assert story["reads"]["aggregate"]["sql"] == 2, story["reads"]


# the full stories: test_on_cluster
def test_connect_restates_a_late_delivery_as_local_does(
    local: dict[str, t.Any], cluster: dict[str, str], connected: dict[str, t.Any]
) -> None:
    for checkpoint in CHECKPOINTS:
        assert connected[checkpoint] == local[checkpoint], checkpoint
    assert connected["restatement"]["status"] == "promoted", connected["restatement"]
    # The oracle's story has content: late rows for closed days, and the promotion changed
    # prod's gold.
    assert local["detect"]["late_rows"] > 0 and local["detect"]["impacted"], local["detect"]
    gold = [m for m in local["promoted"] if m.startswith("gold.")]
    assert any(local["promoted"][m] != local["planned"][m] for m in gold)
    # It ran on the cluster: the tables are in its warehouse, none in the client's home.
    assert (Path(cluster["TARDY_WAREHOUSE"]) / "bronze.db").is_dir()
    assert not (connected["home"] / "metastore_db").exists()
    assert not (connected["home"] / "warehouse").exists()
    # The meter over Connect: the client timed each plan it had executed, labelled by its SQL.
    assert_metered(connected["restatement"])
    # Every overwrite of silver over Connect carried its interval predicate (`REPLACE WHERE`,
    # tardy's `exact_writes`; docs/facts.md, fact 2): the plan's and the promotion's.
    overwrites = [w for w in connected["writes"] if w.get("mode") == "Overwrite"]
    assert len(overwrites) >= 2, connected["writes"]
    assert all("event_date" in w.get("predicate", "") for w in overwrites), overwrites
    # A read through `delta.query` is one plan over Connect, where `spark.sql` is two (its
    # eager analysis, then the query: docs/engine.md, "One plan a read"), with the same rows.
    for name, read in connected["reads"].items():
        assert read["same"] and read["rows"] > 0, (name, read)
        assert read["query"] == 1, (name, read)
    assert connected["reads"]["aggregate"]["sql"] == 2, connected["reads"]


def test_the_connect_server_answers_only_its_owner(cluster: dict[str, str]) -> None:
    root = Path(cluster["TARDY_HOME"]) / "cluster"
    token_file, conf = root / "connect-token", root / "run" / "connect.conf"
    assert (token_file.stat().st_mode & 0o777) == 0o600
    assert (conf.stat().st_mode & 0o777) == 0o600
    token = token_file.read_text().strip()
    password = cluster["TARDY_PG_PASSWORD"]
    # No command line of the cluster's processes shows a secret.
    listed = subprocess.run(["pgrep", "-af", str(root)], capture_output=True, text=True)
    assert "connect.conf" in listed.stdout, listed.stdout  # the server is among them
    assert token not in listed.stdout and password not in listed.stdout
    url = cluster["TARDY_SPARK_REMOTE"]
    assert url.endswith(f"/;token={token}"), "the exported URL carries the token"
    address = url.split("/;")[0]
    for refused in (address, f"{address}/;token=not-the-secret"):
        done = connect_asks(refused)
        assert done.returncode != 0 and "42" not in done.stdout, refused
    done = connect_asks(url)
    assert done.stdout.strip() == "42", done.stderr[-2000:]
