"""The warm engine's record (``engine.json``) and the addresses it gives: what the engine's
supervisor writes (``tardy.runtime.warm``) and what its watchdog (``tardy.runtime.watchdog``)
reads, kept below both."""

from __future__ import annotations

from dataclasses import dataclass

# The catalog call a probe makes: the metastore (Derby), under the catalog's lock.
PROBE_STATEMENT = "SHOW DATABASES"
HOST = "localhost"  # with a token, the client accepts plain text only for `localhost`


@dataclass(frozen=True)
class Record:
    """``engine.json``: a running engine, as its supervisor wrote it once the port answered."""

    home: str
    supervisor_pid: int
    server_pid: int
    port: int
    started_at: float
    settings_digest: str
    idle_seconds: float

    @property
    def url(self) -> str:
        return f"sc://{HOST}:{self.port}"


def session_url(port: int, token: str, session_id: str) -> str:
    """The Spark Connect URL of one session on the engine at ``port``, the token in it."""
    return f"sc://{HOST}:{port}/;token={token};session_id={session_id}"
