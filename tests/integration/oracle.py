"""An independent recomputation of silver and gold from landing files, in pandas.

It shares no code with the SQLMesh models or with ``tardy.ingest``: it reads the JSON lines
itself and applies the rules as the README states them, so a bug in either side shows up
as a difference.
"""

from __future__ import annotations

import hashlib
import json
import re
import typing as t
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


def records(files: Iterable[Path], landing: Path) -> pd.DataFrame:
    """One row per sales landing line: validity, key, typed fields, arrival (store changes,
    under ``store_master/``, are not sales: ``store_changes`` reads them)."""
    rows = []
    for path in files:
        if path.relative_to(landing).parts[0] == STORE_SOURCE:
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


CONTENT = (
    "transaction_id",
    "record_type",
    "event_ts",
    "store_id",
    "product_id",
    "quantity",
    "unit_price",
    "discount",
)


def _content(row: t.Any) -> tuple:
    """A record's content: every field but its arrival metadata (None for a missing one)."""
    return tuple(None if pd.isna(value) else value for value in (getattr(row, c) for c in CONTENT))


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
    # A verbatim resend is the same version again: the row keeps the record id of its
    # version's first record, by arrival then record id (docs/architecture.md).
    first: dict[tuple, str] = {}
    for row in valid.sort_values(["arrival_ts", "record_id"]).itertuples():
        first.setdefault(_content(row), row.record_id)
    winners["record_id"] = [first[_content(row)] for row in winners.itertuples()]
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


# --- Store dimension (issue 14): store changes, SCD2 versions, revenue by region ----------
#
# The rules are those of the issue-14 spec (landing contract, validity, SCD2, as-of join),
# applied here to the landing files directly; nothing is imported from ``tardy``.

PAYMENTS_SOURCE = "payments"
STORE_SOURCE = "store_master"
STORE_FIELDS = (
    "store_id",
    "effective_ts",
    "region",
    "format",
    "manager",
    "change_id",
    "is_correction",
)
STORE_CHANGE_COLUMNS = [
    "record_id",
    "source_file",
    "line_number",
    "arrival_ts",
    "store_id",
    "effective_ts",
    "region",
    "format",
    "manager",
    "change_id",
    "is_correction",
    "reason",
]
STORE_VERSION_COLUMNS = ["store_id", "valid_from", "valid_to", "region", "format", "manager"]
REGION_REVENUE_COLUMNS = ["event_date", "region", "stores", "transactions", "revenue"]
UNKNOWN_REGION = "unknown"
BOM = b"\xef\xbb\xbf"


def _landing_files(landing: Path, pattern: str) -> list[Path]:
    """Regular files only: ingestion refuses symbolic links and other entries, so they never
    reach bronze."""
    return sorted(p for p in landing.glob(pattern) if p.is_file() and not p.is_symlink())


def store_files(landing: Path) -> list[Path]:
    """The store-change landing files: ``store_master/arrival_ts=*/**.jsonl``."""
    return _landing_files(landing, f"{STORE_SOURCE}/arrival_ts=*/**/*.jsonl")


def sales_files(landing: Path) -> list[Path]:
    """The sales landing files: every ``*.jsonl`` whose source system (first folder under
    the landing root) is neither ``store_master`` nor ``payments`` (refunds)."""
    return [
        p
        for p in _landing_files(landing, "**/*.jsonl")
        if p.relative_to(landing).parts[0] not in (STORE_SOURCE, PAYMENTS_SOURCE)
    ]


def _lines(data: bytes) -> list[bytes]:
    """A file's lines as the README defines them: the bytes up to each ``\\n`` (and after
    the last one), a ``\\r`` before the ``\\n`` and a UTF-8 BOM opening the file dropped."""
    if data.startswith(BOM):
        data = data[len(BOM) :]
    if not data:
        return []
    lines = data.split(b"\n")
    if lines[-1] == b"":
        lines.pop()
    return [line.removesuffix(b"\r") for line in lines]


def _reject_constant(name: str) -> object:
    raise ValueError(f"{name} is not JSON")


