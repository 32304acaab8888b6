"""A code change to a silver model, the stock SQLMesh way, on real Spark + Delta.

Scenario "fixing a discount bug": prod runs a ``silver.sales_transactions`` whose
``net_amount`` ignores the discount (``quantity * unit_price``). The fix (the project's real
``quantity * unit_price - discount``) goes through

1. ``plan dev``: the modified model and everything downstream get new versions, backfilled
   in their own physical tables with every blocking audit, while prod is untouched;
2. ``table_diff prod:dev``: exactly the discounted transactions differ, each by its discount;
3. ``plan prod``: a virtual update. Prod's views are repointed at the tables dev built;
   nothing is recomputed or rewritten.

Where it runs: in a child process with its own data home and its own copy of the project,
like ``test_cli.py``, never on conftest's session ``context`` / ``spark``:

- the shared SparkSession's warehouse and Derby metastore are fixed at its start from
  ``TARDY_HOME``, so a second data home cannot exist in this process;
- model and schema names are fixed, so on the shared home this scenario would add bronze rows
  (Delta ``appendOnly``: they can never be removed again), prod tables and SQLMesh state that
  ``test_lakehouse.py`` (collected after this module) expects to have built alone: its oracle
  recomputes prod from its own landing files only. A final restoring ``plan`` could put back
  prod's models, not bronze;
- the buggy model lives in a copy of the project, so the repo's files are never edited.

The child is this module run as a script. It drives SQLMesh's Python API (``Context.plan``,
``Context.table_diff``) and writes what it observed to a JSON file; the test asserts on it.
To see which models each plan evaluated and audited, the child wraps
``SnapshotEvaluator.evaluate`` / ``.audit`` (observation only, in the child process). Delta's
commit history checks independently that promotion writes nothing. Cost: one more JVM and
two small backfills (2 stores x 7 days); 3.6 min measured on 2 cores shared with other Spark
jobs, nearly all of it per-commit and start-up overhead, not data.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import time
from collections import defaultdict
from contextlib import contextmanager
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from pathlib import Path

import pytest

from tardy.project.home import project_root
from tardy.simulate import SimulationConfig

# Long tier: a child process (its own JVM) on a copy of the project. Fast guard:
# test_closure (a project change planned through SQLMesh's API in the worker).
pytestmark = pytest.mark.long

CONFIG = SimulationConfig(seed=5, stores=2, days=7, transactions_per_store_day=20)
CLOCK = datetime.combine(CONFIG.start + timedelta(days=CONFIG.days), datetime.min.time(), UTC)
LAST_DAY = CONFIG.last_day.isoformat()

SILVER = "silver.sales_transactions"
DOWNSTREAM = {
    "gold.daily_store_revenue",
    "gold.daily_region_revenue",
    "gold.daily_store_net_revenue",
    "gold.weekly_store_revenue",
    "gold.monthly_store_revenue",
    "gold.store_features",
}
UNCHANGED = {"silver.sales_quarantine"}
FIXED = "CAST(quantity * unit_price - discount AS DECIMAL(14, 2)) AS net_amount"
BUGGY = "CAST(quantity * unit_price AS DECIMAL(14, 2)) AS net_amount"
PROJECT_FILES = (
    "config.py",
    "project.yaml",
    "external_models.yaml",
    "sources.yaml",
    "models",
    "python_models",
    "macros",
    "audits",
    "spark-conf",
)


# --- the child process: the scenario on its own data home -----------------------------------


def short(fqn: str) -> str:
    """'"spark_catalog"."silver"."sales_transactions"' -> 'silver.sales_transactions'."""
    return ".".join(part.strip('"`') for part in fqn.split(".")[-2:])


@contextmanager
def recording(log: dict):
    """Which models the scheduler evaluates and audits inside the block."""
    from sqlmesh.core.snapshot.evaluator import SnapshotEvaluator

    evaluate, audit = SnapshotEvaluator.evaluate, SnapshotEvaluator.audit
    log.update(evaluated=[], audits=[])

    def recorded_evaluate(self, snapshot, *args, **kwargs):
        log["evaluated"].append(short(snapshot.name))
        return evaluate(self, snapshot, *args, **kwargs)

    def recorded_audit(self, snapshot, *args, **kwargs):
        results = audit(self, snapshot, *args, **kwargs)
        log["audits"] += [
            {
                "model": short(snapshot.name),
                "audit": r.audit.name,
                "count": r.count,
                "blocking": r.blocking,
                "skipped": r.skipped,
            }
            for r in results
        ]
        return results

    SnapshotEvaluator.evaluate, SnapshotEvaluator.audit = recorded_evaluate, recorded_audit
    try:
        yield log
    finally:
        SnapshotEvaluator.evaluate, SnapshotEvaluator.audit = evaluate, audit


def plan_facts(plan) -> dict:
    return {
        "directly_modified": sorted(short(s.name) for s in plan.directly_modified),
        "indirectly_modified": sorted(
            {short(s.name) for ids in plan.indirectly_modified.values() for s in ids}
        ),
        "missing_intervals": sorted(short(s.snapshot_id.name) for s in plan.missing_intervals),
        "requires_backfill": plan.requires_backfill,
    }


def view_target(spark, view: str) -> str:
    """The physical table a SQLMesh view selects from (its stored view text)."""
    text = next(
        r.data_type
        for r in spark.sql(f"DESCRIBE TABLE EXTENDED {view}").collect()
        if r.col_name == "View Text"
    )
    match = re.fullmatch(r"SELECT \* FROM (\S+)", text.strip(), re.IGNORECASE)
    assert match, text
    return match.group(1).replace("`", "")


def dev_view(model: str) -> str:
    schema, table = model.split(".")
    return f"{schema}__dev.{table}"


def delta_version(spark, table: str) -> int:
    return spark.sql(f"DESCRIBE HISTORY {table}").agg({"version": "max"}).first()[0]


def silver_facts(spark, view: str) -> dict:
    """Sums computed in Python from the silver rows, independently of the model's SQL."""
    rows = spark.sql(
        f"SELECT transaction_id, quantity, unit_price, discount, net_amount FROM {view}"
    ).collect()
    discounted = {r.transaction_id: str(r.discount) for r in rows if r.discount > 0}
    return {
        "rows": len(rows),
        "discounted": discounted,
        "gross": str(sum(r.quantity * r.unit_price for r in rows)),
        "discounts": str(sum(r.discount for r in rows)),
        "fixed_net": str(sum(r.quantity * r.unit_price - r.discount for r in rows)),
        "net_amount": str(sum(r.net_amount for r in rows)),
    }


