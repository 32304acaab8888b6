"""``python -m tardy.cluster up|down|status|database NAME`` (``tardy.cluster.main``)."""

from __future__ import annotations

import sys

from tardy.cluster import main

sys.exit(main(sys.argv[1:]))
