"""A staged restatement as a virtual environment people can query.

While a restatement waits for review (``tardy restate --no-promote``), every model of the
project is readable as a view in an environment named after it, with SQLMesh's own naming for
environment schemas (``<schema>__<env>.<table>``): a restated model's view reads its
staged table over the restated intervals and prod for every other interval, i.e. the table as
it would be after promotion; every other model's view reads prod. Plain Spark SQL, a notebook,
a BI tool or ``sqlmesh table_diff <schema>.<table>:<schema>__<env>.<table> --on <key>`` work
on it. Prod's views are never touched.

The environment's schemas carry a comment naming the restatement (``COMMENT``): dropping the
stage (promote, discard, a failed gate, rollback's recovery) drops every schema so marked,
whatever the environment's name. Costs one ``CREATE SCHEMA`` per schema and one ``CREATE VIEW``
per model, only for a restatement left staged.
"""

from __future__ import annotations

import re
import typing as t
from collections.abc import Sequence

from tardy.engine import sqlmesh_api
from tardy.errors import InputError

if t.TYPE_CHECKING:
    from pyspark.sql import SparkSession
    from sqlmesh import Context

COMMENT_PREFIX = "tardy restatement "
_NAME = re.compile(r"^[a-z][a-z0-9_]*$")


class Restated(t.Protocol):
    """What a view reads of a restated model (``stage.StagedTable`` is one): its staged
    table and the predicate of its restated intervals. ``stage`` drops environments with
    the stage, so this module does not import ``stage``."""

    @property
    def model(self) -> str: ...

    @property
    def staged_table(self) -> str: ...

    def predicate(self, spans: list[list[str]] | None = None) -> str: ...


class EnvironmentNameError(InputError):
    """An environment name that is no valid schema suffix, or names prod."""


def name_for(restatement_id: str, requested: str | None = None) -> str:
    """The environment's name: ``requested`` (checked), or one derived from the id
    (``r_20261124t101500z_1a2b3c``)."""
    if requested is None:
        return "r_" + re.sub(r"[^a-z0-9]+", "_", restatement_id.lower()).strip("_")
    name = requested.lower()
    if not _NAME.match(name) or name == "prod":
        raise EnvironmentNameError(
            f"--env {requested!r}: use lowercase letters, digits and _, starting with a "
            "letter, and not 'prod'"
        )
    return name


def view_name(model: str, environment: str) -> str:
    """SQLMesh's name of a model's view in an environment: ``<schema>__<env>.<table>``."""
    schema, _, table = model.rpartition(".")
    return f"{schema}__{environment}.{table}"


def create(
    context: Context,
    spark: SparkSession,
    restatement_id: str,
    environment: str,
    staged: Sequence[Restated],
) -> dict[str, str]:
    """Create the environment's views; model -> view."""
    by_model = {table.model: table for table in staged}
    views: dict[str, str] = {}
    schemas: set[str] = set()
    for snapshot in sqlmesh_api.model_snapshots(context):
        model = snapshot.model.name
        view = view_name(model, environment)
        schema = view.rpartition(".")[0]
        if schema not in schemas:
            spark.sql(
                f"CREATE SCHEMA IF NOT EXISTS {schema} "
                f"COMMENT '{COMMENT_PREFIX}{restatement_id}: environment {environment}'"
            )
            schemas.add(schema)
        prod = sqlmesh_api.spark_name(snapshot.table_name(is_deployable=True))
        table = by_model.get(model)
        if table is None:
            source = f"SELECT * FROM {prod}"
        else:
            restated = table.predicate()
            source = (
                f"SELECT * FROM {table.staged_table} WHERE {restated} UNION ALL "
                f"SELECT * FROM {prod} WHERE NOT COALESCE({restated}, FALSE)"
            )
        spark.sql(f"CREATE OR REPLACE VIEW {view} AS {source}")
        views[model] = view
    return views


def drop(spark: SparkSession) -> list[str]:
    """Drop every restatement environment (the schemas tardy marked); their names."""
    dropped = []
    for database in spark.catalog.listDatabases():
        if (database.description or "").startswith(COMMENT_PREFIX):
            spark.sql(f"DROP SCHEMA IF EXISTS {database.name} CASCADE")
            dropped.append(database.name)
    return dropped
