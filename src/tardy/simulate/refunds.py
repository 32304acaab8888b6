"""Card refunds from the payment provider (source ``payments``): refunds of the simulated sales,
late by days or weeks, resent, corrected, some for transactions no store sent, some invalid.

Refunds
=======

With ``refunds`` (off by default; the demo switches it on), each store-day of sales gets
``round(transactions_per_store_day * refund_rate)`` refunds. A refund names a sale of that
store-day that always exists (``S<store:03>-<YYYYMMDD>-<n:05>`` with ``n`` at most 80% of the
day's average count), is made 1-10 days after the sale's day at a whole minute 08:00-22:00
UTC (never after the last simulated day), and refunds 0.50-2.00 (at most any sale's net
amount). Ids are ``F<store:03>-<YYYYMMDD>-<k:03>`` (the sale's day). A refund's normal
arrival is the first slot strictly after it; no refund record arrives after the last day's
18:00 slot (one that would is not sent). Kinds are counted with a ``refund_`` prefix; shares
are of refunds, drawn independently per refund:

=============================  =====  ======================================================
kind                           share  meaning
=============================  =====  ======================================================
``refund_on_time``             rest   arrives at its normal slot
``refund_late_days``           20%    1-6 days after its normal slot
``refund_late_weeks``          10%    7-28 days after its normal slot
``refund_duplicate``           10%    the identical line re-sent 1-12 slots later
``refund_correction``          10%    a record ``<id>-C`` with ``corrects_refund_id`` and
                                      another amount, 1-5 days after the refund's arrival
``refund_date_move``           30%    share of corrections whose refund time moves 1-2 days
                               of     (never to the sale's day or before, never after the
                               corr.  last day, always before the correction's arrival)
``refund_unknown_transaction`` 3%     the refund names ``S<store:03>-<YYYYMMDD>-99999``, a
                                      sale no store sent (it is still a valid refund)
``refund_invalid_amount``      3%     an additional record ``<id>-X`` beside the refund whose
                                      amount is ``-<amount>`` or ``"n/a"`` (quarantined)
=============================  =====  ======================================================

Refunds draw from their own ``random.Random`` per store-day (seeded with ``seed``, store and
day), so switching them on or off changes no byte of any other source's files.
"""

from __future__ import annotations

import json
import random
from datetime import date, timedelta

from tardy.simulate.batch import DAY, SLOT, Batch, iso
from tardy.simulate.config import SimulationConfig

PAYMENTS_SOURCE = "payments"
REFUNDS_NAME = "refunds.jsonl"
REFUND_KINDS: tuple[str, ...] = (
    "refund_on_time",
    "refund_late_days",
    "refund_late_weeks",
    "refund_duplicate",
    "refund_correction",
    "refund_date_move",
    "refund_unknown_transaction",
    "refund_invalid_amount",
)
_OPEN_MINUTE, _CLOSE_MINUTE = 8 * 60, 22 * 60
_LAST_SLOT_HOUR = 18  # no record arrives after the last day's 18:00 slot


def _line(
    refund_id: str, transaction_id: str, store: int, ts: int, amount: object, **extra: str
) -> str:
    record: dict[str, object] = {
        "refund_id": refund_id,
        "transaction_id": transaction_id,
        "store_id": store,
        "refund_ts": iso(ts),
        "amount": amount,
        **extra,
    }
    return json.dumps(record, separators=(",", ":"))


def _cents(value: int) -> float:
    return round(value / 100, 2)


def refund_batches(config: SimulationConfig) -> list[Batch]:
    """The ``payments`` batches of ``config``, by arrival (module docstring)."""
    if not config.refunds:
        return []
    start = (config.start - date(1970, 1, 1)).days * DAY
    last_day = start + (config.days - 1) * DAY
    end = last_day + _LAST_SLOT_HOUR * 3600
    batches: dict[int, Batch] = {}

    def add(arrival: int, line: str, *kinds: str) -> None:
        if arrival > end:
            return
        batch = batches.get(arrival)
        if batch is None:
            batch = batches[arrival] = Batch(PAYMENTS_SOURCE, arrival, REFUNDS_NAME)
        batch.add(line, *kinds)

    per_day = round(config.transactions_per_store_day * config.refund_rate)
    highest_sale = max(1, int(config.transactions_per_store_day * 0.8))
    for day in range(config.days):
        sale_day = config.start + timedelta(days=day)
        stamp = sale_day.strftime("%Y%m%d")
        for store in range(1, config.stores + 1):
            rnd = random.Random(f"tardy-refunds/{config.seed}/{store}/{sale_day}").random
            for k in range(1, per_day + 1):
                refund_day = start + (day + 1 + int(rnd() * 10)) * DAY
                minute = _OPEN_MINUTE + int(rnd() * (_CLOSE_MINUTE - _OPEN_MINUTE))
                ts = refund_day + minute * 60
                amount = 50 + int(rnd() * 151)  # cents
                sale = f"S{store:03d}-{stamp}-{1 + int(rnd() * highest_sale):05d}"
                kinds: list[str] = []
                if rnd() < 0.03:
                    sale, kinds = f"S{store:03d}-{stamp}-99999", ["refund_unknown_transaction"]
                if refund_day > last_day:
                    continue
                refund_id = f"F{store:03d}-{stamp}-{k:03d}"
                normal = (ts // SLOT + 1) * SLOT
                u = rnd()
                if u < 0.10:
                    kind, arrival = "refund_late_weeks", normal + (7 + int(rnd() * 22)) * DAY
                elif u < 0.30:
                    kind, arrival = "refund_late_days", normal + (1 + int(rnd() * 6)) * DAY
                else:
                    kind, arrival = "refund_on_time", normal
                line = _line(refund_id, sale, store, ts, _cents(amount))
                add(arrival, line, kind, *kinds)
                if rnd() < 0.10:
                    add(arrival + (1 + int(rnd() * 12)) * SLOT, line, "refund_duplicate")
                if rnd() < 0.03:
                    bad: object = -_cents(amount) if rnd() < 0.5 else "n/a"
                    add(
                        arrival,
                        _line(f"{refund_id}-X", sale, store, ts, bad),
                        "refund_invalid_amount",
                    )
                if rnd() < 0.10:
                    fixed_arrival = arrival + (4 + int(rnd() * 17)) * SLOT
                    fixed_ts, fixed_kinds = ts, ["refund_correction"]
                    if rnd() < 0.30:
                        moves = [
                            shift * DAY
                            for shift in (-2, -1, 1, 2)
                            if start + (day + 1) * DAY <= ts + shift * DAY < fixed_arrival
                            and ts + shift * DAY < last_day + DAY
                        ]
                        if moves:
                            fixed_ts += moves[int(rnd() * len(moves))]
                            fixed_kinds.append("refund_date_move")
                    other = 50 + (amount - 50 + 1 + int(rnd() * 150)) % 151
                    add(
                        fixed_arrival,
                        _line(
                            f"{refund_id}-C",
                            sale,
                            store,
                            fixed_ts,
                            _cents(other),
                            corrects_refund_id=refund_id,
                        ),
                        *fixed_kinds,
                    )
    return [batches[arrival] for arrival in sorted(batches)]
