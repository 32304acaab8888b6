"""``python -m tardy.homecopy SRC DEST``: the README's command to copy a data home
(``tardy.project.homecopy``)."""

import sys

from tardy.project.homecopy import main

if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
