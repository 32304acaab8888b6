"""`make bench`: restatement and daily-run costs, as ratios measured in one run on this machine.

One run (the parent process) empties its data home ($TARDY_HOME, which must be named
``bench``), runs each part in its own process (SQLMesh's context and the Spark session are
bound to one data home per process), then prints the combined tables and writes them, with
the raw numbers, to $TARDY_HOME/bench.json:

1. ``year`` (data home ``h<long>``; full size 20 stores x 365 days x 700 sales a store-day
   from TARDY_START 2025-11-01): the full build; a stock full restatement; a stock
   restatement of the hull of 2 days ~350 apart; ``tardy restate`` of k = 1, 2 (~350 apart)
   and 10 scattered closed days, each on fresh late rows, with its step seconds and Spark
   statements; ``tardy restate`` with nothing new. Then the history part below on the same
   home (the ``12x`` history).
2. ``history`` (data home ``h<short>``, 30 days at the same daily volume; the ``1x``
   history): after the full build, 3 consecutive daily runs (a new arrival day simulated and
   ingested, then the lateness series extended as ``tardy ingest`` does, timed apart, then
   ``context.run`` with the clock one day later; best of 3) and 3 separate
   1-day ``tardy restate`` on fresh late rows for the same closed day counted from the end
   (best of 3). The parent compares long/short, and on the year home the one-day ingest with
   the series against without it (issue 53's 1.1).
3. ``demo`` (data home ``demo``, built by ``tardy demo``; 5 stores, 28 days): 3 late sales for
   one closed day, then, as CLI processes timed by wall clock, ``tardy restate --json``
   against a stock ``sqlmesh plan --restate-model bronze.pos_events --start D --end D`` of
   that day (unreviewed: prod written in place, audited after) and over every day; then a
   second ``tardy restate`` on 3 more late sales: both held to 1.0x the stock one-day
   restatement and 40 plans; after a third ingest, a computed ``tardy status`` and ``tardy
   detect --fresh``, each held to 5 s.

``--scale small`` (or TARDY_BENCH_SCALE=small) runs the same flow at a tiny size (3 stores,
40 and 8 days, 50 sales a store-day) in a few minutes; the default is ``full``. No timing is
asserted: every target is a ratio of two measurements of the same run, printed as met or not.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import time
import typing as t
from dataclasses import dataclass
from datetime import UTC, date, datetime, timedelta
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
BIN = Path(sys.executable).parent
BENCH_START = "2025-11-01"
RUNS = 3  # daily runs and 1-day restatements per home (best of)
STEPS = ("detect", "stage", "audit", "diff", "promote", "log", "publish")
DESIGNS = "docs/engine.md (Open) and docs/benchmarks.md"
MAX_STATEMENTS = 40  # plans per restatement on the warm engine
AFTER_INGEST = 5.0  # seconds of a computed `tardy status` / `tardy detect`
# Safety at the stock price: a reviewed one-day restatement against the stock unreviewed one
# of the same day (demo home), and the year home's one day against the stock full one.
DEMO_VS_STOCK_DAY = 1.0
YEAR_DAY_VS_FULL = 0.15


@dataclass(frozen=True)
class Scale:
    stores: int
    per_day: int
    long: int  # days of the year home
    short: int  # days of the short-history home
    back: int  # the history part restates the day this many days before the data's last day


SCALES = {
    "full": Scale(stores=20, per_day=700, long=365, short=30, back=20),
    "small": Scale(stores=3, per_day=50, long=40, short=8, back=4),
}


def midnight(day: date) -> datetime:
    return datetime.combine(day, datetime.min.time(), UTC)


def late_sales(tag: str, days: t.Iterable[date], per_day: int = 3) -> str:
    """``per_day`` new sales (stores 1..per_day) at noon of each day, as a landing file."""
    lines = [
        json.dumps(
            {
                "transaction_id": f"BENCH-{tag}-{d}-{i}",
                "record_type": "sale",
                "store_id": 1 + i,
                "product_id": 1,
                "quantity": 1,
                "unit_price": 10.0,
                "discount": 0.0,
                "event_ts": f"{d}T12:00:00Z",
            }
        )
        for d in days
        for i in range(per_day)
    ]
    return "\n".join(lines) + "\n"


def scattered(start: date, days: int, k: int) -> list[date]:
    """k closed days spread evenly from day 5 to 10 days before the last one."""
    lo, hi = min(5, days // 4), days - 10
    return [start + timedelta(days=round(lo + (hi - lo) * i / (k - 1))) for i in range(k)]


# --- a data home in this process (the `year` and `history` parts) ------------------------------


class Home:
    """One data home, its SQLMesh context and Spark session, and the simulated clock."""

    def __init__(self, scale: Scale, days: int) -> None:
        started = time.perf_counter()
        self.start = date.fromisoformat(os.environ.setdefault("TARDY_START", BENCH_START))
        from tardy.engine import meter
        from tardy.ingest import ingest
        from tardy.ingest.landing import arrival_dir_name
        from tardy.project.context import open_context, spark_of
        from tardy.requests.restatements import restate
        from tardy.simulate import SimulationConfig, simulate

        self._meter, self._restate, self._ingest = meter, restate, ingest
        self._simulate, self._arrival_dir_name = simulate, arrival_dir_name
        self.context = open_context()
        self.spark = spark_of(self.context)
        self.spark.sql("SELECT 1").collect()
        self.root = Path(os.environ["TARDY_HOME"]).resolve()
        self.startup = time.perf_counter() - started
        self.days = days
        # Simulated for RUNS more days than prod is first built with: the daily runs deliver
        # them one arrival day at a time (the same config, a later `through`).
        self.config = SimulationConfig(
            stores=scale.stores,
            days=days + RUNS,
            transactions_per_store_day=scale.per_day,
            start=self.start,
        )
        self.last_day = self.start + timedelta(days=days - 1)  # the last day of sales landed
        self.clock = midnight(self.last_day + timedelta(days=1))  # deliveries landed through
        self.late = 0
        t0 = time.perf_counter()
        simulate(self.config, self.root / "landing", through=self.clock)
        self.simulate_seconds = time.perf_counter() - t0
        t0 = time.perf_counter()
        ingest(self.spark, self.root / "landing")
        self.ingest_seconds = time.perf_counter() - t0
        # The lateness series' backfill of the whole home (`tardy ingest` extends it after
        # its commit; the library's ingest, timed here and by the daily runs, does not).
        from tardy.lateness.series import extend

        self._extend = extend
        t0 = time.perf_counter()
        extend(self.spark)
        self.series_backfill_seconds = time.perf_counter() - t0
        self.bronze_rows = self.spark.table("bronze.pos_events").count()

    @property
    def built_through(self) -> datetime:
        """Prod is built through the arrival day of the last deliveries (rows without a usable
        event_ts are accounted to it), so that nothing waits inside the grace window and the
        arrival watermark advances, as it does after any daily run."""
        return self.clock + timedelta(days=1)

    def full_build(self) -> dict[str, t.Any]:
        return self.measure(
            lambda: self.context.plan(
                "prod", execution_time=self.built_through, auto_apply=True, no_prompts=True
            )
        )

    def measure(self, action: t.Callable[[], t.Any]) -> dict[str, t.Any]:
        """Seconds, statements and executions of ``action`` (``tardy.engine.meter.Meter``:
        in-process and on the warm engine alike)."""
        meter = self._meter.Meter(self.spark)
        with meter.step("action"):
            result = action()
        return {
            "seconds": meter.seconds["action"],
            "statements": meter.statements["action"],
            "executions": meter.executions["action"],
            "result": result,
        }

    def land(self, *days: date) -> None:
        """3 fresh late sales for each day, in a new arrival folder after every delivery."""
        self.late += 1
        folder = (
            self.root
            / "landing"
            / "pos"
            / self._arrival_dir_name(self.clock + timedelta(minutes=self.late))
        )
        folder.mkdir(parents=True, exist_ok=True)
        path = folder / f"bench-{self.late}.jsonl"
        path.write_text(late_sales(str(self.late), days))
        self._ingest(self.spark, self.root / "landing", [path])

    def restate(self, reason: str = "bench") -> dict[str, t.Any]:
        measured = self.measure(lambda: self._restate(self.context, self.spark, reason))
        outcome = measured.pop("result")
        row = {
            "seconds": measured["seconds"],
            "statements": measured["statements"],
            "status": str(outcome.status),
            "steps": {k: round(v, 3) for k, v in outcome.seconds.items()},
            "step_statements": dict(outcome.statements),
            "statement_seconds": dict(outcome.statement_seconds),
            "slowest": list(outcome.slowest),
            "evaluated": outcome.evaluated,
            "advanced_watermark": outcome.advanced_watermark,
        }
        steps = ", ".join(
            f"{k} {v:.1f} s/{outcome.statements.get(k, 0)}" for k, v in outcome.seconds.items()
        )
        print(
            f"  tardy restate ({reason}): {row['seconds']:.1f} s, {row['statements']} "
            f"statements, {outcome.status}; {steps}",
            flush=True,
        )
        return row

    def stock(self, first: date, last: date) -> dict[str, t.Any]:
        measured = self.measure(
            lambda: self.context.plan(
                "prod",
                restate_models=["bronze.pos_events"],
                start=first.isoformat(),
                end=last.isoformat(),
                execution_time=self.built_through,
                auto_apply=True,
                no_prompts=True,
            )
        )
        measured.pop("result")
        print(f"  stock restatement {first}..{last}: {measured['seconds']:.1f} s", flush=True)
        return measured

    def daily_run(self) -> dict[str, t.Any]:
        """The next arrival day lands and is ingested, then the daily run, one day later."""
        self.clock += timedelta(days=1)
        self.last_day += timedelta(days=1)
        t0 = time.perf_counter()
        self._simulate(self.config, self.root / "landing", through=self.clock)
        result = self._ingest(self.spark, self.root / "landing")
        ingest_seconds = time.perf_counter() - t0
        series = self.measure(lambda: self._extend(self.spark))  # what `tardy ingest` adds
        series.pop("result")
        end = (self.built_through - timedelta(days=1)).date().isoformat()
        measured = self.measure(
            lambda: self.context.run("prod", end=end, execution_time=self.built_through)
        )
        status = measured.pop("result")
        if status.is_failure:
            raise SystemExit(f"the daily run through {end} failed")
        print(
            f"  daily run through {end}: {measured['seconds']:.1f} s, "
            f"{measured['statements']} statements ({result.rows:,} rows landed and ingested "
            f"in {ingest_seconds:.1f} s; the lateness series then {series['seconds']:.1f} s, "
            f"{series['statements']} statements)",
            flush=True,
        )
        return {
            **measured,
            "status": str(status),
            "rows": result.rows,
            "ingest": ingest_seconds,
            "series": series,
        }

    def baseline(self, reason: str) -> dict[str, t.Any]:
        """A restatement of whatever late data the simulator delivered: afterwards prod
        reflects bronze, and the arrival watermark is past every row."""
        row = self.restate(reason)
        if not row["advanced_watermark"]:
            print(f"  WARNING: {reason} left changes pending (watermark not advanced)")
        return row

    def common(self) -> dict[str, t.Any]:
        return {
            "days": self.days,
            "stores": self.config.stores,
            "per_day": self.config.transactions_per_store_day,
            "bronze_rows": self.bronze_rows,
            "startup": self.startup,
            "simulate": self.simulate_seconds,
            "ingest": self.ingest_seconds,
            "series_backfill": self.series_backfill_seconds,
        }


def history(home: Home, scale: Scale) -> dict[str, t.Any]:
    """3 daily runs, then 3 one-day restatements, each on fresh late rows for the same day."""
    print(f"[{home.root.name}] history: {RUNS} daily runs, {RUNS} 1-day restatements", flush=True)
    runs = [home.daily_run() for _ in range(RUNS)]
    after_runs = home.baseline("bench: the daily runs' late data")
    day = home.start + timedelta(days=home.days - 1 - scale.back)
    restatements = []
    for _ in range(RUNS):
        home.land(day)
        restatements.append(home.restate())
    return {
        "daily_runs": runs,
        "after_runs": after_runs,
        "restated_day": day.isoformat(),
        "restatements": restatements,
    }


def built(scale: Scale, days: int) -> tuple[Home, dict[str, t.Any]]:
    """A data home of ``days`` days with prod built from empty and a baseline restatement."""
    home = Home(scale, days)
    print(f"[{home.root.name}] {home.bronze_rows:,} bronze rows; full build", flush=True)
    build = home.full_build()
    build.pop("result")
    print(f"  full build: {build['seconds']:.1f} s", flush=True)
    baseline = home.baseline("bench baseline")
    return home, {**home.common(), "full_build": build, "baseline": baseline}


def part_year(scale: Scale) -> dict[str, t.Any]:
    home, measured = built(scale, scale.long)
    start, last = home.start, home.last_day
    lo, hi = scattered(start, home.days, 2)
    ten = scattered(start, home.days, 10)
    runs: dict[str, t.Any] = {}
    home.land(lo, hi)
    runs["k2"] = home.restate()
    home.land(lo, hi)
    # Stock equivalent: one hull, aligned to the first week/month, through the features.
    stock_hull = home.stock(max(start, lo.replace(day=1)), last)
    home.baseline("bench: watermark after stock")
    home.land(hi)
    runs["k1"] = home.restate()
    runs["nothing"] = home.restate()
    home.land(*ten)
    runs["k10"] = home.restate()
    home.land(lo)
    stock_full = home.stock(start, last)
    home.baseline("bench: watermark after stock")
    return {
        **measured,
        "days_restated": {
            "k1": [hi.isoformat()],
            "k2": [lo.isoformat(), hi.isoformat()],
            "k10": [d.isoformat() for d in ten],
        },
        "tardy": runs,
        "stock_hull": stock_hull,
        "stock_hull_range": [max(start, lo.replace(day=1)).isoformat(), last.isoformat()],
        "stock_full": stock_full,
        "history": history(home, scale),
    }


def part_history(scale: Scale) -> dict[str, t.Any]:
    home, measured = built(scale, scale.short)
    return {**measured, "history": history(home, scale)}


# --- the demo home, driven through the CLIs (the `demo` part, in the parent) ------------------


def cli(args: list[str], env: dict[str, str], log: Path, check: bool = True) -> tuple[float, str]:
    """Runs a CLI from the repo root; returns its wall seconds and stdout (stderr to ``log``)."""
    t0 = time.perf_counter()
    with log.open("a") as err:
        err.write(f"\n$ {' '.join(args)}\n")
        err.flush()
        done = subprocess.run(
            args, cwd=REPO, env=env, stdout=subprocess.PIPE, stderr=err, text=True, check=False
        )
    seconds = time.perf_counter() - t0
    if check and done.returncode != 0:
        raise RuntimeError(f"{' '.join(args)} exited {done.returncode} (see {log})")
    print(
        f"  {' '.join(Path(a).name if i == 0 else a for i, a in enumerate(args))}: {seconds:.1f} s",
        flush=True,
    )
    return seconds, done.stdout


def last_json(text: str) -> dict[str, t.Any]:
    """The JSON object a `--json` command printed (after any stray line)."""
    decoder = json.JSONDecoder()
    for line_start in [0] + [i + 1 for i, c in enumerate(text) if c == "\n"]:
        if text.startswith("{", line_start):
            try:
                return decoder.raw_decode(text, line_start)[0]
            except json.JSONDecodeError:
                continue
    raise ValueError(f"no JSON object in: {text[-2000:]}")


def cli_outcome(wall: float, out: str) -> dict[str, t.Any]:
    """A `tardy restate --json` process: its wall seconds and its own step measurements."""
    outcome = last_json(out)
    return {
        "seconds": wall,
        "statements": sum(outcome["statements"].values()),  # the metered steps only
        "steps": outcome["seconds"],
        "step_statements": outcome["statements"],
        "statement_seconds": outcome["statement_seconds"],
        "slowest": outcome["slowest"],
        "status": outcome["status"],
        "evaluated": outcome["evaluated"],
        "advanced_watermark": outcome["advanced_watermark"],
    }


def part_demo(root: Path) -> dict[str, t.Any]:
    from tardy.ingest.landing import arrival_dir_name
    from tardy.runtime import jvm
    from tardy.simulate import SimulationConfig

    config = SimulationConfig()  # what `tardy demo` simulates
    clock = midnight(config.last_day + timedelta(days=1))  # the demo's final run
    home = root / "demo"
    home.mkdir(parents=True)
    log = root / "demo.log"
    env = {**os.environ, "TARDY_HOME": str(home), "TARDY_START": config.start.isoformat()}
    # The stock `sqlmesh` CLI does not call tardy.project.home.activate: give it the JVM class
    # archive too, so that both CLIs start alike.
    env.setdefault(jvm.ARCHIVE_VARIABLE, jvm.options())
    print(f"[demo] {home} (log: {log})", flush=True)
    tardy, sqlmesh = str(BIN / "tardy"), str(BIN / "sqlmesh")
    build, _ = cli([tardy, "demo"], env, log)
    # The demo leaves its own closed-day late data for a restatement: take it first, so that
    # the timed restatement is of the 3 late sales only.
    seconds, out = cli(
        [tardy, "restate", "--reason", "bench: the demo's late data", "--json"], env, log
    )
    baseline = cli_outcome(seconds, out)
    day = config.start + timedelta(days=9)

    def land(n: int) -> None:
        folder = home / "landing" / "pos" / arrival_dir_name(clock + timedelta(minutes=n))
        folder.mkdir(parents=True, exist_ok=True)
        (folder / f"bench-{n}.jsonl").write_text(late_sales(f"demo{n}", [day]))
        cli([tardy, "ingest", "--json"], env, log)

    land(1)
    seconds, out = cli([tardy, "restate", "--reason", "bench", "--json"], env, log)
    restated = cli_outcome(seconds, out)
    land(2)
    seconds, out = cli([tardy, "restate", "--reason", "bench, again", "--json"], env, log)
    again = cli_outcome(seconds, out)
    land(3)
    # Issue 50: what a user asks right after an ingest, computed (nothing recorded is current).
    status_seconds, _ = cli([tardy, "status", "--json"], env, log)
    detect_seconds, _ = cli([tardy, "detect", "--json", "--fresh"], env, log)

    def stock_args(first: date, last: date) -> list[str]:
        return [
            sqlmesh,
            "plan",
            "--restate-model",
            "bronze.pos_events",
            "--start",
            first.isoformat(),
            "--end",
            last.isoformat(),
            "--execution-time",
            clock.strftime("%Y-%m-%d"),
            "--auto-apply",
            "--no-prompts",
        ]

    stock_day, _ = cli(stock_args(day, day), env, log)
    stock, _ = cli(stock_args(config.start, config.last_day), env, log)
    return {
        "tardy_demo": build,
        "baseline": baseline,
        "restated_day": day.isoformat(),
        "tardy_restate": restated,
        "tardy_restate_again": again,
        "status_after_ingest": status_seconds,
        "detect_after_ingest": detect_seconds,
        "stock_day": stock_day,
        "stock_full": stock,
        "stock_command": " ".join(["sqlmesh", *stock_args(day, day)[1:]]),
    }


# --- the parent: run the parts, print the tables ----------------------------------------------


def fresh_home() -> Path:
    """The bench's own data home, emptied: every build must start from nothing."""
    home = Path(os.environ["TARDY_HOME"]).resolve()
    if home.name != "bench":
        raise SystemExit(f"refusing to empty {home}: the bench home must be named 'bench'")
    if home.exists():
        shutil.rmtree(home)
    home.mkdir(parents=True)
    return home


