"""tardy: absorb late, duplicated and corrected POS data on Spark + Delta with SQLMesh."""

__version__ = "0.1.0"