def _reject_duplicates(pairs: list[tuple[str, object]]) -> dict[str, object]:
    keys = [key for key, _ in pairs]
    if len(set(keys)) != len(keys):
        raise ValueError("duplicate key")
    return dict(pairs)


def _json_object(line: bytes) -> dict[str, object] | None:
    """The line as a strict JSON object (numbers kept as their text), None when it is not:
    not UTF-8, blank, NaN/Infinity, a duplicate key, nesting too deep, not an object, or an
    unpaired surrogate in a store field."""
    try:
        text = line.decode("utf-8")
        rec = json.loads(
            text,
            parse_int=str,
            parse_float=str,
            parse_constant=_reject_constant,
            object_pairs_hook=_reject_duplicates,
        )
    except (UnicodeDecodeError, ValueError, RecursionError):
        return None  # json.JSONDecodeError is a ValueError
    if not isinstance(rec, dict):
        return None
    for name in STORE_FIELDS:
        value = rec.get(name)
        if isinstance(value, str):
            try:
                value.encode("utf-8")
            except UnicodeEncodeError:
                return None
    return rec


def _field_text(value: object) -> str | None:
    """A JSON value as text: strings as they are, numbers as written, true/false, and
    anything else as compact JSON; None for a missing key or JSON null."""
    if value is None:
        return None
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        return value
    return json.dumps(value, separators=(",", ":"))


def _blank(text: str | None) -> bool:
    return text is None or not text.strip()


def _store_change(line: bytes, record_id: str, arrival: datetime) -> dict[str, object]:
    row: dict[str, object] = dict.fromkeys(STORE_CHANGE_COLUMNS)
    row.update(record_id=record_id, arrival_ts=arrival)
    rec = _json_object(line)
    if rec is None:
        return {**row, "reason": "invalid_json"}
    text = {name: _field_text(rec.get(name)) for name in STORE_FIELDS}
    store = _int(text["store_id"])
    effective = None if _blank(text["effective_ts"]) else _ts(text["effective_ts"])
    flag = text["is_correction"]
    row.update(
        store_id=store,
        effective_ts=effective,
        region=text["region"],
        format=text["format"],
        manager=text["manager"],
        change_id=text["change_id"],
        is_correction={"true": True, "false": False, None: False}.get(flag),
    )
    if store is None or store < 1:
        reason = "unknown_store"
    elif _blank(text["effective_ts"]):
        reason = "missing_effective_ts"
    elif effective is None:
        reason = "unparseable_effective_ts"
    elif _blank(text["region"]):
        reason = "missing_region"
    elif flag is not None and flag not in ("true", "false"):
        reason = "invalid_is_correction"
    else:
        reason = None
    return {**row, "reason": reason}


def store_changes(landing: Path) -> pd.DataFrame:
    """One row per line of every store-change landing file: ``record_id``
    (``<file sha256>:<line>``), ``source_file``, ``line_number``, ``arrival_ts`` (from the
    folder), the parsed fields (``store_id`` int, ``effective_ts`` naive UTC,
    ``is_correction`` bool: absent = False) and ``reason`` (the first failing validity rule,
    None when the change is valid). Files are read in path order (arrival order); a file
    with the bytes of one read before adds nothing, as in bronze."""
    rows = []
    seen: set[str] = set()
    for path in store_files(landing):
        data = path.read_bytes()
        sha = hashlib.sha256(data).hexdigest()
        if sha in seen:
            continue  # a copy of a file already read: ingestion skips it (same record ids)
        seen.add(sha)
        relative = path.relative_to(landing)
        arrival = _arrival(relative)
        for number, line in enumerate(_lines(data), start=1):
            row = _store_change(line, f"{sha}:{number}", arrival)
            rows.append({**row, "source_file": relative.as_posix(), "line_number": number})
    frame = pd.DataFrame(rows, columns=STORE_CHANGE_COLUMNS)
    # Python ints (no float64 round trip when a row has none), None when invalid.
    frame["store_id"] = pd.Series([row["store_id"] for row in rows], dtype=object)
    return frame


def store_quarantine(landing: Path) -> pd.DataFrame:
    """The invalid store changes: ``record_id``, ``reason``, sorted by record_id."""
    changes = store_changes(landing)
    bad = changes[changes["reason"].notna()]
    return bad[["record_id", "reason"]].sort_values("record_id").reset_index(drop=True)


