"""A training snapshot: the rows a model learns from, built from pinned published versions.

What the model learns is the project's (``project.yaml``'s ``training``, ``Spec``): per
entity (a column the two models share, e.g. a store) and *feature day* ``d``, the label
model's measure summed over the ``horizon_days`` days after ``d``, from the features
model's numeric columns of ``d`` (both models published; their days are their time
columns). Both are read at a published version (``tardy.consumers.versions``): Delta time
travel, so the same pins give the same rows whenever the snapshot is rebuilt, and a
restatement that changes a day publishes a new version instead of changing what an old
snapshot read.

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

LABEL = "label"
SPEC_KEYS = ("features", "label", "label_measure", "entity")


@dataclass(frozen=True)
class Spec:
    """What the model learns: ``project.yaml``'s ``training`` (module docstring)."""

    features: str  # a published model: its time column is the feature day
    label: str  # a published model
    label_measure: str  # the label model's column summed over the horizon
    entity: str  # the column both models share (one row per entity and day)

    @classmethod
    def of(cls, variables: t.Mapping[str, t.Any]) -> Spec:
        raw = variables.get("training")
        missing = [k for k in SPEC_KEYS if not isinstance(raw, dict) or not raw.get(k)]
        if missing:
            raise InputError(
                f"project.yaml: training: name {', '.join(missing)} (the features and label "
                "models, the label's measure and the column both share)"
            )
        assert isinstance(raw, dict)
        return cls(**{k: str(raw[k]) for k in SPEC_KEYS})


def spec() -> Spec:
    """The project's training spec (its config read with no engine)."""
    from tardy.project.context import load_variables

    return Spec.of(load_variables())


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
    # The feature day, the entity, the features, LABEL: one row per entity and feature day,
    # sorted.
    frame: pd.DataFrame
    inputs: list[Input]
    sha256: str
    holdout_start: date  # the first held-out feature day

    @property
    def day(self) -> pd.Series:
        return self.frame[self.frame.columns[0]]

    @property
    def train(self) -> pd.DataFrame:
        return self.frame[self.day < self.holdout_start]

    @property
    def holdout(self) -> pd.DataFrame:
        return self.frame[self.day >= self.holdout_start]

    def as_dict(self) -> dict[str, object]:
        return {
            "sha256": self.sha256,
            "rows": len(self.frame),
            "train_rows": len(self.train),
            "holdout_rows": len(self.holdout),
            "holdout_start": self.holdout_start.isoformat(),
            "inputs": [i.as_dict() for i in self.inputs],
        }


def _read(
    spark: SparkSession, publication: Publication, where: str
) -> tuple[pd.DataFrame, list[str]]:
    """One published version's rows and its numeric columns, in its order (one statement)."""
    import pyarrow as pa

    table = spark.sql(
        f"SELECT * FROM {publication.physical_table} "
        f"VERSION AS OF {int(publication.delta_version)} {where}"
    ).toArrow()
    numeric = [
        f.name
        for f in table.schema
        if pa.types.is_integer(f.type)
        or pa.types.is_floating(f.type)
        or pa.types.is_decimal(f.type)
    ]
    return table.to_pandas(), numeric


def features_of(frame: pd.DataFrame) -> list[str]:
    """A snapshot frame's feature columns: all but its day, its entity and the label."""
    return [c for c in frame.columns[2:] if c != LABEL]


def _between(column: str, first: date | None, last: date | None) -> str:
    bounds = [
        f"{column} >= DATE'{first}'" if first else "",
        f"{column} <= DATE'{last}'" if last else "",
    ]
    kept = [b for b in bounds if b]
    return f"WHERE {' AND '.join(kept)}" if kept else ""


def build(
    spark: SparkSession,
    features: Publication,
    label: Publication,
    window: Window,
    target: Spec,
) -> Snapshot:
    """The snapshot of ``window`` from the pinned ``features`` and ``label`` versions (two
    statements)."""
    import pandas as pd

    horizon = timedelta(days=window.horizon_days)
    label_first = window.first + timedelta(days=1) if window.first else None
    label_last = window.last + horizon if window.last else None
    day, label_day, entity = features.time_column, label.time_column, target.entity
    daily, _ = _read(spark, label, _between(label_day, label_first, label_last))
    feats, numeric = _read(spark, features, _between(day, window.first, window.last))
    for frame, publication, columns in (
        (daily, label, (label_day, entity, target.label_measure)),
        (feats, features, (day, entity)),
    ):
        for column in columns:
            if column not in frame.columns:
                raise InputError(
                    f"project.yaml: training: {publication.table_name} has no column {column}"
                )
    if daily.empty or feats.empty:
        raise InputError(f"no rows to train on in {features.name} and {label.name}")
    names = [c for c in numeric if c not in (day, entity)]
    sums: dict[tuple[t.Any, date], Decimal] = {
        (e, d): Decimal(str(v))
        for e, d, v in zip(
            daily[entity], daily[label_day], daily[target.label_measure], strict=True
        )
    }
    known_last = max(daily[label_day])  # the label version's last day
    rows = []
    for record in feats.sort_values([day, entity]).to_dict("records"):
        when: date = record[day]
        key = _plain(record[entity])
        if when + horizon > known_last:
            continue  # its label window is not all known yet
        label_value = sum(
            (
                sums.get((key, when + timedelta(days=k)), Decimal(0))
                for k in range(1, window.horizon_days + 1)
            ),
            Decimal(0),
        )
        rows.append([when, key, *(_plain(record[f]) for f in names), label_value])
    frame = pd.DataFrame(rows, columns=[day, entity, *names, LABEL])
    if frame.empty:
        raise InputError(
            f"no feature day of {features.name} has {window.horizon_days} label days after "
            f"it in {label.name}"
        )
    days = sorted(frame[day].unique())
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
