"""Hostile landing files: a seeded generator of the inputs ``tardy ingest`` must survive.

``write_hostile_landing(root, seed)`` writes, into the landing root ``root`` (the sales
landing contract ``<root>/pos/arrival_ts=<YYYYMMDDTHHMMSSZ>/<name>.jsonl``), one file (or
link, FIFO, folder) per hostile case, and returns the cases with the outcome each must have
(``docs/hostile-input.md`` gives the rules and why):

- ``Outcome.BRONZE``: every line becomes one bronze row; ``reasons`` holds, per line, the
  ``silver.sales_quarantine`` reason it must get, or None when it is a valid silver record;
- ``Outcome.SKIPPED``: its content was already ingested (``detail``: as which file);
- ``Outcome.REFUSED``: refused, with an error naming the file (``detail``: a phrase of it).

Two cases need an ingest first (a renamed copy of an ingested file, a file whose content
changes after it was ingested): call ``write_after_ingest(root, seed)`` after ingesting the
first set. Cases with ``explicit`` set are not found by walking the landing root (a path
with ``..`` leading out of it): pass them to ``ingest`` as paths, with the root itself.
Everything is a function of ``seed`` (``random.Random(seed)``, never the clock).
"""

from __future__ import annotations

import json
import os
import random
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from enum import StrEnum
from pathlib import Path

from tardy.ingest.landing import arrival_dir_name

__all__ = ["HostileCase", "Outcome", "write_after_ingest", "write_hostile_landing"]

SOURCE = "pos"
TEN_MB = 10 * 1024 * 1024
INVALID_JSON = "invalid_json"


class Outcome(StrEnum):
    BRONZE = "bronze"
    SKIPPED = "skipped"
    REFUSED = "refused"


@dataclass(frozen=True)
class HostileCase:
    name: str
    path: Path  # as ingest finds it (or is given it): may be a link, or hold ``..``
    outcome: Outcome
    rule: str  # the rule it exercises, one sentence
    reasons: tuple[str | None, ...] = ()  # BRONZE: per line, quarantine reason or None
    detail: str = ""  # SKIPPED: the earlier file's source_file; REFUSED: a phrase of the error
    explicit: bool = False  # pass it to ingest as a path (walking the root never finds it)


@dataclass(frozen=True)
class _Layout:
    """Where a seed's cases live: two arrival folders and a folder outside the root."""

    root: Path
    seed: int
    first_arrival: datetime
    rng: random.Random

    @classmethod
    def of(cls, root: Path, seed: int, salt: str) -> _Layout:
        rng = random.Random(f"hostile-{seed}-{salt}")
        first = datetime(2026, 1, 2, 6, tzinfo=UTC) + timedelta(hours=6 * (seed % 4))
        return cls(root, seed, first, rng)

    @property
    def second_arrival(self) -> datetime:
        return self.first_arrival + timedelta(days=1)

    def batch(self, arrival: datetime) -> Path:
        return self.root / SOURCE / arrival_dir_name(arrival)

    @property
    def outside(self) -> Path:
        return self.root.parent / f"{self.root.name}-outside"

    def record(self, name: str, number: int, **overrides: object) -> dict[str, object]:
        """A valid sale (JSON values as Python), arriving in the first arrival folder."""
        event = self.first_arrival - timedelta(minutes=self.rng.randrange(30, 20 * 60))
        quantity = self.rng.randrange(1, 6)
        record: dict[str, object] = {
            "transaction_id": f"H{self.seed}-{name}-{number:03d}",
            "record_type": "sale",
            "store_id": self.rng.randrange(1, 6),
            "product_id": self.rng.randrange(1, 41),
            "quantity": quantity,
            "unit_price": self.rng.randrange(250, 2401, 50) / 100,
            "discount": 0.0,
            "event_ts": event.strftime("%Y-%m-%dT%H:%M:%SZ"),
        }
        record.update(overrides)
        return record

    def line(self, name: str, number: int, **overrides: object) -> str:
        return json.dumps(self.record(name, number, **overrides), separators=(",", ":"))


