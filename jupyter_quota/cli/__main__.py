"""``python -m jupyter_quota.cli`` is ``jupyter quota``, as it was before ``cli`` became a package."""

import sys

from .main import main

sys.exit(main())
