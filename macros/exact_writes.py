"""Loaded by SQLMesh with the project: switches Spark writes to Delta's REPLACE WHERE.

See ``tardy.exact_writes``: without it, an interval whose recomputed result is empty keeps
its old rows on Spark. Defines no macro; importing it is the point.
"""

from tardy.exact_writes import enable

enable()
