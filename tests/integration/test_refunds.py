"""Card refunds, the third source, on real Spark + Delta: declared in ``sources.yaml`` and
modelled in SQL (``silver.refunds``, ``silver.refund_quarantine``,
``gold.daily_store_net_revenue``), detected and restated by the same engine as sales.

In a copy of the ``small`` template (two stores, ten days, prod planned at midnight after
the last day), refunds land late in two rounds:

1. a refund for a closed day (3), one inside the grace window (9), one resent in two files
   (day 4), one on day 5, and three bad lines (a non-numeric and a negative amount, no
   transaction id): exactly days 3, 4 and 5 of the refunds and their net revenue are
   restated, the bad lines are quarantined with their reasons on their days, day 9 waits;
2. corrections: day 5's refund moved to day 6 with another amount, day 4's refund
   corrected in place: days 4, 5 and 6 are restated, day 5 is left without a refund and each
   refund counts once.

The expected days come from the construction; the expected amounts from a Python oracle
over the landing lines (refunds) and ``oracle.py`` (sales), not from the models.
"""

from __future__ import annotations

import json
from collections import defaultdict
from datetime import date, datetime, timedelta
from decimal import Decimal, InvalidOperation
from pathlib import Path

import oracle
from children import SMALL, SMALL_CLOCK, SMALL_CONFIG, cli_in_process

REFUNDS, QUARANTINE, NET = (
    "silver.refunds",
    "silver.refund_quarantine",
    "gold.daily_store_net_revenue",
)
GRACE = 3
LAST = SMALL_CONFIG.last_day
CLOSED = LAST - timedelta(days=GRACE)


def day(n: int) -> date:
    return SMALL_CONFIG.start + timedelta(days=n - 1)


def refund(refund_id: str, n: int, store: int, amount: object, **extra: object) -> dict:
    sale = f"S{store:03d}-{day(n) - timedelta(days=1):%Y%m%d}-00001"
    return {
        "refund_id": refund_id,
        "transaction_id": sale,
        "store_id": store,
        "refund_ts": f"{day(n)}T15:00:00Z",
        "amount": amount,
        **extra,
    }


