"""``python -m jupyter_quota`` is ``jupyter quota``."""

import sys

from .cli import main

sys.exit(main())