def child(part: str, root: Path, name: str, scale: str) -> dict[str, t.Any] | None:
    home, out = root / name, root / f"{name}.json"
    env = {**os.environ, "TARDY_HOME": str(home), "TARDY_START": BENCH_START}
    args = [sys.executable, __file__, "--part", part, "--scale", scale, "--out", str(out)]
    done = subprocess.run(args, cwd=REPO, env=env, check=False)
    if done.returncode != 0 or not out.exists():
        print(f"[{name}] FAILED (exit {done.returncode})", flush=True)
        return None
    return json.loads(out.read_text())


def best(rows: list[dict[str, t.Any]]) -> dict[str, t.Any]:
    return min(rows, key=lambda r: r["seconds"])


def fmt_s(seconds: float | None) -> str:
    return "n/a" if seconds is None else f"{seconds:.1f} s"


def held(label: str, run: dict[str, t.Any]) -> list[str]:
    """A target not met: its restatement's wall seconds split into its statements' own and the
    client's (SQLMesh's renders, Python, round trips), and its slowest statements."""
    own = sum(run.get("statement_seconds", {}).values())
    lines = [
        f"- *{label}*: {run['seconds']:.1f} s, {run['statements']} statements; "
        f"{own:.1f} s in the statements, {run['seconds'] - own:.1f} s around them"
    ]
    lines += [
        f"  - {s['seconds']:.1f} s, {s['step']}: `{s['statement']}`" for s in run.get("slowest", [])
    ]
    return lines


