"""Every error tardy raises on purpose maps to its documented exit code (tardy.errors)."""

from __future__ import annotations

import json

import pytest

from tardy.consumers.versions import HashMismatch, VersionNotFound
from tardy.engine.audit import AuditFailed
from tardy.engine.named import SelectionError
from tardy.engine.outcome import BreakerTripped, PendingRestatement, RestatementError
from tardy.engine.promote import ProdChangedError
from tardy.engine.sqlmesh_api import NoProdError
from tardy.errors import ChallengerRefused, TardyError
from tardy.ingest.errors import IngestError
from tardy.project.home import ProjectNotFound
from tardy.runtime.lock import LockedError


@pytest.mark.parametrize(
    ("error", "code"),
    [
        (IngestError, 1),
        (ProjectNotFound, 1),
        (NoProdError, 1),
        (SelectionError, 1),
        (VersionNotFound, 1),
        (HashMismatch, 1),
        (RestatementError, 2),
        (BreakerTripped, 2),
        (ProdChangedError, 2),
        (LockedError, 3),
        (PendingRestatement, 3),
        (ChallengerRefused, 5),
    ],
)
def test_each_error_has_its_documented_exit_code(error: type[TardyError], code: int) -> None:
    assert issubclass(error, TardyError)
    assert error.exit_code == code


def test_a_failed_audit_exits_2() -> None:
    assert AuditFailed([]).exit_code == 2


def test_a_named_restatement_needs_model_start_and_end_together(
    tmp_path, monkeypatch, capsys
) -> None:
    """Refused before any project or Spark session opens (exit 1, the reason on stderr)."""
    from tardy import cli

    monkeypatch.setenv("TARDY_HOME", str(tmp_path))
    code = cli.main(["restate", "--reason", "week 12", "--model", "gold.*", "--json"])
    assert code == 1
    out = json.loads(capsys.readouterr().out)
    assert out["exit_code"] == 1 and "--model, --start and --end together" in out["error"]
    assert not (tmp_path / "metastore_db").exists()
