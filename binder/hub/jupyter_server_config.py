"""The demo teams under JupyterHub: a directory for ``JUPYTER_CONFIG_PATH``.

binder/jupyterhub_config.py puts this directory on the quota service's and every server's
``JUPYTER_CONFIG_PATH``, after any directories already there, so a ``jupyter_server_config.py``
of the admin's own (``c.JupyterQuota.job_command``, say) overrides what is set here. The teams are
those of binder/jupyter_server_config.py, with hub groups as members: alpha is ``ml-alpha``, beta
is ``ml-beta``.
"""

import os

from traitlets.config.loader import LazyConfigValue

c = get_config()  # noqa: F821 (provided by the Jupyter config loader)
load_subconfig(os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))),  # noqa: F821
                            "jupyter_server_config.py"))

HUB_GROUPS = {"alpha": ["ml-alpha"], "beta": ["ml-beta"]}
c.JupyterQuota.profiles = [
    {**profile, "users": [], "groups": HUB_GROUPS[profile["team"]]} for profile in c.JupyterQuota.profiles
]

# binder's file extends ServerApp.tornado_settings with `.update(...)`, a lazy config value, and
# jupyterhub-singleuser (6.1.1, singleuser/extension.py:684) tests `'log_function' in` that value
# and fails to load ("argument of type 'LazyConfigValue' is not iterable"): the server then never
# answers the hub. A plain dict with the same content loads.
if isinstance(c.ServerApp.get("tornado_settings"), LazyConfigValue):
    c.ServerApp.tornado_settings = c.ServerApp.tornado_settings.get_value({})
