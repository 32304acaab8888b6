"""Every error tardy raises on purpose maps to its documented exit code (tardy.errors)."""

from __future__ import annotations

import pytest

from tardy.engine.audit import AuditFailed
from tardy.engine.promote import ProdChangedError
from tardy.engine.restate import BreakerTripped, PendingRestatement, RestatementError
from tardy.engine.sqlmesh_api import NoProdError
from tardy.errors import TardyError
from tardy.home import ProjectNotFound
from tardy.ingest import IngestError
from tardy.lock import LockedError


@pytest.mark.parametrize(
    ("error", "code"),
    [
        (IngestError, 1),
        (ProjectNotFound, 1),
        (NoProdError, 1),
        (RestatementError, 2),
        (BreakerTripped, 2),
        (ProdChangedError, 2),
        (LockedError, 3),
        (PendingRestatement, 3),
    ],
)
def test_each_error_has_its_documented_exit_code(error: type[TardyError], code: int) -> None:
    assert issubclass(error, TardyError)
    assert error.exit_code == code


def test_a_failed_audit_exits_2() -> None:
    assert AuditFailed([]).exit_code == 2
