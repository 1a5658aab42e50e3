"""The demo as a real JupyterHub on one machine (scripts/demo-hub; the tests in tests/hub/ load it too).

Loopback only. DummyAuthenticator with one shared password; users ann (group ml-alpha), bob
(ml-beta), cat (both) and the hub admin ada; SimpleLocalProcessSpawner (every server runs as the
hub's OS user); configurable-http-proxy from node_modules; the quota service ``jupyter quota
serve`` as the managed service ``jupyter-quota`` (jupyter_quota.hubservice.hubconfig).

Read from the environment:
- ``JUPYTER_QUOTA_DEMO_PASSWORD`` (required): the password of every demo user;
- ``JUPYTER_QUOTA_HUB_DIR``: where the hub's database, cookie secret, the users' homes and the
  quota service's state (``state/``) live; default ``.jupyter_quota/hub`` in the checkout (git-ignored);
- ``JUPYTER_QUOTA_HUB_PORT``: the public port (default 8000); ``JUPYTER_QUOTA_HUB_API_PORT``,
  ``JUPYTER_QUOTA_PROXY_API_PORT`` and ``JUPYTER_QUOTA_SERVICE_PORT``: the internal ones (default: free ports);
- ``JUPYTER_CONFIG_PATH``: directories whose ``jupyter_server_config.py`` override the demo's
  (binder/hub/) in the quota service and in every server.
"""

import os
import shutil
import socket
import sys

from jupyter_quota.hubservice.hubconfig import configure_hub

c = get_config()  # noqa: F821 (provided by the config loader)

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
EXAMPLE = os.path.join(REPO, "examples", "quota_and_swift_sft.ipynb")
RUN = os.path.abspath(os.environ.get("JUPYTER_QUOTA_HUB_DIR") or os.path.join(REPO, ".jupyter_quota", "hub"))
BIN = os.path.dirname(sys.executable)  # the venv the hub runs from; servers and the service use it too
USERS = {"ann": ["ml-alpha"], "bob": ["ml-beta"], "cat": ["ml-alpha", "ml-beta"]}
ADMINS = {"ada"}


def _port(name: str, default: int | None = None) -> int:
    if os.environ.get(name):
        return int(os.environ[name])
    if default is not None:
        return default
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


password = os.environ.get("JUPYTER_QUOTA_DEMO_PASSWORD")
if not password:
    sys.exit("set JUPYTER_QUOTA_DEMO_PASSWORD (scripts/demo-hub generates one)")
os.makedirs(os.path.join(RUN, "home"), exist_ok=True)

c.JupyterHub.bind_url = f"http://127.0.0.1:{_port('JUPYTER_QUOTA_HUB_PORT', 8000)}"
c.JupyterHub.hub_ip = "127.0.0.1"
c.JupyterHub.hub_port = _port("JUPYTER_QUOTA_HUB_API_PORT")
c.ConfigurableHTTPProxy.api_url = f"http://127.0.0.1:{_port('JUPYTER_QUOTA_PROXY_API_PORT')}"
c.ConfigurableHTTPProxy.command = [os.path.join(REPO, "node_modules", ".bin", "configurable-http-proxy")]
c.ConfigurableHTTPProxy.pid_file = os.path.join(RUN, "proxy.pid")
c.JupyterHub.pid_file = os.path.join(RUN, "jupyterhub.pid")
c.JupyterHub.db_url = "sqlite:///" + os.path.join(RUN, "jupyterhub.sqlite")
c.JupyterHub.cookie_secret_file = os.path.join(RUN, "jupyterhub_cookie_secret")
c.JupyterHub.cleanup_servers = True  # the servers stop with the hub; jobs belong to the service and go on
c.JupyterHub.cleanup_proxy = True

c.JupyterHub.authenticator_class = "dummy"
# JupyterHub 5.3+ logs that this setting is deprecated (for SharedPasswordAuthenticator); it still
# works, and DummyAuthenticator says plainly that this hub is a demo.
c.DummyAuthenticator.password = password
c.Authenticator.allowed_users = set(USERS)
c.Authenticator.admin_users = ADMINS
c.JupyterHub.load_groups = {
    group: {"users": sorted(u for u, groups in USERS.items() if group in groups)}
    for group in sorted({g for groups in USERS.values() for g in groups})
}

c.JupyterHub.spawner_class = "simple"
c.SimpleLocalProcessSpawner.home_dir_template = os.path.join(RUN, "home", "{username}")
c.Spawner.cmd = [os.path.join(BIN, "jupyterhub-singleuser")]
if os.getuid() == 0:  # jupyter-server refuses to run as root unless told (containers, CI)
    c.Spawner.args = ["--ServerApp.allow_root=True"]
c.Spawner.default_url = "/lab/tree/" + os.path.basename(EXAMPLE)


def seed_home(spawner):
    """Each demo user finds the example notebook in their home (a copy: their edits stay theirs).
    Only SimpleLocalProcessSpawner's homes: a spawner of OS accounts owns their homes itself."""
    if not getattr(spawner, "home_dir", None):
        return
    os.makedirs(spawner.home_dir, exist_ok=True)
    target = os.path.join(spawner.home_dir, os.path.basename(EXAMPLE))
    if not os.path.exists(target):
        shutil.copyfile(EXAMPLE, target)


c.Spawner.pre_spawn_hook = seed_home
c.Spawner.start_timeout = 120
c.Spawner.http_timeout = 120

# The hub passes its children almost none of its own environment (Spawner.env_keep).
config_path = [p for p in os.environ.get("JUPYTER_CONFIG_PATH", "").split(os.pathsep) if p]
environment = {
    "PATH": os.pathsep.join([BIN, os.environ.get("PATH", "/usr/bin:/bin")]),
    "JUPYTER_CONFIG_PATH": os.pathsep.join(config_path + [os.path.join(HERE, "hub")]),
}
if os.environ.get("PYTHONPATH"):
    environment["PYTHONPATH"] = os.environ["PYTHONPATH"]
configure_hub(
    c,
    service_port=_port("JUPYTER_QUOTA_SERVICE_PORT"),
    environment=environment,
    service_environment={"JUPYTER_QUOTA_STATE_DIR": os.path.join(RUN, "state")},
)
