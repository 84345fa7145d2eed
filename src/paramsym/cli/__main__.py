"""``python -m paramsym.cli``: the ``paramsym`` command."""

import sys

from . import main

sys.exit(main())
