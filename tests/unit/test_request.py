"""Restatement request files (tardy.requests.request): what a committed request may say."""

from __future__ import annotations

from datetime import date
from pathlib import Path

import pytest

from tardy.requests.request import RequestError, load


def write(tmp_path: Path, name: str, text: str) -> Path:
    path = tmp_path / name
    path.write_text(text)
    return path


def test_a_detected_request_has_a_reason_only(tmp_path: Path) -> None:
    request = load(write(tmp_path, "Partner-Resend.yaml", "reason: partner resent week 2\n"))
    assert (request.name, request.reason, request.selection) == (
        "partner_resend",
        "partner resent week 2",
        None,
    )
    assert request.restatement_id("20260115T093012Z-a1b2c3") == "20260115T093012Z-partner_resend"


def test_a_named_request_takes_one_or_several_selectors_and_a_range(tmp_path: Path) -> None:
    one = load(
        write(
            tmp_path, "w2.yaml", "reason: r\nmodels: gold.*\nstart: 2026-01-05\nend: '2026-01-11'\n"
        )
    )
    assert one.selection is not None
    assert one.selection.models == ("gold.*",)
    assert (one.selection.start, one.selection.end) == (date(2026, 1, 5), date(2026, 1, 11))
    two = load(
        write(
            tmp_path,
            "w3.yaml",
            "reason: r\nmodels: [a.b, tag:x]\nstart: 2026-01-05\nend: 2026-01-05\n",
        )
    )
    assert two.selection is not None and two.selection.models == ("a.b", "tag:x")


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("models: [a.b]\n", "`reason` is required"),
        ("reason: r\nmodels: [a.b]\nstart: 2026-01-05\n", "go together"),
        ("reason: r\nmodel: a.b\n", "unknown keys"),
        ("reason: r\nmodels: a.b\nstart: 5 Jan\nend: 2026-01-06\n", "not a date"),
        ("reason: r\nmodels: {a: b}\nstart: 2026-01-05\nend: 2026-01-06\n", "model selector"),
        ("- just a list\n", "expected a mapping"),
        ("reason: [unclosed\n", "w.yaml"),
    ],
)
def test_a_bad_request_is_refused_with_its_reason(tmp_path: Path, text: str, message: str) -> None:
    with pytest.raises(RequestError, match=message):
        load(write(tmp_path, "w.yaml", text))


def test_a_request_name_must_be_plain(tmp_path: Path) -> None:
    with pytest.raises(RequestError, match="name the file"):
        load(write(tmp_path, "week 2!.yaml", "reason: r\n"))
