"""The point-of-sale feed model: the sales of every store-day and the late, duplicated,
corrected, voided, out-of-order and invalid records a real feed delivers (sources ``pos`` and
``partner``).

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
"""

from __future__ import annotations

import random
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import date, timedelta

from tardy.ingest.landing import PARTNER_SOURCE, POS_BATCH_NAME, POS_SOURCE
from tardy.simulate.batch import DAY, HOUR, SLOT, Batch, iso
from tardy.simulate.config import SimulationConfig

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

_OPEN = 8 * HOUR  # first possible event second of a day
_CLOSE = 22 * HOUR  # events are strictly before this second of the day
_DISCOUNT_SHARE = 0.20  # share of sales with a non-zero discount
_NEW_ID_SHARE = 0.20  # share of corrections / voids with their own transaction id
_SECOND_CORRECTION_SHARE = 0.10  # share of corrected sales corrected a second time
_MALFORMED_SHARE = 0.10  # share of invalid rows that are truncated JSON
PARTNER_WEEK_DAYS = 7  # the partner resends days 0..6 ...
_PARTNER_ARRIVAL = 10 * DAY + 9 * HOUR  # ... on day 10 at 09:00 UTC
_PARTNER_MIN_DAYS = 14


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


class Generator:
    """Generates store-days in order and keeps the pending ``pos`` batches by slot."""

    def __init__(self, config: SimulationConfig) -> None:
        self.config = config
        self.start = (config.start - date(1970, 1, 1)).days * DAY
        self.pending: dict[int, Batch] = {}
        self.partner: Batch | None = None
        if config.partner_resend and config.days >= _PARTNER_MIN_DAYS:
            self.partner = Batch(
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
            cached = self._delays[slot] = (late, (24 + int(rng.random() * 25)) * HOUR)
        return cached

    def is_out_of_order(self, slot: int) -> bool:
        return slot in self.forced_out_of_order or self._random_delay(slot)[0]

    def delivery(self, slot: int) -> int:
        late, delay = self._random_delay(slot)
        return slot + delay if late or slot in self.forced_out_of_order else slot

    def day_start(self, day: int) -> int:
        return self.start + day * DAY

    def _batch(self, slot: int) -> Batch:
        batch = self.pending.get(slot)
        if batch is None:
            batch = self.pending[slot] = Batch(POS_SOURCE, slot, POS_BATCH_NAME)
        return batch

    def pop_complete(self, day: int) -> Iterator[Batch]:
        """Batches no later store-day can add to once days 0..day are generated."""
        # Events of day+1 and later happen at or after its 08:00 and arrive after that.
        limit = self.day_start(day + 1) + _OPEN
        for slot in sorted(s for s in self.pending if s < limit):
            yield self.pending.pop(slot)

    def pop_all(self) -> Iterator[Batch]:
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
        in_partner_week = self.partner is not None and day < PARTNER_WEEK_DAYS
        for number, (event_ts, product, quantity, price, discount) in enumerate(sales, 1):
            txn = f"{prefix}{number:05d}"
            event_iso = iso(event_ts)
            line = _line(txn, "sale", store, product, quantity, price, discount, event_iso)
            normal = (event_ts // SLOT + 1) * SLOT
            u = a()
            if u < weeks:
                kind, arrival = "late_weeks", normal + (7 + int(a() * 22)) * DAY
            elif u < days:
                kind, arrival = "late_days", normal + (1 + int(a() * 3)) * DAY
            elif u < hours:
                delay = 2 * HOUR + int(a() * 10 * HOUR)
                kind, arrival = "late_hours", -(-(normal + delay) // SLOT) * SLOT
            else:
                kind, arrival = "on_time", normal
            self._batch(arrival).add(line, kind)
            if in_partner_week:
                assert self.partner is not None
                self.partner.add(line, "partner_resend")
            if a() < cfg.duplicate_rate:
                self._batch(arrival + (1 + int(a() * 12)) * SLOT).add(line, "duplicate")
            if a() < cfg.invalid_rate:
                self._invalid(a, arrival, txn, store, product, quantity, price, discount, event_ts)
            u = a()
            sale = _Version(quantity, price, discount, event_ts)
            if u < corrections:
                self._corrections(a, txn, store, product, sale, arrival)
            elif u < voids:
                void_arrival = arrival + (1 + int(a() * 40)) * SLOT
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
        event_iso = iso(event_ts)
        if reason == "null_transaction_id":
            bad_id = None
        elif reason == "unparseable_event_ts":
            event_iso = iso(event_ts)[:9] + "X 25:61"  # e.g. 2026-01-0X 25:61
        elif reason == "negative_quantity":
            quantity = -(1 + int(a() * 5))
        elif reason == "future_event":
            event_iso = iso(arrival + 2 * DAY + int(a() * HOUR))
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
        first_arrival = sale_arrival + (4 + int(a() * 37)) * SLOT  # 1..10 days later
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
            window = (self.delivery(first_arrival) - first_arrival - 1) // SLOT
            second_arrival = first_arrival + (1 + int(a() * window)) * SLOT
        else:
            second_arrival = first_arrival + (4 + int(a() * 37)) * SLOT
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
                shift * DAY
                for shift in (-3, -2, -1, 1, 2, 3)
                if self.start <= version.event_ts + shift * DAY < arrival
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
            iso(version.event_ts),
            txn if new_id else None,
        )
        self._batch(arrival).add(line, *kinds)
        return version
