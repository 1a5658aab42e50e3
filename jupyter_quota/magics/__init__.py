"""IPython magics: ``%quota`` (a team's balance), ``%swift_sft`` (quota-fitted ms-swift jobs) and
``%swift_deploy`` (a model served under the quota).

Loaded by ``%load_ext jupyter_quota``. The modules: ``magics`` (the Magics class and argument
handling), ``client`` (the kernel's REST client of its Jupyter server), ``display`` (balance and
plan views), ``follow`` (the ``Job`` handle and its live widget), ``endpoint`` (the ``Endpoint``
handle ``%swift_deploy`` returns).
"""

from .client import ApiError, QuotaClient, QuotaClientError, ServerNotFound, connect
from .endpoint import Endpoint
from .follow import Job
from .magics import QuotaMagics

__all__ = [
    "ApiError",
    "Endpoint",
    "Job",
    "QuotaClient",
    "QuotaClientError",
    "QuotaMagics",
    "ServerNotFound",
    "connect",
    "load_ipython_extension",
]


def load_ipython_extension(ipython) -> None:
    """Register ``%quota``, ``%swift_sft`` and ``%swift_deploy`` with ``ipython``."""
    ipython.register_magics(QuotaMagics(shell=ipython))