def per_step(label: str, run: dict[str, t.Any]) -> str:
    """A restatement's statements, step by step (what holds a statement count)."""
    counts = run.get("step_statements", {})
    return f"- *{label}*: " + ", ".join(f"{step} {counts.get(step, 0)}" for step in STEPS)


def report(scale_name: str, scale: Scale, parts: dict[str, t.Any]) -> dict[str, t.Any]:
    year, short, demo = parts.get("year"), parts.get("history"), parts.get("demo")
    x = round(scale.long / scale.short)
    rows: list[tuple[str, str, str, str]] = []  # measurement, value, target, met?
    where: dict[str, dict[str, t.Any]] = {}  # restatement -> its steps
    ratios: dict[str, float] = {}

    def info(label: str, value: str) -> None:
        rows.append((label, value, "", ""))

    holds: list[str] = []  # for each target not met: what its restatement's time went to

    def ratio(
        label: str,
        key: str,
        num: float,
        den: float,
        target: float,
        run: dict[str, t.Any] | None = None,
    ) -> None:
        value = num / den
        ratios[key] = value
        met = value <= target
        rows.append((label, f"{value:.3f}", f"<= {target:g}", "yes" if met else "**no**"))
        if not met and run is not None:
            holds.extend(held(label, run))

    if year:
        tardy = year["tardy"]
        size = f"{year['stores']} stores x {year['days']} days x {year['per_day']}/day"
        info(f"year home ({size}): bronze rows", f"{year['bronze_rows']:,}")
        info("startup (JVM, Spark, SQLMesh context, metastore)", fmt_s(year["startup"]))
        info("full build (plan of prod from empty)", fmt_s(year["full_build"]["seconds"]))
        info(
            "full build, rows per second",
            f"{year['bronze_rows'] / year['full_build']['seconds']:,.0f}",
        )
        full, hull = year["stock_full"], year["stock_hull"]
        info(
            "stock full restatement (every day)",
            f"{fmt_s(full['seconds'])} ({full['statements']} statements)",
        )
        lo, hi = year["stock_hull_range"]
        info(
            f"stock restatement of the hull {lo}..{hi}",
            f"{fmt_s(hull['seconds'])} ({hull['statements']} statements)",
        )
        lo_day, hi_day = map(date.fromisoformat, year["days_restated"]["k2"])
        apart = f"2 days {(hi_day - lo_day).days} apart"
        labels = {"k1": "1 day", "k2": apart, "k10": "10 scattered days"}
        for key, label in labels.items():
            run = tardy[key]
            info(
                f"`tardy restate`, {label}",
                f"{fmt_s(run['seconds'])} ({run['statements']} statements)",
            )
            where[f"{label} (year)"] = run
        info(
            "`tardy restate`, nothing new",
            f"{fmt_s(tardy['nothing']['seconds'])} ({tardy['nothing']['statements']} statements)",
        )
        where["nothing new (year)"] = tardy["nothing"]
        ratio(
            "tardy 1 day / stock full restatement",
            "k1_vs_full",
            tardy["k1"]["seconds"],
            full["seconds"],
            YEAR_DAY_VS_FULL,
            tardy["k1"],
        )
        ratios["k2_vs_hull"] = tardy["k2"]["seconds"] / hull["seconds"]
        info(f"tardy {apart} / stock hull", f"{ratios['k2_vs_hull']:.3f}")
        ratio(
            "tardy 10 scattered days / tardy 1 day",
            "k10_vs_k1",
            tardy["k10"]["seconds"],
            tardy["k1"]["seconds"],
            1.5,
            tardy["k10"],
        )
        counts = [tardy[k]["statements"] for k in ("k1", "k2", "k10")]
        most = max(counts)
        rows.append(
            (
                "Spark statements (warm engine: plans) per restatement (most of k=1, 2, 10)",
                f"{most}",
                f"<= {MAX_STATEMENTS}",
                "yes" if most <= MAX_STATEMENTS else "**no**",
            )
        )
        if most > MAX_STATEMENTS:
            holds.append(
                per_step(f"{most} statements", tardy[("k1", "k2", "k10")[counts.index(most)]])
            )
        value = max(counts[1:]) / counts[0]
        ratios["statements_growth"] = value
        rows.append(
            (
                "Spark statements k=1 / k=2 / k=10 (max(k=2, k=10) / k=1)",
                f"{counts[0]} / {counts[1]} / {counts[2]} ({value:.2f})",
                "does not grow with k (<= 1.1)",
                "yes" if value <= 1.1 else "**no**",
            )
        )
    for label, part in ((f"{x}x", year), ("1x", short)):
        if part:
            h = part["history"]
            run, one = best(h["daily_runs"]), best(h["restatements"])
            info(
                f"daily `sqlmesh run`, {part['days']}-day home ({label}), best of {RUNS}",
                f"{fmt_s(run['seconds'])} ({run['statements']} statements; ingest "
                f"{min(r['ingest'] for r in h['daily_runs']):.1f} s)",
            )
            info(
                f"1-day `tardy restate` of {h['restated_day']}, {part['days']}-day home "
                f"({label}), best of {RUNS}",
                f"{fmt_s(one['seconds'])} ({one['statements']} statements)",
            )
            where[f"1 day, {label} history"] = one
    if year and "series" in year["history"]["daily_runs"][0]:  # since 2026-11-30
        info("the lateness series' backfill of the year home", fmt_s(year["series_backfill"]))
        fastest = min(year["history"]["daily_runs"], key=lambda r: r["ingest"])
        with_series = min(
            r["ingest"] + r["series"]["seconds"] for r in year["history"]["daily_runs"]
        )
        ratio(
            "year: a one-day ingest with the lateness series / without (best of "
            f"{RUNS}; the series {fastest['series']['statements']} statements)",
            "ingest_series",
            with_series,
            fastest["ingest"],
            1.1,
        )
    if year and short:
        hy, hs = year["history"], short["history"]
        ratio(
            f"daily run {x}x / 1x history",
            "daily_run_history",
            best(hy["daily_runs"])["seconds"],
            best(hs["daily_runs"])["seconds"],
            1.1,
        )
        ratio(
            f"1-day restatement {x}x / 1x history",
            "restate_history",
            best(hy["restatements"])["seconds"],
            best(hs["restatements"])["seconds"],
            1.1,
            best(hy["restatements"]),
        )
    if demo:
        info("`tardy demo` (fresh demo home, CLI wall clock)", fmt_s(demo["tardy_demo"]))
        restated = demo["tardy_restate"]
        info(
            f"`tardy restate --json`, 3 late sales on {demo['restated_day']} (CLI wall clock)",
            f"{fmt_s(restated['seconds'])} (own steps {sum(restated['steps'].values()):.1f} s, "
            f"{restated['statements']} statements)",
        )
        info(
            "stock `sqlmesh plan --restate-model` of every demo day (CLI wall clock)",
            fmt_s(demo["stock_full"]),
        )
        # Runs before 2026-12-04 timed no stock one-day restatement: their full one.
        stock_day = demo.get("stock_day", demo["stock_full"])
        if "stock_day" in demo:
            info(
                f"stock `sqlmesh plan --restate-model` of {demo['restated_day']} only "
                "(CLI wall clock)",
                fmt_s(stock_day),
            )
        ratio(
            "demo: tardy restate / stock one-day restatement (CLI wall clock)",
            "demo",
            restated["seconds"],
            stock_day,
            DEMO_VS_STOCK_DAY,
            restated,
        )
        both = (restated, demo.get("tardy_restate_again") or restated)
        plans = max(r["statements"] for r in both)
        rows.append(
            (
                "demo: plans per `tardy restate` (most of the two)",
                f"{plans}",
                f"<= {MAX_STATEMENTS}",
                "yes" if plans <= MAX_STATEMENTS else "**no**",
            )
        )
        where["demo, 3 late sales (CLI)"] = restated
        again = demo.get("tardy_restate_again")
        if again is not None:  # runs before 2026-11-27 timed one restatement
            info(
                "the same, a second `tardy restate --json` on 3 more late sales (CLI)",
                f"{fmt_s(again['seconds'])} ({again['statements']} statements)",
            )
            ratio(
                "demo, both warm: second tardy restate / stock one-day restatement (CLI)",
                "demo_warm",
                again["seconds"],
                stock_day,
                DEMO_VS_STOCK_DAY,
                again,
            )
            where["demo, again (CLI)"] = again
        for key, command in (("status_after_ingest", "status"), ("detect_after_ingest", "detect")):
            if key in demo:  # runs before 2026-11-29 did not time them
                seconds = demo[key]
                rows.append(
                    (
                        f"demo: computed `tardy {command}` after an ingest (CLI wall clock)",
                        fmt_s(seconds),
                        f"<= {AFTER_INGEST:g} s",
                        "yes" if seconds <= AFTER_INGEST else "**no**",
                    )
                )
    table = ["| measurement | value | target | met? |", "|---|---:|---|---|"]
    table += [f"| {a} | {b} | {c} | {d} |" for a, b, c, d in rows]
    names = list(where)
    steps = ["| step | " + " | ".join(names) + " |", "|---|" + "---:|" * len(names)]
    for step in STEPS:
        cells = [
            f"{w['steps'][step]:.1f} s / {w['step_statements'].get(step, 0)}"
            if step in w["steps"]
            else "-"
            for w in where.values()
        ]
        steps.append(f"| {step} | " + " | ".join(cells) + " |")
    steps.append(
        "| sum of steps | "
        + " | ".join(
            f"{sum(w['steps'].values()):.1f} s / {sum(w['step_statements'].values())}"
            for w in where.values()
        )
        + " |"
    )
    steps.append(
        "| of which in statements | "
        + " | ".join(
            f"{sum(w.get('statement_seconds', {}).values()):.1f} s" for w in where.values()
        )
        + " |"
    )
    steps.append(
        "| whole call (wall / statements) | "
        + " | ".join(f"{w['seconds']:.1f} s / {w['statements']}" for w in where.values())
        + " |"
    )
    print(f"\n## make bench (scale {scale_name})\n")
    print("\n".join(table))
    print("\nWhere `tardy restate`'s time goes (seconds / Spark statements per step):\n")
    print("\n".join(steps))
    if holds:
        print("\nWhat holds each target not met (its restatement's slowest statements):\n")
        print("\n".join(holds))
        print(f"\nThe designs tried for them, and the next: {DESIGNS}")
    return {"table": table, "where": steps, "holds": holds, "ratios": ratios}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--scale", choices=sorted(SCALES), default=os.environ.get("TARDY_BENCH_SCALE", "full")
    )
    parser.add_argument(
        "--part",
        choices=["all", "year", "history", "demo", "report"],
        default="all",
        help="year, history: internal, one data home in its own process; demo: the demo "
        "part alone (its own bench home); report: reprint the tables of $TARDY_HOME/bench.json "
        "(or parts.json)",
    )
    parser.add_argument("--out", type=Path, help="internal: where a part writes its JSON")
    args = parser.parse_args()
    scale = SCALES[args.scale]
    if args.part == "report":  # print the tables of an earlier run's bench.json again
        root = Path(os.environ["TARDY_HOME"])
        found = root / "bench.json" if (root / "bench.json").exists() else root / "parts.json"
        saved = json.loads(found.read_text())
        report(saved["scale"], SCALES[saved["scale"]], saved["parts"])
        return 0
    if args.part == "demo":
        demo = part_demo(fresh_home())
        report(args.scale, scale, {"demo": demo})
        return 0
    if args.part != "all":
        result = (part_year if args.part == "year" else part_history)(scale)
        args.out.write_text(json.dumps(result, indent=2, default=str))
        return 0
    root = fresh_home()
    started = time.perf_counter()
    parts: dict[str, t.Any] = {}

    def save() -> None:  # after each part: a run stopped halfway keeps what it measured
        (root / "parts.json").write_text(
            json.dumps({"scale": args.scale, "parts": parts}, indent=2, default=str)
        )

    parts["history"] = child("history", root, f"h{scale.short}", args.scale)
    save()
    try:
        parts["demo"] = part_demo(root)
    except Exception as error:  # noqa: BLE001 - report it, keep the other parts
        print(f"[demo] FAILED: {error}", flush=True)
        parts["demo"] = None
    save()
    parts["year"] = child("year", root, f"h{scale.long}", args.scale)
    save()
    summary = report(args.scale, scale, parts)
    print(f"\n(bench wall clock: {(time.perf_counter() - started) / 60:.1f} min)")
    (root / "bench.json").write_text(
        json.dumps({"scale": args.scale, **summary, "parts": parts}, indent=2, default=str)
    )
    return 0 if all(parts.values()) else 1


if __name__ == "__main__":
    sys.exit(main())
