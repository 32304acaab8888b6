"""Hostile landing files (tests/hostile.py) through `tardy ingest` on real Spark + Delta.

Every file ends in bronze line by line, and from there in silver or in the quarantine with
the reason its case expects, or is refused with an error naming it; a refused file never
costs another file's rows, earlier or later.

The Spark work runs on a data home of its own, opened in the worker's warm engine
(``children.in_own_home``): the rows it ingests are no other module's business
(test_concurrent_ingest.py does the same). It:

1. writes the first set of hostile cases into its landing root and ingests them
   (``strict``: ``FilesRefused`` is raised after the other files were committed);
2. writes the second set (a renamed copy, a changed file, a new good file) and ingests
   again (``strict=False``: the refusals come back in the result);
3. runs the `tardy ingest` CLI once more (nothing new: exit 1, every refused file named);
4. renders silver.sales_transactions and silver.sales_quarantine with SQLMesh over the
   hostile days and runs both queries (the models' own SQL, not written anywhere).

The parent checks it all against the cases and against the files' bytes, split into lines
here with ``io.BytesIO.readlines`` (not ingest's code).
"""

from __future__ import annotations

import contextlib
import hashlib
import io
from collections import Counter
from dataclasses import asdict
from pathlib import Path

from children import in_own_home

BRONZE_TABLE = "bronze.pos_events"  # sources.yaml: pos and partner land here

SEED = 3
FIRST_DAY, LAST_DAY, EXECUTION_TIME = "2026-01-01", "2026-01-05", "2026-01-06"


def child() -> dict:
    from hostile import Outcome, write_after_ingest, write_hostile_landing

    from tardy.cli import main
    from tardy.ingest import ingest
    from tardy.ingest.result import FilesRefused
    from tardy.ingest.tables import LEDGER_TABLE
    from tardy.project.context import open_context, spark_of
    from tardy.project.home import activate

    home = activate()
    context = open_context()
    spark = spark_of(context)
    root = home.landing.resolve()
    root.mkdir(parents=True, exist_ok=True)
    snapshot = home.root / "first-content"  # the first content of every bronze case
    snapshot.mkdir()

    def bronze() -> list[list[object]]:
        rows = spark.sql(
            f"SELECT source_file, line_number, file_sha256, record_id, "
            f"sha2(raw_record, 256) AS raw_sha, "
            f"CASE WHEN length(transaction_id) < 100 THEN transaction_id END AS tid "
            f"FROM {BRONZE_TABLE}"
        ).collect()
        return [list(r) for r in rows]

    def case_dicts(cases: list) -> list[dict[str, object]]:
        return [{**asdict(c), "path": str(c.path)} for c in cases]

    first = write_hostile_landing(root, SEED)
    for case in (c for c in first if c.outcome is Outcome.BRONZE):
        (snapshot / case.name).write_bytes(case.path.read_bytes())
    explicit = [root, *(c.path for c in first if c.explicit)]
    out: dict[str, object] = {"root": str(root), "snapshot": str(snapshot)}
    try:
        ingest(spark, root, explicit)
        out["first"] = {"raised": None}
    except FilesRefused as error:
        out["first"] = {"raised": str(error), "result": error.result.as_dict()}
    out["bronze_after_first"] = bronze()

    second = write_after_ingest(root, SEED)
    out["second"] = {"result": ingest(spark, root, explicit, strict=False).as_dict()}
    out["cases"] = {"first": case_dicts(first), "second": case_dicts(second)}

    stdout, stderr = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(stdout), contextlib.redirect_stderr(stderr):
        code = main(["ingest", *map(str, explicit)])
    out["cli"] = {"code": code, "stdout": stdout.getvalue(), "stderr": stderr.getvalue()}

    out["bronze"] = bronze()
    out["ledger"] = [
        list(r)
        for r in spark.sql(f"SELECT source_file, file_sha256, rows FROM {LEDGER_TABLE}").collect()
    ]
    rendered = {
        model: context.render(
            model, start=FIRST_DAY, end=LAST_DAY, execution_time=EXECUTION_TIME
        ).sql(dialect="spark")
        for model in ("silver.sales_transactions", "silver.sales_quarantine")
    }
    silver = spark.sql(rendered["silver.sales_transactions"])
    out["silver"] = [r.source_record_id for r in silver.select("source_record_id").collect()]
    quarantine = spark.sql(rendered["silver.sales_quarantine"])
    out["quarantine"] = [list(r) for r in quarantine.select("record_id", "reason").collect()]
    return out


def oracle_lines(data: bytes) -> list[bytes]:
    """The contract's lines: after each b"\\n" only, without "\\r\\n"/"\\n", BOM dropped."""
    if data.startswith(b"\xef\xbb\xbf"):
        data = data[3:]
    return [line.removesuffix(b"\n").removesuffix(b"\r") for line in io.BytesIO(data)]


def text_sha(line: bytes) -> str:
    """sha256 of the raw record bronze must hold: the line, bad UTF-8 bytes as \\xNN."""
    return hashlib.sha256(line.decode("utf-8", "backslashreplace").encode()).hexdigest()


