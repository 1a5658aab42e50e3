"""KubeSpawner's profile_list from the team profiles (``hubservice/profile_list.py``).

Users are JupyterHub's own ORM users in an in-memory hub database (name, groups,
``new_api_token``, as ``spawner.user`` forwards them in the hub); the form is rendered and the
choice validated by KubeSpawner itself.
"""

from __future__ import annotations

import asyncio
import json

import kubernetes_asyncio.config.kube_config
import pytest
import tornado.httpserver
import tornado.web
from jupyterhub import orm, roles
from kubespawner import KubeSpawner

from jupyter_quota.errors import InvalidRequest
from jupyter_quota.hubservice.names import ACCESS_SCOPE, SERVICE_NAME
from jupyter_quota.hubservice.profile_list import make_profile_list

GPU = "requests.nvidia.com/gpu"
PROFILES = [
    {
        "team": "alpha",
        "groups": ["ml-alpha"],
        "gpuModel": "A100 80GB",
        "hard": {GPU: "2"},
        "nodeSelector": {"nvidia.com/gpu.product": "A100"},
    },
    {"team": "beta", "groups": ["ml-beta"], "hard": {GPU: "4"}},
]


def balance(hard, used):
    return {"resources": {GPU: {"hard": str(hard), "used": str(used), "remaining": str(max(0, hard - used))}}}


BALANCES = {"team-alpha": balance(2, 2), "team-beta": balance(4, 1)}


@pytest.fixture
def hub_db():
    """A hub database with the groups, the quota service, and the user role giving its access scope."""
    db = orm.new_session_factory("sqlite:///:memory:")()
    db.add(orm.OAuthClient(identifier="jupyterhub"))
    db.add(orm.Service(name=SERVICE_NAME))
    db.commit()
    roles.create_role(db, {"name": "user", "scopes": ["self", ACCESS_SCOPE]})
    groups = {name: orm.Group(name=name) for name in ("ml-alpha", "ml-beta")}
    for name, member_of in (("ann", ["ml-alpha"]), ("bob", ["ml-beta"]), ("cat", ["ml-alpha", "ml-beta"]), ("dan", [])):
        user = orm.User(name=name)
        user.groups = [groups[g] for g in member_of]
        db.add(user)
        db.commit()
        roles.assign_default_roles(db, user)
    yield db
    db.close()


def user(db, name):
    return orm.User.find(db, name)


class Spawner:
    """What the callable reads of a spawner: its user."""

    def __init__(self, user):
        self.user = user


def fixed(balances):
    async def source(spawner):
        return dict(balances)

    return source


def run(coroutine):
    return asyncio.run(coroutine)


def test_each_user_sees_only_their_teams(hub_db):
    profile_list = make_profile_list(PROFILES, balances=fixed(BALANCES))
    shown = {
        name: [p["slug"] for p in run(profile_list(Spawner(user(hub_db, name))))]
        for name in ("ann", "bob", "cat", "dan")
    }
    assert shown == {"ann": ["team-alpha"], "bob": ["team-beta"], "cat": ["team-alpha", "team-beta"], "dan": []}


def test_gpu_counts_go_up_to_the_teams_hard_quota_and_those_that_do_not_fit_are_marked(hub_db):
    [alpha, beta] = run(make_profile_list(PROFILES, balances=fixed(BALANCES))(Spawner(user(hub_db, "cat"))))
    assert alpha["display_name"] == "Team alpha (A100 80GB)"
    assert alpha["description"] == "namespace team-alpha · 0 of 2 GPUs left"
    alpha_gpus = alpha["profile_options"]["gpus"]["choices"]
    assert {k: c["display_name"] for k, c in alpha_gpus.items()} == {
        "0": "No GPU",
        "1": "1 GPU (does not fit: team-alpha has 0 GPUs left)",
        "2": "2 GPUs (does not fit: team-alpha has 0 GPUs left)",
    }
    assert alpha_gpus["1"]["kubespawner_override"] == {
        "extra_resource_limits": {"nvidia.com/gpu": "1"},
        "extra_resource_guarantees": {"nvidia.com/gpu": "1"},
        "node_selector": {"nvidia.com/gpu.product": "A100"},
    }
    assert alpha_gpus["0"]["kubespawner_override"] == {}
    beta_gpus = beta["profile_options"]["gpus"]["choices"]
    assert {k: c["display_name"] for k, c in beta_gpus.items()} == {
        "0": "No GPU",
        "1": "1 GPU",
        "2": "2 GPUs",
        "4": "4 GPUs (does not fit: team-beta has 3 GPUs left)",
    }


