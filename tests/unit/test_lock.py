"""The restatement lock: one holder at a time; a dead holder's lock is taken over."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from tardy.lock import LockedError, exclusive, holder, lock_path


def test_a_second_restatement_is_refused_while_the_first_holds_the_lock(tmp_path: Path) -> None:
    with exclusive(tmp_path, "first") as stale:
        assert stale is None
        assert holder(tmp_path).restatement_id == "first"
        running = f"restatement first is running \\(pid {os.getpid()}"
        with pytest.raises(LockedError, match=running), exclusive(tmp_path, "second"):
            pass
    assert not lock_path(tmp_path).exists()


def test_a_lock_left_by_a_killed_process_is_taken_over_and_reported(tmp_path: Path) -> None:
    dead = subprocess.run(
        [sys.executable, "-c", "import os; print(os.getpid())"],
        capture_output=True,
        text=True,
        check=True,
    )
    pid = int(dead.stdout)
    path = lock_path(tmp_path)
    path.parent.mkdir(parents=True)
    path.write_text(
        json.dumps(
            {
                "restatement_id": "killed",
                "pid": pid,
                "host": socket.gethostname(),
                "since": "2026-01-01T00:00:00+00:00",
            }
        )
    )
    with exclusive(tmp_path, "next") as stale:
        assert stale is not None and stale.restatement_id == "killed" and stale.pid == pid
        assert holder(tmp_path).restatement_id == "next"
    assert not path.exists()


def test_a_lock_of_another_host_is_never_taken_over(tmp_path: Path) -> None:
    path = lock_path(tmp_path)
    path.parent.mkdir(parents=True)
    path.write_text(
        json.dumps(
            {
                "restatement_id": "elsewhere",
                "pid": 1,
                "host": "another-host",
                "since": "2026-01-01T00:00:00+00:00",
            }
        )
    )
    with pytest.raises(LockedError, match="elsewhere"), exclusive(tmp_path, "next"):
        pass
    assert holder(tmp_path).restatement_id == "elsewhere"
