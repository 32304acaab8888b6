"""Models trained on published versions, with their lineage (issue 27).

A training pipeline reads *pinned* published versions (``tardy.consumers.versions``), never the live
tables, so the rows it learned from can be re-read byte for byte; MLflow records the run and
registers the model with the versions, day ranges and snapshot hash it came from. When a
restatement changes days a model read, ``impact`` names it stale and ``retrain`` trains a
challenger on the corrected versions and moves the ``champion`` alias by a stated rule.

* ``snapshot``: the training rows built from pinned versions, and their hash;
* ``model``: the project's model (features, label, fit, backtest);
* ``registry``: the MLflow store under the data home (runs, versions, the alias);
* ``lineage``: which model versions a restatement made stale, and the alias rule;
* ``pipeline``: ``train``, ``retrain``, ``impact`` and ``rollback`` put together.
"""
