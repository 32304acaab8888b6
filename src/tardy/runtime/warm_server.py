"""The warm engine's supervisor: ``python -m tardy.runtime.warm_server serve HOME DIGEST``.

A client (``tardy.runtime.warm.start``) starts it in a new session; it starts the data home's Spark
Connect server with the home's settings and a properties file only its owner reads, opens
the metastore over a session of its own, records the engine, interrupts the sessions of
clients that died, and stops the server after ``TARDY_ENGINE_IDLE`` seconds with no live
client or when told to.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
import uuid
from dataclasses import asdict
from pathlib import Path

from tardy.runtime.private import write_private, write_properties
from tardy.runtime.processes import free_port, port_answers, stop_group
from tardy.runtime.warm import (
    BIND,
    CLIENT_ONLY,
    POLL,
    SERVER_CLASS,
    SERVER_SETTINGS,
    START_TIMEOUT,
    Paths,
    Record,
    idle_for,
    idle_seconds,
    probe_timeout,
    read,
    reap_dead_clients,
    session_url,
    touch,
)
from tardy.runtime.watchdog import probe


def _server_argv(paths: Paths, port: int) -> list[str]:
    import pyspark

    settings = json.loads((paths.dir / "settings.json").read_text())
    properties = {k: v for k, v in settings.items() if k not in CLIENT_ONLY}
    properties.update(SERVER_SETTINGS)
    properties.update(
        {
            "spark.app.name": "tardy-engine",
            "spark.connect.grpc.binding.address": BIND,
            "spark.connect.grpc.binding.port": str(port),
            "spark.connect.authenticate.token": paths.token.read_text().strip(),
            "spark.driver.host": BIND,
            "spark.driver.bindAddress": BIND,
        }
    )
    write_properties(paths.server_conf, properties)
    spark_home = Path(pyspark.__file__).parent
    return [
        str(spark_home / "bin" / "spark-submit"),
        "--master",
        settings.get("spark.master", "local[*]"),
        "--properties-file",
        str(paths.server_conf),
        "--class",
        SERVER_CLASS,
        "spark-internal",
    ]


def _open_metastore(paths: Paths, port: int) -> None:
    """Run one catalog statement over the supervisor's own session, so that the metastore's
    first initialisation (Derby through DataNucleus and its connection pool) is done before
    any client can connect. A client killed inside that initialisation has its statement
    interrupted by ``reap_dead_clients``; the interrupt lands in the pool's first
    connection, which the pool never gets back, and every later catalog call waits on
    ``SharedState``'s lock for good (docs/warm-engine.md, "A client killed in the engine's
    first statement")."""
    from pyspark.sql.connect.session import SparkSession

    token = paths.token.read_text().strip()
    spark = SparkSession.builder.remote(session_url(port, token, str(uuid.uuid4()))).create()
    try:
        spark.sql("SHOW DATABASES").collect()
    finally:
        spark.stop()


def _answers(paths: Paths, record: Record) -> bool:
    """After interrupting a dead client's statements: the watchdog's probe. An interrupt
    inside a metastore call can leave the catalog stuck for good; such an engine is stopped
    (its tables and metastore are on disk), so that no command waits on it and the next one
    starts a fresh engine (docs/warm-engine.md, "The watchdog")."""
    token = paths.token.read_text().strip()
    checked = probe(record, token, str(uuid.uuid4()), probe_timeout(), release=True)
    if checked.answered:
        return True
    print(f"tardy engine: wedged after a reap ({checked.error}); stopping", flush=True)
    return False


def serve(home: Path, digest: str) -> int:
    """The supervisor: start the server, record it, stop it when idle or when told to."""
    import pyspark

    paths = Paths(home)
    idle = idle_seconds()
    env = dict(os.environ)
    env.update(SPARK_HOME=str(Path(pyspark.__file__).parent), SPARK_LOCAL_IP=BIND, TZ="UTC")
    env.update(SPARK_LOCAL_DIRS=str(home / "tmp"), PYSPARK_PYTHON=sys.executable)
    for attempt in range(3):  # a free port can be taken between the probe and the bind
        port = free_port(BIND)
        server = subprocess.Popen(
            _server_argv(paths, port),
            stdin=subprocess.DEVNULL,
            env=env,
            start_new_session=True,
        )
        deadline = time.monotonic() + START_TIMEOUT
        while server.poll() is None and not port_answers(BIND, port):
            if time.monotonic() > deadline:
                stop_group(server.pid)
                return 1
            time.sleep(0.3)
        if server.poll() is None:
            break
        print(f"tardy engine: server exited while starting (attempt {attempt + 1})", flush=True)
    else:
        return 1

    def shutdown(*_: object) -> None:
        stop_group(server.pid)
        if (record := read(paths)) is not None and record.supervisor_pid == os.getpid():
            paths.record.unlink(missing_ok=True)
        sys.exit(0)

    signal.signal(signal.SIGTERM, shutdown)
    signal.signal(signal.SIGINT, shutdown)
    began = time.monotonic()
    try:
        _open_metastore(paths, port)
    except Exception as error:
        print(f"tardy engine: the metastore did not open: {error}", flush=True)
        stop_group(server.pid)
        return 1
    print(f"tardy engine: metastore open in {time.monotonic() - began:.1f} s", flush=True)
    record = Record(str(home), os.getpid(), server.pid, port, time.time(), digest, idle)
    touch(paths.last_used)
    write_private(paths.record, json.dumps(asdict(record)))
    print(f"tardy engine: serving {home} on {BIND}:{port} (pid {server.pid})", flush=True)
    while server.poll() is None:
        time.sleep(min(POLL, max(idle / 4, 0.2)))
        interrupted: list[str] = []
        with contextlib.suppress(Exception):
            interrupted = reap_dead_clients(paths, record)
        if interrupted and not _answers(paths, record):
            shutdown()
        unused = idle_for(paths)
        if unused is not None and unused >= idle:
            print(f"tardy engine: idle for {unused:.0f} s, stopping", flush=True)
            shutdown()
    print(f"tardy engine: server exited with {server.returncode}", flush=True)
    if (current := read(paths)) is not None and current.supervisor_pid == os.getpid():
        paths.record.unlink(missing_ok=True)
    return 1


def main(argv: list[str]) -> int:
    if len(argv) == 3 and argv[0] == "serve":
        return serve(Path(argv[1]), argv[2])
    print("usage: python -m tardy.runtime.warm_server serve HOME DIGEST (users: tardy engine ...)")
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
