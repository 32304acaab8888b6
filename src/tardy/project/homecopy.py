"""Copy a data home to another path, as a valid data home there.

A data home is a directory (``tardy.project.home``): Delta tables under ``warehouse/``, the Derby
metastore ``metastore_db/``, SQLMesh's DuckDB state, landing files and logs. Everything in it
is addressed relative to ``$TARDY_HOME`` (``project.yaml`` renders its paths from it; Delta's
logs name their files relative to the table; SQLMesh's state names tables, not paths) except
one thing: the Hive metastore stores each database's and table's location as an absolute
URI (``file:/<home>/warehouse/...``). A plain copy's tables would read and write the
original's files.

:func:`copy_home` copies the directory (``cp -a``, with reflinks where the file system has
them) and rewrites the copy's metastore locations from the old root to the new one in
Derby's own SQL, run by Derby's ``ij`` tool in a bare JVM (under a second: no Spark, no
Hive). It then checks that no location of the copy still names the source.

Refused: a home whose metastore is open (a process holds Derby's lock: copying it mid-write
could tear it), and a home holding shallow clones (a restatement staged before overlay
staging): a clone's Delta log names its source's files by absolute path (a staged view
names tables, not paths). Used by the tests' home templates (docs/testing.md).
"""

from __future__ import annotations

import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from tardy.errors import InputError
from tardy.project.home import DataHome

METASTORE = "metastore_db"
# Each column of the Hive metastore schema (2.3, Derby) that holds a location URI, with the
# filter on its row: database and table locations, and the ``path`` option Spark keeps among
# a data-source table's storage properties.
LOCATION_COLUMNS = (
    ("DBS", "DB_LOCATION_URI", "1 = 1"),
    ("SDS", "LOCATION", "1 = 1"),
    ("SERDE_PARAMS", "PARAM_VALUE", "PARAM_KEY = 'path'"),
)


class HomeCopyError(InputError):
    """The data home cannot be copied (open, holds clones, or the copy is not valid)."""


def _derby_classpath() -> str:
    from tardy.runtime.jars import pyspark_jars_dir

    jars = sorted(pyspark_jars_dir().glob("derby*.jar"))
    if not any(j.name.startswith("derbytools") for j in jars):
        raise HomeCopyError(f"Derby's ij tool (derbytools) is not in {pyspark_jars_dir()}")
    return ":".join(str(j) for j in jars)


def _quote(text: str) -> str:
    return "'" + text.replace("'", "''") + "'"


def _text(column: str) -> str:
    """A column as VARCHAR: SERDE_PARAMS.PARAM_VALUE is a CLOB, which Derby cannot compare."""
    return f"CAST({column} AS VARCHAR(4000))"


def _ij(database: Path, statements: list[str]) -> str:
    """Run SQL statements on a Derby database with ``ij``; its output. The database is shut
    down when the JVM exits (its log is flushed: the copy is consistent)."""
    script = [f"CONNECT {_quote(f'jdbc:derby:{database}')};", *statements, "DISCONNECT;"]
    with tempfile.NamedTemporaryFile("w", suffix=".sql") as sql:
        sql.write("\n".join(script) + "\n")
        sql.flush()
        done = subprocess.run(
            [
                "java",
                "-Dderby.stream.error.file=/dev/null",
                "-cp",
                _derby_classpath(),
                "org.apache.derby.tools.ij",
                sql.name,
            ],  # fmt: skip
            capture_output=True,
            text=True,
            timeout=120,
        )
    if done.returncode != 0 or "ERROR " in done.stdout:
        raise HomeCopyError(f"ij on {database} failed:\n{done.stdout[-2000:]}{done.stderr[-2000:]}")
    return done.stdout


def relocate_metastore(home: Path, old_root: Path) -> int:
    """Rewrite the metastore of ``home`` so that locations under ``old_root`` are under
    ``home``; the number of locations rewritten. Afterwards none names ``old_root``."""
    old, new = f"file:{old_root}", f"file:{home}"
    statements = []
    for table, column, where in LOCATION_COLUMNS:
        value = _text(column)
        under = (
            f"({value} = {_quote(old)} OR SUBSTR({value}, 1, {len(old) + 1}) = {_quote(old + '/')})"
        )
        statements.append(
            f"UPDATE {table} SET {column} = {_quote(new)} || SUBSTR({value}, {len(old) + 1}) "
            f"WHERE {where} AND {under};"
        )
    statements += [
        f"SELECT 'LEFT', COUNT(*) FROM {table} WHERE {where} AND "
        f"LOCATE({_quote(str(old_root) + '/')}, {_text(column)}) > 0;"
        for table, column, where in LOCATION_COLUMNS
    ]
    out = _ij(home / METASTORE, statements)
    rewritten = sum(
        int(line.split()[0])
        for line in out.splitlines()
        if "rows inserted/updated" in line or "row inserted/updated" in line
    )
    left = [line for line in out.splitlines() if line.startswith("LEFT")]
    if len(left) != len(LOCATION_COLUMNS) or any(
        line.split("|")[-1].strip() != "0" for line in left
    ):
        raise HomeCopyError(f"the metastore of {home} still names {old_root}:\n{out[-2000:]}")
    return rewritten


def _shallow_clones(home: Path) -> list[Path]:
    """Tables of the home whose Delta log holds a clone (absolute paths to another table)."""
    return sorted(
        log.parent.parent
        for log in (home / "warehouse").glob("*/*/_delta_log/00000000000000000000.json")
        if '"operation":"CLONE"' in log.read_text()
    )


def copy_home(source: Path, target: Path) -> int:
    """Copy the data home ``source`` to ``target`` (which must not exist) and relocate the
    copy's metastore; the number of metastore locations rewritten."""
    from tardy.runtime.busy import home_busy

    source, target = source.resolve(), target.resolve()
    if target.exists():
        raise HomeCopyError(f"{target} exists: a data home is copied to a new path")
    if busy := home_busy(source, wait=0.0):
        raise HomeCopyError(f"cannot copy {source}: {busy}")
    if clones := _shallow_clones(source):
        names = ", ".join(p.name for p in clones)
        raise HomeCopyError(f"cannot copy {source}: it holds shallow clones ({names})")
    if DataHome(source).stage.exists():  # its log names the staged rows by their path
        raise HomeCopyError(
            f"cannot copy {source}: it holds a staged restatement (stage/): promote or "
            "discard it first (`tardy log` names it)"
        )
    target.parent.mkdir(parents=True, exist_ok=True)
    subprocess.run(["cp", "-a", "--reflink=auto", str(source), str(target)], check=True)
    for lock in ("db.lck", "dbex.lck"):  # a clean shutdown leaves none; a killed JVM may
        (target / METASTORE / lock).unlink(missing_ok=True)
    if not (target / METASTORE).is_dir():
        return 0
    try:
        return relocate_metastore(target, source)
    except BaseException:
        shutil.rmtree(target, ignore_errors=True)
        raise


def main(argv: list[str]) -> int:
    """``python -m tardy.homecopy SRC DEST``."""
    if len(argv) != 2:
        print("usage: python -m tardy.homecopy SRC DEST", file=sys.stderr)
        return 2
    try:
        rewritten = copy_home(Path(argv[0]), Path(argv[1]))
    except HomeCopyError as refused:
        print(f"error: {refused}", file=sys.stderr)
        return refused.exit_code
    print(f"copied {argv[0]} to {argv[1]} ({rewritten} metastore locations rewritten)")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
