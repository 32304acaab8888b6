"""The stores' master data changes (source ``store_master``): region, format and manager,
with the same troubles as the sales.

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
"""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import dataclass
from datetime import date

from tardy.ingest.landing import SLOT_HOURS, STORE_CHANGES_NAME, STORE_MASTER_SOURCE
from tardy.simulate.batch import DAY, HOUR, SLOT, Batch, iso
from tardy.simulate.config import SimulationConfig

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
    draws: tuple[float, ...]  # fixed count per change: see store_batches
    delay_days: int = 0  # after the first slot following `effective`

    @property
    def on_time(self) -> int:
        return (self.effective // SLOT + 1) * SLOT

    @property
    def arrival(self) -> int:
        return self.on_time + self.delay_days * DAY


_STORE_DRAWS = 9  # uniforms drawn per change, whatever it uses


def store_batches(config: SimulationConfig) -> list[Batch]:
    """The ``store_master`` batches of ``config``, by arrival (module docstring)."""
    start = (config.start - date(1970, 1, 1)).days * DAY
    last_day = config.days - 1
    end = start + last_day * DAY + SLOT * (_STORE_LAST_HOUR // SLOT_HOURS + 1)  # last arrival
    batches: dict[int, Batch] = {}

    def add(arrival: int, line: str, *kinds: str) -> None:
        batch = batches.get(arrival)
        if batch is None:
            batch = batches[arrival] = Batch(STORE_MASTER_SOURCE, arrival, STORE_CHANGES_NAME)
        batch.add(line, *kinds)

    for store in range(1, config.stores + 1):
        rnd = random.Random(f"tardy-store-changes/{config.seed}/{store}").random
        region = STORE_REGIONS[int(rnd() * len(STORE_REGIONS))]
        store_format = STORE_FORMATS[int(rnd() * len(STORE_FORMATS))]
        manager = STORE_MANAGERS[int(rnd() * len(STORE_MANAGERS))]
        prefix = f"C{store:03d}-"
        add(
            start,
            _store_line(str(store), iso(start), region, store_format, manager, f"{prefix}0", False),
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
            effective = start + day * DAY + hour * HOUR
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
            needed = -(-(second.arrival + 1 - first.on_time) // DAY)
            if first.on_time + needed * DAY <= end:
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
    effective = iso(change.effective)
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
        again = change.arrival + (1 + int(dup_delay * 12)) * SLOT
        if again <= end:
            add(again, line, "store_duplicate")
    if forced or fix < _STORE_CORRECTION_SHARE:
        fixed = change.arrival + (1 + int(fix_delay * 40)) * SLOT
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
