"""The data home's MLflow store: runs, registered model versions with their lineage, the alias.

Everything lives under ``$TARDY_HOME/models/``: the tracking and registry store in SQLite
(``mlflow.db``; MLflow 3's file store is in maintenance mode) and the artifacts
(``artifacts/``). Nothing leaves the machine: MLflow's telemetry is switched off before it is
imported. One process at a time changes the registry (``models/LOCK``, ``flock``, released
when its holder exits however it exits), so two trainings never race for the alias.

A registered version carries its lineage as tags (``tardy.inputs``: the published versions
and day ranges it read; ``tardy.snapshot_sha256``; ``tardy.code_version``;
``tardy.trained_after``: the restatement it was retrained after) and its run the parameters
and the backtest's metrics. The alias ``champion`` is what readers load
(``models:/store_revenue@champion``); the registered model's tag ``tardy.champions`` keeps
the versions it pointed to, oldest first, so a rollback moves it back.
"""

from __future__ import annotations

import fcntl
import io
import json
import logging
import os
import typing as t
from collections.abc import Iterator
from contextlib import contextmanager, redirect_stderr
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path

from tardy.errors import InputError
from tardy.training.snapshot import Input

if t.TYPE_CHECKING:
    from mlflow import MlflowClient

MODEL_NAME = "store_revenue"
ALIAS = "champion"
EXPERIMENT = "tardy"
CHAMPIONS_TAG = "tardy.champions"


@dataclass(frozen=True)
class Registered:
    """One registered model version, with what it was trained on and how it scored."""

    version: int
    run_id: str
    inputs: list[Input]
    snapshot_sha256: str
    params: dict[str, str]
    metrics: dict[str, float]
    code_version: str
    trained_after: str  # the restatement it was retrained after, or ""
    decision: str  # retrain's verdict on it ("" for a first training)
    champion: bool
    created_at: str
    artifacts: str  # where its files are (a file: URI under the data home)

    @property
    def uri(self) -> str:
        return f"models:/{MODEL_NAME}/{self.version}"

    def as_dict(self) -> dict[str, object]:
        return {
            "name": MODEL_NAME,
            "version": self.version,
            "uri": self.uri,
            "champion": self.champion,
            "run_id": self.run_id,
            "inputs": [i.as_dict() for i in self.inputs],
            "snapshot_sha256": self.snapshot_sha256,
            "params": self.params,
            "metrics": self.metrics,
            "code_version": self.code_version,
            "trained_after": self.trained_after,
            "decision": self.decision,
            "created_at": self.created_at,
            "artifacts": self.artifacts,
        }


@dataclass
class Lineage:
    """What a new version is tagged with."""

    inputs: list[Input]
    snapshot_sha256: str
    code_version: str
    trained_after: str = ""
    decision: str = ""
    extra: dict[str, str] = field(default_factory=dict)

    def tags(self) -> dict[str, str]:
        return {
            "tardy.inputs": json.dumps([i.as_dict() for i in self.inputs], sort_keys=True),
            "tardy.snapshot_sha256": self.snapshot_sha256,
            "tardy.code_version": self.code_version,
            "tardy.trained_after": self.trained_after,
            "tardy.decision": self.decision,
            **self.extra,
        }


def _mlflow() -> t.Any:
    os.environ.setdefault("MLFLOW_DISABLE_TELEMETRY", "true")
    os.environ.setdefault("DO_NOT_TRACK", "true")
    try:
        import mlflow
    except ImportError as exc:  # the `ml` extra is not installed
        raise InputError(
            "MLflow is not installed: `make setup` installs it (the project's `ml` extra)"
        ) from exc
    for name in ("mlflow", "alembic"):  # after the import: MLflow sets its own levels then
        logging.getLogger(name).setLevel(logging.WARNING)
    return mlflow


