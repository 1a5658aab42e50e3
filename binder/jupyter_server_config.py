"""The demo: two teams sharing one declared machine of 4 A100 80GB, 32 CPUs and 256Gi.

Used by binder, by the README's quick start (``scripts/demo``) and by the tests. The user who
runs the server belongs to team ``alpha`` only.
"""

import getpass
import os

c = get_config()  # noqa: F821 (provided by the Jupyter config loader)

# Outside JupyterHub the token/password login is the server's owner; under a hub, JUPYTERHUB_USER.
demo_user = os.environ.get("JUPYTERHUB_USER") or getpass.getuser()

# A LimitRange whose defaults let a job that states only its GPUs through: every container gets
# 2 CPUs requested (4 limit) and 16Gi requested (32Gi limit) unless it says otherwise.
demo_limit_range = {
    "limits": [
        {
            "type": "Container",
            "default": {"cpu": "4", "memory": "32Gi"},
            "defaultRequest": {"cpu": "2", "memory": "16Gi"},
            "max": {"cpu": "16", "memory": "128Gi"},
        }
    ]
}

c.JupyterQuota.inventory = {
    "gpus": 4,
    "gpuModel": "A100 80GB",
    "gpuMemory": "80Gi",
    "cpu": "32",
    "memory": "256Gi",
}

c.JupyterQuota.profiles = [
    {
        "team": "alpha",
        "namespace": "team-alpha",
        "displayName": "Team Alpha",
        "users": [demo_user],
        # The classic example from the Kubernetes docs.
        "hard": {"requests.nvidia.com/gpu": "2", "limits.memory": "128Gi", "requests.cpu": "8"},
        "limitRange": demo_limit_range,
        "gpuModel": "A100 80GB",
        "gpuMemory": "80Gi",
    },
    {
        "team": "beta",
        "namespace": "team-beta",
        "displayName": "Team Beta",
        "users": ["beta-user"],
        "hard": {"requests.nvidia.com/gpu": "2", "requests.cpu": "8", "limits.memory": "64Gi"},
        "limitRange": demo_limit_range,
        "gpuModel": "A100 80GB",
        "gpuMemory": "80Gi",
    },
]

# The demo's ledger and logs stay inside the checkout unless the environment says otherwise.
c.JupyterQuota.state_dir = os.environ.get(
    "JUPYTER_QUOTA_STATE_DIR", os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".jupyter_quota")
)

# The demo opens without JupyterLab's "Would you like to get notified about official Jupyter
# news?" toast: its announcements plugin (the news feed and update checks) is disabled in the
# page config of servers started with this file only, through jupyterlab_server's
# ``page_config_hook``; a user's own settings and page_config.json are left as they are.
DEMO_DISABLED_PLUGINS = ["@jupyterlab/apputils-extension:announcements"]


def demo_page_config(handler, page_config):
    disabled = page_config.setdefault("disabledExtensions", [])
    disabled += [plugin for plugin in DEMO_DISABLED_PLUGINS if plugin not in disabled]
    return page_config


# A plain dict, not `.update(...)`: that leaves a lazy config value, which jupyterhub-singleuser
# (6.1.1, singleuser/extension.py:684) cannot read, so the demo hub's servers (binder/hub) would
# never start.
c.ServerApp.tornado_settings = {"page_config_hook": demo_page_config}
