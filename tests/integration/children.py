"""Shared by the tests that need their own data home: run a test module as a child process
there, and the late sales they land for closed days.

A child gets its own ``TARDY_HOME``: the pytest session's SparkSession holds the shared data
home's embedded metastore, which admits one process at a time.
"""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
import typing as t
from contextlib import redirect_stderr, redirect_stdout
from datetime import date, timedelta
from pathlib import Path

from tardy.home import project_root


def run_in_own_home(script: str, home: Path, *args: str, timeout: float = 900) -> t.Any:
    """Run ``script`` (a test module's ``__main__``) with ``TARDY_HOME=home``; the JSON of
    the last line it printed."""
    done = subprocess.run(
        [sys.executable, script, *args],
        cwd=project_root(),
        env={**os.environ, "TARDY_HOME": str(home)},
        capture_output=True,
        text=True,
        timeout=timeout,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


def cli_in_process(*argv: str) -> tuple[int, str, str]:
    """``tardy <argv>`` in this process (no JVM start): exit code, stdout, stderr."""
    from tardy import cli

    out, err = io.StringIO(), io.StringIO()
    with redirect_stdout(out), redirect_stderr(err):
        code = cli.main(list(argv))
    return code, out.getvalue(), err.getvalue()


def late_sales(prefix: str, start: date, days: t.Iterable[int] = (1, 4), per_day: int = 2) -> str:
    """JSON lines: ``per_day`` new sales of 4.50 on each of ``days`` (offsets from
    ``start``), ids ``<prefix>-<offset>-<n>``."""
    return "".join(
        json.dumps(
            {
                "transaction_id": f"{prefix}-{day}-{i}",
                "record_type": "sale",
                "store_id": 1,
                "product_id": 2,
                "quantity": 1,
                "unit_price": 4.5,
                "event_ts": f"{start + timedelta(days=day)}T08:00:00Z",
            }
        )
        + "\n"
        for day in days
        for i in range(per_day)
    )
