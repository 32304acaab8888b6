"""A landing file's lines as bronze rows: split into lines (``\\n`` only, CRLF and a BOM
dropped, over-long lines refused), each decoded and parsed as strict RFC 8259 JSON, its record
fields kept as their JSON text; a line that is not a JSON object is kept with ``parse_error``.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence
from datetime import UTC, datetime

from tardy.ingest.discovery import LandingFile, read_landing_file
from tardy.ingest.errors import FileRefused
from tardy.ingest.tables import BronzeTable, table_of, undeclared

# The longest line ingest accepts (one bronze row, held whole in the driver, Arrow and the
# JVM); a file with a longer line is refused, not truncated (docs/hostile-input.md).
MAX_LINE_BYTES = 64 * 1024 * 1024
UTF8_BOM = b"\xef\xbb\xbf"


def split_lines(data: bytes, max_line_bytes: int = MAX_LINE_BYTES) -> list[bytes]:
    """A file's lines: the bytes up to each ``\\n`` (and after the last one, if any).

    A ``\\r`` before the ``\\n`` (CRLF) is dropped, and so is a UTF-8 BOM opening the file;
    nothing else ends a line (``\\r`` alone, U+2028, U+0085 may sit inside a JSON string).
    An empty file has no line. Raises ``ValueError`` for a line over ``max_line_bytes``.
    """
    if data.startswith(UTF8_BOM):
        data = data[len(UTF8_BOM) :]
    if not data:
        return []
    lines = data.split(b"\n")
    if lines[-1] == b"":
        lines.pop()  # the final line end
    lines = [line[:-1] if line.endswith(b"\r") else line for line in lines]
    for number, line in enumerate(lines, start=1):
        if len(line) > max_line_bytes:
            raise ValueError(
                f"line {number} is {len(line):,} bytes, over the {max_line_bytes:,}-byte limit "
                "of one bronze row"
            )
    return lines


def decode_line(line: bytes) -> tuple[str, str | None]:
    """The line as text, and an error when it is not UTF-8 (its bad bytes then appear as
    ``\\xNN`` escapes in the text, so the raw record stays exact and readable)."""
    try:
        return line.decode("utf-8"), None
    except UnicodeDecodeError as exc:
        text = line.decode("utf-8", errors="backslashreplace")
        return text, f"not UTF-8: byte 0x{line[exc.start]:02x} at byte {exc.start + 1}"


def _text(value: object) -> str | None:
    """A JSON value as the text it was written with (numbers are parsed as strings)."""
    if value is None:
        return None
    if isinstance(value, str):
        return value
    if isinstance(value, bool):
        return "true" if value else "false"
    return json.dumps(value, separators=(",", ":"))


def parse_event_ts(text: str | None) -> datetime | None:
    """ISO-8601 to naive UTC; None when missing or unparseable (silver quarantines it)."""
    if not text:
        return None
    try:
        parsed = datetime.fromisoformat(text)
    except ValueError:
        return None
    if parsed.tzinfo is not None:
        parsed = parsed.astimezone(UTC).replace(tzinfo=None)
    return parsed


class _NotJson(ValueError):
    """Text Python's ``json`` accepts but RFC 8259 JSON does not (or leaves ambiguous)."""


def _no_constant(name: str) -> object:
    raise _NotJson(f"{name} is not a JSON value")


def _unique_keys(pairs: list[tuple[str, object]]) -> dict[str, object]:
    record = dict(pairs)
    if len(record) != len(pairs):
        seen: set[str] = set()
        for key, _ in pairs:
            if key in seen:
                raise _NotJson(f"duplicate key {key!r}")
            seen.add(key)
    return record


def parse_line(line: str, fields: Sequence[str] = ()) -> tuple[dict[str, str | None], str | None]:
    """The record's ``fields`` as text, and a parse error (None when the line is a JSON object).

    Strict RFC 8259: ``NaN``/``Infinity``, duplicate keys (which value counts differs
    between parsers) and unpaired surrogates (no UTF-8 text holds them) are errors, and so
    is nesting too deep for the parser. Numbers keep their text (``1e400``, 2**64).
    """
    try:
        record = json.loads(
            line,
            parse_float=str,
            parse_int=str,
            parse_constant=_no_constant,
            object_pairs_hook=_unique_keys,
        )
    except json.JSONDecodeError as exc:
        return {}, f"invalid JSON: {exc.msg} at column {exc.colno}"
    except _NotJson as exc:
        return {}, f"invalid JSON: {exc}"
    except RecursionError:
        return {}, "invalid JSON: nested too deeply"
    if not isinstance(record, dict):
        return {}, f"not a JSON object: {type(record).__name__}"
    texts = {name: _text(record.get(name)) for name in fields}
    for name, value in texts.items():
        if value is not None and not _is_utf8(value):
            return {}, f"invalid JSON: {name} holds an unpaired surrogate escape"
    return texts, None


def _is_utf8(text: str) -> bool:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def parse_landing_line(
    line: bytes, fields: Sequence[str] = ()
) -> tuple[str, dict[str, str | None], str | None]:
    """One line of a landing file: its text, its ``fields`` and its parse error
    (``bronze_rows``)."""
    text, error = decode_line(line)
    if error is not None:
        return text, {}, error
    if not text.strip():
        return text, {}, "blank line"
    texts, error = parse_line(text, fields)
    return text, texts, error


def bronze_rows(
    landing_file: LandingFile, ingestion_id: str, ingested_at: datetime
) -> list[tuple[object, ...]]:
    """The file's rows of its bronze table (``table_of``), in the table's column order;
    ``FileRefused`` when it changed since it was hashed or has a line too long (then nothing
    of it is written)."""
    data = read_landing_file(landing_file.path)
    digest = hashlib.sha256(data).hexdigest()
    if digest != landing_file.sha256:
        raise FileRefused(
            landing_file.path,
            f"changed while being ingested (sha256 {landing_file.sha256[:12]}... when found, "
            f"{digest[:12]}... when read); nothing of it was written, the next ingest takes it",
        )
    try:
        lines = split_lines(data)
    except ValueError as exc:
        raise FileRefused(landing_file.path, str(exc)) from exc
    arrival = landing_file.arrival_ts or ingested_at
    arrival = arrival.astimezone(UTC).replace(tzinfo=None) if arrival.tzinfo else arrival
    ingested = ingested_at.astimezone(UTC).replace(tzinfo=None)
    table = table_of(landing_file.source_system)
    if table is None:  # ingest refuses such files first
        raise FileRefused(landing_file.path, undeclared(landing_file.source_system))
    return [
        bronze_row(table, landing_file, number, line, ingestion_id, ingested, arrival)
        for number, line in enumerate(lines, start=1)
    ]


def bronze_row(
    table: BronzeTable,
    landing_file: LandingFile,
    number: int,
    line: bytes,
    ingestion_id: str,
    ingested: datetime,
    arrival: datetime,
) -> tuple[object, ...]:
    """Line ``number`` of a landing file as its row of ``table``, in the table's column order
    (naive UTC times); also how a steward's fix is checked before it is written
    (``tardy.quarantine.fixes``)."""
    text, fields, error = parse_landing_line(line, table.fields)
    return (
        f"{landing_file.sha256}:{number}",
        landing_file.source_system,
        landing_file.source_file,
        landing_file.sha256,
        number,
        ingestion_id,
        ingested,
        arrival,
        arrival.date(),
        parse_event_ts(fields.get(table.ts_field)),
        text,
        error,
        *(fields.get(name) for name in table.fields),
    )
