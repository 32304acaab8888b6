"""Switches SQLMesh's Spark writes to Delta's REPLACE WHERE, in every process that evaluates.

See ``tardy.project.exact_writes``: without it, an interval whose recomputed result is empty keeps
its old rows on Spark. Importing this module (SQLMesh loads it with the project) enables it;
but the stock ``sqlmesh run`` does not load the project (it evaluates the snapshots in the
state), so ``project.yaml``'s ``before_all`` also calls ``@exact_interval_writes()``: SQLMesh
stores that statement and this macro's code with the environment and runs them at the start
of every ``plan`` and ``run``, before any model is evaluated. It renders to no statement.
"""

from sqlmesh import macro

from tardy.project.exact_writes import enable

enable()


@macro()
def exact_interval_writes(evaluator):  # noqa: ANN001, ANN201 (SQLMesh's macro signature)
    from tardy.project.exact_writes import enable

    enable()
    return None