def test_without_the_service_the_profiles_are_offered_unmarked_and_say_why(hub_db):
    async def down(spawner):
        raise ConnectionRefusedError("no service")

    [alpha] = run(make_profile_list(PROFILES, balances=down)(Spawner(user(hub_db, "ann"))))
    assert alpha["description"] == "namespace team-alpha · the team's remaining quota could not be read now"
    assert "does not fit" not in json.dumps(alpha)


def test_a_malformed_profile_fails_at_hub_start():
    with pytest.raises(InvalidRequest, match=r"Namespace \"Team_Alpha\" is invalid"):
        make_profile_list([{"team": "alpha", "namespace": "Team_Alpha"}])


def test_kubespawner_renders_the_users_teams_and_refuses_a_foreign_team(hub_db, tmp_path, monkeypatch):
    # KubeSpawner loads a kubeconfig when made; nothing here calls the cluster it names.
    (tmp_path / "kubeconfig").write_text(
        "apiVersion: v1\nkind: Config\ncurrent-context: none\ncontexts: [{name: none, context: {cluster: none, "
        "user: none}}]\nclusters: [{name: none, cluster: {server: 'https://127.0.0.1:1'}}]\nusers: [{name: none, "
        "user: {token: none}}]\n"
    )
    monkeypatch.setattr(
        kubernetes_asyncio.config.kube_config, "KUBE_CONFIG_DEFAULT_LOCATION", str(tmp_path / "kubeconfig")
    )
    monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)

    async def scenario():  # KubeSpawner is made inside the hub's event loop
        spawner = KubeSpawner(
            _mock=True, user=user(hub_db, "ann"), profile_list=make_profile_list(PROFILES, balances=fixed(BALANCES))
        )
        form = await spawner.options_form(spawner)
        assert "Team alpha (A100 80GB)" in form and "Team beta" not in form
        assert "1 GPU (does not fit: team-alpha has 0 GPUs left)" in form

        spawner.user_options = spawner.options_from_form({"profile": ["team-beta"]})
        with pytest.raises(ValueError, match="No such profile: team-beta"):
            await spawner.load_user_options()

        spawner.user_options = spawner.options_from_form(
            {"profile": ["team-alpha"], "profile-option-team-alpha--gpus": ["1"]}
        )
        await spawner.load_user_options()
        assert spawner.extra_resource_limits == {"nvidia.com/gpu": "1"}
        assert spawner.node_selector == {"nvidia.com/gpu.product": "A100"}

    run(scenario())


def test_balances_are_read_from_the_service_with_a_short_lived_token_of_the_user(hub_db):
    seen = []

    class Namespaces(tornado.web.RequestHandler):
        def get(self):
            token = self.request.headers.get("Authorization", "").removeprefix("token ")
            found = orm.APIToken.find(hub_db, token)
            seen.append((found.user.name, found.scopes, (found.expires_at - found.created).total_seconds()))
            self.finish({"namespaces": [{"name": "team-alpha", "team": "alpha", "balance": BALANCES["team-alpha"]}]})

    async def scenario():
        app = tornado.web.Application([(f"/services/{SERVICE_NAME}/quota/v1/namespaces", Namespaces)])
        server = tornado.httpserver.HTTPServer(app)
        [sock] = tornado.netutil.bind_sockets(0, "127.0.0.1")
        server.add_sockets([sock])
        url = f"http://127.0.0.1:{sock.getsockname()[1]}/services/{SERVICE_NAME}/"
        try:
            return await make_profile_list(PROFILES, service_url=url)(Spawner(user(hub_db, "ann")))
        finally:
            server.stop()

    [alpha] = run(scenario())
    assert alpha["description"] == "namespace team-alpha · 0 of 2 GPUs left"
    assert seen == [("ann", [ACCESS_SCOPE], pytest.approx(60, abs=2))]