def gold_facts(spark, schema: str) -> dict:
    daily = {
        f"{r.event_date}|{r.store_id}": str(r.revenue)
        for r in spark.sql(f"SELECT * FROM {schema}.daily_store_revenue").collect()
    }
    totals = {
        table: str(spark.sql(f"SELECT SUM(revenue) FROM {schema}.{table}").first()[0])
        for table in ("daily_store_revenue", "weekly_store_revenue", "monthly_store_revenue")
    }
    features = spark.sql(f"SELECT SUM(revenue_1d) FROM {schema}.store_features").first()[0]
    return {"daily": daily, "totals": totals, "features_revenue_1d": str(features)}


def scenario(project: Path) -> dict:
    from tardy.ingest import ingest
    from tardy.project.context import open_context, spark_of
    from tardy.project.home import activate
    from tardy.simulate import simulate

    facts: dict = {"seconds": {}}
    tick = time.perf_counter()

    def lap(step: str) -> None:
        nonlocal tick
        now = time.perf_counter()
        facts["seconds"][step] = round(now - tick, 1)
        tick = now

    home = activate()
    model_file = project / "models" / "silver" / "sales_transactions.sql"
    fixed_sql = model_file.read_text()
    assert fixed_sql.count(FIXED) == 1, "the silver model's net_amount expression moved"
    model_file.write_text(fixed_sql.replace(FIXED, BUGGY))

    context = open_context()
    spark = spark_of(context)
    simulate(CONFIG, home.landing, through=CLOCK)
    facts["bronze_rows"] = ingest(spark, home.landing).rows
    lap("start_and_ingest")

    # 1. prod runs the buggy model
    context.plan("prod", execution_time=CLOCK, auto_apply=True, no_prompts=True)
    facts["buggy_prod"] = {"silver": silver_facts(spark, SILVER), "gold": gold_facts(spark, "gold")}
    models = sorted(UNCHANGED | {SILVER} | DOWNSTREAM)
    facts["buggy_prod"]["views"] = {m: view_target(spark, m) for m in models}
    lap("plan_prod_buggy")

    # 2. the fix, in dev: new versions backfilled in isolation, audited
    model_file.write_text(fixed_sql)
    context.load()
    with recording({}) as log:
        plan = context.plan(
            "dev",
            execution_time=CLOCK,
            start=CONFIG.start.isoformat(),
            end=LAST_DAY,
            auto_apply=True,
            no_prompts=True,
        )
    facts["dev_plan"] = {**plan_facts(plan), **log}
    facts["after_dev"] = {
        "prod_gold": gold_facts(spark, "gold"),
        "prod_views": {m: view_target(spark, m) for m in models},
        "dev_silver": silver_facts(spark, dev_view(SILVER)),
        "dev_gold": gold_facts(spark, "gold__dev"),
        "dev_views": {m: view_target(spark, dev_view(m)) for m in sorted({SILVER} | DOWNSTREAM)},
        "dev_views_of_unchanged": [
            m for m in sorted(UNCHANGED) if spark.catalog.tableExists(dev_view(m))
        ],
    }
    lap("plan_dev")

    # 3. review: table_diff prod:dev
    (diff,) = context.table_diff("prod", "dev", select_models=[SILVER], limit=10_000, show=False)
    rows = diff.row_diff()
    sample = rows.joined_sample
    facts["table_diff"] = {
        "join_count": rows.join_count,
        "full_match_count": rows.full_match_count,
        "partial_match_count": rows.partial_match_count,
        "source_only": rows.s_only_count,
        "target_only": rows.t_only_count,
        "columns": list(sample.columns),
        "column_match_pct": {
            str(k): float(v) for k, v in rows.column_stats["pct_match"].to_dict().items()
        },
        "sample": json.loads(sample.astype(str).to_json(orient="records")),
    }
    lap("table_diff")

    # 4. promote: a virtual update
    commits = {m: delta_version(spark, t) for m, t in facts["after_dev"]["dev_views"].items()}
    with recording({}) as log:
        plan = context.plan("prod", execution_time=CLOCK, auto_apply=True, no_prompts=True)
    facts["prod_plan"] = {**plan_facts(plan), **log}
    facts["after_prod"] = {
        "prod_views": {m: view_target(spark, m) for m in models},
        "commits_before": commits,
        "commits_after": {
            m: delta_version(spark, t) for m, t in facts["after_dev"]["dev_views"].items()
        },
        "silver": silver_facts(spark, SILVER),
        "gold": gold_facts(spark, "gold"),
    }
    lap("plan_prod_promote")
    return facts


