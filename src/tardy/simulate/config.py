"""What a simulation depends on (``SimulationConfig``) and what one ``simulate`` call delivered
(``SimulationResult``).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import date, datetime, timedelta

DEFAULT_START = date(2026, 1, 1)


@dataclass(frozen=True)
class SimulationConfig:
    """Everything the simulation depends on; rates are described in ``tardy.simulate.sales``."""

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
    refunds: bool = False  # card refunds (source ``payments``, ``tardy.simulate.refunds``)
    refund_rate: float = 0.02  # refunds per sale, per store-day

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
            "refund_rate",
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
