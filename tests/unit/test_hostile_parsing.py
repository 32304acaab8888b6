"""Ingest's pure rules on the hostile landing cases (tests/hostile.py): which files are refused
at discovery, and which lines get a parse error (silver's invalid_json). The Delta writes and
silver's other reasons are covered by tests/integration/test_hostile_landing.py."""

from __future__ import annotations

import hashlib
import io
import json
from pathlib import Path

import pytest
from hostile import INVALID_JSON, SOURCE, Outcome, write_after_ingest, write_hostile_landing

from tardy.ingest.discovery import describe, discover
from tardy.ingest.errors import FileRefused
from tardy.ingest.parsing import parse_landing_line, parse_line, split_lines
from tardy.ingest.result import FilesRefused, IngestResult
from tardy.ingest.tables import table_of

SEED = 3


def oracle_lines(data: bytes) -> list[bytes]:
    """Lines as the landing contract defines them, not with ingest's code: readlines() on
    bytes splits after each b"\\n" only."""
    if data.startswith(b"\xef\xbb\xbf"):
        data = data[3:]
    lines = io.BytesIO(data).readlines()
    return [line.removesuffix(b"\n").removesuffix(b"\r") for line in lines]


@pytest.fixture
def landing(tmp_path: Path) -> tuple[Path, list]:
    root = (tmp_path / "landing").resolve()
    root.mkdir()
    return root, write_hostile_landing(root, SEED)


def test_the_generator_is_a_function_of_its_seed(tmp_path: Path) -> None:
    def digest(root: Path, seed: int = SEED) -> dict[str, str]:
        cases = write_hostile_landing(root, seed)
        return {
            c.name: hashlib.sha256(c.path.read_bytes()).hexdigest()
            for c in cases
            if c.outcome is Outcome.BRONZE
        }

    first = digest(tmp_path / "a" / "landing")
    assert digest(tmp_path / "b" / "landing") == first and len(first) >= 14
    assert digest(tmp_path / "c" / "landing", SEED + 1) != first  # another seed


def test_every_bronze_case_has_one_expected_reason_per_line(landing) -> None:
    _, cases = landing
    for case in (c for c in cases if c.outcome is Outcome.BRONZE):
        assert len(case.reasons) == len(oracle_lines(case.path.read_bytes())), case.name
    sizes = {
        c.name: max(map(len, oracle_lines(c.path.read_bytes())), default=0)
        for c in cases
        if c.outcome is Outcome.BRONZE
    }
    assert sizes["ten-megabyte-line"] >= 10 * 1024 * 1024
    assert sizes["empty"] == 0 and cases[0].path.stat().st_size > 0


def test_parse_errors_are_exactly_the_invalid_json_lines(landing) -> None:
    _, cases = landing
    checked = 0
    for case in (c for c in cases if c.outcome is Outcome.BRONZE):
        lines = split_lines(case.path.read_bytes())
        assert lines == oracle_lines(case.path.read_bytes()), case.name
        for number, (line, reason) in enumerate(zip(lines, case.reasons, strict=True), 1):
            _, _, error = parse_landing_line(line, table_of(SOURCE).fields)
            assert (error is not None) == (reason == INVALID_JSON), (case.name, number, error)
            checked += 1
    assert checked > 40


def test_every_file_the_walk_finds_is_described_or_refused_naming_it(landing) -> None:
    root, cases = landing
    refused = {c.path: c for c in cases if c.outcome is Outcome.REFUSED}
    found = discover(root, [root, *(c.path for c in cases if c.explicit)])
    assert set(refused) <= set(found)  # links, FIFO and the `..` path are all candidates
    for path in found:
        if path in refused and "declared by no source" in refused[path].detail:
            assert table_of(describe(path, root).source_system) is None  # ingest refuses it
        elif path in refused:
            with pytest.raises(FileRefused, match=refused[path].detail) as error:
                describe(path, root)
            assert str(path) in str(error.value)
        else:
            assert describe(path, root).source_file == path.relative_to(root).as_posix()
    bronze = {c.path for c in cases if c.outcome is Outcome.BRONZE}
    assert bronze | set(refused) == set(found)


def test_the_second_delivery_cases(landing) -> None:
    root, cases = landing
    before = {c.path: describe(c.path, root).sha256 for c in cases if c.outcome is Outcome.BRONZE}
    later = {c.name: c for c in write_after_ingest(root, SEED)}
    copy = later["renamed-copy"]
    assert describe(copy.path, root).sha256 == before[root / copy.detail]
    changed = later["changed-after-ingest-rewritten"].path
    assert describe(changed, root).sha256 != before[changed]


def test_numbers_keep_their_text() -> None:
    fields, error = parse_line(
        '{"transaction_id":9007199254740993,"quantity":1e400,"store_id":18446744073709551616}',
        table_of(SOURCE).fields,
    )
    assert error is None
    assert fields["transaction_id"] == "9007199254740993" and fields["quantity"] == "1e400"
    assert fields["store_id"] == "18446744073709551616"


def test_a_line_over_the_limit_refuses_the_file_not_truncates_it() -> None:
    assert split_lines(b"abc\ndefg\n", max_line_bytes=4) == [b"abc", b"defg"]
    with pytest.raises(ValueError, match="line 2 is 5 bytes"):
        split_lines(b"abc\ndefgh\n", max_line_bytes=4)


def test_a_not_utf8_line_keeps_its_bytes_visible() -> None:
    text, fields, error = parse_landing_line(b'{"transaction_id":"caf\xe9"}')
    assert text == '{"transaction_id":"caf\\xe9"}' and fields == {}
    assert error == "not UTF-8: byte 0xe9 at byte 23"


def test_the_refusal_error_names_every_refused_file() -> None:
    result = IngestResult("x", files_ingested=2, rows=7, files_refused=2)
    result.refused = [
        {"path": "/l/pos/a.jsonl", "reason": "a symbolic link (to b)"},
        {"path": "/l/pos/p.jsonl", "reason": "not a regular file (a FIFO)"},
    ]
    error = FilesRefused(result)
    assert error.exit_code == 1 and error.result is result
    message = str(error)
    assert "/l/pos/a.jsonl: a symbolic link" in message and "/l/pos/p.jsonl: not a" in message
    assert "2 ingested, 7 rows" in message
    assert json.loads(json.dumps(result.as_dict()))["refused"] == result.refused


def test_a_file_changed_between_discovery_and_commit_is_refused_whole(tmp_path: Path) -> None:
    from datetime import UTC, datetime

    from tardy.ingest.parsing import bronze_rows

    root = tmp_path / "landing"
    path = root / "pos" / "arrival_ts=20260102T060000Z" / "a.jsonl"
    path.parent.mkdir(parents=True)
    path.write_bytes(b'{"transaction_id":"T1"}\n')
    found = describe(path, root)
    assert [r[10] for r in bronze_rows(found, "i", datetime.now(UTC))] == [
        '{"transaction_id":"T1"}'
    ]
    path.write_bytes(b'{"transaction_id":"T1"}\n{"transaction_id":"T2"}\n')
    with pytest.raises(FileRefused, match="changed while being ingested"):
        bronze_rows(found, "i", datetime.now(UTC))
    path.unlink()
    path.symlink_to(tmp_path)  # swapped for a link after discovery: never followed
    with pytest.raises(FileRefused, match="cannot be opened"):
        bronze_rows(found, "i", datetime.now(UTC))