def _write(path: Path, data: bytes) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data)
    return path


def _jsonl(lines: list[str], ending: str = "\n") -> bytes:
    return "".join(line + ending for line in lines).encode("utf-8")


def write_hostile_landing(root: Path, seed: int) -> list[HostileCase]:
    """The first set of hostile cases, written under the landing root ``root``."""
    at = _Layout.of(root, seed, "first")
    return list(_first_cases(at))


def _first_cases(at: _Layout) -> Iterator[HostileCase]:
    batch = at.batch(at.first_arrival)

    def good(name: str, count: int) -> HostileCase:
        path = _write(batch / f"{name}.jsonl", _jsonl([at.line(name, n) for n in range(count)]))
        return HostileCase(name, path, Outcome.BRONZE, "an ordinary file", (None,) * count)

    yield good("00-good-first", 3)

    garbage = at.rng.randbytes(6000).translate(bytes.maketrans(b"{", b"z"))  # never an object
    garbage = b"\xff\xfe\x00" + garbage  # starts as no UTF-8 text can
    lines = garbage.split(b"\n")
    count = len(lines) - (lines[-1] == b"")
    yield HostileCase(
        "binary-garbage",
        _write(batch / "binary-garbage.jsonl", garbage),
        Outcome.BRONZE,
        "content is never judged by ingest: each \\n-separated piece is a bronze row, "
        "quarantined as invalid_json",
        (INVALID_JSON,) * count,
    )

    name = "non-utf8"
    latin1 = at.line(name, 0, store_id=1).replace(f"{name}-000", f"{name}-caf\u00e9")
    yield HostileCase(
        name,
        _write(
            batch / f"{name}.jsonl",
            latin1.encode("latin-1")
            + b"\n"
            + _jsonl([at.line(name, 1)])
            + at.line(name, 2)
            .replace(f"{name}-002", "\udcc0\udcaf")
            .encode("utf-8", "surrogateescape")
            + b"\n"
            + at.line(name, 3)
            .replace(f"{name}-003", "\udced\udca0\udc80")
            .encode("utf-8", "surrogateescape")
            + b"\n"
            + at.line(name, 4).encode("utf-16-le")
            + b"\n",
        ),
        Outcome.BRONZE,
        "a line that is not UTF-8 (Latin-1, an overlong form, an encoded surrogate, UTF-16) "
        "is kept with its bad bytes escaped and quarantined as invalid_json; the other "
        "lines of the file are unaffected",
        (INVALID_JSON, None, INVALID_JSON, INVALID_JSON, INVALID_JSON),
    )

    yield HostileCase(
        "empty",
        _write(batch / "empty.jsonl", b""),
        Outcome.BRONZE,
        "an empty file has no line: ingested with 0 rows (ledger entry, no bronze row)",
    )

    yield HostileCase(
        "blank-lines",
        _write(batch / "blank-lines.jsonl", b"\n \n\t\r\n"),
        Outcome.BRONZE,
        "a blank line is still a line: a bronze row quarantined as invalid_json",
        (INVALID_JSON,) * 3,
    )

    name = "utf8-bom"
    yield HostileCase(
        name,
        _write(
            batch / f"{name}.jsonl",
            b"\xef\xbb\xbf"
            + _jsonl([at.line(name, 0), at.line(name, 1), "\ufeff" + at.line(name, 2)]),
        ),
        Outcome.BRONZE,
        "a UTF-8 BOM opening the file is an encoding signature, dropped; a BOM inside the "
        "file is content, and its line is not JSON",
        (None, None, INVALID_JSON),
    )

    name = "crlf"
    two_in_one = at.line(name, 2) + "\r" + at.line(name, 3)
    yield HostileCase(
        name,
        _write(
            batch / f"{name}.jsonl",
            _jsonl([at.line(name, 0), at.line(name, 1), two_in_one], "\r\n")
            + at.line(name, 4).encode(),  # the last line has no line end
        ),
        Outcome.BRONZE,
        "CRLF ends a line like LF (the \\r is dropped); a \\r alone does not end a line; "
        "a last line without a line end is a line",
        (None, None, INVALID_JSON, None),
    )

    name = "unicode-line-breaks"
    notes = ["a\u2028b\u2029c", "a\u0085b", "a\x0cb"]  # the last one raw: not JSON
    yield HostileCase(
        name,
        _write(
            batch / f"{name}.jsonl",
            _jsonl(
                [
                    at.line(name, n, note="NOTE").replace("NOTE", note)
                    for n, note in enumerate(notes)
                ]
            ),
        ),
        Outcome.BRONZE,
        "only \\n ends a line: U+2028, U+2029, U+0085 inside a JSON string are content; "
        "a raw control character in a string is not JSON",
        (None, None, INVALID_JSON),
    )

    name = "ten-megabyte-line"
    note = at.rng.randbytes(TEN_MB // 2).hex()
    yield HostileCase(
        name,
        _write(batch / f"{name}.jsonl", _jsonl([at.line(name, 0, note=note), at.line(name, 1)])),
        Outcome.BRONZE,
        "a 10 MB line is one bronze row, whole (the limit is MAX_LINE_BYTES, 64 MiB)",
        (None, None),
    )

    name = "nested-json"
    yield HostileCase(
        name,
        _write(
            batch / f"{name}.jsonl",
            _jsonl(
                [
                    json.dumps({"record": at.record(name, 0)}),
                    at.line(name, 1, store_id={"id": 3}),
                    at.line(name, 2, quantity=[2]),
                    "[" * 100_000 + "]" * 100_000,
                    '{"a":' * 50_000 + "1" + "}" * 50_000,
                    json.dumps([at.record(name, 5), at.record(name, 6)]),
                    at.line(name, 7, transaction_id={"pos": f"H{at.seed}-{name}-007"}),
                ]
            ),
        ),
        Outcome.BRONZE,
        "nested values are kept as JSON text: silver rejects them where it needs a number, "
        "an envelope has no transaction_id, nesting too deep for the parser is invalid_json; "
        "a nested transaction_id is (today) accepted as its JSON text",
        (
            "missing_transaction_id",
            "invalid_store_id",
            "invalid_quantity",
            INVALID_JSON,
            INVALID_JSON,
            INVALID_JSON,
            None,
        ),
    )

    name = "numbers-as-strings"
    yield HostileCase(
        name,
        _write(
            batch / f"{name}.jsonl",
            _jsonl(
                [
                    at.line(
                        name,
                        0,
                        store_id="3",
                        product_id="7",
                        quantity="2",
                        unit_price="12.50",
                        discount="0.00",
                    ),
                    at.line(name, 1, store_id=" 4 ", quantity=" 1"),
                    at.line(name, 2, store_id="3.0"),
                    at.line(name, 3, quantity="1e2"),
                    at.line(name, 4, unit_price="twelve"),
                ]
            ),
        ),
        Outcome.BRONZE,
        "bronze keeps a number's text, so a number written as a string is the same value; "
        "silver's own rules decide (whole numbers, decimals)",
        (None, None, "invalid_store_id", "invalid_quantity", "invalid_unit_price"),
    )

    name = "big-and-non-finite-numbers"
    raw_numbers = [
        ('"store_id":', "9223372036854775807", "invalid_store_id"),
        ('"product_id":', "2147483648", "invalid_product_id"),
        ('"quantity":', "18446744073709551616", "invalid_quantity"),
        ('"quantity":', "-9223372036854775808", "invalid_quantity"),
        ('"transaction_id":', "9007199254740993", None),
        ('"unit_price":', "12345678901.99", "invalid_unit_price"),
        ('"quantity":', "1e400", "invalid_quantity"),
        ('"unit_price":', "1e400", "invalid_unit_price"),
        ('"unit_price":', "NaN", INVALID_JSON),
        ('"discount":', "Infinity", INVALID_JSON),
        ('"discount":', "-Infinity", INVALID_JSON),
    ]
    lines = [
        _replace_value(at.line(name, n), key, text) for n, (key, text, _) in enumerate(raw_numbers)
    ]
    yield HostileCase(
        name,
        _write(batch / f"{name}.jsonl", _jsonl(lines)),
        Outcome.BRONZE,
        "numbers keep their exact text (no float rounding of 2**53 + 1, no overflow); silver "
        "rejects what does not fit INT or DECIMAL(12, 2); NaN and Infinity are not JSON",
        tuple(reason for _, _, reason in raw_numbers),
    )

    name = "duplicate-keys"
    yield HostileCase(
        name,
        _write(
            batch / f"{name}.jsonl",
            _jsonl(
                [
                    at.line(name, 0)[:-1] + f',"transaction_id":"H{at.seed}-{name}-other"}}',
                    at.line(name, 1)[:-1] + ',"quantity":5}',
                    at.line(name, 2)[:-1] + ',"extra":{"a":1,"a":2}}',
                    at.line(name, 3)[:-1] + ',"Quantity":9}',
                ]
            ),
        ),
        Outcome.BRONZE,
        "a duplicate key (at any depth) is ambiguous, parsers disagree on which value "
        "counts: invalid_json; keys differing in case are different keys",
        (INVALID_JSON, INVALID_JSON, INVALID_JSON, None),
    )

    name = "unicode-escapes"
    yield HostileCase(
        name,
        _write(
            batch / f"{name}.jsonl",
            _jsonl(
                [
                    _replace_value(
                        at.line(name, 0), '"transaction_id":', f'"H{at.seed}-\\ud83c\\udf63"'
                    ),
                    _replace_value(
                        at.line(name, 1), '"transaction_id":', f'"H{at.seed}-\\ud800-lone"'
                    ),
                    _replace_value(
                        at.line(name, 2), '"transaction_id":', f'"H{at.seed}-nul-\\u0000"'
                    ),
                ]
            ),
        ),
        Outcome.BRONZE,
        "an escaped surrogate pair is one character; an unpaired surrogate escape cannot be "
        "UTF-8 text: invalid_json; an escaped NUL is an ordinary character",
        (None, INVALID_JSON, None),
    )

    name = "changed-after-ingest"
    yield HostileCase(
        name,
        _write(batch / f"{name}.jsonl", _jsonl([at.line(name, n) for n in range(2)])),
        Outcome.BRONZE,
        "ingested as usual; write_after_ingest then changes it",
        (None, None),
    )

    yield good("zz-good-last", 3)

    # Not regular files inside the landing root: refused, each named.
    link = batch / "symlink-inside.jsonl"
    link.symlink_to("00-good-first.jsonl")
    yield HostileCase(
        "symlink-inside",
        link,
        Outcome.REFUSED,
        "a symbolic link is refused even when its target is in the landing root",
        detail="symbolic link",
    )

    escape = _write(
        at.outside / SOURCE / batch.name / "escape.jsonl",
        _jsonl([at.line("escape", n) for n in range(2)]),
    )
    link = batch / "symlink-outside.jsonl"
    link.symlink_to(escape)
    yield HostileCase(
        "symlink-outside",
        link,
        Outcome.REFUSED,
        "a symbolic link to a file outside the landing root is refused",
        detail="symbolic link",
    )

    folder = at.batch(at.first_arrival + timedelta(hours=1))
    folder.symlink_to(escape.parent, target_is_directory=True)
    yield HostileCase(
        "symlinked-folder",
        folder,
        Outcome.REFUSED,
        "a symbolic link to a folder is not followed and is refused (its files would "
        "otherwise be passed over in silence)",
        detail="symbolic link",
    )

    stray = _write(
        at.root / "unknown_feed" / batch.name / "stray.jsonl",
        _jsonl([at.line("stray", n) for n in range(2)]),
    )
    yield HostileCase(
        "undeclared-folder",
        stray,
        Outcome.REFUSED,
        "a file of a landing folder no source declares (sources.yaml) is refused and left "
        "untouched, never guessed to be sales",
        detail="declared by no source",
    )

    dotdot = at.root / SOURCE / ".." / ".." / at.outside.name / SOURCE / batch.name / escape.name
    yield HostileCase(
        "dotdot-outside",
        dotdot,
        Outcome.REFUSED,
        "a path whose .. components lead outside the landing root is refused",
        detail="outside the landing root",
        explicit=True,
    )

    fifo = batch / "named-pipe.jsonl"
    os.mkfifo(fifo)
    yield HostileCase(
        "named-pipe",
        fifo,
        Outcome.REFUSED,
        "a FIFO (or socket, device) is not a regular file; reading it would block forever",
        detail="not a regular file",
    )

    name = "bad-arrival-folder"
    yield HostileCase(
        name,
        _write(
            at.root / SOURCE / "arrival_ts=yesterday" / f"{name}.jsonl", _jsonl([at.line(name, 0)])
        ),
        Outcome.REFUSED,
        "an arrival folder that does not parse gives no arrival time: refused",
        detail="malformed arrival folder",
    )

    name = "no-source-system"
    yield HostileCase(
        name,
        _write(at.root / f"{name}.jsonl", _jsonl([at.line(name, 0)])),
        Outcome.REFUSED,
        "a file directly in the landing root has no source system: refused",
        detail="source system",
    )


def _replace_value(line: str, key: str, text: str) -> str:
    """``line`` with the JSON value after ``key`` replaced by the raw JSON ``text``."""
    start = line.index(key) + len(key)
    depth, end, in_string = 0, start, False
    while True:
        char = line[end]
        if in_string:
            in_string = char != '"' or line[end - 1] == "\\"
        elif char == '"':
            in_string = True
        elif char in "[{":
            depth += 1
        elif char in "]}" and depth:
            depth -= 1
        elif char in ",}" and not depth:
            break
        end += 1
    return line[:start] + text + line[end:]


def write_after_ingest(root: Path, seed: int) -> list[HostileCase]:
    """The cases that need the first set ingested: a renamed copy of an ingested file, an
    ingested file whose content then changes, and an ordinary new file."""
    at = _Layout.of(root, seed, "after")
    first = at.batch(at.first_arrival)
    second = at.batch(at.second_arrival)
    original = first / "00-good-first.jsonl"
    copy = _write(second / "00-good-first-renamed.jsonl", original.read_bytes())
    changed = first / "changed-after-ingest.jsonl"
    lines = changed.read_bytes().decode().splitlines()
    lines[0] = _replace_value(lines[0], '"quantity":', "5")
    changed.write_bytes(_jsonl([*lines, at.line("changed-after-ingest", 9)]))
    good = _write(
        second / "good-second-delivery.jsonl",
        _jsonl([at.line("good-second-delivery", n) for n in range(2)]),
    )
    return [
        HostileCase(
            "renamed-copy",
            copy,
            Outcome.SKIPPED,
            "the same bytes are the same records (record_id = sha256:line): skipped, naming "
            "the file first ingested with them",
            detail=original.relative_to(root).as_posix(),
        ),
        HostileCase(
            "changed-after-ingest-rewritten",
            changed,
            Outcome.REFUSED,
            "a landing file is immutable once ingested: new content under an ingested name "
            "is refused (bronze keeps the first content)",
            detail="changed since it was ingested",
        ),
        HostileCase("good-second-delivery", good, Outcome.BRONZE, "an ordinary file", (None, None)),
    ]
