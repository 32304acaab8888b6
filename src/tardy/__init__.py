"""tardy: absorb late, duplicated and corrected POS data on Spark + Delta with SQLMesh."""

# SQLMesh adds its syntax to SQLGlot's dialects when this module loads; a dialect SQLGlot
# loaded earlier lacks it, and the project's models then fail to load (docs/facts.md, fact
# 27). Every tardy module may build Spark SQL, so it comes first.
import sqlmesh.core.dialect  # noqa: F401

__version__ = "0.1.0"
