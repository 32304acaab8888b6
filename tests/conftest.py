"""Shared fixtures: one temporary data home and one SparkSession for the whole pytest run."""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest


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
