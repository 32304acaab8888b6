"""An independent recomputation of silver and gold from landing files, in pandas.

It shares no code with the SQLMesh models or with ``tardy.ingest``: it reads the JSON lines
itself and applies the rules as the README states them, so a bug in either side shows up
as a difference.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Iterable
from datetime import UTC, date, datetime, timedelta
from decimal import Decimal, InvalidOperation
from pathlib import Path

import pandas as pd

ARRIVAL = re.compile(r"arrival_ts=(\d{8}T\d{6}Z)")
INTEGER = re.compile(r"^-?[0-9]+$")
CENT = Decimal("0.01")


def _arrival(path: Path) -> datetime:
    match = ARRIVAL.search(str(path))
    assert match, f"{path} is outside an arrival_ts= folder"
    return datetime.strptime(match.group(1), "%Y%m%dT%H%M%SZ")


def _int(value: object) -> int | None:
    if isinstance(value, bool) or value is None:
        return None
    text = str(value).strip()
    return int(text) if INTEGER.match(text) else None


def _money(value: object) -> Decimal | None:
    if value is None or isinstance(value, bool):
        return None
    try:
        return Decimal(str(value).strip()).quantize(CENT)
    except InvalidOperation:
        return None


def _ts(value: object) -> datetime | None:
    if not isinstance(value, str):
        return None
    try:
        parsed = datetime.fromisoformat(value)
    except ValueError:
        return None
    return parsed.astimezone(UTC).replace(tzinfo=None) if parsed.tzinfo else parsed


STORE_MASTER = "store_master"  # store changes: not sales (bronze.store_changes)


def records(files: Iterable[Path], landing: Path) -> pd.DataFrame:
    """One row per sales landing line: validity, key, typed fields, arrival. Files of the
    ``store_master`` source system (store changes, not sales) are left out."""
    rows = []
    for path in files:
        if path.relative_to(landing).parts[0] == STORE_MASTER:
            continue
        data = path.read_bytes()
        sha = hashlib.sha256(data).hexdigest()
        arrival = _arrival(path.relative_to(landing))
        for number, line in enumerate(data.decode().splitlines(), start=1):
            rows.append(_record(line, f"{sha}:{number}", arrival))
    return pd.DataFrame(rows)


def _record(line: str, record_id: str, arrival: datetime) -> dict[str, object]:
    base: dict[str, object] = {"record_id": record_id, "arrival_ts": arrival, "valid": False}
    try:
        rec = json.loads(line)
    except json.JSONDecodeError:
        return {**base, "reason": "invalid_json", "report_date": arrival.date()}
    if not isinstance(rec, dict):
        return {**base, "reason": "invalid_json", "report_date": arrival.date()}
    event = _ts(rec.get("event_ts"))
    kind = rec.get("record_type")
    store, product, qty = _int(rec.get("store_id")), _int(rec.get("product_id")), None
    price, discount = None, Decimal("0.00")
    reason = None
    if not rec.get("transaction_id") or not str(rec["transaction_id"]).strip():
        reason = "missing_transaction_id"
    elif kind not in ("sale", "correction", "void"):
        reason = "invalid_record_type"
    elif rec.get("event_ts") is None:
        reason = "missing_event_ts"
    elif event is None:
        reason = "unparseable_event_ts"
    elif event > arrival:
        reason = "event_after_arrival"
    elif store is None:
        reason = "invalid_store_id"
    elif kind != "void":
        qty = _int(rec.get("quantity"))
        price = _money(rec.get("unit_price"))
        discount = _money(rec.get("discount")) if rec.get("discount") is not None else CENT * 0
        if product is None:
            reason = "invalid_product_id"
        elif qty is None:
            reason = "invalid_quantity"
        elif qty < 0:
            reason = "negative_quantity"
        elif price is None:
            reason = "invalid_unit_price"
        elif price < 0:
            reason = "negative_unit_price"
        elif discount is None:
            reason = "invalid_discount"
        elif discount < 0:
            reason = "negative_discount"
        elif discount > qty * price:
            reason = "discount_exceeds_gross"
    report = event.date() if event is not None and event <= arrival else arrival.date()
    if reason:
        return {**base, "reason": reason, "report_date": report}
    key = (rec.get("corrects_transaction_id") or "").strip() or rec["transaction_id"]
    return {
        **base,
        "valid": True,
        "reason": None,
        "report_date": report,
        "transaction_id": key,
        "record_type": kind,
        "event_ts": event,
        "event_date": event.date(),
        "store_id": store,
        "product_id": product,
        "quantity": qty,
        "unit_price": price,
        "discount": discount,
    }


def silver(recs: pd.DataFrame) -> pd.DataFrame:
    """The winning version of every transaction; voided ones removed."""
    valid = recs[recs["valid"]].copy()
    valid["amendment"] = valid["record_type"].isin(["correction", "void"])
    valid = valid.sort_values(
        ["transaction_id", "amendment", "arrival_ts", "record_id"],
        ascending=[True, False, False, False],
    )
    winners = valid.drop_duplicates("transaction_id", keep="first")
    winners = winners[winners["record_type"] != "void"].copy()
    for column in ("store_id", "product_id", "quantity"):
        winners[column] = winners[column].astype(int)
    winners["net_amount"] = [
        q * p - d
        for q, p, d in zip(winners.quantity, winners.unit_price, winners.discount, strict=True)
    ]
    return winners.set_index("transaction_id").sort_index()


def daily(sil: pd.DataFrame) -> pd.DataFrame:
    grouped = sil.groupby(["event_date", "store_id"])
    out = pd.DataFrame(
        {
            "transactions": grouped.size(),
            "items": grouped["quantity"].sum(),
            "revenue": grouped["net_amount"].agg(lambda s: sum(s, Decimal("0.00"))),
        }
    )
    return out.sort_index()


def rollup(day: pd.DataFrame, unit: str) -> pd.DataFrame:
    frame = day.reset_index()
    if unit == "week":
        frame["period"] = [d - timedelta(days=d.weekday()) for d in frame.event_date]
    else:
        frame["period"] = [d.replace(day=1) for d in frame.event_date]
    grouped = frame.groupby(["period", "store_id"])
    return pd.DataFrame(
        {
            "transactions": grouped["transactions"].sum(),
            "items": grouped["items"].sum(),
            "revenue": grouped["revenue"].agg(lambda s: sum(s, Decimal("0.00"))),
        }
    ).sort_index()


def quarantine_counts(recs: pd.DataFrame) -> dict[str, int]:
    return recs[~recs["valid"]].groupby("reason").size().to_dict()


def features(day: pd.DataFrame, first: date, last: date) -> dict:
    """(feature_date, store) -> (revenue_7d, revenue_28d, transactions_28d) over the days
    with a sale in the 28 days ending on feature_date."""
    rows = day.reset_index()
    out = {}
    current = first
    while current <= last:
        window = rows[(rows.event_date <= current) & (rows.event_date > current - timedelta(28))]
        for store, group in window.groupby("store_id"):
            week = group[group.event_date > current - timedelta(7)]
            out[(current, int(store))] = (
                sum(week.revenue, Decimal("0.00")),
                sum(group.revenue, Decimal("0.00")),
                int(group.transactions.sum()),
            )
        current += timedelta(days=1)
    return out
