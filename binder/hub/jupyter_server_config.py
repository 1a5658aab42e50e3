"""The demo teams under JupyterHub: a directory for ``JUPYTER_CONFIG_PATH``.

binder/jupyterhub_config.py puts this directory on the quota service's and every server's
``JUPYTER_CONFIG_PATH``, after any directories already there, so a ``jupyter_server_config.py``
of the admin's own (``c.JupyterQuota.job_command``, say) overrides what is set here. The teams are
those of binder/jupyter_server_config.py, with hub groups as members: alpha is ``ml-alpha``, beta
is ``ml-beta``.
"""

import os

c = get_config()  # noqa: F821 (provided by the Jupyter config loader)
load_subconfig(  # noqa: F821
    os.path.join(
        os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
        "jupyter_server_config.py",
    )
)

HUB_GROUPS = {"alpha": ["ml-alpha"], "beta": ["ml-beta"]}
c.JupyterQuota.profiles = [
    {**profile, "users": [], "groups": HUB_GROUPS[profile["team"]]} for profile in c.JupyterQuota.profiles
]