class Registry:
    """The MLflow store of one data home."""

    def __init__(self, home: Path) -> None:
        self.folder = home / "models"
        self.folder.mkdir(parents=True, exist_ok=True)
        self.uri = f"sqlite:///{self.folder / 'mlflow.db'}"
        self.mlflow = _mlflow()
        self.mlflow.set_tracking_uri(self.uri)
        self.mlflow.set_registry_uri(self.uri)
        self.client: MlflowClient = self.mlflow.MlflowClient(self.uri, self.uri)

    @contextmanager
    def changing(self) -> Iterator[None]:
        """Hold the registry's lock: one process at a time registers or moves the alias."""
        fd = os.open(self.folder / "LOCK", os.O_RDWR | os.O_CREAT, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            yield
        finally:
            os.close(fd)

    def _experiment(self) -> str:
        found = self.client.get_experiment_by_name(EXPERIMENT)
        if found is not None:
            return str(found.experiment_id)
        location = (self.folder / "artifacts").as_uri()
        return str(self.client.create_experiment(EXPERIMENT, artifact_location=location))

    def register(
        self,
        model: t.Any,
        example: t.Any,
        params: dict[str, str],
        metrics: dict[str, float],
        lineage: Lineage,
    ) -> int:
        """Log a run with ``model`` and register it as the next version (under ``changing``)."""
        from mlflow.models import infer_signature

        mlflow = self.mlflow
        # MLflow prints "Successfully registered model ..." on stderr itself: the CLI says it.
        with mlflow.start_run(experiment_id=self._experiment()), redirect_stderr(io.StringIO()):
            mlflow.log_params(params)
            mlflow.log_metrics(metrics)
            mlflow.set_tags(lineage.tags())
            info = mlflow.sklearn.log_model(
                model,
                name="model",
                registered_model_name=MODEL_NAME,
                signature=infer_signature(example, model.predict(example)),
            )
        version = int(info.registered_model_version)
        for key, value in lineage.tags().items():
            self.client.set_model_version_tag(MODEL_NAME, str(version), key, value)
        return version

    def tag(self, version: int, key: str, value: str) -> None:
        self.client.set_model_version_tag(MODEL_NAME, str(version), key, value)

    def champion(self) -> int | None:
        """The version readers load by the alias, None before the first training."""
        from mlflow.exceptions import MlflowException

        if not self.versions_exist():
            return None
        try:
            return int(self.client.get_model_version_by_alias(MODEL_NAME, ALIAS).version)
        except MlflowException:
            return None

    def _champions(self) -> list[int]:
        if not self.versions_exist():
            return []
        raw = self.client.get_registered_model(MODEL_NAME).tags.get(CHAMPIONS_TAG, "")
        return [int(v) for v in raw.split(",") if v]

    def versions_exist(self) -> bool:
        return bool(self.client.search_registered_models(f"name = '{MODEL_NAME}'"))

    def crown(self, version: int) -> None:
        """Point the alias at ``version`` and remember it (under ``changing``)."""
        self.client.set_registered_model_alias(MODEL_NAME, ALIAS, str(version))
        history = [*self._champions(), version]
        self._remember(history)

    def rollback(self) -> tuple[int, int]:
        """Move the alias back to the version it pointed to before; (from, to)."""
        history = self._champions()
        if len(history) < 2:
            raise InputError(
                f"{MODEL_NAME}@{ALIAS} has no earlier version to roll back to"
                + (f" (it is v{history[0]}, the first)" if history else "")
            )
        self.client.set_registered_model_alias(MODEL_NAME, ALIAS, str(history[-2]))
        self._remember(history[:-1])
        return history[-1], history[-2]

    def _remember(self, history: list[int]) -> None:
        self.client.set_registered_model_tag(
            MODEL_NAME, CHAMPIONS_TAG, ",".join(str(v) for v in history)
        )

    def load(self, version: int) -> t.Any:
        return self.mlflow.sklearn.load_model(f"models:/{MODEL_NAME}/{version}")

    def versions(self) -> list[Registered]:
        """Every registered version, oldest first, with its lineage and metrics."""
        if not self.versions_exist():
            return []
        champion = self.champion()
        found = self.client.search_model_versions(f"name = '{MODEL_NAME}'")
        return sorted((self._registered(v, champion) for v in found), key=lambda r: r.version)

    def _registered(self, mv: t.Any, champion: int | None) -> Registered:
        run = self.client.get_run(mv.run_id)
        tags = dict(mv.tags)
        source = str(mv.source)  # MLflow 3: models:/<logged model id>
        artifacts = (
            self.client.get_logged_model(source.removeprefix("models:/")).artifact_location
            if source.startswith("models:/")
            else source
        )
        return Registered(
            version=int(mv.version),
            run_id=str(mv.run_id),
            inputs=[Input.from_dict(i) for i in json.loads(tags.get("tardy.inputs", "[]"))],
            snapshot_sha256=tags.get("tardy.snapshot_sha256", ""),
            params=dict(run.data.params),
            metrics=dict(run.data.metrics),
            code_version=tags.get("tardy.code_version", ""),
            trained_after=tags.get("tardy.trained_after", ""),
            decision=tags.get("tardy.decision", ""),
            champion=int(mv.version) == champion,
            created_at=datetime.fromtimestamp(mv.creation_timestamp / 1000, UTC).isoformat(
                timespec="seconds"
            ),
            artifacts=str(artifacts),
        )
