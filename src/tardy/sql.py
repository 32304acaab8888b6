"""Literal lists in Spark SQL, quoted by SQLGlot: the filters tardy inlines into queries."""

from __future__ import annotations

from collections.abc import Iterable
from datetime import date

from sqlglot import exp


def literal(value: str) -> str:
    """``value`` as a Spark SQL string literal, quoted by SQLGlot."""
    return exp.Literal.string(value).sql("spark")


def in_list(column: str, values: Iterable[str]) -> str:
    """``column IN ('a', …)`` with each value quoted by SQLGlot; FALSE when there are none."""
    literals = sorted({literal(v) for v in values})
    return f"{column} IN ({', '.join(literals)})" if literals else "FALSE"


def date_list(column: str, days: Iterable[date]) -> str:
    """``column IN (DATE'…', …)``; FALSE when there are none."""
    literals = sorted({f"DATE'{d.isoformat()}'" for d in days})
    return f"{column} IN ({', '.join(literals)})" if literals else "FALSE"
