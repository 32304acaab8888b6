"""The warm engine's watchdog: a bounded catalog call that tells an engine that answers
from a wedged one (docs/warm-engine.md, "The watchdog"); ``tardy.runtime.warm`` acts on it."""

from __future__ import annotations

import sys
import threading
import time
from dataclasses import dataclass

from tardy.runtime.record import PROBE_STATEMENT, Record, session_url


@dataclass(frozen=True)
class Probe:
    """One catalog call on the engine, bounded: ``seconds`` it took, or ``error`` (it did
    not answer within ``timeout``, or failed)."""

    statement: str
    timeout: float
    seconds: float | None
    error: str | None

    @property
    def answered(self) -> bool:
        return self.error is None


def probe(
    record: Record, token: str, session_id: str, timeout: float, *, release: bool = False
) -> Probe:
    """Run ``PROBE_STATEMENT`` on the engine over ``session_id`` and wait at most
    ``timeout`` seconds for its answer. A metastore left broken by an interrupt (Derby's
    connection closed inside a pooled call) never answers: the call waits on the catalog's
    lock for good, so it runs on a daemon thread that is abandoned, with the engine, when
    it does not answer (docs/warm-engine.md, "The watchdog")."""
    import pyspark.sql.connect.proto as pb2
    from pyspark.sql.connect.client import SparkConnectClient

    answer: list[float] = []
    failure: list[str] = []
    client = SparkConnectClient(session_url(record.port, token, session_id))

    def call() -> None:
        began = time.monotonic()
        try:
            client.execute_command(pb2.Command(sql_command=pb2.SqlCommand(sql=PROBE_STATEMENT)))
            if release:  # a session of the probe's own, not a client's
                client.release_session()
            answer.append(time.monotonic() - began)
        except Exception as error:  # any failure counts: the engine did not answer
            failure.append(f"{type(error).__name__}: {str(error)[:200]}")

    thread = threading.Thread(target=call, name="tardy-engine-probe", daemon=True)
    thread.start()
    thread.join(timeout)
    # Closed in any case: a client left open asks the server again when the process exits
    # (PySpark's exit hook), which a wedged engine never answers.
    client.close()
    if answer:
        return Probe(PROBE_STATEMENT, timeout, round(answer[0], 3), None)
    error = failure[0] if failure else f"no answer within {timeout:.0f} s"
    return Probe(PROBE_STATEMENT, timeout, None, error)


def notice(message: str) -> None:
    """One line on stderr for what the engine's watchdog did (a restart): the command's
    own output stays on stdout, for ``tardy`` and the stock ``sqlmesh`` alike."""
    print(f"tardy: {message}", file=sys.stderr, flush=True)
