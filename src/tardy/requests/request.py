"""Restatement requests: a committed file that a pull request stages and its merge promotes.

A request is ``restatements/<name>.yaml`` in the project (or any path)::

    reason: "partner: week 2 totals wrong (OPS-1234)"
    # optional, all three together: a named restatement (tardy.engine.named)
    models: [gold.daily_sales]
    start: 2026-01-05
    end: 2026-01-11

Without ``models`` it restates what ``tardy detect`` finds. The restatement a request stages
carries the request's name at the end of its id (``20261124T101500Z-week2``), so the CI job
that runs on merge finds it again: ``tardy promote --request restatements/week2.yaml``
promotes the latest restatement of that request (or says it is already promoted: a re-run
job is harmless), ``tardy discard --request ...`` drops it when the pull request is closed.
"""

from __future__ import annotations

import re
import typing as t
from dataclasses import dataclass
from datetime import date
from pathlib import Path

from tardy.engine.named import Selection
from tardy.errors import InputError

_NAME = re.compile(r"^[a-z0-9][a-z0-9_]*$")
_KEYS = {"reason", "models", "start", "end"}


class RequestError(InputError):
    """A request file that cannot be read as a restatement request."""


@dataclass(frozen=True)
class Request:
    name: str  # the file's stem, lowercase letters, digits and _
    reason: str
    selection: Selection | None

    def id_suffix(self) -> str:
        return f"-{self.name}"

    def restatement_id(self, new_id: str) -> str:
        """A fresh restatement id that names this request."""
        return new_id.rsplit("-", 1)[0] + self.id_suffix()


def load(path: Path) -> Request:
    """Read and check a request file."""
    from ruamel.yaml import YAML, YAMLError

    name = path.stem.lower().replace("-", "_")
    if not _NAME.match(name):
        raise RequestError(f"{path}: name the file with letters, digits, - and _ only")
    try:
        data = YAML(typ="safe").load(path.read_text())
    except (OSError, YAMLError) as error:
        raise RequestError(f"{path}: {error}") from error
    if not isinstance(data, dict):
        raise RequestError(f"{path}: expected a mapping with at least `reason`")
    unknown = set(data) - _KEYS
    if unknown:
        raise RequestError(f"{path}: unknown keys {sorted(unknown)}; allowed: {sorted(_KEYS)}")
    reason = str(data.get("reason") or "").strip()
    if not reason:
        raise RequestError(f"{path}: `reason` is required")
    named = [data.get(key) for key in ("models", "start", "end")]
    if not any(named):
        return Request(name, reason, None)
    if not all(named):
        raise RequestError(f"{path}: `models`, `start` and `end` go together")
    models = data["models"]
    models = [models] if isinstance(models, str) else models
    if not isinstance(models, list) or not all(isinstance(m, str) for m in models):
        raise RequestError(f"{path}: `models` is a model selector or a list of them")
    start, end = (_day(path, key, data[key]) for key in ("start", "end"))
    return Request(name, reason, Selection(tuple(models), start, end))


def _day(path: Path, key: str, value: t.Any) -> date:
    if isinstance(value, date):
        return value
    try:
        return date.fromisoformat(str(value))
    except ValueError as error:
        raise RequestError(f"{path}: `{key}` is not a date (YYYY-MM-DD): {value!r}") from error