# --- the test -------------------------------------------------------------------------------


def copy_project(target: Path) -> Path:
    target.mkdir()
    for name in PROJECT_FILES:
        source = project_root() / name
        if source.is_dir():
            shutil.copytree(source, target / name, ignore=shutil.ignore_patterns("__pycache__"))
        else:
            shutil.copy2(source, target / name)
    return target


def D(value: str) -> Decimal:  # noqa: N802
    return Decimal(value)


def test_fixing_a_discount_bug_in_silver_goes_dev_diff_then_virtual_update(tmp_path: Path):
    import oracle

    project = copy_project(tmp_path / "project")
    home, out = tmp_path / "home", tmp_path / "facts.json"
    started = time.perf_counter()
    done = subprocess.run(
        [sys.executable, __file__, str(project), str(out)],
        cwd=project,
        env={**os.environ, "TARDY_HOME": str(home), "TARDY_PROJECT": str(project)},
        capture_output=True,
        text=True,
        timeout=1200,
    )
    assert done.returncode == 0, f"{done.stdout[-4000:]}\n{done.stderr[-4000:]}"
    facts = json.loads(out.read_text())
    facts["seconds"]["child_process"] = round(time.perf_counter() - started, 1)
    print(json.dumps(facts["seconds"]))
    assert (project_root() / "models/silver/sales_transactions.sql").read_text().count(FIXED) == 1

    # 1. The buggy prod: revenue is the gross amount, discounts ignored.
    buggy = facts["buggy_prod"]
    silver = buggy["silver"]
    assert facts["bronze_rows"] > silver["rows"] > 200
    assert len(silver["discounted"]) > 20 and D(silver["discounts"]) > 0
    gross, fixed = D(silver["gross"]), D(silver["fixed_net"])
    assert fixed == gross - D(silver["discounts"])
    assert D(silver["net_amount"]) == gross
    assert all(D(v) == gross for v in buggy["gold"]["totals"].values())
    assert D(buggy["gold"]["features_revenue_1d"]) == gross

    # 2. plan dev: the modified model and all of its downstream changed, nothing else; the new
    #    versions backfilled (and only those), with every audit run, blocking, and passing.
    dev = facts["dev_plan"]
    assert dev["directly_modified"] == [SILVER]
    assert set(dev["indirectly_modified"]) == DOWNSTREAM
    assert set(dev["missing_intervals"]) == {SILVER} | DOWNSTREAM
    assert dev["requires_backfill"]
    assert set(dev["evaluated"]) == {SILVER} | DOWNSTREAM  # not the quarantine
    audited = defaultdict(set)
    for result in dev["audits"]:
        assert result["count"] == 0 and result["blocking"] and not result["skipped"], result
        audited[result["model"]].add(result["audit"])
    assert set(audited) == {SILVER} | DOWNSTREAM
    assert {"reconciles_with_bronze", "non_negative_amounts"} <= audited[SILVER]
    assert "reconciles_with_silver" in audited["gold.daily_store_revenue"]
    assert "reconciles_with_daily" in audited["gold.weekly_store_revenue"]

    # ... in isolation: prod reads exactly what it read before; dev has the fixed numbers.
    after_dev = facts["after_dev"]
    assert after_dev["prod_gold"] == buggy["gold"]
    assert after_dev["prod_views"] == buggy["views"]
    assert after_dev["dev_silver"]["rows"] == silver["rows"]
    assert D(after_dev["dev_silver"]["net_amount"]) == fixed
    assert all(D(v) == fixed for v in after_dev["dev_gold"]["totals"].values())
    assert D(after_dev["dev_gold"]["features_revenue_1d"]) == fixed
    # dev has a view, on a new physical table, for each changed model only (SQLMesh does not
    # create dev views of unmodified models unless asked to: --include-unmodified)
    dev_views = after_dev["dev_views"]
    assert after_dev["dev_views_of_unchanged"] == []
    for model in {SILVER} | DOWNSTREAM:
        assert dev_views[model] != buggy["views"][model]

    # 3. table_diff prod:dev: same keys; exactly the discounted transactions differ, by their
    #    discount, and only in net_amount.
    diff = facts["table_diff"]
    assert diff["join_count"] == silver["rows"]
    assert diff["source_only"] == diff["target_only"] == 0
    assert diff["partial_match_count"] == len(silver["discounted"])
    assert diff["full_match_count"] == silver["rows"] - len(silver["discounted"])
    mismatching = {c for c, pct in diff["column_match_pct"].items() if pct < 100}
    assert mismatching == {"net_amount"}, diff["column_match_pct"]
    key = next(c for c in diff["columns"] if c.endswith("transaction_id"))
    prod_net, dev_net = "PROD__net_amount", "DEV__net_amount"  # SQLMesh's sample columns
    assert diff["columns"] == [key, prod_net, dev_net]
    changed = {row[key]: D(row[prod_net]) - D(row[dev_net]) for row in diff["sample"]}
    assert changed == {k: D(v) for k, v in silver["discounted"].items()}

    # 4. plan prod: a virtual update. Nothing missing, nothing evaluated or audited, no Delta
    #    commit; prod's views now select from the very tables dev built.
    prod = facts["prod_plan"]
    assert prod["directly_modified"] == [SILVER]
    assert set(prod["indirectly_modified"]) == DOWNSTREAM
    assert prod["missing_intervals"] == [] and not prod["requires_backfill"]
    assert prod["evaluated"] == [] and prod["audits"] == []
    after = facts["after_prod"]
    assert after["commits_after"] == after["commits_before"]
    assert after["prod_views"] == {**buggy["views"], **dev_views}

    # ... and prod's revenue is the fixed value: sum(quantity * unit_price - discount) of the
    # silver rows, and an independent recomputation from the landing files.
    assert D(after["silver"]["net_amount"]) == D(after["silver"]["fixed_net"]) == fixed
    assert all(D(v) == fixed for v in after["gold"]["totals"].values())
    assert D(after["gold"]["features_revenue_1d"]) == fixed
    assert after["gold"]["daily"] == after_dev["dev_gold"]["daily"]
    expected = oracle.daily(
        oracle.silver(oracle.records(sorted((home / "landing").rglob("*.jsonl")), home / "landing"))
    )
    assert {k: D(v) for k, v in after["gold"]["daily"].items()} == {
        f"{day}|{store}": row.revenue for (day, store), row in expected.iterrows()
    }
    assert sum(expected.revenue) == fixed


if __name__ == "__main__":
    _, project_dir, facts_file = sys.argv
    Path(facts_file).write_text(json.dumps(scenario(Path(project_dir)), indent=1))
