"""The package's house rules, read from the source (the ``ast`` of every module, no import):
no import circles, each package importing only the layers below it (docs/architecture.md,
"Layers"), a small top, no long module, no SQL built when a module loads.

Every import counts: at the top of a module, inside a function, or only for type checking,
because each is a dependency a reader has to follow and a cycle of them is a load-order bug
waiting for the call that closes it.
"""

from __future__ import annotations

import ast
from collections.abc import Iterable
from pathlib import Path

import pytest

import tardy

PACKAGE = Path(tardy.__file__).parent

# Bottom to top: a package imports its own modules, the shared top modules (``TOP``) and the
# packages of the layers below its own, never one of its layer or above.
LAYERS: list[set[str]] = [
    {"runtime", "outbox"},
    {"project"},
    {"ingest"},
    {"engine"},
    {"quarantine"},
    {"lateness"},
    {"consumers"},
    {"training", "requests", "cluster"},
    {"reporting"},
    {"rendering"},
    {"simulate"},
    {"cli"},
]
# Imported by all; they import no tardy module. The project's macros import the last two:
# SQLMesh fingerprints a macro's helper with its file's path, so they stay where they are.
TOP = {"tardy", "tardy.errors", "tardy.sql", "tardy.audited_intervals", "tardy.key_index"}
ENTRY_POINTS = {"tardy.homecopy"}  # `python -m tardy.homecopy` (the README's), at the top
# The engine's results, the only engine modules rendering reads.
ENGINE_RESULTS = {"tardy.engine.results", "tardy.engine.outcome"}
MAX_TOP_MODULES = 6
MAX_LINES = 600
# Calls that build or run SQL; none may run when a module loads.
SQL_CALLS = ("exp.", "sqlglot.", "parse_one", "maybe_parse", "transpile", "spark.", ".sql")


def module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def modules() -> dict[str, Path]:
    return {module_name(path): path for path in sorted(PACKAGE.rglob("*.py"))}


def imported(name: str, path: Path, known: Iterable[str]) -> set[str]:
    """The tardy modules ``name`` imports (a name imported from a package is its module
    when it is one, else the package)."""
    known = set(known)
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]

    def resolve(target: str) -> str:
        while target and target not in known:
            target = target.rpartition(".")[0]
        return target

    out: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            out |= {resolve(a.name) for a in node.names if a.name.split(".")[0] == "tardy"}
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")[: len(package.split(".")) - node.level + 1]
                source = ".".join(base + ([node.module] if node.module else []))
            else:
                source = node.module or ""
            if source.split(".")[0] != "tardy":
                continue
            for alias in node.names:
                full = f"{source}.{alias.name}"
                out.add(full if full in known else resolve(source))
    out.discard(name)
    out.discard("")
    return out


def graph() -> dict[str, set[str]]:
    found = modules()
    return {name: imported(name, path, found) for name, path in found.items()}


