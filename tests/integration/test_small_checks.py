"""Audits, named selections and the request file on the ``small`` template (two stores, ten
days, prod planned after every ingest, so prod reflects bronze), in the worker's warm engine;
the fast tier's tests of them (the long tier's stories on the ``timeline`` template are
``test_lakehouse``'s).

- Each audit of the project passes on prod and fails on a copy damaged by one statement, run
  once over two intervals (or once per interval where it reads another table by its bounds);
  the store dimension's audits likewise; silver's key-restricted reconciliation counts only
  the recomputed keys.
- Named selections follow ``sqlmesh plan --restate-model``.
- A request file stages on the pull request and promotes on merge (the CLI, in-process).
- `tardy plan ENV --restate-model` stages what the named restatement stages.
"""

from __future__ import annotations

import json
import typing as t
from datetime import timedelta
from pathlib import Path

import oracle
import pytest
from children import SMALL, SMALL_CONFIG, cli_in_process
from prod_checks import content_hashes, physical_table

CONFIG = SMALL_CONFIG


@pytest.fixture(scope="module")
def data_home(engine, tmp_path_factory: pytest.TempPathFactory):
    """This module's home: a copy of the ``small`` template, opened in the worker's warm
    engine (conftest's ``context`` and ``spark`` are its)."""
    root = tmp_path_factory.mktemp("small-checks") / "home"
    SMALL.copy_to(engine, root)
    return engine.open(root)[0]


def test_python_model_from_python_models_is_loaded(context) -> None:
    model = context.get_model("gold.store_features")
    assert model is not None and model.is_python
    assert model.depends_on == {'"spark_catalog"."gold"."daily_store_revenue"'}


def test_bronze_table_matches_its_external_model_declaration(context, spark) -> None:
    declared = {
        name: dtype.sql("spark").upper()
        for name, dtype in context.get_model("bronze.pos_events").columns_to_types.items()
    }
    actual = {
        f.name: f.dataType.simpleString().upper() for f in spark.table("bronze.pos_events").schema
    }
    assert actual == declared


DAMAGES = [
    # (model, audit, damage of one period's rows: {t} is the staged table, {p} the period)
    (
        "gold.daily_store_revenue",
        "reconciles_with_silver",
        "UPDATE {t} SET revenue = revenue + 1 WHERE event_date = DATE'{p}' AND store_id = 1",
    ),
    (
        "gold.daily_store_revenue",
        "non_negative_amounts",
        "UPDATE {t} SET items = -1 WHERE event_date = DATE'{p}' AND store_id = 1",
    ),
    (
        "gold.weekly_store_revenue",
        "reconciles_with_daily",
        "DELETE FROM {t} WHERE week_start = DATE'{p}' AND store_id = 2",
    ),
    (
        "gold.monthly_store_revenue",
        "reconciles_with_daily",
        "UPDATE {t} SET transactions = transactions + 1 WHERE month_start = DATE'{p}'",
    ),
    (
        "silver.sales_transactions",
        "reconciles_with_bronze",
        "DELETE FROM {t} WHERE event_date = DATE'{p}' AND store_id = 1",
    ),
    (
        "gold.daily_store_net_revenue",
        "reconciles_with_refunds",
        "UPDATE {t} SET refunded = refunded + 1 WHERE event_date = DATE'{p}'",
    ),
    (
        "silver.sales_transactions",
        "non_negative_amounts",
        "UPDATE {t} SET discount = -0.01 WHERE event_date = DATE'{p}' AND store_id = 1",
    ),
    (
        "gold.daily_region_revenue",
        "reconciles_with_store_revenue",
        "UPDATE {t} SET revenue = revenue + 1 WHERE event_date = DATE'{p}'",
    ),
    (
        "gold.daily_region_revenue",
        "unique_combination_of_columns",
        "INSERT INTO {t} SELECT * FROM {t} WHERE event_date = DATE'{p}'",
    ),
    (
        "gold.daily_region_revenue",
        "non_negative_amounts",
        "UPDATE {t} SET stores = -1 WHERE event_date = DATE'{p}'",
    ),
]


