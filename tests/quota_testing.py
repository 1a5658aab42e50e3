"""Helpers shared by the test modules (importable as ``quota_testing``: tests/ is on pytest's path)."""

from __future__ import annotations

from pathlib import Path

from jupyter_server.auth.identity import IdentityProvider, User
from traitlets.config import Config
from traitlets.config.loader import PyFileConfigLoader

ROOT = Path(__file__).resolve().parent.parent
DEMO_CONFIG = ROOT / "binder" / "jupyter_server_config.py"
FAKE_TRAINER = Path(__file__).resolve().parent / "fake_trainer.py"


def demo_config() -> Config:
    """The very config binder and the quick start use."""
    return PyFileConfigLoader(DEMO_CONFIG.name, path=str(DEMO_CONFIG.parent)).load_config()


class HeaderIdentityProvider(IdentityProvider):
    """Token auth as usual, then the user named by ``X-Test-User`` (tests act as many users)."""

    async def get_user(self, handler):
        user = await super().get_user(handler)
        if user is None:
            return None
        name = handler.request.headers.get("X-Test-User")
        return User(username=name) if name else user
