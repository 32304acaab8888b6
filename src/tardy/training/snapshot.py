"""A training snapshot: the rows a model learns from, built from pinned published versions.

The store revenue model learns, per store and *feature day* ``d``, the revenue of the
``horizon_days`` days after ``d`` (the label, from ``gold.daily_store_revenue``) from the
features of ``d`` (``gold.store_features``). Both are read at a published version
(``tardy.consumers.versions``): Delta time travel, so the same pins give the same rows whenever the
snapshot is rebuilt, and a restatement that changes a day publishes a new version instead of
changing what an old snapshot read.

A feature day is in the snapshot when its whole label window lies within the label version's
days. The last ``holdout_days`` feature days are held out for evaluation; the model learns
from the days before them. The snapshot's SHA-256 is that of its rows as text (the form of
``tardy.consumers.versions.as_text``), sorted: rebuilding from the same pins gives the same hash.
"""

from __future__ import annotations

import hashlib
import typing as t
from dataclasses import asdict, dataclass
from datetime import date, timedelta
from decimal import Decimal

from tardy.consumers.versions import Publication, as_text
from tardy.errors import InputError

if t.TYPE_CHECKING:
    import pandas as pd
    from pyspark.sql import SparkSession

FEATURES_TABLE = "gold.store_features"
LABEL_TABLE = "gold.daily_store_revenue"
KEY = ("feature_date", "store_id")
FEATURES = (
    "revenue_1d",
    "revenue_7d",
    "revenue_28d",
    "transactions_7d",
    "transactions_28d",
    "avg_ticket_28d",
    "active_days_28d",
)
LABEL = "label"


@dataclass(frozen=True)
class Input:
    """One published version a snapshot read, and the days of it that it used."""

    table_name: str
    version: int
    physical_table: str
    delta_version: int
    first_day: str
    last_day: str

    @property
    def name(self) -> str:
        return f"{self.table_name}@v{self.version}"

    def used(self, days: t.Iterable[str]) -> list[str]:
        """Those of ``days`` (ISO dates) this input's rows cover."""
        return sorted(d for d in days if self.first_day <= d <= self.last_day)

    def as_dict(self) -> dict[str, object]:
        return {**asdict(self), "name": self.name}

    @classmethod
    def from_dict(cls, raw: dict[str, t.Any]) -> Input:
        return cls(
            table_name=str(raw["table_name"]),
            version=int(raw["version"]),
            physical_table=str(raw["physical_table"]),
            delta_version=int(raw["delta_version"]),
            first_day=str(raw["first_day"]),
            last_day=str(raw["last_day"]),
        )


@dataclass(frozen=True)
class Window:
    """Which feature days a snapshot may hold, the label's horizon, and the held-out days."""

    first: date | None = None
    last: date | None = None
    horizon_days: int = 7
    holdout_days: int = 7

    def __post_init__(self) -> None:
        if self.horizon_days < 1 or self.holdout_days < 1:
            raise InputError("--horizon-days and --holdout-days must be at least 1")
        if self.first and self.last and self.first > self.last:
            raise InputError(f"--from {self.first} is after --to {self.last}")

    def as_params(self) -> dict[str, str]:
        """As MLflow run parameters (text); ``from_params`` reads them back."""
        return {
            "from": self.first.isoformat() if self.first else "",
            "to": self.last.isoformat() if self.last else "",
            "horizon_days": str(self.horizon_days),
            "holdout_days": str(self.holdout_days),
        }

    @classmethod
    def from_params(cls, params: dict[str, str]) -> Window:
        return cls(
            first=date.fromisoformat(params["from"]) if params.get("from") else None,
            last=date.fromisoformat(params["to"]) if params.get("to") else None,
            horizon_days=int(params["horizon_days"]),
            holdout_days=int(params["holdout_days"]),
        )


