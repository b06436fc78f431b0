"""``python -m epochgc.cli``: the same entry point as the ``epochgc`` command."""

import sys

from epochgc.cli.main import main

if __name__ == "__main__":
    sys.exit(main())
