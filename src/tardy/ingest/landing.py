"""The landing directory's contract: where a source's batch file lives and what its folder name
says (its arrival time). ``tardy.simulate`` writes it, ``tardy.ingest`` reads it.

Landing contract
================

``<landing_dir>/<source_system>/arrival_ts=<YYYYMMDDTHHMMSSZ>/<name>.jsonl``

* ``arrival_ts`` is the batch's arrival time, ISO-8601 basic format, UTC, no colons
  (``arrival_ts=20260102T060000Z``); ``arrival_dir_name`` / ``parse_arrival_dir`` convert.
* Source ``pos``: one file ``pos-batch.jsonl`` per upload slot (every 6 hours: 00:00, 06:00,
  12:00, 18:00 UTC) holding every store's records of that slot; empty slots have no file.
* Source ``partner``: one file ``partner-resend-week-<YYYY-MM-DD>.jsonl``
  (``tardy.simulate.sales``).
* JSON lines, ``\\n`` endings, compact separators, keys always in this order:
  ``transaction_id`` (string), ``record_type`` (``sale`` | ``correction`` | ``void``),
  ``store_id`` (int), ``product_id`` (int, 1..40), ``quantity`` (int, 1..5),
  ``unit_price`` (JSON number, exactly 2 decimals), ``discount`` (JSON number, exactly 2
  decimals), ``event_ts`` (``2026-01-01T14:03:27Z``) and, only on corrections and voids that
  carry their own new id, ``corrects_transaction_id``.
* Net amount = ``quantity * unit_price - discount``; for valid rows
  ``0 <= discount <= quantity * unit_price``.
* Source ``store_master`` (``STORE_MASTER_SOURCE``, only when ``store_changes``): one file
  ``store-changes.jsonl`` per 6-hour slot that has store changes arriving. One record per
  change, compact JSON, keys in this order: ``store_id`` (int), ``effective_ts``
  (``2026-01-05T09:00:00Z``, when the change took effect: a whole hour), ``region``,
  ``format``, ``manager`` (strings), ``change_id`` (string) and ``is_correction`` (JSON
  ``true``/``false``). Every record carries the store's whole state after the change.
"""

from __future__ import annotations

import re
from datetime import UTC, datetime

POS_SOURCE = "pos"
PARTNER_SOURCE = "partner"
STORE_MASTER_SOURCE = "store_master"
STORE_CHANGES_NAME = "store-changes.jsonl"
POS_BATCH_NAME = "pos-batch.jsonl"
ARRIVAL_DIR_PREFIX = "arrival_ts="
SLOT_HOURS = 6

_ARRIVAL_RE = re.compile(r"arrival_ts=(\d{8}T\d{6}Z)")
_ARRIVAL_FORMAT = "%Y%m%dT%H%M%SZ"

# --- arrival folder names ---------------------------------------------------------------------


def arrival_dir_name(ts: datetime) -> str:
    """``arrival_ts=YYYYMMDDTHHMMSSZ`` for an aware datetime (converted to UTC).

    Sub-second precision is dropped. Raises ValueError for a naive datetime.
    """
    if ts.tzinfo is None or ts.utcoffset() is None:
        raise ValueError(f"arrival_dir_name needs a timezone-aware datetime, got naive {ts!r}")
    return ARRIVAL_DIR_PREFIX + ts.astimezone(UTC).strftime(_ARRIVAL_FORMAT)


def parse_arrival_dir(name: str) -> datetime:
    """The UTC-aware arrival time of an ``arrival_ts=YYYYMMDDTHHMMSSZ`` folder name."""
    match = _ARRIVAL_RE.fullmatch(name) if isinstance(name, str) else None
    if match is None:
        raise ValueError(
            f"malformed arrival folder name {name!r}: expected 'arrival_ts=YYYYMMDDTHHMMSSZ' "
            "(UTC, ISO-8601 basic format, e.g. 'arrival_ts=20260102T060000Z')"
        )
    try:
        return datetime.strptime(match.group(1), _ARRIVAL_FORMAT).replace(tzinfo=UTC)
    except ValueError as exc:
        raise ValueError(f"malformed arrival folder name {name!r}: {exc}") from None
