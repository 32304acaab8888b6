"""The grace window, written once: ``variables.grace_days`` in ``project.yaml``.

A model reading late data recomputes, on every run, the intervals a late record may still
change: its ``lookback`` is the grace window plus the days its period spans beyond its first
(``@grace_lookback()`` for a daily model, ``@grace_lookback(6)`` for a weekly one,
``@grace_lookback(30)`` for a monthly one). ``tardy grace --apply`` changes the window in
that one place; the stock ``sqlmesh plan`` then shows each model whose lookback it moves.
"""

from __future__ import annotations

from sqlglot import exp
from sqlmesh import macro
from sqlmesh.core.macros import MacroEvaluator


@macro()
def grace_lookback(evaluator: MacroEvaluator, extra_days: exp.Expression | int = 0) -> int:
    """The grace window in days (``grace_days``), plus ``extra_days``."""
    extra = int(extra_days.name) if isinstance(extra_days, exp.Expression) else int(extra_days)
    return int(evaluator.var("grace_days")) + extra
