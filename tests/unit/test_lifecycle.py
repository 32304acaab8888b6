"""The lifecycle's table (``tardy.engine.lifecycle``): every intent it logs is finished by
recovery, a resumed command accepts the status its own intent left, and a status the table
does not name refuses the command before anything runs."""

from __future__ import annotations

import typing as t

import pytest

from tardy.engine import lifecycle, log
from tardy.engine.lifecycle import RECOVERY, TRANSITIONS, Verb
from tardy.engine.log import Action, Record
from tardy.engine.outcome import RestatementError


def test_every_intent_the_table_logs_is_an_interruption_recovery_finishes() -> None:
    intents = {step.intent for steps in TRANSITIONS.values() for step in steps.values()}
    intents.discard(None)
    # Staging's intent is logged by the machine (``staging``), before the lifecycle's table.
    assert intents | {Action.STAGING} == set(log.INTERRUPTED) == set(RECOVERY)
    for status, (verb, said) in RECOVERY.items():
        # The command recovery runs accepts the status the kill left, and logs no second
        # intent over it.
        assert TRANSITIONS[verb][status].intent is None, status
        assert "{}" in said


def test_a_command_resumed_from_its_own_intent_goes_on_without_logging_it_again() -> None:
    for verb, steps in TRANSITIONS.items():
        for status, step in steps.items():
            if step.intent is not None:
                resumed = steps[step.intent]
                assert resumed.run is step.run and resumed.intent is None, (verb, status)


def _row(status: Action) -> Record:
    fields: dict[str, t.Any] = {
        "restatement_id": "r1",
        "action": str(status),
        "status": str(status),
        "reason": "why",
        "message": None,
        "intervals": None,
        "table_versions_before": None,
        "table_versions_after": None,
    }
    return Record.of(fields)


@pytest.mark.parametrize(
    ("verb", "status", "said"),
    [
        (Verb.PROMOTE, Action.DISCARDED, "is discarded: nothing to promote"),
        (Verb.PROMOTE, Action.AUDIT_FAILED, "is audit_failed: nothing to promote"),
        (Verb.DISCARD, Action.PROMOTED, "nothing to discard; to undo it, `tardy rollback r1"),
        (Verb.DISCARD, Action.ROLLED_BACK, "is rolled_back: nothing to discard"),
        (Verb.ROLLBACK, Action.STAGED, "is staged: nothing to roll back"),
        (Verb.ROLLBACK, Action.DISCARDED, "is discarded: nothing to roll back"),
    ],
)
def test_a_status_the_table_does_not_name_refuses_before_anything_runs(
    verb: Verb, status: Action, said: str
) -> None:
    # No context and no Spark: a refusal must not reach either.
    request = lifecycle.Request(t.cast(t.Any, None), t.cast(t.Any, None), "r1", [_row(status)])
    with pytest.raises(RestatementError, match=said.replace("`", ".").replace("(", ".")):
        lifecycle.apply(verb, request)
    assert status not in TRANSITIONS[verb]


def test_an_unknown_restatement_is_refused() -> None:
    request = lifecycle.Request(t.cast(t.Any, None), t.cast(t.Any, None), "r9", [])
    for verb in Verb:
        with pytest.raises(RestatementError, match="no restatement r9"):
            lifecycle.apply(verb, request)