def land(landing: Path, arrival: datetime, name: str, records: list[dict]) -> None:
    folder = landing / "payments" / f"arrival_ts={arrival:%Y%m%dT%H%M%SZ}"
    folder.mkdir(parents=True, exist_ok=True)
    (folder / f"{name}.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records))


def refund_oracle(landing: Path) -> dict[tuple[date, int], tuple[int, Decimal]]:
    """(refunds, amount) per (day, store): per refund (the one a record corrects, else its
    own id) among its valid records, a correction beats the original, then the latest
    arrival wins."""
    winners: dict[str, tuple[tuple[int, str], dict]] = {}
    for path in sorted(landing.glob("payments/arrival_ts=*/*.jsonl")):
        arrival = path.parent.name.removeprefix("arrival_ts=")
        for line in path.read_text().splitlines():
            record = json.loads(line)
            try:
                amount = Decimal(str(record["amount"]))
            except InvalidOperation:
                continue
            if amount <= 0 or not str(record.get("transaction_id") or "").strip():
                continue
            key = record.get("corrects_refund_id") or record["refund_id"]
            rank = (1 if record.get("corrects_refund_id") else 0, arrival)
            if key not in winners or winners[key][0] <= rank:
                winners[key] = (rank, {**record, "amount": amount})
    out: dict[tuple[date, int], tuple[int, Decimal]] = {}
    for _, record in winners.values():
        at = (date.fromisoformat(record["refund_ts"][:10]), record["store_id"])
        n, total = out.get(at, (0, Decimal("0")))
        out[at] = (n + 1, total + record["amount"])
    return out


def net_oracle(landing: Path) -> dict[tuple[date, int], Decimal]:
    sales = oracle.daily(oracle.silver(oracle.records(oracle.sales_files(landing), landing)))
    out: dict[tuple[date, int], Decimal] = defaultdict(lambda: Decimal("0.00"))
    for (event_date, store), row in sales.iterrows():
        out[(event_date, int(store))] += row.revenue
    for at, (_, amount) in refund_oracle(landing).items():
        out[at] -= amount
    return dict(out)


def net_rows(spark) -> dict[tuple[date, int], Decimal]:
    rows = spark.sql(f"SELECT event_date, store_id, net_revenue FROM {NET}").collect()
    return {(r.event_date, r.store_id): r.net_revenue for r in rows}


def days(spans: list[list[str]]) -> set[date]:
    out = set()
    for first, last in spans:
        a, b = date.fromisoformat(first), date.fromisoformat(last)
        out |= {a + timedelta(days=i) for i in range((b - a).days + 1)}
    return out


def detect_and_restate(reason: str) -> tuple[dict, dict]:
    code, out, err = cli_in_process("detect", "--json")
    assert code == 0, err
    manifest = json.loads(out)
    code, out, err = cli_in_process("restate", "--reason", reason, "--json")
    assert code == 0, err
    return manifest, json.loads(out)


def test_late_duplicated_corrected_and_bad_refunds_restate_exactly_their_days(
    engine, tmp_path: Path
) -> None:
    SMALL.copy_to(engine, tmp_path / "home")
    try:
        home, _, spark = engine.open(tmp_path / "home")
        code, out, err = cli_in_process("restate", "--reason", "baseline", "--json")
        assert code == 0 and json.loads(out)["status"] == "nothing_to_do", err
        before = net_rows(spark)
        assert before == {k: v for k, v in net_oracle(home.landing).items()}

        first = SMALL_CLOCK + timedelta(hours=6)
        duplicated = refund("R3", 4, 2, 1.5)
        land(
            home.landing,
            first,
            "refunds",
            [
                refund("R1", 3, 1, 2.0),
                refund("R2", 9, 2, 1.0),
                duplicated,
                refund("R4", 5, 1, 3.0),
                refund("R5", 2, 1, "n/a"),
                refund("R6", 2, 2, -1),
                refund("R7", 6, 1, 4.0, transaction_id=" "),
            ],
        )
        land(home.landing, first + timedelta(hours=6), "refunds-resent", [duplicated])
        code, _, err = cli_in_process("ingest", "--json")
        assert code == 0, err
        manifest, result = detect_and_restate("late refunds")
        assert days(manifest["roots"][REFUNDS]) == {day(3), day(4), day(5)}
        assert days(manifest["roots"][QUARANTINE]) == {day(2), day(6)}
        assert days(manifest["absorbed_by_next_run"][REFUNDS]) == {day(9)}
        assert days(manifest["impacted"][NET]) == {day(3), day(4), day(5)}
        sales_models = [m for m in manifest["roots"] if m not in (REFUNDS, QUARANTINE)]
        assert not any(manifest["roots"][m] for m in sales_models)
        assert result["status"] == "promoted", result
        reasons = spark.sql(f"SELECT report_date, reason FROM {QUARANTINE}").collect()
        assert sorted((r.report_date, r.reason) for r in reasons) == [
            (day(2), "invalid_amount"),
            (day(2), "non_positive_amount"),
            (day(6), "missing_transaction_id"),
        ]
        check(spark, home.landing, before)
        # R3 was sent twice, verbatim: one version, which keeps its first record's arrival.
        r3 = spark.sql(f"SELECT version_count, arrival_ts FROM {REFUNDS} WHERE refund_id = 'R3'")
        assert tuple(r3.first()) == (1, first.replace(tzinfo=None))

        second = first + timedelta(days=1)
        land(
            home.landing,
            second,
            "corrections",
            [
                refund("R4-C", 6, 1, 1.25, corrects_refund_id="R4"),
                refund("R3-C", 4, 2, 0.75, corrects_refund_id="R3"),
            ],
        )
        code, _, err = cli_in_process("ingest", "--json")
        assert code == 0, err
        manifest, result = detect_and_restate("corrected refunds")
        assert days(manifest["roots"][REFUNDS]) == {day(4), day(5), day(6)}
        assert result["status"] == "promoted", result
        check(spark, home.landing, before)
        refunds = spark.sql(f"SELECT refund_id, refund_date, amount FROM {REFUNDS}").collect()
        assert sorted((r.refund_id, r.refund_date, str(r.amount)) for r in refunds) == [
            ("R1", day(3), "2.00"),
            ("R3", day(4), "0.75"),
            ("R4", day(6), "1.25"),
        ]
        # `tardy history` of the moved refund: its two records in the refunds' bronze table,
        # the restatements that added it on day 5, then moved it to day 6; its row now.
        code, out, err = cli_in_process("history", "R4", "--json")
        assert code == 0, err
        story = json.loads(out)
        assert [
            (r["bronze_table"], r["refund_id"], r["event_time"][:10]) for r in story["records"]
        ] == [
            ("bronze.payment_refunds", "R4", day(5).isoformat()),
            ("bronze.payment_refunds", "R4-C", day(6).isoformat()),
        ]
        moves = sorted(
            (c["event_date"], c["change"], c["reason"])
            for c in story["changes"]
            if c["model"] == REFUNDS
        )
        assert moves == [
            (day(5).isoformat(), "added", "late refunds"),
            (day(5).isoformat(), "removed", "corrected refunds"),
            (day(6).isoformat(), "added", "corrected refunds"),
        ]
        assert [r["refund_date"] for r in story["current"][REFUNDS]] == [day(6).isoformat()]
    finally:
        engine.release()


def check(spark, landing: Path, before: dict[tuple[date, int], Decimal]) -> None:
    """Prod's net revenue equals the oracle's on every closed day, and what it was before
    the refunds inside the grace window."""
    after, expected = net_rows(spark), net_oracle(landing)
    for key in set(after) | set(expected) | set(before):
        if key[0] <= CLOSED:
            assert after.get(key) == expected.get(key), key
        else:
            assert after.get(key) == before.get(key), key
