"""The project's model (``project.yaml``'s ``training``): a scikit-learn pipeline fitted on
a snapshot, and its backtest.

Standardised features into a ridge regression (``alpha`` its one parameter): small, exact to
reproduce (no randomness), and enough to show what a correction does to a model. A feature a
store's day leaves empty (no transaction in 28 days: no average ticket) counts as 0.
Backtest: the mean absolute error (and RMSE) of the predicted label over held-out rows.
"""

from __future__ import annotations

import math
import typing as t
from dataclasses import asdict, dataclass

from tardy.training.snapshot import LABEL, features_of

if t.TYPE_CHECKING:
    import pandas as pd
    from sklearn.pipeline import Pipeline

DEFAULT_ALPHA = 1.0


@dataclass(frozen=True)
class Backtest:
    mae: float
    rmse: float
    rows: int

    def as_dict(self) -> dict[str, object]:
        return asdict(self)


def matrix(rows: pd.DataFrame) -> pd.DataFrame:
    """The features as floats, in the snapshot's order (``snapshot.features_of``)."""
    return rows[features_of(rows)].astype(float).fillna(0.0)


def fit(train: pd.DataFrame, alpha: float) -> Pipeline:
    from sklearn.linear_model import Ridge
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import StandardScaler

    model = make_pipeline(StandardScaler(), Ridge(alpha=alpha))
    model.fit(matrix(train), train[LABEL].astype(float))
    return model


def backtest(model: t.Any, rows: pd.DataFrame) -> Backtest:
    """``model``'s errors on ``rows`` (any object with scikit-learn's ``predict``)."""
    predicted = model.predict(matrix(rows))
    errors = [p - y for p, y in zip(predicted, rows[LABEL].astype(float), strict=True)]
    return Backtest(
        mae=round(sum(abs(e) for e in errors) / len(errors), 6),
        rmse=round(math.sqrt(sum(e * e for e in errors) / len(errors)), 6),
        rows=len(errors),
    )