@dataclass
class Snapshot:
    frame: pd.DataFrame  # KEY, FEATURES, LABEL; one row per store and feature day, sorted
    inputs: list[Input]
    sha256: str
    holdout_start: date  # the first held-out feature day

    @property
    def train(self) -> pd.DataFrame:
        return self.frame[self.frame["feature_date"] < self.holdout_start]

    @property
    def holdout(self) -> pd.DataFrame:
        return self.frame[self.frame["feature_date"] >= self.holdout_start]

    def as_dict(self) -> dict[str, object]:
        return {
            "sha256": self.sha256,
            "rows": len(self.frame),
            "train_rows": len(self.train),
            "holdout_rows": len(self.holdout),
            "holdout_start": self.holdout_start.isoformat(),
            "inputs": [i.as_dict() for i in self.inputs],
        }


def _read(spark: SparkSession, publication: Publication, where: str) -> pd.DataFrame:
    """One published version's rows (one statement)."""
    return (
        spark.sql(
            f"SELECT * FROM {publication.physical_table} "
            f"VERSION AS OF {int(publication.delta_version)} {where}"
        )
        .toArrow()
        .to_pandas()
    )


def _between(column: str, first: date | None, last: date | None) -> str:
    bounds = [
        f"{column} >= DATE'{first}'" if first else "",
        f"{column} <= DATE'{last}'" if last else "",
    ]
    kept = [b for b in bounds if b]
    return f"WHERE {' AND '.join(kept)}" if kept else ""


def build(
    spark: SparkSession, features: Publication, label: Publication, window: Window
) -> Snapshot:
    """The snapshot of ``window`` from the pinned ``features`` and ``label`` versions (two
    statements)."""
    import pandas as pd

    horizon = timedelta(days=window.horizon_days)
    label_first = window.first + timedelta(days=1) if window.first else None
    label_last = window.last + horizon if window.last else None
    daily = _read(spark, label, _between("event_date", label_first, label_last))
    feats = _read(spark, features, _between("feature_date", window.first, window.last))
    if daily.empty or feats.empty:
        raise InputError(f"no rows to train on in {features.name} and {label.name}")
    revenue: dict[tuple[int, date], Decimal] = {
        (int(s), d): Decimal(r)
        for s, d, r in zip(daily["store_id"], daily["event_date"], daily["revenue"], strict=True)
    }
    known_last = max(daily["event_date"])  # the label version's last day
    rows = []
    for record in feats.sort_values(list(KEY)).to_dict("records"):
        day: date = record["feature_date"]
        store = int(record["store_id"])
        if day + horizon > known_last:
            continue  # its label window is not all known yet
        label_value = sum(
            (
                revenue.get((store, day + timedelta(days=k)), Decimal(0))
                for k in range(1, window.horizon_days + 1)
            ),
            Decimal(0),
        )
        rows.append([day, store, *(_plain(record[f]) for f in FEATURES), label_value])
    frame = pd.DataFrame(rows, columns=[*KEY, *FEATURES, LABEL])
    if frame.empty:
        raise InputError(
            f"no feature day of {features.name} has {window.horizon_days} label days after "
            f"it in {label.name}"
        )
    days = sorted(frame["feature_date"].unique())
    if len(days) <= window.holdout_days:
        raise InputError(
            f"{len(days)} feature days leave none to train on after {window.holdout_days} "
            "held-out days: widen --from/--to or lower --holdout-days"
        )
    first, last = days[0], days[-1]
    inputs = [
        _input(features, first, last),
        _input(label, first + timedelta(days=1), last + horizon),
    ]
    return Snapshot(frame, inputs, _digest(frame), days[-window.holdout_days])


def _plain(value: object) -> object:
    """A Python value for a pandas one: numpy scalars as ``int``/``float``, NaN as None."""
    item = getattr(value, "item", None)
    value = item() if callable(item) and not isinstance(value, Decimal) else value
    return None if isinstance(value, float) and value != value else value


def _input(publication: Publication, first: date, last: date) -> Input:
    return Input(
        publication.table_name,
        publication.version,
        publication.physical_table,
        publication.delta_version,
        first.isoformat(),
        last.isoformat(),
    )


def _digest(frame: pd.DataFrame) -> str:
    """SHA-256 of the rows as text, one line each, in key order (``frame`` is sorted)."""
    digest = hashlib.sha256(",".join(frame.columns).encode() + b"\n")
    for row in frame.itertuples(index=False):
        digest.update(",".join(as_text(v) for v in row).encode() + b"\n")
    return digest.hexdigest()
