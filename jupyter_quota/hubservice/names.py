"""The quota service's hub names and scopes, named once (JupyterHub's RBAC: ``jupyterhub/scopes.py``)."""

#: the service's name in ``c.JupyterHub.services``; its URL prefix is ``/services/<name>/``
SERVICE_NAME = "jupyter-quota"
#: what a token needs to call the service (JupyterHub's ``access:services`` filtered to it)
ACCESS_SCOPE = f"access:services!service={SERVICE_NAME}"
#: a custom scope (``c.JupyterHub.custom_scopes``) that makes its holder a quota admin,
#: besides JupyterHub's own admins and ``JupyterQuota.admin_users``/``admin_groups``
ADMIN_SCOPE = "custom:jupyter-quota:admin"
#: the user server finds the service here when ``JupyterQuota.service_url`` is not set
SERVICE_URL_ENV = "JUPYTER_QUOTA_SERVICE_URL"