@pytest.mark.parametrize(("model", "audit_name", "damage"), DAMAGES)
def test_each_audit_passes_on_prod_and_fails_on_a_damaged_copy(
    model: str, audit_name: str, damage: str, context, spark
) -> None:
    """The audits run by tardy's engine (SQLMesh renders them) over a clone of prod, on two
    intervals (the first and the last period): clean, the audit returns nothing; after one
    statement damaging the last period, it returns rows and blocks. Prod reflects bronze (the
    template's plan came after every ingest: a home built day by day leaves late rows beyond
    the grace window out, which silver's reconciliation with bronze rightly reports). An
    audit runs once over
    both intervals (a reconciliation too, through the interval macros), unless it reads
    another table by ``@start_date`` (``oracle.reads_by_bounds``): then once per interval,
    and only its run over the damaged one fails. The audits counted together in one
    aggregate (``audit.count``) count what each counts alone, and the audits of a rows
    table holding the intervals' rows (what a restatement audits) find the same."""
    from tardy.engine import audit, sqlmesh_api
    from tardy.engine.stage import drop_stage

    snapshots = sqlmesh_api.model_snapshots(context)
    snapshot = next(s for s in snapshots if s.model.name == model)
    prod = sqlmesh_api.spark_name(snapshot.table_name(is_deployable=True))
    staged = sqlmesh_api.spark_name(snapshot.table_name(is_deployable=False))
    column = sqlmesh_api.time_column(snapshot)
    low, period = spark.sql(f"SELECT MIN({column}), MAX({column}) FROM {prod}").first()
    first = low if low < period else low - timedelta(days=31)  # one month: an empty one before
    renderer = sqlmesh_api.Renderer.for_prod(context, execution_day=CONFIG.last_day)
    renderer.stage(snapshot)
    intervals = [[first.isoformat(), first.isoformat()], [period.isoformat(), period.isoformat()]]
    by_bounds = oracle.reads_by_bounds(
        next(a for a, _ in snapshot.model.audits_with_args if a.name == audit_name)
    )
    rows = f"{staged}__rows_of_intervals"
    try:
        spark.sql(f"CREATE TABLE {staged} SHALLOW CLONE {prod}")
        clean = [
            r for r in audit.run(spark, renderer, snapshot, intervals) if r.audit == audit_name
        ]
        assert [r.spans for r in clean] == ([[i] for i in intervals] if by_bounds else [intervals])
        assert all(r.rows == 0 for r in clean), clean
        spark.sql(damage.format(t=staged, p=period))
        results = audit.run(spark, renderer, snapshot, intervals)
        damaged = [r for r in results if r.audit == audit_name]
        assert [r.spans for r in damaged if r.failed] == [
            intervals[-1:] if by_bounds else intervals
        ]
        assert all(r.blocking for r in damaged), damaged
        if audit_name == "non_negative_amounts":  # counted in one aggregate with not_null
            planned = audit.plan(renderer, snapshot, intervals)
            alone = [audit.count(spark, [item])[0].rows for item in planned]
            assert [r.rows for r in results] == alone and max(alone) > 0
        # As a restatement audits it: ``@this_model`` reads a rows table of the intervals'
        # rows (``stage.write``), all of it; the same results.
        predicate = " OR ".join(f"{column} BETWEEN '{a}' AND '{b}'" for a, b in intervals)
        spark.sql(f"CREATE TABLE {rows} AS SELECT * FROM {staged} WHERE {predicate}")
        assert audit.run(spark, renderer, snapshot, intervals, rows=rows) == results
    finally:
        spark.sql(f"DROP TABLE IF EXISTS {rows}")
        drop_stage(context, spark)


# The store dimension is a view: its audits run over a table copy of it, damaged by one
# statement ({t}), each returning rows where the copy is clean.
DIMENSION_DAMAGES = [
    (
        "no_overlapping_validity",
        # a second current version of store 1, starting after its first version
        "INSERT INTO {t} SELECT store_id, valid_from + INTERVAL 1 HOUR, NULL, region, format, "
        "manager, change_id, is_correction, version + 100, TRUE, record_count, arrival_ts, "
        "source_record_id FROM {t} WHERE store_id = 1 AND version = 1",
    ),
    (
        # store 1's second version lost: its first version now ends where nothing starts
        "no_validity_gaps",
        "DELETE FROM {t} WHERE store_id = 1 AND version = 2",
    ),
    (
        "unique_combination_of_columns",
        "INSERT INTO {t} SELECT * FROM {t} WHERE store_id = 1 AND version = 1",
    ),
]


