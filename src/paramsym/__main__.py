"""``python -m paramsym``: the ``paramsym`` command (same as ``python -m paramsym.cli``)."""

import sys

from .cli import main

if __name__ == "__main__":
    sys.exit(main())
