"""IPython magics: ``%quota`` (a team's balance) and ``%swift_sft`` (quota-fitted ms-swift jobs).

Loaded by ``%load_ext jupyter_quota``. The modules: ``magics`` (the Magics class and argument
handling), ``client`` (the kernel's REST client of its Jupyter server), ``display`` (balance and
plan views), ``follow`` (the ``Job`` handle and its live widget).
"""

from .client import ApiError, QuotaClient, QuotaClientError, ServerNotFound, connect
from .follow import Job
from .magics import QuotaMagics

__all__ = [
    "ApiError",
    "Job",
    "QuotaClient",
    "QuotaClientError",
    "QuotaMagics",
    "ServerNotFound",
    "connect",
    "load_ipython_extension",
]


def load_ipython_extension(ipython) -> None:
    """Register ``%quota`` and ``%swift_sft`` with ``ipython``."""
    ipython.register_magics(QuotaMagics(shell=ipython))