@pytest.mark.parametrize(("audit_name", "damage"), DIMENSION_DAMAGES)
def test_each_store_dimension_audit_fails_on_a_damaged_copy(
    audit_name: str, damage: str, context, spark
) -> None:
    from tardy.engine import audit, delta, sqlmesh_api

    snapshot = next(
        s for s in sqlmesh_api.model_snapshots(context) if s.model.name == "silver.store_versions"
    )
    prod = sqlmesh_api.spark_name(snapshot.table_name(is_deployable=True))
    copy = sqlmesh_api.spark_name(snapshot.table_name(is_deployable=False))
    renderer = sqlmesh_api.Renderer.for_prod(context, execution_day=CONFIG.last_day)
    renderer.stage(snapshot)  # @this_model is the copy
    day = [[CONFIG.last_day.isoformat()] * 2]
    try:
        spark.sql(f"CREATE TABLE {copy} USING delta AS SELECT * FROM {prod}")
        assert spark.sql(f"SELECT COUNT(*) FROM {copy} WHERE store_id = 1").first()[0] >= 2
        clean = {r.audit: r for r in audit.run(spark, renderer, snapshot, day)}
        assert clean[audit_name].rows == 0, clean[audit_name]
        spark.sql(damage.format(t=copy))
        damaged = {r.audit: r for r in audit.run(spark, renderer, snapshot, day)}
        assert damaged[audit_name].failed and damaged[audit_name].blocking, damaged[audit_name]
    finally:
        delta.drop_existing(spark, [], [copy])


def test_key_restricted_reconciliation_counts_the_recomputed_keys(context, spark) -> None:
    """Written by key, silver's ``reconciles_with_bronze`` counts only the changed keys' valid
    rows (and every invalid row of the day): the write left every other key's rows as prod's.
    On a clone of prod it passes; losing a changed key's row fails it; losing another key's
    row does not (the restricted audit never reads it), while the stock audit does."""
    from tardy.engine import audit, delta, sqlmesh_api
    from tardy.engine.stage import KeyRestriction, drop_stage
    from tardy.key_index import KeySet
    from tardy.project.sources import declared

    snapshot = next(
        s
        for s in sqlmesh_api.model_snapshots(context)
        if s.model.name == "silver.sales_transactions"
    )
    prod = sqlmesh_api.spark_name(snapshot.table_name(is_deployable=True))
    staged = sqlmesh_api.spark_name(snapshot.table_name(is_deployable=False))
    day = CONFIG.start + timedelta(days=5)
    ids = [
        r.transaction_id
        for r in spark.sql(
            f"SELECT transaction_id FROM {prod} WHERE event_date = DATE'{day}' "
            "ORDER BY transaction_id"
        ).collect()
    ]
    changed, other = ids[:2], ids[-1]
    listed = ", ".join(f"'{k}'" for k in changed)
    dates = spark.sql(
        f"SELECT DISTINCT arrival_date FROM {declared().get('pos').key_index} "
        f"WHERE natural_key IN ({listed})"
    ).collect()
    restriction = KeyRestriction(
        "transaction_id", KeySet(frozenset(changed), frozenset(r.arrival_date for r in dates))
    )
    renderer = sqlmesh_api.Renderer.for_prod(context, execution_day=CONFIG.last_day)
    renderer.stage(snapshot)
    interval = [[day.isoformat(), day.isoformat()]]

    def reconciliation(variables) -> audit.AuditResult:
        results = audit.run(spark, renderer, snapshot, interval, variables)
        return next(r for r in results if r.audit == "reconciles_with_bronze")

    try:
        spark.sql(f"CREATE TABLE {staged} SHALLOW CLONE {prod}")
        assert reconciliation(restriction.variables()).rows == 0
        version = delta.version(spark, staged)
        spark.sql(f"DELETE FROM {staged} WHERE transaction_id = '{changed[0]}'")
        lost_changed = reconciliation(restriction.variables())
        assert lost_changed.failed and lost_changed.blocking
        delta.restore(spark, staged, version)
        spark.sql(f"DELETE FROM {staged} WHERE transaction_id = '{other}'")
        assert reconciliation(restriction.variables()).rows == 0
        assert reconciliation(None).failed
    finally:
        drop_stage(context, spark)


