"""Re-reading a published version (``tardy export``, ``tardy show``): its rows as they were
published, checked against the hash recorded with it (``tardy.consumers.versions``)."""

from __future__ import annotations

import typing as t
from dataclasses import asdict, dataclass
from datetime import date
from pathlib import Path

from tardy.consumers.versions import (
    HashMismatch,
    Publication,
    csv_text,
    day_digests,
    publications,
    read_rows,
    resolve,
    sha256,
    version_hash,
)

if t.TYPE_CHECKING:
    from pyspark.sql import SparkSession


@dataclass(frozen=True)
class Exported:
    publication: Publication
    path: str
    sha256: str
    rows: int

    def as_dict(self) -> dict[str, object]:
        return {**asdict(self), "publication": self.publication.as_dict()}


def export(spark: SparkSession, table_name: str, as_of: str | None, folder: Path) -> Exported:
    """Write a published version's deterministic CSV and its ``.sha256`` into ``folder``;
    ``HashMismatch`` when the bytes differ from those published."""
    publication = resolve(publications(spark, table_name), table_name, as_of)
    columns, rows = read_rows(spark, publication.physical_table, publication.delta_version)
    text = csv_text(columns, rows)
    digest = sha256(text)
    folder.mkdir(parents=True, exist_ok=True)
    target = folder / f"{publication.name}.csv"
    target.write_text(text, encoding="utf-8", newline="")
    target.with_name(target.name + ".sha256").write_text(f"{digest}  {target.name}\n")
    if publication.day_digests is None:  # published before day digests: the export's hash
        found = digest
    else:
        digests = day_digests(columns, rows, publication.time_column)
        found = version_hash(digests)
        differ = sorted(
            d
            for d in digests.keys() | publication.day_digests.keys()
            if digests.get(d) != publication.day_digests.get(d)
        )
        if differ:
            raise HashMismatch(
                f"{publication.name} re-exported differs from what was published on "
                f"{len(differ)} day(s) ({', '.join(differ[:5])}): its Delta version no longer "
                "reads the same"
            )
    if found != publication.sha256:
        raise HashMismatch(
            f"{publication.name} re-exported to {found[:16]}..., published as "
            f"{publication.sha256[:16]}...: its Delta version no longer reads the same"
        )
    return Exported(publication, str(target), digest, len(rows))


@dataclass(frozen=True)
class Shown:
    """What ``tardy show`` re-read: a publication's rows (of one day), as text."""

    publication: Publication
    day: str | None
    columns: list[str]
    rows: list[tuple[str, ...]]

    def as_dict(self) -> dict[str, object]:
        return {
            "publication": self.publication.as_dict(),
            "day": self.day,
            "columns": self.columns,
            "rows": [list(row) for row in self.rows],
        }


def show(spark: SparkSession, table_name: str, as_of: str | None, day: date | None) -> Shown:
    """The rows a published version holds, all or those whose time column is ``day``
    (a day, or a week's or month's first day)."""
    publication = resolve(publications(spark, table_name), table_name, as_of)
    where = f"{publication.time_column} = DATE'{day.isoformat()}'" if day else ""
    columns, rows = read_rows(spark, publication.physical_table, publication.delta_version, where)
    return Shown(publication, day.isoformat() if day else None, columns, rows)