def store_versions(landing: Path) -> pd.DataFrame:
    """SCD2 versions of the stores from the valid changes: one per (store_id, effective_ts),
    won by a correction, then the latest arrival, then the greatest record_id; ``valid_to``
    is the store's next version's ``valid_from`` (NaT for the current one). Sorted by
    (store_id, valid_from)."""
    changes = store_changes(landing)
    valid = changes[changes["reason"].isna()]
    rows = sorted(
        (
            (r.store_id, r.effective_ts, bool(r.is_correction), r.arrival_ts, r.record_id, r)
            for r in valid.itertuples(index=False)
        ),
        key=lambda t: t[:5],
        reverse=True,
    )
    winners: dict[tuple[int, datetime], object] = {}
    for store, effective, *_, row in rows:
        winners.setdefault((store, effective), row)  # the first is the greatest
    out = []
    for store, effective in sorted(winners):
        row = winners[(store, effective)]
        out.append([int(store), effective, None, row.region, row.format, row.manager])
    for current, following in zip(out, out[1:], strict=False):
        if following[0] == current[0]:
            current[2] = following[1]
    frame = pd.DataFrame(out, columns=STORE_VERSION_COLUMNS)
    for column in ("valid_from", "valid_to"):
        frame[column] = pd.to_datetime(frame[column])
    return frame


def _regions(versions: pd.DataFrame) -> dict[int, list[tuple[datetime, datetime | None, str]]]:
    """Per store, its versions as (valid_from, valid_to or None, region)."""
    out: dict[int, list[tuple[datetime, datetime | None, str]]] = {}
    for v in versions.itertuples(index=False):
        ends = None if pd.isna(v.valid_to) else v.valid_to.to_pydatetime()
        out.setdefault(int(v.store_id), []).append((v.valid_from.to_pydatetime(), ends, v.region))
    return out


def _region_at(regions: dict, store: int, at: datetime) -> str:
    """The region of the store's version with valid_from <= at < valid_to (open when None)."""
    for starts, ends, region in regions.get(store, []):
        if starts <= at and (ends is None or at < ends):
            return region
    return UNKNOWN_REGION


def daily_region_revenue(landing: Path) -> pd.DataFrame:
    """The oracle's silver sales joined as of ``event_ts`` to ``store_versions`` (region
    ``unknown`` when no version of the store is valid then), by (event_date, region):
    ``stores`` (distinct stores), ``transactions``, ``revenue`` (Decimal, 2 places)."""
    recs = records(sales_files(landing), landing)
    if recs.empty or not recs["valid"].any():
        return pd.DataFrame(columns=REGION_REVENUE_COLUMNS)
    sales = silver(recs)
    regions = _regions(store_versions(landing))
    totals: dict[tuple[date, str], tuple[set[int], int, Decimal]] = {}
    for sale in sales.itertuples():
        event = pd.Timestamp(sale.event_ts).to_pydatetime()
        key = (sale.event_date, _region_at(regions, int(sale.store_id), event))
        stores, count, revenue = totals.get(key, (set(), 0, Decimal("0.00")))
        totals[key] = (stores | {int(sale.store_id)}, count + 1, revenue + sale.net_amount)
    rows = [
        (day, region, len(stores), count, revenue.quantize(CENT))
        for (day, region), (stores, count, revenue) in sorted(totals.items())
    ]
    return pd.DataFrame(rows, columns=REGION_REVENUE_COLUMNS)


def reads_by_bounds(audit: t.Any) -> bool:
    """Whether an audit reads anything by the restated interval's bounds besides the audited
    rows (its text names ``@start_...`` or ``@end_...``: a reconciliation): tardy runs it once
    per interval, and any other audit once over the union of the intervals."""
    text = audit.query.sql() if hasattr(audit, "query") else ""
    return "@start_" in text or "@end_" in text


def audit_runs(model: t.Any, spans: int) -> int:
    """The audit results of a model (a SQLMesh model) restated on ``spans`` intervals."""
    return sum(spans if reads_by_bounds(a) else 1 for a, _ in model.audits_with_args)
