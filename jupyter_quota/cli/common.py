"""What every ``jupyter quota`` command shares: the ``--config`` option, the configuration it
names, the caller's service (in this process or the hub's) and their namespace."""

from __future__ import annotations

import argparse
import os

from ..config import JupyterQuota
from ..errors import QuotaError


def config_option(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--config",
        metavar="FILE",
        help="a Jupyter config file (.py or .json) holding c.JupyterQuota settings; default: the "
        "jupyter_server_config files of the Jupyter config path",
    )


def load_config(config_file: str | None) -> JupyterQuota:
    """``JupyterQuota`` as the server would see it, from the Jupyter config path or ``FILE``."""
    from jupyter_core.application import JupyterApp

    class _Loader(JupyterApp):
        name = "jupyter-quota"
        config_file_name = "jupyter_server_config"

    loader = _Loader()
    if config_file:
        if not os.path.isfile(config_file):
            raise QuotaError(f"config file {config_file!r} does not exist")
        loader.config_file = os.path.abspath(config_file)
    loader.initialize([])
    return JupyterQuota(config=loader.config)


def owner_service(config: JupyterQuota):
    """The configured service built in this process, and its owner (``JupyterQuota.owner``), who
    the command acts as. The caller closes the service."""
    from ..identity import owner_identity
    from ..service.app import build_service

    service = build_service(config)
    try:
        return service, owner_identity(config)
    except BaseException:
        service.close()
        raise


def hub_client(config: JupyterQuota):
    """A client of the hub's quota service (``JupyterQuota.service_url``), as this server's user."""
    from ..magics.client import QuotaClient

    token = os.environ.get("JUPYTERHUB_API_TOKEN", "")
    return QuotaClient(config.service_url, token, "JupyterQuota.service_url", timeout=config.service_timeout)


def only_namespace(registry, who) -> str:
    """The caller's one namespace, or an error asking for ``--namespace`` that lists theirs."""
    mine = registry.teams_of(who)
    if len(mine) != 1:
        names = ", ".join(p.namespace for p in mine) or "none"
        raise QuotaError(f"name the namespace with --namespace; yours: {names}")
    return mine[0].namespace
