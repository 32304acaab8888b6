"""Writing the generated batches as landing files: each delivered batch published atomically
(temporary file, then hard link), an identical file left alone, a different one refused.
"""

from __future__ import annotations

import os
from pathlib import Path

from tardy.ingest.landing import POS_SOURCE, arrival_dir_name
from tardy.simulate.batch import Batch, datetime_of
from tardy.simulate.refunds import REFUND_KINDS
from tardy.simulate.sales import KINDS, Generator
from tardy.simulate.store_changes import STORE_KINDS


class Writer:
    def __init__(self, landing_dir: Path, through: int | None, generator: Generator) -> None:
        self.landing_dir = landing_dir
        self.through = through
        self.generator = generator
        self.files_written = 0
        self.files_existing = 0
        self.records = 0
        self.counts: dict[str, int] = dict.fromkeys((*KINDS, *STORE_KINDS, *REFUND_KINDS), 0)

    def emit(self, batch: Batch) -> None:
        if not batch.lines:
            return
        out_of_order = False
        delivered = batch.arrival
        if batch.source_system == POS_SOURCE:
            out_of_order = self.generator.is_out_of_order(batch.arrival)
            delivered = self.generator.delivery(batch.arrival)
        if self.through is not None and delivered > self.through:
            return
        folder = arrival_dir_name(datetime_of(batch.arrival))
        path = self.landing_dir / batch.source_system / folder / batch.name
        data = ("\n".join(batch.lines) + "\n").encode("utf-8")
        if _publish(path, data):
            self.files_written += 1
        else:
            self.files_existing += 1
        self.records += len(batch.lines)
        for kind, count in batch.counts.items():
            self.counts[kind] += count
        if out_of_order:
            self.counts["out_of_order_batch"] += 1


def _same_or_raise(path: Path, data: bytes) -> bool:
    if path.read_bytes() == data:
        return False
    raise FileExistsError(
        f"landing file {path} already exists with different content; refusing to overwrite "
        "landing data (was this landing directory written with another simulation config? "
        "use an empty landing directory)"
    )


def _publish(path: Path, data: bytes) -> bool:
    """Write ``path`` atomically; False if it already holds exactly ``data``."""
    if path.exists():
        return _same_or_raise(path, data)
    path.parent.mkdir(parents=True, exist_ok=True)
    # Hidden, not *.jsonl: a concurrent reader of the landing directory never picks it up.
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        tmp.write_bytes(data)
        try:
            os.link(tmp, path)  # fails instead of overwriting a file created meanwhile
        except FileExistsError:
            return _same_or_raise(path, data)
        except OSError:  # no hard links on this file system
            if path.exists():
                return _same_or_raise(path, data)
            os.replace(tmp, path)
        return True
    finally:
        tmp.unlink(missing_ok=True)
