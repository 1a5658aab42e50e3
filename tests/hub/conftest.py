"""Fixtures of the hub tier: one real JupyterHub for the whole session (see ``hub_process``).

Start-up costs about 5 s for the hub and 5-8 s per server on two cores, so the hub and the
users' servers are shared by every test; a test that stops a server starts it again.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))

import hub_process


@pytest.fixture(scope="session")
def hub(tmp_path_factory) -> hub_process.HubProcess:
    process = hub_process.HubProcess(tmp_path_factory.mktemp("hub"))
    try:
        yield process.start()
    finally:
        process.stop()


@pytest.fixture(scope="session")
def hub_servers(hub) -> hub_process.HubProcess:
    """The hub with every user's server running (started once, concurrently)."""
    hub.start_servers()
    return hub


@pytest.fixture
def servers(hub_servers) -> hub_process.HubProcess:
    """The same, for each test: servers a test stopped are started again first."""
    hub_servers.start_servers()
    return hub_servers