def test_named_selection_follows_sqlmesh_restate_model(context) -> None:
    """Names, wildcards (SQLMesh's selector takes `schema.*`, not a star inside a name) and an
    external model (standing for the models that read it), as `sqlmesh plan --restate-model`
    takes them; a selection naming nothing is refused."""
    from tardy.engine.named import Selection, SelectionError, selected_models

    def names(*selectors: str) -> list[str]:
        return selected_models(context, Selection(selectors, CONFIG.start, CONFIG.start))

    assert names("gold.weekly_store_revenue") == ["gold.weekly_store_revenue"]
    gold = names("gold.*")
    assert set(gold) == {
        "gold.daily_store_revenue",
        "gold.daily_region_revenue",
        "gold.daily_store_net_revenue",
        "gold.weekly_store_revenue",
        "gold.monthly_store_revenue",
        "gold.store_features",
    }
    assert gold[0] == "gold.daily_store_revenue"  # upstream first: the others read it
    assert names("bronze.pos_events") == ["silver.sales_quarantine", "silver.sales_transactions"]
    # A view (the store dimension) stands for the models reading it, as bronze does.
    assert names("silver.store_versions") == ["gold.daily_region_revenue"]
    with pytest.raises(SelectionError, match="names no model"):
        names("gold.no_such_model")


def test_a_request_file_stages_on_the_pull_request_and_promotes_on_merge(
    context, spark, tmp_path
) -> None:
    """The CI recipe: `tardy restate --request F --no-promote --review R` on the pull request
    (staged, prod unchanged, the review written), `tardy promote --request F` on merge
    (promoted; again: already promoted), and a second request discarded by `tardy discard
    --request`. The commands run in this process, as the CLI's own entry point."""
    daily = physical_table(context, "gold.daily_store_revenue")
    day = CONFIG.start + timedelta(days=4)
    clean = content_hashes(context, spark)
    spark.sql(
        f"UPDATE {daily} SET revenue = revenue - 7 WHERE event_date = DATE'{day}' AND store_id = 2"
    )
    edited = content_hashes(context, spark)
    request = tmp_path / "restatements" / "store-2-fix.yaml"
    request.parent.mkdir()
    request.write_text(
        f"reason: 'store 2 revenue wrong (OPS-7)'\n"
        f"models: gold.daily_store_revenue\nstart: {day}\nend: {day}\n"
    )
    review = tmp_path / "review.md"

    code, out, err = cli_in_process(
        "restate", "--request", str(request), "--no-promote", "--review", str(review), "--json"
    )
    assert code == 0, err
    staged = json.loads(out)
    assert staged["status"] == "staged" and staged["restatement_id"].endswith("-store_2_fix")
    assert staged["named"]["models"] == ["gold.daily_store_revenue"]
    assert content_hashes(context, spark) == edited  # staged only
    text = review.read_text()
    for part in (
        staged["restatement_id"],
        "`gold.daily_store_revenue`",
        "### Audits",
        f"tardy promote --request {request}",
        f"tardy discard --request {request}",
        f"`<schema>__{staged['environment']}.<table>`",
    ):
        assert part in text, part
    # One of the environment's views as the example query (the JSON's keys are sorted).
    assert any(f"SELECT * FROM {view}" in text for view in staged["views"].values())
    assert text == (Path(staged["report_dir"]) / "review.md").read_text()

    code, out, err = cli_in_process("promote", "--request", str(request), "--json")
    assert code == 0, err
    assert json.loads(out)["status"] == "promoted"
    assert content_hashes(context, spark) == clean
    code, out, _ = cli_in_process("promote", "--request", str(request), "--json")
    assert (code, json.loads(out)["status"]) == (0, "already_promoted")

    other = request.with_name("nothing.yaml")
    other.write_text("reason: detected late data, reviewed\n")
    code, out, err = cli_in_process("discard", "--request", str(other), "--json")
    assert code == 1 and "no restatement of request nothing" in json.loads(out)["error"]
    code, out, err = cli_in_process("restate", "--request", str(request), "--reason", "x")
    assert code == 1 and "not with --reason" in err


