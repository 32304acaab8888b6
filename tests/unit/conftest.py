"""The unit tests' shared fixture: a renderer of the project's models and audits."""

from __future__ import annotations

import typing as t

import pytest


@pytest.fixture(scope="module")
def renderer(context: t.Any) -> t.Any:
    """A renderer over the project's local snapshots, every model deployable (prod).

    The context is the worker's shared data home's, opened in the worker's engine: loading a
    context starts Spark, and a session this module opened on a home of its own would stay
    the worker's active one, so the next module's home would open on its metastore."""
    from sqlmesh.core.snapshot import DeployabilityIndex, SnapshotChangeCategory

    from tardy.engine import sqlmesh_api

    snapshots = sqlmesh_api.by_fqn(context.snapshots.values())
    for snapshot in snapshots.values():
        snapshot.categorize_as(SnapshotChangeCategory.BREAKING)
    return sqlmesh_api.Renderer(
        context,
        snapshots,
        DeployabilityIndex.all_deployable(),
        sqlmesh_api.bounds("2026-01-31", "2026-01-31")[1],
    )
