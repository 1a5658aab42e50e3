"""Server extension wiring: config to registry, backend and routes. No logic of its own."""

from __future__ import annotations

import os


from .access import TeamRegistry
from .backends import make_backend
from .config import JupyterQuota
from .handlers import setup_handlers
from .service import QuotaService


def build_service(config: JupyterQuota, log=None, root_dir: str = "") -> QuotaService:
    """The service a server (or a benchmark, or the CLI) uses, from a ``JupyterQuota`` config."""
    registry = TeamRegistry(
        config.profiles,
        default_team=config.default_team,
        overrides_path=os.path.join(config.state_dir, "profiles.json"),
        log=log,
    )
    backend = make_backend(config, log=log, root_dir=root_dir)
    return QuotaService(config, registry, backend)


def load(server_app) -> QuotaService:
    config = JupyterQuota(parent=server_app)
    service = build_service(config, log=server_app.log, root_dir=server_app.root_dir)
    service.backend.start()
    setup_handlers(server_app.web_app, service)
    server_app.log.info(
        "jupyter_quota: %s backend, %d team(s), API at %squota/v1",
        service.backend.name, len(service.registry.all()), server_app.base_url,
    )
    return service
