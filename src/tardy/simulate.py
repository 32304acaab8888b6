"""Deterministic point-of-sale simulator for SQL Sushi Co.

``simulate`` generates the sales of ``stores`` stores over ``days`` days and writes them as
landing batch files, with the late, duplicated, corrected, voided, out-of-order and invalid
records that a real point-of-sale feed delivers; and the stores' master data changes
(region, format, manager) with the same troubles (``store_changes``, "Store changes" below).

Landing contract
================

``<landing_dir>/<source_system>/arrival_ts=<YYYYMMDDTHHMMSSZ>/<name>.jsonl``

* ``arrival_ts`` is the batch's arrival time, ISO-8601 basic format, UTC, no colons
  (``arrival_ts=20260102T060000Z``); ``arrival_dir_name`` / ``parse_arrival_dir`` convert.
* Source ``pos``: one file ``pos-batch.jsonl`` per upload slot (every 6 hours: 00:00, 06:00,
  12:00, 18:00 UTC) holding every store's records of that slot; empty slots have no file.
* Source ``partner``: one file ``partner-resend-week-<YYYY-MM-DD>.jsonl`` (see below).
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

Sales
=====

Every store-day has ``transactions_per_store_day`` sales on average (the count varies
deterministically within +-20%), with ``event_ts`` uniform in 08:00-22:00 UTC of the day and
ids ``S<store:03>-<YYYYMMDD>-<n:05>`` numbered in event order. ``product_id`` is uniform in
1..40 with the fixed price list ``UNIT_PRICE_CENTS`` (2.50-24.00), ``quantity`` uniform in
1..5, ``discount`` 0.00 for 80% of sales and otherwise a multiple of 0.10 of at most 20% of
the gross amount. An on-time sale arrives in the first ``pos`` slot strictly after its
``event_ts``.

Kinds and default rates
=======================

Rates are fractions of sales unless stated otherwise; each is drawn independently per sale.
``SimulationResult.counts`` counts every kind (records, except ``out_of_order_batch``):

======================  =======  ===========================================================
kind                    default  meaning
======================  =======  ===========================================================
``on_time``             rest     sale arriving in the first slot after its event
``late_hours``          5%       sale arriving 2-12 hours after its normal slot (next slot up)
``late_days``           3%       sale arriving 1-3 days after its normal slot
``late_weeks``          0.5%     sale arriving 7-28 days after its normal slot
``duplicate``           1%       the identical sale line re-sent (retry) 1-12 slots (6 h to
                                 3 days) after the sale's arrival
``correction``          1%       a ``correction`` record 1-10 days after the sale's arrival,
                                 with a different net amount (quantity, unit_price or
                                 discount changed, still valid); 10% of corrected sales
                                 (``second_correction``) get a second correction later still
``date_move``           25%      share of corrections whose ``event_ts`` moves to another day
                        of corr. (+-1-3 days, never before ``start``, always strictly
                                 before the correction's own arrival)
``void``                0.5%     a ``void`` record 6 hours to 10 days after the sale's
                                 arrival, with the sale's ``event_ts`` and field values
                                 (corrections and voids never hit the same sale)
``out_of_order_batch``  2% of    a ``pos`` batch delivered 24-48 hours after its
                        batches  ``arrival_ts`` (newer batches land before it); its folder
                                 keeps the original ``arrival_ts``
``partner_resend``      once     every original ``sale`` line of days 0..6 (all stores)
                                 re-sent by the ``partner`` source in one file arriving on day
                                 10 at 09:00 UTC (only when ``days >= 14``); some of those
                                 sales have been corrected or voided since
``invalid_<reason>``    0.5%     an additional bad record in the sale's batch (the sale itself
                                 still arrives valid); reasons ``null_transaction_id``,
                                 ``unparseable_event_ts`` (``2026-01-0X 25:61``),
                                 ``negative_quantity`` (-1..-5), ``future_event`` (event_ts
                                 2 days after the batch's arrival) at 22.5% each and
                                 ``malformed_json`` (a truncated JSON object) at 10%
======================  =======  ===========================================================

Corrections and voids reuse the sale's ``transaction_id`` in 80% of cases; the other 20% get
their own id (``<sale id>-C1``, ``-C2``, ``-V``) and name the sale's id in
``corrects_transaction_id`` (always the original sale's id, also for a second correction).
Invalid rows use ids ``<sale id>-X`` so they never collide with valid ones.

Built-in out-of-order race: the first corrected sale of a run always gets a second
correction, the batch of its first correction is always delivered out of order, and the
second correction arrives after the first one's ``arrival_ts`` but before its delivery, so an
older version of a transaction is delivered after a newer one. Every second correction whose
first correction sits in an out-of-order batch races the same way. Duplicates and the partner
resend also deliver older versions of a sale after its correction or void.

Store changes
=============

With ``store_changes`` (default), each store gets its **opening** version (``store_opening``)
effective at ``start`` 00:00:00Z, arriving on time in the first slot of day 0 (``arrival_ts``
= ``start`` 00:00:00Z), region ``STORE_REGIONS``, format ``STORE_FORMATS``, a manager's name.
Then about one change every 10 days (gaps uniform in 5-15 days), each changing the region
(40%), the format (30%) or the manager (30%), effective at a whole hour 00:00-17:00 UTC of a
day in ``1..days-1``. A change's normal arrival is the first slot strictly after its
``effective_ts`` (the same day). Kinds are counted with a ``store_`` prefix; shares are of
changes, drawn independently per change:

===========================================  =======  ==================================
kind                                         share    meaning
===========================================  =======  ==================================
``store_opening``                            1/store  the opening version (see above)
``store_on_time``                            rest     the change arrives at its normal slot
``store_late_days``                          25%      1-6 days after its normal slot
``store_late_weeks``                         15%      7-28 days after its normal slot
``store_out_of_order``                       -        a change that arrives before a change
                                                      of the same store effective earlier
                                                      (counted on the overtaking change)
``store_correction``                         10%      ``is_correction: true``, same
                                                      ``(store_id, effective_ts)``, another
                                                      region, own ``change_id``
                                                      (``<id>-R``), 6 h-10 days after the
                                                      change's arrival
``store_duplicate``                          10%      the identical line (same
                                                      ``change_id``) re-sent 6 h-3 days
                                                      after the change's arrival
``store_invalid_unknown_store``              3%       an additional record beside the
                                                      change with ``store_id`` ``"S-<n>"``
                                                      or ``-<n>`` (id ``<id>-X1``)
``store_invalid_missing_effective_ts``       3%       an additional record beside the
                                                      change without ``effective_ts``
                                                      (id ``<id>-X2``)
===========================================  =======  ==================================

``change_id`` is ``C<store:03>-<n>``, ``n`` = 0 for the opening and 1, 2, ... for the changes
in ``effective_ts`` order. The simulated period bounds delivery: no change takes effect after
the last day, and **no store record arrives after the last day's 18:00 slot**: a late change's
delay is cut to the days left (it is then counted by the delay it got, e.g. on time on the last
day), and a duplicate or correction that would arrive later is not sent. Built-in cases, so that
a short run has every kind: store 1's first change is always duplicated, corrected and
accompanied by one invalid record of each reason (when they fit in the period), and it arrives
after store 1's second change (out of order). Store changes draw from their own
``random.Random`` per store (seeded with ``seed`` and the store), so switching them on or off
changes no byte of the ``pos`` and ``partner`` files.

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

import os
import random
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import UTC, date, datetime, timedelta
from functools import lru_cache
from pathlib import Path

__all__ = [
    "ARRIVAL_DIR_PREFIX",
    "DEFAULT_START",
    "INVALID_REASONS",
    "KINDS",
    "PARTNER_SOURCE",
    "STORE_CHANGES_NAME",
    "STORE_FORMATS",
    "STORE_INVALID_REASONS",
    "STORE_KINDS",
    "STORE_MASTER_SOURCE",
    "STORE_REGIONS",
    "POS_BATCH_NAME",
    "POS_SOURCE",
    "SLOT_HOURS",
    "UNIT_PRICE_CENTS",
    "SimulationConfig",
    "SimulationResult",
    "arrival_dir_name",
    "parse_arrival_dir",
    "simulate",
]

DEFAULT_START = date(2026, 1, 1)

POS_SOURCE = "pos"
PARTNER_SOURCE = "partner"
STORE_MASTER_SOURCE = "store_master"
STORE_CHANGES_NAME = "store-changes.jsonl"
POS_BATCH_NAME = "pos-batch.jsonl"
ARRIVAL_DIR_PREFIX = "arrival_ts="
SLOT_HOURS = 6

PRODUCTS = 40
# Fixed price list in cents, product_id -> unit price: 40 distinct prices in 2.50..24.00.
UNIT_PRICE_CENTS: dict[int, int] = {i + 1: 250 + ((i * 17) % 44) * 50 for i in range(PRODUCTS)}

INVALID_REASONS: tuple[str, ...] = (
    "null_transaction_id",
    "unparseable_event_ts",
    "negative_quantity",
    "future_event",
    "malformed_json",
)
KINDS: tuple[str, ...] = (
    "on_time",
    "late_hours",
    "late_days",
    "late_weeks",
    "duplicate",
    "correction",
    "second_correction",
    "date_move",
    "void",
    "out_of_order_batch",
    "partner_resend",
    *(f"invalid_{reason}" for reason in INVALID_REASONS),
)

_HOUR = 3600
_DAY = 24 * _HOUR
_SLOT = SLOT_HOURS * _HOUR
_OPEN = 8 * _HOUR  # first possible event second of a day
_CLOSE = 22 * _HOUR  # events are strictly before this second of the day
_DISCOUNT_SHARE = 0.20  # share of sales with a non-zero discount
_NEW_ID_SHARE = 0.20  # share of corrections / voids with their own transaction id
_SECOND_CORRECTION_SHARE = 0.10  # share of corrected sales corrected a second time
_MALFORMED_SHARE = 0.10  # share of invalid rows that are truncated JSON
_PARTNER_WEEK_DAYS = 7  # the partner resends days 0..6 ...
_PARTNER_ARRIVAL = 10 * _DAY + 9 * _HOUR  # ... on day 10 at 09:00 UTC
_PARTNER_MIN_DAYS = 14
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)

# Store changes (source ``store_master``): the module docstring's "Store changes".
STORE_REGIONS: tuple[str, ...] = ("north", "south", "east", "west", "central")
STORE_FORMATS: tuple[str, ...] = ("express", "standard", "flagship")
STORE_MANAGERS: tuple[str, ...] = (
    "Aiko Tanaka",
    "Ben Okafor",
    "Carla Mendes",
    "Dmitri Volkov",
    "Elif Yilmaz",
    "Farah Haddad",
    "Goran Petrovic",
    "Hana Novak",
    "Ines Moreau",
    "Jonas Berg",
    "Kenji Sato",
    "Lena Fischer",
)
STORE_INVALID_REASONS: tuple[str, ...] = ("unknown_store", "missing_effective_ts")
STORE_KINDS: tuple[str, ...] = (
    "store_opening",
    "store_on_time",
    "store_late_days",
    "store_late_weeks",
    "store_out_of_order",
    "store_correction",
    "store_duplicate",
    *(f"store_invalid_{reason}" for reason in STORE_INVALID_REASONS),
)
_STORE_GAP_DAYS = (5, 15)  # days between two changes of a store, uniform (mean 10)
_STORE_LAST_HOUR = 17  # changes take effect at a whole hour 00..17, so on time is the same day
_STORE_LATE_WEEKS_SHARE = 0.15  # of changes: 7-28 days late
_STORE_LATE_DAYS_SHARE = 0.25  # of changes: 1-6 days late
_STORE_DUPLICATE_SHARE = 0.10  # of changes: the identical line re-sent 6 h to 3 days later
_STORE_CORRECTION_SHARE = 0.10  # of changes: corrected (another region) 6 h to 10 days later
_STORE_INVALID_SHARE = 0.06  # of changes: an additional invalid record in the change's file
_ARRIVAL_RE = re.compile(r"arrival_ts=(\d{8}T\d{6}Z)")
_ARRIVAL_FORMAT = "%Y%m%dT%H%M%SZ"


@dataclass(frozen=True)
class SimulationConfig:
    """Everything the simulation depends on; rates are described in the module docstring."""

    seed: int = 42
    stores: int = 5
    days: int = 28
    start: date = DEFAULT_START
    transactions_per_store_day: int = 120
    late_hours_rate: float = 0.05
    late_days_rate: float = 0.03
    late_weeks_rate: float = 0.005
    duplicate_rate: float = 0.01
    correction_rate: float = 0.01
    date_move_rate: float = 0.25
    void_rate: float = 0.005
    out_of_order_rate: float = 0.02
    invalid_rate: float = 0.005
    partner_resend: bool = True
    store_changes: bool = True

    def __post_init__(self) -> None:
        for name in ("stores", "days", "transactions_per_store_day"):
            value = getattr(self, name)
            if not isinstance(value, int) or isinstance(value, bool) or value < 1:
                raise ValueError(f"SimulationConfig.{name} must be a positive int, got {value!r}")
        if self.stores > 999:
            raise ValueError(f"SimulationConfig.stores must be at most 999, got {self.stores}")
        if not isinstance(self.start, date) or isinstance(self.start, datetime):
            raise ValueError(f"SimulationConfig.start must be a date, got {self.start!r}")
        rates = (
            "late_hours_rate",
            "late_days_rate",
            "late_weeks_rate",
            "duplicate_rate",
            "correction_rate",
            "date_move_rate",
            "void_rate",
            "out_of_order_rate",
            "invalid_rate",
        )
        for name in rates:
            value = getattr(self, name)
            if not 0.0 <= value <= 1.0:
                raise ValueError(f"SimulationConfig.{name} must be within [0, 1], got {value!r}")
        if self.late_hours_rate + self.late_days_rate + self.late_weeks_rate > 1.0:
            raise ValueError("SimulationConfig: late_hours + late_days + late_weeks rates exceed 1")
        if self.correction_rate + self.void_rate > 1.0:
            raise ValueError("SimulationConfig: correction_rate + void_rate exceed 1")

    @property
    def last_day(self) -> date:
        return self.start + timedelta(days=self.days - 1)


@dataclass
class SimulationResult:
    """What one ``simulate`` call delivered (files written now or already present)."""

    files_written: int
    files_existing: int
    records: int
    counts: dict[str, int]
    first_day: date
    last_day: date

    def as_dict(self) -> dict[str, object]:
        return {
            "files_written": self.files_written,
            "files_existing": self.files_existing,
            "records": self.records,
            "counts": dict(self.counts),
            "first_day": self.first_day.isoformat(),
            "last_day": self.last_day.isoformat(),
        }


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


# --- formatting -------------------------------------------------------------------------------


def _epoch_of(ts: datetime) -> int:
    """Whole seconds since the epoch, rounded down; the datetime must be aware."""
    if ts.tzinfo is None or ts.utcoffset() is None:
        raise ValueError(f"'through' must be a timezone-aware datetime, got naive {ts!r}")
    return (ts - _EPOCH) // timedelta(seconds=1)


def _datetime_of(seconds: int) -> datetime:
    return _EPOCH + timedelta(seconds=seconds)


@lru_cache(maxsize=4096)
def _day_prefix(day_number: int) -> str:
    return (date(1970, 1, 1) + timedelta(days=day_number)).isoformat() + "T"


def _iso(seconds: int) -> str:
    day_number, rest = divmod(seconds, _DAY)
    hours, rest = divmod(rest, _HOUR)
    minutes, secs = divmod(rest, 60)
    return f"{_day_prefix(day_number)}{hours:02d}:{minutes:02d}:{secs:02d}Z"


def _money(cents: int) -> str:
    return f"{cents // 100}.{cents % 100:02d}"


def _line(
    transaction_id: str | None,
    record_type: str,
    store_id: int,
    product_id: int,
    quantity: int,
    price: int,
    discount: int,
    event_ts: str,
    corrects: str | None = None,
) -> str:
    # All strings are generated here (ids, ISO timestamps): nothing needs JSON escaping.
    tid = "null" if transaction_id is None else f'"{transaction_id}"'
    text = (
        f'{{"transaction_id":{tid},"record_type":"{record_type}","store_id":{store_id},'
        f'"product_id":{product_id},"quantity":{quantity},"unit_price":{_money(price)},'
        f'"discount":{_money(discount)},"event_ts":"{event_ts}"'
    )
    if corrects is not None:
        text += f',"corrects_transaction_id":"{corrects}"'
    return text + "}"


# --- generation -------------------------------------------------------------------------------


@dataclass
class _Batch:
    source_system: str
    arrival: int  # epoch seconds
    name: str
    lines: list[str] = field(default_factory=list)
    counts: dict[str, int] = field(default_factory=dict)

    def add(self, line: str, *kinds: str) -> None:
        self.lines.append(line)
        for kind in kinds:
            self.counts[kind] = self.counts.get(kind, 0) + 1


@dataclass
class _Version:
    """One version of a transaction: the values a correction changes."""

    quantity: int
    price: int
    discount: int
    event_ts: int

    @property
    def net(self) -> int:
        return self.quantity * self.price - self.discount


def _random_discount(rnd: Callable[[], float], gross: int) -> int:
    # A multiple of 10 cents, at least 0.10 and at most 20% of gross (gross >= 2.50).
    return 10 * (1 + int(rnd() * max(1, gross // 50)))


def _amend(rnd: Callable[[], float], old: _Version) -> _Version:
    """A still valid version with a different net amount (quantity, price or discount)."""
    for _ in range(100):
        quantity, price, discount = old.quantity, old.price, old.discount
        mode = rnd()
        if mode < 0.5:
            quantity = 1 + int(rnd() * 4)
            if quantity >= old.quantity:
                quantity += 1  # any of 1..5 except the old quantity
        elif mode < 0.8:
            price = max(5, round(old.price * (0.8 + 0.4 * rnd()) / 5) * 5)
        elif discount and rnd() < 0.5:
            discount = 0
        else:
            discount = _random_discount(rnd, quantity * price)
        gross = quantity * price
        if discount > gross:
            discount = gross // 50 * 10
        candidate = _Version(quantity, price, discount, old.event_ts)
        if candidate.net != old.net:
            return candidate
    raise AssertionError("could not amend a sale")  # pragma: no cover - 100 misses in a row


class _Generator:
    """Generates store-days in order and keeps the pending ``pos`` batches by slot."""

    def __init__(self, config: SimulationConfig) -> None:
        self.config = config
        self.start = (config.start - date(1970, 1, 1)).days * _DAY
        self.pending: dict[int, _Batch] = {}
        self.partner: _Batch | None = None
        if config.partner_resend and config.days >= _PARTNER_MIN_DAYS:
            self.partner = _Batch(
                PARTNER_SOURCE,
                self.start + _PARTNER_ARRIVAL,
                f"partner-resend-week-{config.start.isoformat()}.jsonl",
            )
        self.forced_out_of_order: set[int] = set()  # membership only, never iterated
        self.race_done = False
        self._delays: dict[int, tuple[bool, int]] = {}

    # Out-of-order delivery: a pure function of (seed, slot), plus the forced race slot.
    def _random_delay(self, slot: int) -> tuple[bool, int]:
        cached = self._delays.get(slot)
        if cached is None:
            rng = random.Random(f"tardy-pos-out-of-order/{self.config.seed}/{slot}")
            late = rng.random() < self.config.out_of_order_rate
            cached = self._delays[slot] = (late, (24 + int(rng.random() * 25)) * _HOUR)
        return cached

    def is_out_of_order(self, slot: int) -> bool:
        return slot in self.forced_out_of_order or self._random_delay(slot)[0]

    def delivery(self, slot: int) -> int:
        late, delay = self._random_delay(slot)
        return slot + delay if late or slot in self.forced_out_of_order else slot

    def day_start(self, day: int) -> int:
        return self.start + day * _DAY

    def _batch(self, slot: int) -> _Batch:
        batch = self.pending.get(slot)
        if batch is None:
            batch = self.pending[slot] = _Batch(POS_SOURCE, slot, POS_BATCH_NAME)
        return batch

    def pop_complete(self, day: int) -> Iterator[_Batch]:
        """Batches no later store-day can add to once days 0..day are generated."""
        # Events of day+1 and later happen at or after its 08:00 and arrive after that.
        limit = self.day_start(day + 1) + _OPEN
        for slot in sorted(s for s in self.pending if s < limit):
            yield self.pending.pop(slot)

    def pop_all(self) -> Iterator[_Batch]:
        for slot in sorted(self.pending):
            yield self.pending.pop(slot)

    def store_day(self, day: int, store: int) -> None:
        cfg = self.config
        day_date = cfg.start + timedelta(days=day)
        day_start = self.day_start(day)
        base = random.Random(f"tardy-pos-sales/{cfg.seed}/{store}/{day_date.isoformat()}")
        rnd = base.random
        count = max(1, round(cfg.transactions_per_store_day * (0.8 + 0.4 * rnd())))
        seconds = sorted(_OPEN + int(rnd() * (_CLOSE - _OPEN)) for _ in range(count))
        sales: list[tuple[int, int, int, int, int]] = []
        for second in seconds:
            product = 1 + int(rnd() * PRODUCTS)
            quantity = 1 + int(rnd() * 5)
            price = UNIT_PRICE_CENTS[product]
            discount = 0
            if rnd() < _DISCOUNT_SHARE:
                discount = _random_discount(rnd, quantity * price)
            sales.append((day_start + second, product, quantity, price, discount))

        # Anomalies draw from their own stream: changing a rate never changes the sales.
        a = random.Random(f"tardy-pos-anomalies/{cfg.seed}/{store}/{day_date.isoformat()}").random
        weeks = cfg.late_weeks_rate
        days = weeks + cfg.late_days_rate
        hours = days + cfg.late_hours_rate
        corrections = cfg.correction_rate
        voids = corrections + cfg.void_rate
        prefix = f"S{store:03d}-{day_date.strftime('%Y%m%d')}-"
        in_partner_week = self.partner is not None and day < _PARTNER_WEEK_DAYS
        for number, (event_ts, product, quantity, price, discount) in enumerate(sales, 1):
            txn = f"{prefix}{number:05d}"
            event_iso = _iso(event_ts)
            line = _line(txn, "sale", store, product, quantity, price, discount, event_iso)
            normal = (event_ts // _SLOT + 1) * _SLOT
            u = a()
            if u < weeks:
                kind, arrival = "late_weeks", normal + (7 + int(a() * 22)) * _DAY
            elif u < days:
                kind, arrival = "late_days", normal + (1 + int(a() * 3)) * _DAY
            elif u < hours:
                delay = 2 * _HOUR + int(a() * 10 * _HOUR)
                kind, arrival = "late_hours", -(-(normal + delay) // _SLOT) * _SLOT
            else:
                kind, arrival = "on_time", normal
            self._batch(arrival).add(line, kind)
            if in_partner_week:
                assert self.partner is not None
                self.partner.add(line, "partner_resend")
            if a() < cfg.duplicate_rate:
                self._batch(arrival + (1 + int(a() * 12)) * _SLOT).add(line, "duplicate")
            if a() < cfg.invalid_rate:
                self._invalid(a, arrival, txn, store, product, quantity, price, discount, event_ts)
            u = a()
            sale = _Version(quantity, price, discount, event_ts)
            if u < corrections:
                self._corrections(a, txn, store, product, sale, arrival)
            elif u < voids:
                void_arrival = arrival + (1 + int(a() * 40)) * _SLOT
                new_id = a() < _NEW_ID_SHARE
                void = _line(
                    f"{txn}-V" if new_id else txn,
                    "void",
                    store,
                    product,
                    quantity,
                    price,
                    discount,
                    event_iso,
                    txn if new_id else None,
                )
                self._batch(void_arrival).add(void, "void")

    def _invalid(
        self,
        a: Callable[[], float],
        arrival: int,
        txn: str,
        store: int,
        product: int,
        quantity: int,
        price: int,
        discount: int,
        event_ts: int,
    ) -> None:
        r = a()
        if r < _MALFORMED_SHARE:
            reason = "malformed_json"
        else:
            reason = INVALID_REASONS[
                min(3, int((r - _MALFORMED_SHARE) / (1 - _MALFORMED_SHARE) * 4))
            ]
        bad_id: str | None = f"{txn}-X"
        event_iso = _iso(event_ts)
        if reason == "null_transaction_id":
            bad_id = None
        elif reason == "unparseable_event_ts":
            event_iso = _iso(event_ts)[:9] + "X 25:61"  # e.g. 2026-01-0X 25:61
        elif reason == "negative_quantity":
            quantity = -(1 + int(a() * 5))
        elif reason == "future_event":
            event_iso = _iso(arrival + 2 * _DAY + int(a() * _HOUR))
        line = _line(bad_id, "sale", store, product, quantity, price, discount, event_iso)
        if reason == "malformed_json":
            line = line[: 10 + int(a() * (len(line) - 20))]  # never reaches the closing brace
        self._batch(arrival).add(line, f"invalid_{reason}")

    def _corrections(
        self,
        a: Callable[[], float],
        txn: str,
        store: int,
        product: int,
        sale: _Version,
        sale_arrival: int,
    ) -> None:
        first_arrival = sale_arrival + (4 + int(a() * 37)) * _SLOT  # 1..10 days later
        first = self._correction(a, txn, 1, store, product, sale, first_arrival)
        second = a() < _SECOND_CORRECTION_SHARE
        if not self.race_done:
            # The first corrected sale of the run races: its first correction's batch is
            # delivered late, after the batch of the second correction.
            self.race_done = second = True
            self.forced_out_of_order.add(first_arrival)
        if not second:
            return
        if self.is_out_of_order(first_arrival):
            # Arrive after the first correction but before its batch is delivered.
            window = (self.delivery(first_arrival) - first_arrival - 1) // _SLOT
            second_arrival = first_arrival + (1 + int(a() * window)) * _SLOT
        else:
            second_arrival = first_arrival + (4 + int(a() * 37)) * _SLOT
        self._correction(a, txn, 2, store, product, first, second_arrival, "second_correction")

    def _correction(
        self,
        a: Callable[[], float],
        txn: str,
        number: int,
        store: int,
        product: int,
        previous: _Version,
        arrival: int,
        *extra_kinds: str,
    ) -> _Version:
        version = _amend(a, previous)
        kinds = ("correction", *extra_kinds)
        if a() < self.config.date_move_rate:
            moves = [
                shift * _DAY
                for shift in (-3, -2, -1, 1, 2, 3)
                if self.start <= version.event_ts + shift * _DAY < arrival
            ]
            # A first correction can always move +1 day (it arrives > 1 day after the event);
            # a racing second correction may have nowhere to go and then keeps its day.
            if moves:
                version.event_ts += moves[int(a() * len(moves))]
                kinds = (*kinds, "date_move")
        new_id = a() < _NEW_ID_SHARE
        line = _line(
            f"{txn}-C{number}" if new_id else txn,
            "correction",
            store,
            product,
            version.quantity,
            version.price,
            version.discount,
            _iso(version.event_ts),
            txn if new_id else None,
        )
        self._batch(arrival).add(line, *kinds)
        return version


# --- store changes (source store_master) ------------------------------------------------------


def _store_line(
    store_id: str,
    effective_ts: str | None,
    region: str,
    store_format: str,
    manager: str,
    change_id: str,
    is_correction: bool,
) -> str:
    """One ``store_master`` record; ``store_id`` is its JSON text, ``effective_ts`` None omits
    the key. Every string is generated here: nothing needs JSON escaping."""
    text = f'{{"store_id":{store_id},'
    if effective_ts is not None:
        text += f'"effective_ts":"{effective_ts}",'
    return text + (
        f'"region":"{region}","format":"{store_format}","manager":"{manager}",'
        f'"change_id":"{change_id}","is_correction":{"true" if is_correction else "false"}}}'
    )


def _other(rnd: Callable[[], float], values: tuple[str, ...], current: str) -> str:
    """A value of ``values`` other than ``current``, uniformly."""
    choices = [value for value in values if value != current]
    return choices[int(rnd() * len(choices))]


@dataclass
class _StoreChange:
    """One change of a store (not the opening version) and its draws."""

    number: int
    effective: int  # epoch seconds, a whole hour
    region: str
    store_format: str
    manager: str
    draws: tuple[float, ...]  # fixed count per change: see _store_batches
    delay_days: int = 0  # after the first slot following `effective`

    @property
    def on_time(self) -> int:
        return (self.effective // _SLOT + 1) * _SLOT

    @property
    def arrival(self) -> int:
        return self.on_time + self.delay_days * _DAY


_STORE_DRAWS = 9  # uniforms drawn per change, whatever it uses


def _store_batches(config: SimulationConfig) -> list[_Batch]:
    """The ``store_master`` batches of ``config``, by arrival (module docstring)."""
    start = (config.start - date(1970, 1, 1)).days * _DAY
    last_day = config.days - 1
    end = start + last_day * _DAY + _SLOT * (_STORE_LAST_HOUR // SLOT_HOURS + 1)  # last arrival
    batches: dict[int, _Batch] = {}

    def add(arrival: int, line: str, *kinds: str) -> None:
        batch = batches.get(arrival)
        if batch is None:
            batch = batches[arrival] = _Batch(STORE_MASTER_SOURCE, arrival, STORE_CHANGES_NAME)
        batch.add(line, *kinds)

    for store in range(1, config.stores + 1):
        rnd = random.Random(f"tardy-store-changes/{config.seed}/{store}").random
        region = STORE_REGIONS[int(rnd() * len(STORE_REGIONS))]
        store_format = STORE_FORMATS[int(rnd() * len(STORE_FORMATS))]
        manager = STORE_MANAGERS[int(rnd() * len(STORE_MANAGERS))]
        prefix = f"C{store:03d}-"
        add(
            start,
            _store_line(
                str(store), _iso(start), region, store_format, manager, f"{prefix}0", False
            ),
            "store_opening",
        )
        changes: list[_StoreChange] = []
        day = 0
        while True:
            low, high = _STORE_GAP_DAYS
            day += low + int(rnd() * (high - low + 1))
            hour = int(rnd() * (_STORE_LAST_HOUR + 1))
            what = rnd()
            if what < 0.4:
                region = _other(rnd, STORE_REGIONS, region)
            elif what < 0.7:
                store_format = _other(rnd, STORE_FORMATS, store_format)
            else:
                manager = _other(rnd, STORE_MANAGERS, manager)
            draws = tuple(rnd() for _ in range(_STORE_DRAWS))
            if day > last_day:
                break
            effective = start + day * _DAY + hour * _HOUR
            change = _StoreChange(len(changes) + 1, effective, region, store_format, manager, draws)
            u, amount = draws[0], draws[1]
            if u < _STORE_LATE_WEEKS_SHARE:
                change.delay_days = 7 + int(amount * 22)
            elif u < _STORE_LATE_WEEKS_SHARE + _STORE_LATE_DAYS_SHARE:
                change.delay_days = 1 + int(amount * 6)
            # Never delivered after the last simulated day: the delay is cut to the days left.
            change.delay_days = min(change.delay_days, last_day - day)
            changes.append(change)
        if store == 1 and len(changes) >= 2:
            # Built-in race: the first change of store 1 arrives after its second one.
            first, second = changes[0], changes[1]
            needed = -(-(second.arrival + 1 - first.on_time) // _DAY)
            if first.on_time + needed * _DAY <= end:
                first.delay_days = max(first.delay_days, needed)
        for change in changes:
            _store_change(
                add, store, change, changes, end, forced=store == 1 and change.number == 1
            )
    return [batches[arrival] for arrival in sorted(batches)]


def _store_change(
    add: Callable[..., None],
    store: int,
    change: _StoreChange,
    changes: list[_StoreChange],
    end: int,
    *,
    forced: bool,
) -> None:
    """Adds one change's records: the change, maybe an invalid one beside it, a duplicate and
    a correction. ``forced``: every one of them (store 1's first change)."""
    _, _, dup, dup_delay, fix, fix_delay, fix_region, bad, bad_how = change.draws
    change_id = f"C{store:03d}-{change.number}"
    effective = _iso(change.effective)
    line = _store_line(
        str(store),
        effective,
        change.region,
        change.store_format,
        change.manager,
        change_id,
        False,
    )
    lateness = (
        "store_on_time"
        if change.delay_days == 0
        else "store_late_days"
        if change.delay_days < 7
        else "store_late_weeks"
    )
    overtakes = any(
        other.effective < change.effective and other.arrival > change.arrival for other in changes
    )
    add(change.arrival, line, lateness, *(("store_out_of_order",) if overtakes else ()))

    reasons = STORE_INVALID_REASONS if forced else ()
    if not forced and bad < _STORE_INVALID_SHARE:
        reasons = (STORE_INVALID_REASONS[int(bad_how * 2) % 2],)
    for reason in reasons:
        if reason == "unknown_store":
            store_json = f'"S-{store}"' if int(bad_how * 4) % 2 == 0 else f"-{store}"
            bad_line = _store_line(
                store_json,
                effective,
                change.region,
                change.store_format,
                change.manager,
                f"{change_id}-X{STORE_INVALID_REASONS.index(reason) + 1}",
                False,
            )
        else:
            bad_line = _store_line(
                str(store),
                None,
                change.region,
                change.store_format,
                change.manager,
                f"{change_id}-X{STORE_INVALID_REASONS.index(reason) + 1}",
                False,
            )
        add(change.arrival, bad_line, f"store_invalid_{reason}")

    if forced or dup < _STORE_DUPLICATE_SHARE:
        again = change.arrival + (1 + int(dup_delay * 12)) * _SLOT
        if again <= end:
            add(again, line, "store_duplicate")
    if forced or fix < _STORE_CORRECTION_SHARE:
        fixed = change.arrival + (1 + int(fix_delay * 40)) * _SLOT
        if fixed <= end:
            correction = _store_line(
                str(store),
                effective,
                _other(lambda: fix_region, STORE_REGIONS, change.region),
                change.store_format,
                change.manager,
                f"{change_id}-R",
                True,
            )
            add(fixed, correction, "store_correction")


# --- writing ----------------------------------------------------------------------------------


class _Writer:
    def __init__(self, landing_dir: Path, through: int | None, generator: _Generator) -> None:
        self.landing_dir = landing_dir
        self.through = through
        self.generator = generator
        self.files_written = 0
        self.files_existing = 0
        self.records = 0
        self.counts: dict[str, int] = dict.fromkeys((*KINDS, *STORE_KINDS), 0)

    def emit(self, batch: _Batch) -> None:
        if not batch.lines:
            return
        out_of_order = False
        delivered = batch.arrival
        if batch.source_system == POS_SOURCE:
            out_of_order = self.generator.is_out_of_order(batch.arrival)
            delivered = self.generator.delivery(batch.arrival)
        if self.through is not None and delivered > self.through:
            return
        folder = arrival_dir_name(_datetime_of(batch.arrival))
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


def simulate(
    config: SimulationConfig, landing_dir: Path, through: datetime | None = None
) -> SimulationResult:
    """Write the landing batches of ``config`` delivered at or before ``through``.

    ``through`` is an aware datetime (None: everything). Re-running is idempotent: files that
    already exist with identical content are counted in ``files_existing``; an existing file
    with different content raises ``FileExistsError``. Counts and records cover the files
    written or already present for this call.
    """
    through_s = None if through is None else _epoch_of(through)
    generator = _Generator(config)
    writer = _Writer(Path(landing_dir), through_s, generator)
    for day in range(config.days):
        if through_s is not None and generator.day_start(day) > through_s:
            break  # everything of this day and later arrives after `through`
        for store in range(1, config.stores + 1):
            generator.store_day(day, store)
        if day == _PARTNER_WEEK_DAYS - 1 and generator.partner is not None:
            writer.emit(generator.partner)
        for batch in generator.pop_complete(day):
            writer.emit(batch)
    for batch in generator.pop_all():
        writer.emit(batch)
    if config.store_changes:
        for batch in _store_batches(config):
            writer.emit(batch)
    return SimulationResult(
        files_written=writer.files_written,
        files_existing=writer.files_existing,
        records=writer.records,
        counts=writer.counts,
        first_day=config.start,
        last_day=config.last_day,
    )
