"""Shared fixtures: one warm Spark engine per pytest worker (``homes.Engine``) and the
worker's shared temporary data home; the scheduling of modules on the workers.

`make test` runs the suite on two pytest-xdist workers with ``--dist loadscope``, scheduled
by the hook below: each module is one work unit (its module fixtures are built once), a module
named in ``SAME_WORKER_AS`` joins another one's unit, and the longest units are sent first, so
that neither worker idles at the end while the other still has a long chain. (xdist's own
``--dist loadgroup`` ignores ``xdist_group`` marks with pytest 9 here: measured, every test
became its own unit.)
"""

from __future__ import annotations

import os
import sys
import typing as t
from collections.abc import Iterator
from pathlib import Path

import pytest

# Small data: interpreted execution, in this process and every process it starts (project.yaml;
# docs/testing.md has the measurement).
os.environ.setdefault("TARDY_SPARK_CODEGEN", "false")
# Spark in-process (one warm session per worker: tests/integration/homes.py), and in every
# process a test starts; the warm engine's own tests switch it on for their processes.
os.environ["TARDY_ENGINE"] = "off"
# The tests replay simulated feeds of 2026: the alerts' now is each feed's own clock (its latest
# arrival), in this process and every process it starts; the silence tests name their own.
os.environ.setdefault("TARDY_NOW", "feed")

# The integration tests' shared helpers (homes, oracle, children) import as top-level modules.
sys.path.insert(0, str(Path(__file__).parent / "integration"))

# Work units, longest first. A module not listed runs after them, in collection order (unit
# tests: seconds). The templates a unit builds on a fresh clone come first in its time.
LONGEST_FIRST = (
    # the fast tier, by its fresh-clone run (docs/testing.md): the units that build a
    # template first, so that the other worker finds it built
    "test_review_commands",  # ~590 s in CI: the small template, restatements, cuts, runs
    "test_demo_story",  # the demo template: the demo's own steps
    "test_interrupted_promotion",  # stage, a promotion and a rollback cut and resumed
    "test_small_story",
    "test_cli_smoke",  # one warm engine, the CLI's processes on it
    "test_small_checks",
    "test_small_rules",
    "test_versions",
    "test_adding_a_source",
    "test_quarantine_review",
    "test_status",
    "test_daily_build",
    "test_refunds",
    # the long tier's (deselected by `make test`)
    "test_on_cluster",
    "test_restatement_races",
    "test_cluster_smoke",
    "test_lakehouse",
    "test_cli",
    "test_warm_engine",
    "test_code_change",
    "test_store_dimension",
)
# Modules that share a work unit with another one and run after it on the same worker.
SAME_WORKER_AS: dict[str, str] = {}


def _work_unit(nodeid: str) -> str:
    module = Path(nodeid.split("::", 1)[0]).stem
    return SAME_WORKER_AS.get(module, module)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    rank = {unit: i for i, unit in enumerate(LONGEST_FIRST)}
    # stable: file order within a unit, and for the units not listed
    items.sort(key=lambda item: rank.get(_work_unit(item.nodeid), len(rank)))


def pytest_xdist_make_scheduler(config: pytest.Config, log: t.Any) -> t.Any:
    """With ``--dist loadscope``: one work unit per ``_work_unit``, in collection order (run
    with ``--no-loadscope-reorder``, else xdist sorts the units by their number of tests)."""
    if config.getvalue("dist") != "loadscope":
        return None
    from xdist.scheduler import LoadScopeScheduling

    class ModuleScheduling(LoadScopeScheduling):
        def _split_scope(self, nodeid: str) -> str:
            return _work_unit(nodeid)

    return ModuleScheduling(config, log)


@pytest.fixture(scope="session")
def engine() -> Iterator[object]:
    """The worker's warm Spark engine (``homes.Engine``): one JVM that opens one data home at
    a time, for every module of the worker."""
    from homes import Engine

    engine = Engine()
    yield engine
    engine.release()


@pytest.fixture(scope="session")
def data_home(tmp_path_factory: pytest.TempPathFactory) -> Iterator[object]:
    """The worker's shared data home (modules that need a state of their own copy a
    template instead: ``homes.Template``)."""
    from tardy.project.home import activate

    previous = os.environ.get("TARDY_HOME")
    os.environ["TARDY_HOME"] = str(tmp_path_factory.mktemp("tardy_home"))
    yield activate()
    if previous is None:
        os.environ.pop("TARDY_HOME", None)
    else:
        os.environ["TARDY_HOME"] = previous


@pytest.fixture(scope="module")
def context(engine: t.Any, data_home: t.Any) -> object:
    """The shared home's ``Context``, opened in the warm engine for each module (a module
    before may have opened another home)."""
    return engine.open(data_home.root)[1]


@pytest.fixture(scope="module")
def spark(engine: t.Any, data_home: t.Any, context: object) -> object:
    return engine.open(data_home.root)[2]


# --- CPU per module: what `.ci/cpu_budget.py` compares with docs/testing.md's budget ---------


def _cpu_seconds() -> float:
    """This worker's CPU-seconds so far: its own, its reaped children's, and its Spark JVM's
    (a child it has not reaped: read from ``/proc``)."""
    import resource

    own = resource.getrusage(resource.RUSAGE_SELF)
    children = resource.getrusage(resource.RUSAGE_CHILDREN)
    total = own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime
    try:
        from pyspark import SparkContext

        gateway = SparkContext._gateway
        if gateway is not None and gateway.proc is not None:
            fields = Path(f"/proc/{gateway.proc.pid}/stat").read_text().rsplit(")", 1)[1].split()
            total += (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    except (ImportError, OSError, ValueError, IndexError, AttributeError):
        pass
    return total


@pytest.fixture(scope="module", autouse=True)
def _module_cpu(request: pytest.FixtureRequest) -> Iterator[None]:
    """Each module's CPU-seconds in this worker (its fixtures, templates it built and tests),
    appended to ``$TARDY_TEST_CPU`` (a JSON-lines file; unset: not recorded)."""
    import json
    import time

    target = os.environ.get("TARDY_TEST_CPU")
    started, wall = _cpu_seconds(), time.monotonic()
    yield
    if target:
        line = {
            "module": Path(str(request.node.path)).stem,
            "cpu_seconds": round(_cpu_seconds() - started, 1),
            "wall_seconds": round(time.monotonic() - wall, 1),
        }
        with open(target, "a") as out:
            out.write(json.dumps(line) + "\n")
