"""What tardy leads with comes from the project: the headline model and measure, each model's
own measure, the circuit breaker's, and the settings that name them checked against the
project as loaded. A real SQLMesh Context over a small project of another domain (a
library's loans; no model, source or column of the sample), on DuckDB: no Spark."""

from __future__ import annotations

from pathlib import Path

import pytest
from sqlmesh import Context
from sqlmesh.core.config import Config, DuckDBConnectionConfig, GatewayConfig, ModelDefaultsConfig

from tardy.errors import InputError
from tardy.project import headline as lead

MODELS = {
    "loans.raw": """
MODEL (name loans.raw, kind FULL);
SELECT CAST('2026-01-01' AS DATE) AS loan_day, 1 AS branch, 1 AS loans,
       CAST(2.50 AS DECIMAL(12, 2)) AS fees, CAST(3.00 AS DECIMAL(12, 2)) AS fines
""",
    "loans.by_day": """
MODEL (
  name loans.by_day,
  kind INCREMENTAL_BY_TIME_RANGE (time_column loan_day),
  grain (loan_day, branch),
  tags (published)
);
SELECT loan_day, branch, SUM(loans) AS loans, CAST(SUM(fees) AS DECIMAL(18, 2)) AS fees,
       CAST(SUM(fines) AS DECIMAL(18, 2)) AS fines
FROM loans.raw WHERE loan_day BETWEEN @start_ds AND @end_ds GROUP BY 1, 2
""",
    "loans.fines_by_day": """
MODEL (
  name loans.fines_by_day,
  kind INCREMENTAL_BY_TIME_RANGE (time_column loan_day),
  grain (loan_day, branch),
  tags (published, 'measure=fines')
);
SELECT loan_day, branch, loans, fees, fines FROM loans.by_day
WHERE loan_day BETWEEN @start_ds AND @end_ds
""",
}

SOURCES = """
version: 1
sources:
  desk:
    bronze: bronze.desk_loans
    record: {loan_id: string, loaned_at: timestamp}
    event_time: loaned_at
    key: [loan_id]
    rules: {rules}
    lateness: daily
"""
MACRO = """
from sqlmesh import macro


@macro()
def loan_rules(evaluator):
    return "NULL"
"""


@pytest.fixture()
def project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    from sqlmesh.core import constants

    from tardy.project.sources import FILE_VARIABLE

    # Load the models in this process: a pytest worker beside a JVM is no place to fork.
    monkeypatch.setattr(constants, "MAX_FORK_WORKERS", 1)
    (tmp_path / "models").mkdir()
    for name, sql in MODELS.items():
        (tmp_path / "models" / f"{name.split('.')[1]}.sql").write_text(sql)
    (tmp_path / "macros").mkdir()
    (tmp_path / "macros" / "rules.py").write_text(MACRO)
    (tmp_path / "sources.yaml").write_text(SOURCES.replace("{rules}", "loan_rules"))
    monkeypatch.setenv(FILE_VARIABLE, str(tmp_path / "sources.yaml"))
    return tmp_path


def context_of(root: Path, **variables: object) -> Context:
    config = Config(
        gateways={"duckdb": GatewayConfig(connection=DuckDBConnectionConfig())},
        model_defaults=ModelDefaultsConfig(dialect="duckdb", start="2026-01-01"),
        variables={"lateness_alert_tiers": {"daily": {}}, **variables},
    )
    return Context(paths=str(root), config=config)


def test_unset_the_headline_is_the_first_published_model_and_its_own_measure(project) -> None:
    context = context_of(project)
    found = lead.headline(context)
    assert found is not None
    assert (found.model, found.time_column, found.measure) == ("loans.by_day", "loan_day", "fees")
    assert found.grain == ("loan_day", "branch")
    # Its first DECIMAL column outside its key leads; the rest keep the model's order.
    assert found.measures == ("fees", "loans", "fines")
    assert found.decimals == ("fees", "fines")
    # The breaker watches the headline and its DECIMAL measure.
    assert lead.breaker_target(context) == ("loans.by_day", "fees")
    lead.check_settings(context)


def test_a_model_s_measure_tag_names_its_own_measure(project) -> None:
    context = context_of(project)
    tagged = context.get_model("loans.fines_by_day")
    assert lead.shown_measure(tagged) == "fines"
    assert lead.measures_of(tagged) == ("fines", "loans", "fees")
    assert lead.shown_measure(context.get_model("loans.by_day")) == "fees"


def test_declared_headline_and_breaker_are_used(project) -> None:
    context = context_of(
        project,
        headline_model="loans.fines_by_day",
        restatement_breaker_model="loans.by_day",
        restatement_breaker_measure="fines",
    )
    found = lead.headline(context)
    assert found is not None and (found.model, found.measure) == ("loans.fines_by_day", "fines")
    assert lead.breaker_target(context) == ("loans.by_day", "fines")


@pytest.mark.parametrize(
    ("variables", "named"),
    [
        ({"headline_model": "loans.nowhere"}, "headline_model names loans.nowhere"),
        ({"headline_measure": "branch"}, "headline_measure names branch"),
        ({"restatement_breaker_model": "loans.gone"}, "restatement_breaker_model names loans.gone"),
        ({"restatement_breaker_measure": "loans"}, "restatement_breaker_measure names loans"),
        (
            {"release_notes": {"material_measures": ["revenue"]}},
            "release_notes.material_measures names revenue",
        ),
    ],
)
def test_a_project_setting_that_names_nothing_is_one_line_naming_it(
    project, variables: dict[str, object], named: str
) -> None:
    with pytest.raises(InputError) as raised:
        lead.check_settings(context_of(project, **variables))
    message = str(raised.value)
    assert message.startswith(f"project.yaml: {named}") and "\n" not in message
    # ... and what exists instead.
    assert "loans." in message or "fees" in message or "fines" in message


def test_a_measure_tag_that_names_no_column_is_refused(project) -> None:
    sql = MODELS["loans.fines_by_day"].replace("'measure=fines'", "'measure=late_fees'")
    (project / "models" / "fines_by_day.sql").write_text(sql)
    with pytest.raises(InputError, match=r"^loans.fines_by_day: its tag measure=late_fees names"):
        lead.check_settings(context_of(project))


def test_a_source_whose_rules_macro_is_missing_is_refused_naming_the_file(project) -> None:
    (project / "sources.yaml").write_text(SOURCES.replace("{rules}", "sale_rules"))
    with pytest.raises(InputError) as raised:
        lead.check_settings(context_of(project))
    message = str(raised.value)
    assert message.startswith(f"{project / 'sources.yaml'}: source 'desk': field 'rules'")
    assert "@sale_rules" in message and "\n" not in message


def test_a_project_without_published_models_has_no_headline(project) -> None:
    for name in ("by_day", "fines_by_day"):
        path = project / "models" / f"{name}.sql"
        path.write_text(path.read_text().replace("published", "internal"))
    context = context_of(project)
    assert lead.headline(context) is None
    assert lead.breaker_target(context) == (None, None)
    lead.check_settings(context)
