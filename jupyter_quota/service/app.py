"""The composition root: config in, a ready :class:`~jupyter_quota.service.QuotaService` out.

The one place that builds the service. The server extension, the hub's quota service, the CLI,
the Python API (``jupyter_quota.plan`` through ``cli``), benchmarks and tests all call
:func:`build_service`; none of them builds its own. The order, built bottom-up:

1. the team registry (profiles from config, the admins' edits in ``profiles.json``);
2. the backend (``backends.make_backend``: local or kube);
3. the service, which makes its managers over them: the effective quota, job memory, metrics,
   increases, stalled jobs, usage reports.

``QuotaService.start`` then starts the backend, reconciles and starts the increases' expiry, the
windows' ticker and the stalled-job policy, in that order; ``QuotaService.close`` stops them in
reverse, the backend last.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING

from ..access import TeamRegistry
from ..backends import make_backend
from . import QuotaService

if TYPE_CHECKING:  # pragma: no cover - the config imports the service's settings
    from ..config import JupyterQuota


def build_service(config: JupyterQuota, log=None, root_dir: str = "") -> QuotaService:
    """The service a server (or a benchmark, or the CLI) uses, from a ``JupyterQuota`` config;
    not started (``start()`` runs its background work; a one-shot CLI command need not)."""
    registry = TeamRegistry(
        config.profiles,
        default_team=config.default_team,
        overrides_path=os.path.join(config.state_dir, "profiles.json"),
        log=log,
    )
    backend = make_backend(config, log=log, root_dir=root_dir)
    return QuotaService(config, registry, backend)
