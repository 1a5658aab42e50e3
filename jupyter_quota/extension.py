"""Server extension wiring: config to registry, backend and routes. No logic of its own."""

from __future__ import annotations

import os

from .config import JupyterQuota
from .handlers import setup_handlers
from .service import QuotaService
from .service.app import build_service


def load(server_app) -> QuotaService | None:
    config = JupyterQuota(parent=server_app)
    if config.service_url:
        from .hubservice.forward import setup_forwarding

        setup_forwarding(server_app.web_app, config, server_app.log)
        server_app.log.info(
            "jupyter_quota: service mode, %squota/v1 forwards to the quota service at %s",
            server_app.base_url,
            config.service_url,
        )
        return None
    if os.environ.get("JUPYTERHUB_API_URL"):
        server_app.log.warning(
            "jupyter_quota: embedded mode under JupyterHub: this server keeps its own ledger in %s, "
            "which other users' servers do not see. For one quota per hub, run the quota service "
            "(README: Running under JupyterHub).",
            config.state_dir,
        )
    service = build_service(config, log=server_app.log, root_dir=server_app.root_dir)
    service.start()
    setup_handlers(server_app.web_app, service)
    server_app.log.info(
        "jupyter_quota: %s backend, %d team(s), API at %squota/v1",
        service.backend.name,
        len(service.registry.all()),
        server_app.base_url,
    )
    return service
