"""Shared by the tests that need their own data home: the ``small`` template (a small prod
that the restatement tests start from), work in a home of its own in the warm engine, the CLI
called in-process, and the late sales they land for closed days.
"""

from __future__ import annotations

import io
import json
import os
import shlex
import subprocess
import sys
import typing as t
from collections.abc import Iterator
from contextlib import contextmanager, redirect_stderr, redirect_stdout
from datetime import UTC, date, datetime, timedelta
from pathlib import Path

from homes import Engine, Template

from tardy.simulate import SimulationConfig

# Two stores over ten days, prod planned at midnight after the last day: the restatement
# tests' starting state (late rows, kills and races come on top, per test).
SMALL_CONFIG = SimulationConfig(seed=3, stores=2, days=10, transactions_per_store_day=20)
SMALL_CLOCK = datetime.combine(
    SMALL_CONFIG.start + timedelta(days=SMALL_CONFIG.days), datetime.min.time(), UTC
)


def build_small(engine: Engine, root: Path) -> dict[str, t.Any]:
    from tardy.ingest import ingest
    from tardy.simulate import simulate

    home, context, spark = engine.open(root)
    simulate(SMALL_CONFIG, home.landing, through=SMALL_CLOCK)
    files = ingest(spark, home.landing).files_ingested
    context.plan(
        "prod",
        execution_time=SMALL_CLOCK,
        auto_apply=True,
        no_prompts=True,
        skip_tests=True,
        skip_linter=True,
        no_diff=True,
    )
    return {"files": files}


SMALL = Template("small", build_small)


def in_own_home(engine: Engine, home: Path, child: t.Callable[..., t.Any], *args: t.Any) -> t.Any:
    """``child(*args)`` in this process, with the data home ``home`` open in the worker's warm
    engine (``TARDY_HOME`` set: the child's own ``open_context()`` finds the open session);
    the home is released afterwards, for any process that comes next. Its result as JSON
    carries it."""
    engine.open(home)
    try:
        result = child(*args)
    finally:
        engine.release()
    return json.loads(json.dumps(result, default=str))  # the shape a child process printed


def cli_in_process(*argv: str) -> tuple[int, str, str]:
    """``tardy <argv>`` in this process (no JVM start): exit code, stdout, stderr."""
    from tardy import cli

    out, err = io.StringIO(), io.StringIO()
    with redirect_stdout(out), redirect_stderr(err):
        code = cli.main(list(argv))
    return code, out.getvalue(), err.getvalue()


@contextmanager
def failing_at(point: str) -> Iterator[None]:
    """``TARDY_FAILPOINT=point`` in raise mode for the block: the step boundary where a test's
    kill would end the process raises ``FailpointReached`` in this one instead (the fast
    tier's in-process guard of a kill; the long tier kills the real process there)."""
    from tardy.engine.promote import FAILPOINT, FAILPOINT_MODE

    os.environ[FAILPOINT], os.environ[FAILPOINT_MODE] = point, "raise"
    try:
        yield
    finally:
        os.environ.pop(FAILPOINT, None)
        os.environ.pop(FAILPOINT_MODE, None)


def cli_cut_at(point: str, *argv: str) -> tuple[str, str]:
    """``tardy <argv>`` in this process, stopped at the failpoint ``point`` as a kill -9 there
    would stop it (``failing_at``); fails when the command ends without reaching it. What it
    printed before: stdout, stderr."""
    from tardy import cli
    from tardy.errors import FailpointReached

    out, err = io.StringIO(), io.StringIO()
    with failing_at(point), redirect_stdout(out), redirect_stderr(err):
        try:
            code = cli.main(list(argv))
        except FailpointReached as reached:
            assert str(reached) == point
            return out.getvalue(), err.getvalue()
    raise AssertionError(f"tardy {' '.join(argv)} exited {code} before {point}: {err.getvalue()}")


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


def exports_of(printed: str) -> dict[str, str]:
    """The variables ``python -m tardy.cluster up`` printed as shell ``export`` lines."""
    return {
        name: value
        for line in printed.splitlines()
        if line.startswith("export ")
        for name, value in [shlex.split(line.removeprefix("export "))[0].split("=", 1)]
    }


# A Spark Connect client in a process of its own (this one may hold a classic session): it
# prints 42 when the server at the URL answers it.
_ASK_42 = (
    "import sys; from pyspark.sql import SparkSession; "
    "s = SparkSession.builder.remote(sys.argv[1]).create(); "
    "print(s.sql('SELECT 41 + 1').first()[0])"
)


def connect_asks(url: str) -> subprocess.CompletedProcess[str]:
    """Ask the Spark Connect server at ``url`` for 41 + 1 (no retries); it answered when
    the process printed 42."""
    return subprocess.run(
        [sys.executable, "-c", _ASK_42, url],
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, "SPARK_CONNECT_RETRY_MAX": "0"},
    )


def cli_sequence(env: dict[str, str], *commands: t.Sequence[str]) -> list[tuple[int, str, str]]:
    """``tardy <argv>`` for each of ``commands``, in order, in one process of its own (one
    Python start and one SQLMesh load for all of them: a client of the data home's warm
    engine when ``env`` says so): each one's exit code, stdout and stderr. Every command runs,
    whatever the ones before it returned."""
    done = subprocess.run(
        [sys.executable, __file__, json.dumps([list(argv) for argv in commands])],
        cwd=Path(__file__).resolve().parents[2],
        env=env,
        capture_output=True,
        text=True,
        timeout=1800,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return [tuple(result) for result in json.loads(done.stdout.splitlines()[-1])]


if __name__ == "__main__":  # cli_sequence's process
    results = [cli_in_process(*argv) for argv in json.loads(sys.argv[1])]
    print(json.dumps(results))
