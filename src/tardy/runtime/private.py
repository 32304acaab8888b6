"""Files only their owner reads: secrets and the properties files that carry them.

A server tardy starts answers only its data home's owner: its secret (Spark Connect's token,
docs/facts.md, fact 26; PostgreSQL's password) lives in a file created mode 0600, and reaches
a JVM through a 0600 properties file (``spark-submit --properties-file``), never a command
line, where any local user reads it (``/proc/<pid>/cmdline``).
"""

from __future__ import annotations

import os
import secrets
from collections.abc import Mapping
from pathlib import Path


def write_private(path: Path, text: str) -> None:
    """Write ``text`` to ``path`` readable by its owner only (created 0600, then renamed)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as handle:
        handle.write(text)
    os.replace(tmp, path)


def secret(path: Path, make: str = "token") -> str:
    """The secret kept in ``path``, generated once (``make``: ``token``, URL-safe, or ``hex``)."""
    if not path.is_file():
        value = secrets.token_urlsafe(32) if make == "token" else secrets.token_hex(12)
        write_private(path, value + "\n")
    return path.read_text().strip()


def write_properties(path: Path, properties: Mapping[str, str]) -> None:
    """A Java properties file (``spark-submit --properties-file``), owner-only: one ``key
    value`` line each, backslashes doubled (the file is read by ``java.util.Properties``)."""
    lines = (f"{key} {value.replace(chr(92), chr(92) * 2)}\n" for key, value in properties.items())
    write_private(path, "".join(sorted(lines)))
