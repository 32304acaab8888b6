"""The restatement lock, with real processes: one holder at a time, released by any death."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tardy.runtime.lock import UNKNOWN, LockedError, exclusive, holder, lock_path

# A process that takes the lock, says so, then holds it for `hold` seconds (or until killed).
HOLD = """
import sys, time
from pathlib import Path
from tardy.runtime.lock import LockedError, exclusive
home, rid, start, hold = Path(sys.argv[1]), sys.argv[2], float(sys.argv[3]), float(sys.argv[4])
time.sleep(max(0.0, start - time.time()))
try:
    with exclusive(home, rid) as stale:
        print("won", stale.restatement_id if stale else "-", flush=True)
        time.sleep(hold)
except LockedError as error:
    print("refused", error, flush=True)
"""


def spawn(home: Path, rid: str, start: float = 0.0, hold: float = 60.0) -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, "-c", HOLD, str(home), rid, str(start), str(hold)],
        stdout=subprocess.PIPE,
        text=True,
    )


def test_a_second_restatement_is_refused_while_the_first_holds_the_lock(tmp_path: Path) -> None:
    with exclusive(tmp_path, "first") as stale:
        assert stale is None
        assert holder(tmp_path).restatement_id == "first"
        running = f"restatement first is running \\(pid {os.getpid()}"
        with pytest.raises(LockedError, match=running), exclusive(tmp_path, "second"):
            pass
        assert holder(tmp_path).restatement_id == "first"
    assert holder(tmp_path) is None
    with exclusive(tmp_path, "third") as stale:  # a clean release leaves nothing stale
        assert stale is None


def test_a_live_holder_in_another_process_refuses_and_its_kill_releases_the_lock(
    tmp_path: Path,
) -> None:
    process = spawn(tmp_path, "killed")
    assert process.stdout.readline().split() == ["won", "-"]
    assert holder(tmp_path).pid == process.pid
    with pytest.raises(LockedError, match="killed"), exclusive(tmp_path, "next"):
        pass
    os.kill(process.pid, signal.SIGKILL)
    process.wait()
    with exclusive(tmp_path, "next") as stale:
        assert stale is not None and stale.restatement_id == "killed"
        assert stale.pid == process.pid
        assert holder(tmp_path).restatement_id == "next"


def test_a_half_written_lock_file_is_taken_over(tmp_path: Path) -> None:
    path = lock_path(tmp_path)
    path.parent.mkdir(parents=True)
    path.write_text('{"restatement_id": "crash", "pi')
    with exclusive(tmp_path, "next") as stale:
        assert stale == UNKNOWN
        assert holder(tmp_path).restatement_id == "next"


def test_processes_racing_for_a_stale_lock_never_both_win(tmp_path: Path) -> None:
    path = lock_path(tmp_path)
    path.parent.mkdir(parents=True)
    path.write_text('{"restatement_id": "crash", "pi')  # left by a crash
    start = time.time() + 2.0  # every racer is up by then and tries at the same instant
    racers = [spawn(tmp_path, f"racer-{i}", start=start, hold=3.0) for i in range(6)]
    results = [racer.communicate(timeout=60)[0].split() for racer in racers]
    winners = [result for result in results if result[0] == "won"]
    assert len(winners) == 1, results
    assert winners[0][1] == "unknown"  # the winner took over the crash's lock
    assert sum(result[0] == "refused" for result in results) == len(racers) - 1, results