def circles(edges: dict[str, set[str]]) -> list[list[str]]:
    """Every strongly connected set of more than one module (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    for root in sorted(edges):
        if root in index:
            continue
        work = [(root, iter(sorted(edges[root])))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(edges.get(child, ())))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                member, group = None, []
                while member != node:
                    member = stack.pop()
                    on_stack.discard(member)
                    group.append(member)
                if len(group) > 1:
                    found.append(sorted(group))
    return found


def package_of(name: str) -> str | None:
    parts = name.split(".")
    return (
        parts[1] if len(parts) > 2 or (len(parts) == 2 and name not in TOP | ENTRY_POINTS) else None
    )


def layer_of(package: str) -> int:
    for number, layer in enumerate(LAYERS):
        if package in layer:
            return number
    raise AssertionError(f"tardy.{package} is in no layer of {__name__}.LAYERS")


def against_layers(edges: dict[str, set[str]]) -> list[str]:
    """Every import that breaks the layering, as ``importer -> imported: why``."""
    wrong = []
    for name, targets in sorted(edges.items()):
        for target in sorted(targets):
            why = None
            mine, theirs = package_of(name), package_of(target)
            if name in TOP:
                why = "a shared top module imports no tardy module"
            elif target in ENTRY_POINTS:
                why = "an entry point is imported by nothing"
            elif theirs is None or theirs == mine:
                continue
            elif mine is None:
                continue  # an entry point at the top
            elif layer_of(theirs) >= layer_of(mine):
                why = f"{theirs} is not below {mine}"
            elif mine == "rendering" and theirs == "engine" and target not in ENGINE_RESULTS:
                why = "rendering reads only the engine's results"
            if why:
                wrong.append(f"{name} -> {target}: {why}")
    return wrong


def test_the_package_has_no_import_circle() -> None:
    edges = graph()
    assert len(edges) > 100  # every module read (a wrong root would find none)
    assert circles(edges) == []


def test_every_import_follows_the_layers() -> None:
    assert against_layers(graph()) == []


def test_the_rules_the_layers_keep() -> None:
    """The rules users of the tree rely on, said once more on their own."""
    edges = graph()
    for name, targets in edges.items():
        package = package_of(name)
        reached = {package_of(target) for target in targets}
        if package == "engine":
            assert not reached & {"consumers", "rendering"}, name
        if package == "runtime":
            assert "engine" not in reached, name
        if package == "rendering":
            assert {t for t in targets if package_of(t) == "engine"} <= ENGINE_RESULTS, name


@pytest.mark.parametrize(
    ("importer", "target", "expected"),
    [
        ("tardy.engine.plan", "tardy.consumers.status", "consumers is not below engine"),
        (
            "tardy.rendering.status",
            "tardy.engine.plan",
            "rendering reads only the engine's results",
        ),
        ("tardy.runtime.warm", "tardy.engine.plan", "engine is not below runtime"),
        ("tardy.project.home", "tardy.cli", "cli is not below project"),
        ("tardy.sql", "tardy.project.home", "a shared top module imports no tardy module"),
    ],
    ids=["engine-to-consumers", "rendering-to-engine", "runtime-to-engine", "up", "top"],
)
def test_an_import_against_the_layers_is_found(importer: str, target: str, expected: str) -> None:
    """The check above can fail: one import added against the rules is reported."""
    edges = graph()
    assert target not in edges[importer]
    changed = {**edges, importer: edges[importer] | {target}}
    assert against_layers(changed) == [f"{importer} -> {target}: {expected}"]


def test_a_circle_is_found() -> None:
    edges = graph()
    changed = {
        **edges,
        "tardy.engine.results": edges["tardy.engine.results"] | {"tardy.engine.diff"},
    }
    assert ["tardy.engine.diff", "tardy.engine.results"] in circles(changed)


def test_a_small_top_and_no_long_module() -> None:
    top = sorted(path.name for path in PACKAGE.glob("*.py"))
    assert len(top) <= MAX_TOP_MODULES, top
    long = {
        name: n
        for name, path in modules().items()
        if (n := len(path.read_text().splitlines())) > MAX_LINES
    }
    assert long == {}


def top_level_calls(body: list[ast.stmt]) -> Iterable[tuple[int, str]]:
    """The calls a module's statements make when it loads: not inside a function, nor under
    ``if TYPE_CHECKING`` / ``if __name__ == "__main__"``; a class body's are."""
    for node in body:
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            continue
        if isinstance(node, ast.ClassDef):
            yield from top_level_calls(node.body)
            continue
        if isinstance(node, ast.If) and (
            "TYPE_CHECKING" in ast.unparse(node.test) or "__main__" in ast.unparse(node.test)
        ):
            continue
        for call in (n for n in ast.walk(node) if isinstance(n, ast.Call)):
            yield node.lineno, ast.unparse(call.func)


def test_no_module_builds_sql_when_it_loads() -> None:
    """No module calls SQLGlot or Spark when it loads: SQL built at import time depends on
    which dialects had loaded before it (SQLMesh adds its syntax when it loads)."""
    found = [
        f"{name}:{line} {callee}"
        for name, path in modules().items()
        for line, callee in top_level_calls(ast.parse(path.read_text()).body)
        if any(part in callee for part in SQL_CALLS)
    ]
    assert found == []
    assert list(top_level_calls(ast.parse("X = exp.column('a')").body)) == [(1, "exp.column")]
