"""Landing discovery and validation: the candidate files under the landing root, each checked to
be a regular file inside it (no link, FIFO or path outside) and described by its source
system, arrival time and content hash (``LandingFile``), or refused with its reason.
"""

from __future__ import annotations

import hashlib
import os
import stat
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

from tardy.ingest.errors import FileRefused, IngestError
from tardy.ingest.landing import ARRIVAL_DIR_PREFIX, parse_arrival_dir


@dataclass(frozen=True)
class LandingFile:
    path: Path  # the real path, inside the landing root
    source_system: str
    source_file: str  # relative to the landing root, POSIX separators
    arrival_ts: datetime | None  # None: arrives at ingestion time
    sha256: str


def discover(landing: Path, paths: Sequence[Path] = ()) -> list[Path]:
    """The candidate landing files named (files, or folders searched recursively), sorted.

    Candidates are the ``*.jsonl`` entries that are not folders (regular files, but also
    symbolic links, FIFOs, ...) and every symbolic link to a folder: ``describe`` refuses all
    but regular files, so nothing that looks like landing data is passed over in silence.
    Links to folders are not followed. Paths are absolute but not resolved (``..`` kept).
    """
    roots = [Path(p).absolute() for p in paths] or [landing.resolve()]
    landing_root = landing.resolve()
    found: set[Path] = set()
    for root in roots:
        if root.is_symlink() and root.resolve() != landing_root:
            found.add(root)  # named explicitly: refused by `describe`
        elif root.is_dir():
            found.update(_walk(root))
        elif os.path.lexists(root):
            found.add(root)
        elif paths:
            raise IngestError(f"no such file or folder: {root}")
    return sorted(found)


def _walk(folder: Path) -> Iterable[Path]:
    for parent, folders, files in os.walk(folder, followlinks=False):
        base = Path(parent)
        yield from (base / name for name in folders if (base / name).is_symlink())
        yield from (base / name for name in files if name.endswith(".jsonl"))


def describe(path: Path, landing: Path) -> LandingFile:
    """Source system, arrival time and content hash of one landing file.

    Raises ``FileRefused`` for anything but a regular file inside the landing root: a
    symbolic link, a path that resolves outside the root (``..``, a linked folder), a FIFO,
    a file that cannot be read, a malformed arrival folder, no source system folder.
    """
    path = Path(path).absolute()  # not normalised: the error names the path as given
    if path.is_symlink():
        raise FileRefused(
            path,
            f"a symbolic link (to {os.readlink(path)}); landing files must be regular files "
            "inside the landing root: land a copy of the file instead",
        )
    root = landing.resolve()
    real = path.resolve()
    if not real.is_relative_to(root):
        raise FileRefused(
            path,
            f"resolves to {real}, outside the landing root {root}; copy it to "
            "<landing>/<source_system>/arrival_ts=<YYYYMMDDTHHMMSSZ>/<name>.jsonl",
        )
    relative = real.relative_to(root)
    arrival_dirs = [p for p in reversed(relative.parents) if p.name.startswith(ARRIVAL_DIR_PREFIX)]
    arrival_ts = None
    if arrival_dirs:
        try:
            arrival_ts = parse_arrival_dir(arrival_dirs[-1].name)
        except ValueError as exc:
            raise FileRefused(path, str(exc)) from exc
    source_system = relative.parts[0] if len(relative.parts) > 1 else ""
    if not source_system or source_system.startswith(ARRIVAL_DIR_PREFIX):
        raise FileRefused(
            path,
            "cannot tell its source system; land it as "
            "<landing>/<source_system>/arrival_ts=<YYYYMMDDTHHMMSSZ>/<name>.jsonl",
        )
    digest = hashlib.sha256(read_landing_file(real)).hexdigest()
    return LandingFile(real, source_system, relative.as_posix(), arrival_ts, digest)


def read_landing_file(path: Path) -> bytes:
    """The bytes of a regular file, never following a symbolic link nor blocking on a FIFO."""
    try:
        # O_NONBLOCK: opening a FIFO for reading would otherwise wait for a writer forever.
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    except OSError as exc:
        raise FileRefused(path, f"cannot be opened: {exc.strerror}") from exc
    with os.fdopen(fd, "rb") as handle:
        mode = os.fstat(handle.fileno()).st_mode
        if not stat.S_ISREG(mode):
            raise FileRefused(path, f"not a regular file ({_file_kind(mode)})")
        try:
            return handle.read()
        except OSError as exc:
            raise FileRefused(path, f"cannot be read: {exc.strerror}") from exc


def _file_kind(mode: int) -> str:
    kinds = {
        stat.S_ISFIFO: "a FIFO",
        stat.S_ISSOCK: "a socket",
        stat.S_ISCHR: "a character device",
        stat.S_ISBLK: "a block device",
        stat.S_ISDIR: "a folder",
    }
    return next((name for test, name in kinds.items() if test(mode)), f"mode {mode:o}")