def test_hostile_landing_files_are_ingested_line_by_line_or_refused_by_name(
    engine, tmp_path: Path
) -> None:
    out = in_own_home(engine, tmp_path / "home", child)
    root, snapshot = Path(out["root"]), Path(out["snapshot"])
    cases = {c["name"]: c for c in out["cases"]["first"] + out["cases"]["second"]}
    first_names = {c["name"] for c in out["cases"]["first"]}

    def source_file(case: dict) -> str:
        return Path(case["path"]).relative_to(root).as_posix()

    def of(outcome: str, names: set[str] | None = None) -> list[dict]:
        return [
            c for n, c in cases.items() if c["outcome"] == outcome and (names is None or n in names)
        ]

    bronze_cases = of("bronze")
    assert len(bronze_cases) >= 16 and len(of("refused")) >= 8 and of("skipped")
    expected_lines = {
        source_file(c): oracle_lines((snapshot / c["name"]).read_bytes())
        if (snapshot / c["name"]).exists()
        else oracle_lines(Path(c["path"]).read_bytes())
        for c in bronze_cases
    }
    for case in bronze_cases:
        assert len(case["reasons"]) == len(expected_lines[source_file(case)]), case["name"]

    # 1. First ingest: raised after committing every acceptable file, naming each refused one.
    first = out["first"]
    assert first["raised"] is not None
    result = first["result"]
    refused_first = of("refused", first_names)
    assert {r["path"] for r in result["refused"]} == {c["path"] for c in refused_first}
    for case in refused_first:
        (entry,) = [r for r in result["refused"] if r["path"] == case["path"]]
        assert case["detail"] in entry["reason"], (case["name"], entry)
        assert case["path"] in first["raised"]
    ingested = {i["source_file"]: i["rows"] for i in result["ingested"]}
    first_bronze = of("bronze", first_names)
    assert ingested == {source_file(c): len(c["reasons"]) for c in first_bronze}
    assert result["files_skipped"] == 0
    rows_first = Counter(r[0] for r in out["bronze_after_first"])
    assert rows_first == {
        source_file(c): len(c["reasons"]) for c in first_bronze if c["reasons"]
    }, "the first ingest lost or added rows"

    # 2. Second ingest: the copy skipped (naming the original), the changed file refused, the
    #    new file ingested; every first-round refusal refused again.
    result = out["second"]["result"]
    copy = cases["renamed-copy"]
    (skip,) = [s for s in result["skipped"] if s["source_file"] == source_file(copy)]
    assert skip["duplicate_of"] == copy["detail"] and copy["detail"] in skip["reason"]
    refused_second = of("refused")
    assert {r["path"] for r in result["refused"]} == {c["path"] for c in refused_second}
    changed = cases["changed-after-ingest-rewritten"]
    (entry,) = [r for r in result["refused"] if r["path"] == changed["path"]]
    assert changed["detail"] in entry["reason"]
    assert [i["source_file"] for i in result["ingested"]] == [
        source_file(cases["good-second-delivery"])
    ]
    unchanged = {source_file(c) for c in first_bronze if c["name"] != "changed-after-ingest"}
    assert {s["source_file"] for s in result["skipped"]} == unchanged | {source_file(copy)}
    assert result["files_skipped"] == len(result["skipped"]) == len(unchanged) + 1

    # 3. The CLI: exit 1 (an input error), every refused file named, nothing else to do.
    cli = out["cli"]
    assert cli["code"] == 1, cli
    message = "".join(cli["stderr"].split())  # Rich wraps long lines, even inside a path
    for case in refused_second:
        assert "".join(case["path"].split()) in message, case["name"]
    assert "0ingested,0rows" in message

    # 4. Bronze: each bronze case line by line, exactly once, with its raw text; nothing of
    #    a refused or skipped file; earlier files' rows all survived the later rounds.
    rows: dict[str, list[list]] = {}
    for row in out["bronze"]:
        rows.setdefault(row[0], []).append(row)
    assert set(rows) == {f for f, lines in expected_lines.items() if lines}
    for case in bronze_cases:
        name, path = case["name"], source_file(case)
        content = (snapshot / name) if (snapshot / name).exists() else Path(case["path"])
        digest = hashlib.sha256(content.read_bytes()).hexdigest()
        lines = expected_lines[path]
        got = sorted(rows.get(path, []), key=lambda r: r[1])
        assert [r[1] for r in got] == list(range(1, len(lines) + 1)), name
        assert {r[2] for r in got} <= {digest}, name
        assert [r[4] for r in got] == [text_sha(line) for line in lines], name
    for row in out["bronze_after_first"]:
        assert row in out["bronze"], "a first-round row was lost"
    changed_now = hashlib.sha256(Path(changed["path"]).read_bytes()).hexdigest()
    assert changed_now not in {r[2] for r in out["bronze"]}
    big = rows[source_file(cases["big-and-non-finite-numbers"])]
    assert sorted(big, key=lambda r: r[1])[4][5] == "9007199254740993"  # no float rounding
    ledger = Counter((r[0], r[2]) for r in out["ledger"])
    assert ledger == Counter(
        (source_file(c), len(expected_lines[source_file(c)])) for c in bronze_cases
    )

    # 5. From bronze, every line in silver or in the quarantine with the expected reason.
    silver, quarantine = set(out["silver"]), dict(out["quarantine"])
    assert len(quarantine) == len(out["quarantine"]) and len(silver) == len(out["silver"])
    record_ids = {r[3] for r in out["bronze"]}
    assert silver.isdisjoint(quarantine) and silver | set(quarantine) == record_ids
    checked = Counter()
    for case in bronze_cases:
        by_line = {r[1]: r[3] for r in rows.get(source_file(case), [])}
        for number, reason in enumerate(case["reasons"], start=1):
            record_id = by_line[number]
            found = "silver" if record_id in silver else quarantine.get(record_id)
            assert found == (reason or "silver"), (case["name"], number, found)
            checked[reason or "silver"] += 1
    assert checked["silver"] >= 20 and checked["invalid_json"] >= 20 and len(checked) >= 7
