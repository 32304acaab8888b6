"""Loads the project's Python models from the top-level ``python_models/`` folder.

SQLMesh only imports Python files under ``models/``; this module imports every module in
``python_models/`` afresh on each project load so their ``@model`` definitions register here.
"""

from pathlib import Path

from sqlmesh.utils.metaprogramming import import_python_file

_ROOT = Path(__file__).resolve().parent.parent

for _path in sorted((_ROOT / "python_models").glob("*.py")):
    if _path.name != "__init__.py":
        import_python_file(_path, _ROOT)
