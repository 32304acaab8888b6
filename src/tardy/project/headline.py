"""The headline: the published model and measure a project's numbers lead with.

``tardy status`` points its reader to the headline's status view and reports its
revisions first, the report charts its measure per day (first published against today),
``tardy summary`` sums it per period, and the circuit breaker watches it unless
``restatement_breaker_model`` / ``restatement_breaker_measure`` say otherwise.

What it is comes from the project, never from tardy:

* ``headline_model`` in ``project.yaml``'s variables names a model tagged ``published``;
  unset, the headline is the first published model in the DAG's order that has a time
  column (SQLMesh's ``time_column``).
* ``headline_measure`` names a numeric column of it; unset, the model's own measure (below),
  else none (rows are still counted).

Each model's own measure (the one a diff, a restatement's table and a release note show
beside its rows) is its tag ``measure=<column>`` (a DECIMAL column of it; in a SQL MODEL
block quote it: ``tags ('measure=amount')``), else its first DECIMAL column outside its
time column and grain, else its first numeric one (``shown_measure``).

A setting that names a model or column the project does not have is an ``InputError``
naming the setting, its file and what exists. Reading the models' columns renders each
candidate's query once, so the answer is kept per Context.
"""

from __future__ import annotations

import typing as t
import weakref
from dataclasses import dataclass

from sqlglot import exp

from tardy.errors import InputError

if t.TYPE_CHECKING:
    from sqlmesh import Context
    from sqlmesh.core.model import Model

PUBLISHED_TAG = "published"
SETTINGS_FILE = "project.yaml"


@dataclass(frozen=True)
class Headline:
    model: str
    time_column: str
    measure: str | None  # None: the model has no numeric column outside its key
    grain: tuple[str, ...]
    measures: tuple[str, ...]  # every numeric column outside the time column and grain
    decimals: tuple[str, ...]  # those that are DECIMAL (a restatement's diff sums them)


_KEPT: weakref.WeakKeyDictionary[Context, Headline | None] = weakref.WeakKeyDictionary()


def published_models(context: Context) -> list[Model]:
    """The project's models tagged ``published``, in the DAG's order (upstream first)."""
    models = {m.fqn: m for m in context.models.values()}
    return [
        models[fqn] for fqn in context.dag if fqn in models and PUBLISHED_TAG in models[fqn].tags
    ]


def grain_of(model: Model) -> tuple[str, ...]:
    """The model's grain columns (its key), empty when it declares none."""
    return tuple(c.name for g in model.grains for c in g.find_all(exp.Column))


def tag_value_of(model: Model, name: str) -> str | None:
    """The value of a ``name=value`` tag of the model (``tags ('restate_window=28')``)."""
    for tag in model.tags:
        key, _, value = tag.partition("=")
        if key.strip() == name:
            return value.strip()
    return None


def time_column_of(model: Model) -> str | None:
    column = getattr(model, "time_column", None)
    return column.column.name if column is not None else None


MEASURE_TAG = "measure"


def measure_tag(model: Model) -> str | None:
    """The column the model's ``measure=<column>`` tag names, if it has one."""
    return tag_value_of(model, MEASURE_TAG)


def measures_of(model: Model) -> tuple[str, ...]:
    """The numeric columns outside the model's time column and grain, in its column order
    but its own measure (``shown_measure``) first."""
    key = {*grain_of(model), time_column_of(model)}
    columns = [
        (name, kind)
        for name, kind in (model.columns_to_types or {}).items()
        if name not in key and kind.is_type(*exp.DataType.NUMERIC_TYPES)
    ]
    names = [name for name, _ in columns]
    decimals = [name for name, kind in columns if kind.is_type(exp.DataType.Type.DECIMAL)]
    tagged = measure_tag(model)
    shown = tagged if tagged in names else next(iter(decimals or names), None)
    return tuple(sorted(names, key=lambda name: name != shown))


def decimal_measures(model: Model) -> tuple[str, ...]:
    """``measures_of`` that are DECIMAL (what a restatement's diff sums per day)."""
    types = model.columns_to_types or {}
    return tuple(m for m in measures_of(model) if types[m].is_type(exp.DataType.Type.DECIMAL))


def shown_measure(model: Model) -> str | None:
    """The model's own measure (module docstring)."""
    measures = measures_of(model)
    return measures[0] if measures else None


def check_measure_tags(models: t.Iterable[Model]) -> None:
    """An ``InputError`` for the first model whose ``measure=`` tag names no numeric column
    of it outside its key."""
    for model in models:
        tagged = measure_tag(model)
        if tagged is not None and tagged not in measures_of(model):
            raise InputError(
                f"{model.name}: its tag {MEASURE_TAG}={tagged} names no numeric column of it "
                f"outside its key (its measures: {', '.join(measures_of(model)) or 'none'})"
            )


def _setting(context: Context, name: str) -> str | None:
    value = context.config.variables.get(name)
    return None if value in (None, "") else str(value)