def _staged_views(spark, staged: dict) -> dict[str, list[str]]:
    """Every row of each model's view in the staged environment, as sorted text."""
    return {
        model: sorted(str(row) for row in spark.sql(f"SELECT * FROM {view}").collect())
        for model, view in sorted(staged["views"].items())
    }


def _events() -> list[dict]:
    from tardy.project.home import activate

    sink = activate().root / "notifications.jsonl"
    return [json.loads(line) for line in sink.read_text().splitlines()]


def test_tardy_plan_restate_model_stages_what_a_named_restatement_stages(context, spark) -> None:
    """`tardy plan dev --restate-model M --start D --end D`, the stock command's habit: staged
    in environment `dev` exactly as `tardy restate --model M --start D --end D --env dev
    --no-promote` stages it (the same views, row for row), prod untouched; with
    `--auto-apply` it is promoted. Without a range it takes the models' computed days, as
    SQLMesh does."""
    from tardy.engine.named import computed_range

    daily = physical_table(context, "gold.daily_store_revenue")
    day = CONFIG.start + timedelta(days=6)
    clean = content_hashes(context, spark)
    spark.sql(
        f"UPDATE {daily} SET revenue = revenue - 3 WHERE event_date = DATE'{day}' AND store_id = 1"
    )
    edited = content_hashes(context, spark)
    selection = ("--restate-model", "gold.daily_store_revenue", "--start", str(day), "--end")

    code, out, err = cli_in_process("plan", "dev", *selection, str(day), "--json")
    assert code == 0, err
    planned = json.loads(out)
    assert planned["status"] == "staged" and planned["environment"] == "dev", planned
    assert planned["named"] == {
        "models": ["gold.daily_store_revenue"],
        "start": str(day),
        "end": str(day),
    }
    assert content_hashes(context, spark) == edited  # staged only
    by_plan = _staged_views(spark, planned)
    assert cli_in_process("discard", planned["restatement_id"])[0] == 0

    code, out, err = cli_in_process(
        "restate",
        "--model",
        "gold.daily_store_revenue",
        "--start",
        str(day),
        "--end",
        str(day),
        "--env",
        "dev",
        "--no-promote",
        "--reason",
        "the same, as tardy restate",
        "--json",
    )
    assert code == 0, err
    restated = json.loads(out)
    assert restated["status"] == "staged"
    for key in ("impacted", "roots"):
        assert restated[key] == planned[key], key
    assert _staged_views(spark, restated) == by_plan
    assert "gold.daily_store_revenue" in by_plan and by_plan != {
        model: sorted(str(row) for row in spark.table(model).collect()) for model in by_plan
    }  # the staged day differs from the edited prod
    assert cli_in_process("discard", restated["restatement_id"])[0] == 0
    assert content_hashes(context, spark) == edited
    # Each staged restatement was announced, awaiting review, in its environment
    # (tardy.outbox.notifications' file sink).
    staged = [e for e in _events() if e["event"] == "restatement_staged"]
    assert [e["detail"]["restatement_id"] for e in staged][-2:] == [
        planned["restatement_id"],
        restated["restatement_id"],
    ]
    assert staged[-1]["detail"]["environment"] == "dev"
    assert f"`tardy promote {restated['restatement_id']}`" in staged[-1]["text"]

    code, out, err = cli_in_process("plan", "dev", *selection, str(day), "--auto-apply", "--json")
    assert code == 0, err
    assert json.loads(out)["status"] == "promoted"
    assert content_hashes(context, spark) == clean

    last = CONFIG.start + timedelta(days=CONFIG.days - 1)
    assert computed_range(context, ["gold.daily_store_revenue"]) == (CONFIG.start, last)


