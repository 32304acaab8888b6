"""Shared fixtures: one temporary data home and one SparkSession for the whole pytest run.

`make test` runs the suite on two pytest-xdist workers with ``--dist loadgroup``: each module
is one work unit (its module fixtures are built once), and the hook below sends the longest
ones first, so that neither worker idles at the end while the other still has a long chain.
"""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest

# Work units, longest first (seconds on one of two busy workers, CI of session 6). A module not
# listed runs after them, in collection order (unit tests: seconds).
LONGEST_FIRST = (
    "test_lakehouse",  # ~1,100 s with test_status, which reuses its prod (same worker, after it)
    "test_restatement_races",  # ~850 s
    "test_interrupted_promotion",  # ~450 s
    "test_cli",  # ~230 s
    "test_code_change",  # ~190 s
    "test_restatement_log",  # ~150 s
)
# Modules that share a work unit with another one and run after it on the same worker.
SAME_WORKER_AS = {"test_status": "test_lakehouse"}


def _work_unit(item: pytest.Item) -> str:
    module = item.path.stem
    return SAME_WORKER_AS.get(module, module)


@pytest.hookimpl(tryfirst=True)  # before xdist's own hook reads the groups
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    rank = {unit: i for i, unit in enumerate(LONGEST_FIRST)}
    for item in items:
        item.add_marker(pytest.mark.xdist_group(_work_unit(item)))
    items.sort(key=lambda item: rank.get(_work_unit(item), len(rank)))  # stable: file order kept


@pytest.fixture(scope="session")
def data_home(tmp_path_factory: pytest.TempPathFactory) -> Iterator[object]:
    from tardy.home import activate

    previous = os.environ.get("TARDY_HOME")
    os.environ["TARDY_HOME"] = str(tmp_path_factory.mktemp("tardy_home"))
    yield activate()
    if previous is None:
        os.environ.pop("TARDY_HOME", None)
    else:
        os.environ["TARDY_HOME"] = previous


@pytest.fixture(scope="session")
def context(data_home: object) -> object:
    from tardy.project import open_context

    return open_context()


@pytest.fixture(scope="session")
def spark(context: object) -> object:
    from tardy.project import spark_of

    return spark_of(context)  # type: ignore[arg-type]
