"""``deploy/z2jh-values.yaml`` and ``deploy/rbac.yaml``: what Zero to JupyterHub accepts and the code renders.

The values are merged over the chart's defaults and validated against its own schema, as helm
does (``tests/data/z2jh``); the hub config is then built the way z2jh's ``jupyterhub_config.py``
builds it. The RBAC objects are applied to a real API server in ``tests/kube/test_z2jh_rbac.py``.
"""

from __future__ import annotations

import json
import re

import jsonschema
import yaml
from traitlets.config import Config
from z2jh_values import CHART, rbac_file_objects, service_config, values, write_service_config

from jupyter_quota.cli import load_config
from jupyter_quota.hubservice.names import ACCESS_SCOPE, ADMIN_SCOPE, SERVICE_NAME, SERVICE_URL_ENV
from jupyter_quota.profiles import load_profiles
from jupyter_quota.rbac import ServiceAccount, team_objects


def merged(defaults, override):
    """helm's merge of values over chart defaults: maps merge key by key, anything else replaces."""
    if isinstance(defaults, dict) and isinstance(override, dict):
        return {**defaults, **{k: merged(defaults.get(k), v) for k, v in override.items()}}
    return override


def test_the_values_pass_the_charts_own_schema():
    chart_defaults = yaml.safe_load((CHART / "values.yaml").read_text())
    schema = json.loads((CHART / "values.schema.json").read_text())
    validator = jsonschema.Draft7Validator(schema)
    validator.validate(merged(chart_defaults, values()))
    # the schema does tell shapes apart: loadRoles as JupyterHub's own list is refused
    as_list = values()
    as_list["hub"]["loadRoles"] = [{"name": k, **r} for k, r in as_list["hub"]["loadRoles"].items()]
    assert not validator.is_valid(merged(chart_defaults, as_list))


def test_services_and_roles_are_dicts_of_dicts_and_give_users_and_servers_the_service():
    hub = values()["hub"]
    assert all(isinstance(v, dict) for v in hub["services"].values())
    assert all(isinstance(v, dict) for v in hub["loadRoles"].values())
    # as z2jh's jupyterhub_config.py turns them into c.JupyterHub.services and load_roles
    services = [{**s, "name": s.get("name", key)} for key, s in hub["services"].items()]
    roles = {key: {**r, "name": r.get("name", key)} for key, r in hub["loadRoles"].items()}
    [service] = [s for s in services if s["name"] == SERVICE_NAME]
    assert service["command"][:3] == ["jupyter", "quota", "serve"]
    assert ACCESS_SCOPE in roles["user"]["scopes"] and "self" in roles["user"]["scopes"]
    assert roles["jupyter-quota-admin"]["scopes"] == [ADMIN_SCOPE]
    config = hub["config"]
    assert ADMIN_SCOPE in config["JupyterHub"]["custom_scopes"]
    assert {ACCESS_SCOPE, "users:activity!user", "access:servers!server"} <= set(
        config["Spawner"]["server_token_scopes"]
    )


def test_the_service_is_reachable_where_servers_and_the_proxy_look_for_it():
    v = values()
    port = int(re.fullmatch(r"http://hub:(\d+)", v["hub"]["services"][SERVICE_NAME]["url"]).group(1))
    assert {"name": SERVICE_NAME, "port": port, "targetPort": port} in v["hub"]["service"]["extraPorts"]
    assert v["singleuser"]["extraEnv"][SERVICE_URL_ENV] == f"http://hub:{port}/services/{SERVICE_NAME}/"
    assert [{"port": port}] == v["hub"]["networkPolicy"]["ingress"][0]["ports"]
    assert [{"port": port}] == v["proxy"]["chp"]["networkPolicy"]["egress"][0]["ports"]


def test_user_pods_get_no_kubernetes_credentials():
    v = values()
    assert v["hub"]["config"]["KubeSpawner"]["automount_service_account_token"] is False
    assert not v["singleuser"].get("serviceAccountName")


def test_the_service_config_loads_and_rbac_yaml_is_what_the_code_renders_for_its_profiles(tmp_path):
    config = load_config(str(write_service_config(tmp_path)))
    assert config.backend == "kube"
    account = ServiceAccount.from_config(config)
    assert account.username == "system:serviceaccount:jhub:hub"
    rendered = [
        obj
        for p in load_profiles(config.profiles).values()
        for obj in team_objects(p, account)
        if obj["kind"] in ("Role", "RoleBinding")
    ]
    assert rbac_file_objects() == rendered


def test_the_extra_config_sets_a_profile_list_for_the_teams(tmp_path):
    snippet = values()["hub"]["extraConfig"]["jupyter-quota-profile-list"]
    path = "/usr/local/etc/jupyter-quota/jupyter_quota_config.json"
    assert path in snippet and values()["hub"]["extraFiles"]["jupyter-quota-config"]["mountPath"] == path
    c = Config()
    exec(snippet.replace(path, str(write_service_config(tmp_path))), {"c": c})  # noqa: S102 - our own file
    assert callable(c.KubeSpawner.profile_list)
    assert [p["team"] for p in service_config()["JupyterQuota"]["profiles"]] == ["alpha", "beta"]
