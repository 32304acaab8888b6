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

# The integration tests' shared helpers (homes, oracle, children) import as top-level modules.
sys.path.insert(0, str(Path(__file__).parent / "integration"))

# Work units, longest first (seconds on an idle machine, one module alone, templates cached:
# docs/testing.md). A module not listed runs after them, in collection order (unit tests:
# seconds). The templates a unit builds on a fresh clone come first in its time.
LONGEST_FIRST = (
    "test_on_cluster",  # long tier, ~870 s: a cluster, the connect and cluster stories
    "test_restatement_races",  # long tier, ~450 s (+~60 s: the small template, shared)
    "test_cluster_smoke",  # a cluster, one connect client, the oracle
    "test_lakehouse",  # long tier: the timeline template (~250 s), then its restatements
    "test_interrupted_promotion",  # the warm-engine kill ~240 s (long tier: +~185 s)
    "test_cli",  # ~260 s: the demo on the warm engine
    "test_review_commands",  # ~260 s: three restatements, three runs, one killed process
    "test_warm_engine",  # engines of its own, started and stopped
    "test_small_story",  # ~200 s: three stock plans, one restatement, a rollback
    "test_code_change",  # ~190 s
    "test_store_dimension",  # ~150 s
    "test_small_rules",  # ~105 s
    "test_small_checks",  # ~100 s alone: the audits, a request file staged and promoted
    "test_daily_build",  # ~80 s alone: two nightly runs on the small template
    "test_status",  # ~60 s alone
    "test_restatement_log",  # ~100 s
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
    from tardy.home import activate

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
