"""How ingest refuses input: ``IngestError`` (nothing of it written) and ``FileRefused`` (one
landing file refused, the others not affected).
"""

from __future__ import annotations

from pathlib import Path

from tardy.errors import InputError


class IngestError(InputError):
    """Bad landing input that cannot be ingested (nothing of it was written)."""


class FileRefused(IngestError):
    """One landing file refused: nothing of it is written (the other files are not affected)."""

    def __init__(self, path: Path | str, reason: str) -> None:
        super().__init__(f"{path}: {reason}")
        self.path = str(path)
        self.reason = reason
