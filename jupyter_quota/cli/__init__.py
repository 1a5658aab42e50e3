"""``jupyter quota`` (also ``python -m jupyter_quota``): the command line.

``main`` builds the parser; each command family lives in its own module (``increases``,
``usage``) and registers itself through ``add_commands``; what they share is in ``common``.
"""

from .common import load_config
from .main import configured_context, main

__all__ = ["configured_context", "load_config", "main"]
