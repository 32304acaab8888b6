"""``python -m tardy.cli``."""

import sys

from tardy.cli import main

sys.exit(main())
