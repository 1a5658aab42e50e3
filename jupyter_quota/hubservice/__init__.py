"""Running under JupyterHub: one quota service per hub, and the user servers as its clients.

- ``names``: the service's name and the hub scopes it uses, named once;
- ``identity``: who calls the service (HubOAuth: a hub token or the OAuth cookie);
- ``app``: ``jupyter quota serve``, the service itself (the REST API of ``handlers`` over
  one ``QuotaService`` that holds every team's state);
- ``forward``: the user server's ``{base_url}quota/v1/*`` when a service is configured.

Kept light: ``identity`` (``jupyter_quota/identity.py``) imports ``names`` on every request.
"""
