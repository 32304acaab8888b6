"""tardy's errors: one hierarchy, each class with the exit code the CLI returns for it.

| exit | class | meaning |
|---|---|---|
| 0 | – | done (including "nothing to do") |
| 1 | ``TardyError`` / ``InputError`` | bad input or set-up: nothing was written |
| 2 | ``RestatementFailed`` | a gate stopped a restatement (audit, breaker, stale prod, state) |
| 3 | ``Refused`` | another restatement holds the lock or awaits review: retry later |
| 3 | ``HomeBusy`` | another process has the data home's embedded state or metastore open |
| 4 | ``AlertsRaised`` | ``tardy status --check`` found a threshold exceeded |
| 5 | ``ChallengerRefused`` | ``tardy retrain``: the alias rule kept the champion |

Domain modules raise these; only the CLI turns them into messages and exit codes.
"""

from __future__ import annotations


class TardyError(RuntimeError):
    """Base of every error tardy raises on purpose."""

    exit_code = 1


class InputError(TardyError, ValueError):
    """Bad input (landing files, arguments, data home): nothing was written."""


class RestatementFailed(TardyError):
    """A restatement stopped at a gate; prod is unchanged (or as the message says)."""

    exit_code = 2


class Refused(TardyError):
    """Another restatement is running or awaiting review: nothing was done."""

    exit_code = 3


class HomeBusy(Refused):
    """Another process has the data home's embedded SQLMesh state (DuckDB) or Derby metastore
    open: each admits one process at a time. Nothing was done."""


class AlertsRaised(TardyError):
    """``tardy status --check`` found a lateness or pending-age threshold exceeded."""

    exit_code = 4


class ChallengerRefused(TardyError):
    """``tardy retrain``: the alias rule kept the champion (the challenger stays registered,
    tagged with the verdict)."""

    exit_code = 5


class FailpointReached(BaseException):  # noqa: N818 - a test hook's signal, not an error
    """A test's kill at a failpoint, in-process (``TARDY_FAILPOINT_MODE=raise``): raised at
    the step boundary where ``TARDY_FAILPOINT`` would kill the process. Not a ``TardyError``
    and not an ``Exception``: no handler of a command takes it for an error, so the command
    stops there as a killed one would (``tardy.engine.promote.failpoint``)."""