def test_one_render_over_the_intervals_selects_what_a_render_per_interval_does(
    context, spark
) -> None:
    """Every SQL model of the project, rendered once over two intervals of prod's days
    (``Renderer.rows_over``: the interval macros select both), gives the rows of SQLMesh's
    renders of each interval, with multiplicity; counted for all models in one statement. A
    render over the hull (the days between the intervals too) is a control: it differs."""
    from tardy.engine import sqlmesh_api

    def day(n: int) -> str:
        return (CONFIG.start + timedelta(days=n)).isoformat()

    intervals = [[day(0), day(1)], [day(6), day(6)]]
    hull = [[intervals[0][0], intervals[-1][1]]]
    renderer = sqlmesh_api.Renderer.for_prod(context, execution_day=CONFIG.last_day)
    models = [
        s
        for s in sqlmesh_api.model_snapshots(context)
        if sqlmesh_api.has_intervals(s) and s.model.is_sql
    ]
    assert len(models) >= 9

    def sql(spans: list[list[str]], one: bool) -> t.Callable[[t.Any], str]:
        def query(snapshot: t.Any) -> str:
            parts = (
                renderer.rows_over(snapshot, spans)
                if one
                else [q for first, last in spans for q in renderer.rows(snapshot, first, last)]
            )
            assert len(parts) == (1 if one else len(spans)), snapshot.name
            return " UNION ALL ".join(
                f"SELECT * FROM ({p.sql('spark', identify=True)})" for p in parts
            )

        return query

    def differences(one: t.Callable[[t.Any], str], each: t.Callable[[t.Any], str]) -> dict:
        branches = [
            f"SELECT {i} AS m, COUNT(*) AS n FROM (({one(s)}) EXCEPT ALL ({each(s)})"
            f" UNION ALL (({each(s)}) EXCEPT ALL ({one(s)})))"
            for i, s in enumerate(models)
        ]
        rows = spark.sql(" UNION ALL ".join(branches)).collect()
        return {models[r.m].model.name: r.n for r in rows}

    assert differences(sql(intervals, True), sql(intervals, False)) == {
        s.model.name: 0 for s in models
    }
    control = differences(sql(hull, True), sql(intervals, False))
    assert control["silver.sales_transactions"] > 0 and control["gold.daily_store_revenue"] > 0


def test_the_diffs_text_of_each_exact_type_is_the_exports(spark) -> None:
    """A published model's day digests after a promotion come from the diff's rows after as
    Spark's text (``diff.after_text``): for every column type ``diff.exact_text`` accepts,
    that text equals the deterministic export's (``versions.as_text`` of what Arrow reads),
    NULLs, signs, scales and quoting included; the others are read (their text differs)."""
    from tardy.consumers.versions import as_rows, read_version
    from tardy.engine.diff import after_text, exact_text

    spark.sql("CREATE SCHEMA IF NOT EXISTS texts")
    spark.sql("DROP TABLE IF EXISTS texts.exact")
    spark.sql(
        "CREATE TABLE texts.exact (s STRING, i INT, l BIGINT, sh SMALLINT, b BOOLEAN, d DATE, "
        "m DECIMAL(18, 2), z DECIMAL(12, 0), six DECIMAL(20, 6)) USING delta"
    )
    spark.sql(
        "INSERT INTO texts.exact VALUES "
        "('a, \"quoted\"', -7, 9007199254740993, 3, true, DATE'2026-02-01', -0.50, 12, 0.000001), "
        "(NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL), "
        "('\\\\N', 0, 0, 0, false, DATE'0999-12-31', 0.00, 0, 0.000000), "
        "('', 1, 1, 1, true, DATE'2026-12-31', 12345678.90, -5, -123456.123456)"
    )
    schema = spark.table("texts.exact").schema
    assert all(exact_text(f) for f in schema.fields)
    query = (
        f"SELECT {after_text(schema)} AS _text FROM (SELECT *, 1 AS _present FROM texts.exact) AS a"
    )
    texts = sorted(tuple(row["_text"]) for row in spark.sql(query).collect())
    version = int(spark.sql("DESCRIBE HISTORY texts.exact").collect()[0]["version"])
    _, exported = as_rows(read_version(spark, "texts.exact", version))
    assert texts == exported
    spark.sql("DROP TABLE IF EXISTS texts.inexact")
    spark.sql(
        "CREATE TABLE texts.inexact (t TIMESTAMP, f DOUBLE, e DECIMAL(20, 8), a ARRAY<INT>) "
        "USING delta"
    )
    assert not any(exact_text(f) for f in spark.table("texts.inexact").schema.fields)