def headline(context: Context) -> Headline | None:
    """The project's headline (module docstring); None when no model is published."""
    if context in _KEPT:
        return _KEPT[context]
    published = published_models(context)
    names = ", ".join(m.name for m in published) or "none"
    declared = _setting(context, "headline_model")
    if declared is not None:
        found = [m for m in published if m.name == declared]
        if not found:
            raise InputError(
                f"{SETTINGS_FILE}: headline_model names {declared}, which is not a model "
                f"tagged {PUBLISHED_TAG} (published: {names})"
            )
        model: Model | None = found[0]
    else:
        model = next((m for m in published if time_column_of(m)), None)
    if model is None:
        _KEPT[context] = None
        return None
    time_column = time_column_of(model)
    if time_column is None:
        raise InputError(
            f"{SETTINGS_FILE}: headline_model {model.name} has no time column "
            "(an INCREMENTAL_BY_TIME_RANGE model's time_column)"
        )
    measures = measures_of(model)
    measure = _setting(context, "headline_measure")
    if measure is not None and measure not in measures:
        raise InputError(
            f"{SETTINGS_FILE}: headline_measure names {measure}, which is not a numeric "
            f"column of {model.name} outside its key (its measures: "
            f"{', '.join(measures) or 'none'})"
        )
    found_headline = Headline(
        model=model.name,
        time_column=time_column,
        measure=measure or shown_measure(model),
        grain=grain_of(model),
        measures=measures,
        decimals=decimal_measures(model),
    )
    _KEPT[context] = found_headline
    return found_headline


def breaker_target(context: Context) -> tuple[str | None, str | None]:
    """The model and DECIMAL measure the circuit breaker watches: the model
    ``restatement_breaker_model`` names, else the headline's; the measure
    ``restatement_breaker_measure`` names, else that model's own (a DECIMAL one: the diff
    sums those), else none (its rows only). A name the project does not have is an
    ``InputError`` naming the setting: a breaker never silently watches nothing."""
    named = _setting(context, "restatement_breaker_model")
    declared = _setting(context, "restatement_breaker_measure")
    if named is None:
        lead = headline(context)
        if lead is None:
            return None, None
        named = lead.model
        if declared is None:
            return named, lead.measure if lead.measure in lead.decimals else None
    model = next((m for m in context.models.values() if m.name == named), None)
    if model is None or time_column_of(model) is None:
        with_time = ", ".join(m.name for m in context.models.values() if time_column_of(m))
        raise InputError(
            f"{SETTINGS_FILE}: restatement_breaker_model names {named}, which is not a model "
            f"of the project with a time column (those: {with_time or 'none'})"
        )
    decimals = decimal_measures(model)
    if declared is None:
        return named, next(iter(decimals), None)
    if declared not in decimals:
        raise InputError(
            f"{SETTINGS_FILE}: restatement_breaker_measure names {declared}, which is not a "
            f"DECIMAL column of {named} outside its key (its DECIMAL columns: "
            f"{', '.join(decimals) or 'none'})"
        )
    return named, declared


def check_settings(context: Context) -> None:
    """Every setting that names a model, measure, column or macro of the project, checked
    against the project as loaded (an ``InputError`` for the first that names nothing):
    ``project.yaml``'s headline, breaker and ``release_notes.material_measures``, every
    model's ``measure=`` tag, and each source's ``rules`` macro in ``sources.yaml``."""
    from tardy.project.sources import declared

    headline(context)
    breaker_target(context)
    check_measure_tags(context.models.values())
    notes = context.config.variables.get("release_notes") or {}
    named = list(notes.get("material_measures") or ()) if isinstance(notes, dict) else []
    measures = {m for model in published_models(context) for m in measures_of(model)}
    for measure in named:
        if measure not in measures:
            raise InputError(
                f"{SETTINGS_FILE}: release_notes.material_measures names {measure}, which no "
                f"published model has (their measures: {', '.join(sorted(measures)) or 'none'})"
            )
    _check_training(context)
    macros = {name.lower() for name in context._macros}
    sources = declared()
    for source in sources.sources.values():
        if source.rules.lower() not in macros:
            raise InputError(
                f"{sources.path}: source {source.name!r}: field 'rules' names the macro "
                f"@{source.rules}, which the project's macros/ do not define"
            )


def _check_training(context: Context) -> None:
    """``training`` (``tardy models train``), when set: two published models, the entity
    column in both and the label's measure in the label model."""
    raw = context.config.variables.get("training")
    if not isinstance(raw, dict):
        return
    published = {m.name: m for m in published_models(context)}
    needs = {"features": ("entity",), "label": ("entity", "label_measure")}
    for role, columns in needs.items():
        name = raw.get(role)
        if name is None:
            continue
        model = published.get(str(name))
        if model is None:
            raise InputError(
                f"{SETTINGS_FILE}: training.{role} names {name}, which is not a model tagged "
                f"{PUBLISHED_TAG} (published: {', '.join(published) or 'none'})"
            )
        for setting in columns:
            column = raw.get(setting)
            if column is not None and str(column) not in (model.columns_to_types or {}):
                raise InputError(
                    f"{SETTINGS_FILE}: training.{setting} names {column}, which is not a "
                    f"column of {name}"
                )
