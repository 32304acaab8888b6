"""Deterministic point-of-sale simulator for SQL Sushi Co.

``simulate`` generates the sales of ``stores`` stores over ``days`` days and writes them as
landing batch files, with the late, duplicated, corrected, voided, out-of-order and invalid
records that a real point-of-sale feed delivers; and the stores' master data changes
(region, format, manager) with the same troubles (``store_changes``), and, when asked, the
payment provider's card refunds of those sales (``refunds``).

The landing contract (paths, file names, arrival folders) is ``tardy.ingest.landing``'s; the feed
model is ``tardy.simulate.sales`` (sales, kinds and their rates) and
``tardy.simulate.store_changes`` (store master data); ``tardy.simulate.writer`` publishes the
files; ``tardy.simulate.config`` holds ``SimulationConfig`` and ``SimulationResult``.

Determinism and delivery
========================

Everything is a pure function of the config: each store-day draws from its own
``random.Random`` seeded with a string built from ``seed``, store and date (never the wall
clock, ``hash()`` or set order), so the same config gives byte-identical files. The sales of
a store-day (ids, times, products, amounts) do not depend on ``days``, ``stores`` or the
rates, but batch files do (other store-days add late records to them): write one landing
directory with one config only. A batch is delivered at its ``arrival_ts`` (out-of-order
batches 24-48 hours later; ``store_master`` files are never delayed);
``simulate(..., through=t)`` writes only the batches delivered at or before ``t``, and a later
call writes the rest. Files are published atomically
(temporary file, then hard link); an existing identical file is left untouched, an existing
different file raises ``FileExistsError``.
"""

from __future__ import annotations

from datetime import datetime
from pathlib import Path

from tardy.simulate.batch import epoch_of
from tardy.simulate.config import SimulationConfig, SimulationResult
from tardy.simulate.refunds import refund_batches
from tardy.simulate.sales import PARTNER_WEEK_DAYS, Generator
from tardy.simulate.store_changes import store_batches
from tardy.simulate.writer import Writer

__all__ = ["SimulationConfig", "SimulationResult", "simulate"]


def simulate(
    config: SimulationConfig, landing_dir: Path, through: datetime | None = None
) -> SimulationResult:
    """Write the landing batches of ``config`` delivered at or before ``through``.

    ``through`` is an aware datetime (None: everything). Re-running is idempotent: files that
    already exist with identical content are counted in ``files_existing``; an existing file
    with different content raises ``FileExistsError``. Counts and records cover the files
    written or already present for this call.
    """
    through_s = None if through is None else epoch_of(through)
    generator = Generator(config)
    writer = Writer(Path(landing_dir), through_s, generator)
    for day in range(config.days):
        if through_s is not None and generator.day_start(day) > through_s:
            break  # everything of this day and later arrives after `through`
        for store in range(1, config.stores + 1):
            generator.store_day(day, store)
        if day == PARTNER_WEEK_DAYS - 1 and generator.partner is not None:
            writer.emit(generator.partner)
        for batch in generator.pop_complete(day):
            writer.emit(batch)
    for batch in generator.pop_all():
        writer.emit(batch)
    if config.store_changes:
        for batch in store_batches(config):
            writer.emit(batch)
    for batch in refund_batches(config):
        writer.emit(batch)
    return SimulationResult(
        files_written=writer.files_written,
        files_existing=writer.files_existing,
        records=writer.records,
        counts=writer.counts,
        first_day=config.start,
        last_day=config.last_day,
    )
