"""The demo's config (``binder/jupyter_server_config.py``) opens JupyterLab without the news question."""

from __future__ import annotations

import glob
import os
import sys
from pathlib import Path

from quota_testing import demo_config

NEWS_PLUGIN = "@jupyterlab/apputils-extension:announcements"


def test_the_demo_disables_jupyterlabs_news_plugin_and_keeps_the_rest_of_the_page_config():
    settings = demo_config().ServerApp.tornado_settings
    # a plain dict: jupyterhub-singleuser cannot read a lazy `.update(...)` value (binder/hub)
    assert isinstance(settings, dict)
    hook = settings["page_config_hook"]
    page_config = {"disabledExtensions": ["some-extension:plugin"], "appName": "JupyterLab"}

    shown = hook(None, page_config)

    assert shown["disabledExtensions"] == ["some-extension:plugin", NEWS_PLUGIN]
    assert shown["appName"] == "JupyterLab"
    assert hook(None, {})["disabledExtensions"] == [NEWS_PLUGIN]


def test_the_news_plugin_is_one_the_installed_jupyterlab_has():
    """Guards the plugin id against a JupyterLab that renames it (the hook would then do nothing)."""
    static = os.path.join(sys.prefix, "share", "jupyter", "lab", "static")
    bundles = glob.glob(os.path.join(static, "*.js"))
    assert bundles, f"no JupyterLab bundles under {static}"
    assert any(NEWS_PLUGIN in Path(path).read_text(encoding="utf-8", errors="replace") for path in bundles)


def test_the_demo_hubs_servers_disable_the_news_plugin_through_their_config_path():
    """Under JupyterHub the single-user extension replaces ``page_config_hook`` with its own, so
    the demo hub disables the plugin in ``labconfig/page_config.json`` on its config path."""
    import json
    import os
    import subprocess
    import sys

    from quota_testing import ROOT

    code = (
        "import json; from jupyterlab_server.config import get_static_page_config; "
        "print(json.dumps(get_static_page_config()))"
    )
    env = {**os.environ, "JUPYTER_CONFIG_PATH": str(ROOT / "binder" / "hub")}
    page_config = json.loads(
        subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True).stdout
    )
    assert page_config["disabledExtensions"][NEWS_PLUGIN] is True
