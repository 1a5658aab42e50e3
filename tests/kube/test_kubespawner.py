"""KubeSpawner on the real node: a real JupyterHub spawns ann's server as a pod, and her
``%swift_sft`` job runs as a pod of her team.

The hub runs on this machine as ``tests/hub`` runs it (``hub_process.HubProcess``: JupyterHub,
configurable-http-proxy, DummyAuthenticator, the quota service ``jupyter quota serve`` as the
hub-managed service), with ``KubeSpawner`` against the test cluster: user pods of
``localhost/jupyter-quota-user:latest`` (``scripts/build-kube-images.sh``) in the hub's namespace
``jhub``, on the real node (``kubenode``). Pods reach the hub and the quota service at the pod
bridge's gateway (``kubenode.GATEWAY``); the proxy reaches the pods at their IPs.

``deploy/z2jh-values.yaml`` is read as Zero to JupyterHub reads it, so the example admins copy is
the one tested: ``hub.config`` (``KubeSpawner.automount_service_account_token``,
``Spawner.server_token_scopes``, the custom scope), the quota service's command
(``--ip=0.0.0.0``), its config file (``hub.extraFiles``: backend, service account, profiles,
job settings), ``singleuser.extraEnv`` and the ``profile_list`` of ``hub.extraConfig``. What this
machine changes, and why (:func:`service_settings`, :func:`hub_settings`):

- no Helm and no hub pod: the hub and the service run on the host; the service signs in with the
  token of ``system:serviceaccount:jhub:hub`` from a kubeconfig (``kube_in_cluster: false``),
  the hub with the admin's (z2jh gives it its own Role in ``jhub``);
- addresses: ``hub`` (the hub's Service) is the gateway here, at the ports of this run;
- no registry: the job and user images are imported (pull policy ``Never``);
- no storage provisioner: the teams' ``homes``/``alpha-shared`` claims and the ``hf-cache``
  claim become one hostPath directory (the tiny model and dataset), mounted at the same path in
  the user pod and the job pod, as the shared file system is in production;
- a 2-core node: the LimitRange's defaults are scaled down, the pods tolerate the test node's
  taint (``kubecluster.REAL_NODE_TAINT``) and the node carries the A100 label of the values'
  ``nodeSelector``;
- the groups come with members (ann in ml-alpha, cat in both: ``binder/jupyterhub_config.py``);
  the values leave them empty for the admin page.
"""

from __future__ import annotations

import copy
import json
import os
import socket
import sys
import threading
from pathlib import Path

import kubecluster
import kubenode
import pytest
import z2jh_values
from kubecluster import REAL_NODE_LABEL, REAL_NODE_TAINT, until

from jupyter_quota.backends.kube import apply_profiles
from jupyter_quota.profiles import load_profiles

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tests" / "e2e"))
sys.path.insert(0, str(ROOT / "tests" / "hub"))
import hub_process  # noqa: E402
import tiny_swift  # noqa: E402
from hub_kernel import run_in_kernel  # noqa: E402

#: the teams of deploy/z2jh-values.yaml (test_z2jh_rbac makes them too)
VALUES_NAMESPACES = ("team-alpha", "team-beta")
HUB_NAMESPACE = kubecluster.SERVICE_ACCOUNT.namespace  # z2jh's release namespace (jhub)
TOLERATION = {"key": REAL_NODE_TAINT["key"], "operator": "Equal", "value": "true", "effect": "NoSchedule"}
#: The limits of a job that states none, scaled to the 2-core test node (values: 2-4 CPUs, 16-32 Gi).
TEST_LIMIT_RANGE = {
    "limits": [
        {
            "type": "Container",
            "default": {"cpu": "2", "memory": "4Gi"},
            "defaultRequest": {"cpu": "500m", "memory": "2Gi"},
        }
    ]
}
SA_DIR = "/var/run/secrets/kubernetes.io/serviceaccount"
MARK = "RESULT:"
#: Waits on a loaded 2-core machine (a pod's phases come from the kubelet's status updates).
SPAWN_TIMEOUT = 300.0
SWIFT_TIMEOUT = 600.0


def service_settings(kubeconfig: Path, work: Path) -> dict:
    """The service's ``JupyterQuota`` settings: the values' config file, adapted as the module says."""
    settings = copy.deepcopy(z2jh_values.service_config()["JupyterQuota"])
    assert settings["backend"] == "kube" and settings["kube_service_account"] == kubecluster.SERVICE_ACCOUNT.name
    assert settings["kube_service_account_namespace"] == HUB_NAMESPACE
    volume = {"name": "work", "mountPath": str(work), "hostPath": {"path": str(work), "type": "Directory"}}
    for profile in settings["profiles"]:
        profile["volumes"] = [volume]
        profile["tolerations"] = [*profile.get("tolerations", []), TOLERATION]
        if "limitRange" in profile:
            profile["limitRange"] = TEST_LIMIT_RANGE
    settings.update(
        kube_in_cluster="false",
        kube_config_file=str(kubeconfig),
        kube_cache_volumes=[],
        job_image=kubenode.JOB_IMAGE,
        job_image_pull_policy="Never",
        job_command=["swift", "sft"],  # the tests' jupyter_server_config.py sets the fake trainer
    )
    return settings


def hub_settings(root: Path, settings: dict, admin_kubeconfig: Path, work: Path) -> str:
    """Lines for ``jupyterhub_config.py`` after the demo's: KubeSpawner with the values' settings."""
    values = z2jh_values.values()
    config_file = root / "jupyter_quota_config.json"
    config_file.write_text(json.dumps({"JupyterQuota": settings}))
    hub_config = copy.deepcopy(values["hub"]["config"])
    hub_config["JupyterHub"].pop("load_groups")  # members come from the demo (the values: the admin page)
    env = dict(values["singleuser"]["extraEnv"])
    assert env["JUPYTER_QUOTA_SERVICE_URL"].startswith("http://hub:10101/")
    service_command = values["hub"]["services"]["jupyter-quota"]["command"]
    listen = [a for a in service_command if a.startswith("--ip=")]
    assert listen == ["--ip=0.0.0.0"], service_command
    snippet = values["hub"]["extraConfig"]["jupyter-quota-profile-list"]
    mount_path = values["hub"]["extraFiles"][z2jh_values.CONFIG_FILE]["mountPath"]
    assert mount_path in snippet and "http://127.0.0.1:10101/" in snippet, snippet
    return f"""
import os
# KubeSpawner calls load_kube_config() outside a pod; kubernetes_asyncio reads KUBECONFIG on import.
os.environ["KUBECONFIG"] = {str(admin_kubeconfig)!r}
from kubespawner import KubeSpawner  # noqa: F401, E402 (fails the hub at start when it is missing)
for _section, _traits in {hub_config!r}.items():
    for _name, _value in _traits.items():
        setattr(getattr(c, _section), _name, _value)
_service_port = int(os.environ["JUPYTER_QUOTA_SERVICE_PORT"])
for _service in c.JupyterHub.services:
    if _service["name"] == "jupyter-quota":
        _service["command"] = [*_service["command"], {listen[0]!r}]

c.JupyterHub.spawner_class = "kubespawner.KubeSpawner"
# The hub's API on every address (the pods' bridge appears with the first pod); the proxy and the
# service dial loopback, the pods the gateway (JupyterHub.hub_connect_url would also move the
# proxy's hub route, and the default bind address, to the gateway).
c.JupyterHub.hub_bind_url = "http://0.0.0.0:%d" % c.JupyterHub.hub_port
c.JupyterHub.hub_connect_url = "http://127.0.0.1:%d" % c.JupyterHub.hub_port
c.KubeSpawner.hub_connect_url = "http://{kubenode.GATEWAY}:%d" % c.JupyterHub.hub_port
c.KubeSpawner.namespace = {HUB_NAMESPACE!r}
c.KubeSpawner.image = {kubenode.USER_IMAGE!r}
c.KubeSpawner.image_pull_policy = "Never"
c.KubeSpawner.cmd = ["jupyterhub-singleuser"]
c.KubeSpawner.args = []
c.KubeSpawner.environment = {{
    k: v.replace("http://hub:10101/", "http://{kubenode.GATEWAY}:%d/" % _service_port) for k, v in {env!r}.items()
}}
c.KubeSpawner.node_selector = {REAL_NODE_LABEL!r}
c.KubeSpawner.tolerations = [{TOLERATION!r}]
c.KubeSpawner.volumes = [{{"name": "work", "hostPath": {{"path": {str(work)!r}, "type": "Directory"}}}}]
c.KubeSpawner.volume_mounts = [{{"name": "work", "mountPath": {str(work)!r}}}]
c.KubeSpawner.start_timeout = {int(SPAWN_TIMEOUT)}
c.KubeSpawner.http_timeout = {int(SPAWN_TIMEOUT)}

# hub.extraConfig as the values have it, at this run's paths and ports
exec({snippet!r}.replace({mount_path!r}, {str(config_file)!r}).replace(
    "http://127.0.0.1:10101/", "http://127.0.0.1:%d/" % _service_port))
"""


class Relay:
    """TCP from the pod network's gateway to the API server on loopback: a cluster's pods reach its
    API server, and this one listens on 127.0.0.1 only."""

    def __init__(self, target_port: int):
        self.target = ("127.0.0.1", target_port)
        self.listener = socket.create_server((kubenode.GATEWAY, 0))
        self.port = self.listener.getsockname()[1]
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self):
        while True:
            try:
                client, _ = self.listener.accept()
            except OSError:
                return
            upstream = socket.create_connection(self.target)
            for a, b in ((client, upstream), (upstream, client)):
                threading.Thread(target=self._pipe, args=(a, b), daemon=True).start()

    @staticmethod
    def _pipe(a, b):
        try:
            while data := a.recv(65536):
                b.sendall(data)
        except OSError:
            pass
        finally:
            for s in (a, b):
                try:
                    s.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass

    def close(self):
        self.listener.close()


@pytest.fixture(scope="module")
def work(tmp_path_factory):
    """The tiny model and dataset: the 'shared file system' of the user pod and the job pod."""
    root = tmp_path_factory.mktemp("kubespawner-work")
    os.chmod(root, 0o777)
    tiny_swift.build_tiny_model(root / "model")
    tiny_swift.build_dataset(root / "data.jsonl")
    return root


@pytest.fixture(scope="module")
def spawner_hub(request, tmp_path_factory, work):
    cluster = kubecluster.node_or_fail(request.config)
    images = cluster.node._ctr("images", "ls", "-q").stdout.split()
    if kubenode.USER_IMAGE not in images:
        pytest.fail(f"no {kubenode.USER_IMAGE} on the node: run scripts/build-kube-images.sh", pytrace=False)
    kube = cluster.kube()
    kubecluster.wait_namespaces_gone(kube, [*VALUES_NAMESPACES, HUB_NAMESPACE], only_terminating=True)
    kubecluster.create_namespace(kube, HUB_NAMESPACE)
    kube.patch(f"/api/v1/nodes/{kubenode.NODE_NAME}", {"metadata": {"labels": _values_node_selector()}})
    settings = service_settings(cluster.kubeconfig_as("service"), work)
    apply_profiles(load_profiles(settings["profiles"]), kube, account=kubecluster.SERVICE_ACCOUNT)
    for profile in settings["profiles"]:
        kubecluster.wait_quota_status(kube, profile["namespace"])
    root = tmp_path_factory.mktemp("kubespawner-hub")
    server_config = "".join(f"c.JupyterQuota.{k} = {v!r}\n" for k, v in settings.items())
    hub = hub_process.HubProcess(root, server_config, hub_settings(root, settings, cluster.kubeconfig, work))
    try:
        yield cluster, kube, hub.start()
    finally:
        hub.stop()  # cleanup_servers: KubeSpawner deletes the user pods
        # the values' teams go with their jobs and Roles: test_z2jh_rbac makes them again
        kubecluster.delete_namespaces(kube, VALUES_NAMESPACES)


def _values_node_selector() -> dict:
    alpha = next(p for p in z2jh_values.service_config()["JupyterQuota"]["profiles"] if p["team"] == "alpha")
    return alpha["nodeSelector"]


def options(profile: str, gpus: int = 0) -> dict:
    """KubeSpawner's user_options for a profile and its ``gpus`` choice (as its form posts them)."""
    return {"profile": profile, f"profile-option-{profile}--gpus": str(gpus)}


def spawn(hub, user: str, profile: str) -> None:
    r = hub.api("POST", f"/users/{user}/server", json=options(profile))
    assert r.status_code in (201, 202), r.text
    hub_process.wait_for(f"{user}'s server pod", lambda: hub.server_ready(user), SPAWN_TIMEOUT, hub.log, 0.5)


def user_pod(kube, user: str) -> dict:
    pods = kube.get(f"/api/v1/namespaces/{HUB_NAMESPACE}/pods", labelSelector=f"hub.jupyter.org/username={user}")
    assert len(pods["items"]) == 1, [p["metadata"]["name"] for p in pods["items"]]
    return pods["items"][0]


def kernel_result(hub, user: str, code: str, timeout: float = 240) -> dict:
    stdout = run_in_kernel(hub, user, code, timeout=timeout)
    lines = [line for line in stdout.splitlines() if line.startswith(MARK)]
    assert len(lines) == 1, stdout
    return json.loads(lines[0][len(MARK) :])


def test_the_spawn_form_offers_each_user_only_their_teams(spawner_hub):
    _, _, hub = spawner_hub
    for user, offered, hidden in (("ann", {"team-alpha"}, {"team-beta"}), ("cat", {"team-alpha", "team-beta"}, set())):
        session = hub.browser(user, page="/hub/spawn")
        form = hub.visit(session, "/hub/spawn").text
        for slug in offered:
            assert f'value="{slug}"' in form, (user, slug, form[-3000:])
        for slug in hidden:
            assert slug not in form, (user, slug)
    # The REST API cannot pick another team's profile either: KubeSpawner validates the choice.
    r = hub.api("POST", "/users/ann/server", json=options("team-beta"))
    assert r.status_code >= 400 or not _spawned_ok(hub, "ann"), r.text


def _spawned_ok(hub, user: str) -> bool:
    def settled():
        server = (hub.api("GET", f"/users/{user}").json().get("servers") or {}).get("")
        return ("gone",) if not server else ("ready",) if server.get("ready") else None

    return until(settled, SPAWN_TIMEOUT, f"{user}'s spawn to settle")[0] == "ready"


PROBE = r"""
import json, os, ssl, urllib.error, urllib.request
out = {"sa_dir": os.path.exists(__SA_DIR__), "kube_env": sorted(k for k in os.environ if k.startswith("KUBERNETES_"))}
try:
    import kubernetes.config
    kubernetes.config.load_incluster_config()
    out["incluster"] = "loaded"
except Exception as e:
    out["incluster"] = f"{type(e).__name__}: {e}"

def call(method, url, headers=None, body=None, context=None):
    req = urllib.request.Request(url, method=method, headers=headers or {}, data=body)
    try:
        with urllib.request.urlopen(req, timeout=20, context=context) as r:
            return [r.status, r.read().decode()[:300]]
    except urllib.error.HTTPError as e:
        return [e.code, e.read().decode()[:300]]

# Anonymous, at the API server (TLS unverified: there is no CA in the pod either).
api = "https://" + __API__ + "/api/v1/namespaces/team-alpha/resourcequotas"
out["anonymous_get"] = call("GET", api, context=ssl._create_unverified_context())
patch = json.dumps({"spec": {"hard": {"requests.nvidia.com/gpu": "100"}}}).encode()
out["anonymous_patch"] = call(
    "PATCH", api + "/team", {"Content-Type": "application/merge-patch+json"}, patch, ssl._create_unverified_context()
)
# With the only credential in the pod, the server's own hub token: an admin's change of quota.
token = os.environ["JUPYTERHUB_API_TOKEN"]
body = json.dumps({"team": "alpha", "namespace": "team-alpha", "hard": {"requests.nvidia.com/gpu": "100"}}).encode()
auth = {"Authorization": "token " + token, "Content-Type": "application/json"}
profile_url = os.environ["JUPYTER_QUOTA_SERVICE_URL"] + "quota/v1/profiles/alpha"
out["service_put"] = call("PUT", profile_url, auth, body)
out["service_put_anonymous"] = call("PUT", profile_url, {"Content-Type": "application/json"}, body)
print("RESULT:" + json.dumps(out))
"""


def test_anns_server_is_a_pod_without_credentials_and_her_job_runs_as_a_pod_of_her_team(spawner_hub, work):
    cluster, kube, hub = spawner_hub
    spawn(hub, "ann", "team-alpha")
    pod = user_pod(kube, "ann")
    spec = pod["spec"]
    assert spec["nodeName"] == kubenode.NODE_NAME
    assert spec["containers"][0]["image"] == kubenode.USER_IMAGE
    # The setting that keeps a token out of the pod where ServiceAccount admission runs (it does not
    # in the test cluster, so the missing file alone would prove nothing): the values' own.
    assert spec.get("automountServiceAccountToken") is False
    assert spec.get("serviceAccountName") in (None, ""), spec.get("serviceAccountName")
    assert not any(v.get("secret") or v.get("projected") for v in spec.get("volumes") or []), spec["volumes"]
    where = f"{spec['nodeName']}, IP {pod['status']['podIP']}"
    print(f"\nann's server: pod {HUB_NAMESPACE}/{pod['metadata']['name']} on {where}")

    relay = Relay(int(cluster.server.rsplit(":", 1)[1]))
    try:
        api = f"{kubenode.GATEWAY}:{relay.port}"
        probe = kernel_result(hub, "ann", PROBE.replace("__SA_DIR__", repr(SA_DIR)).replace("__API__", repr(api)))
    finally:
        relay.close()
    print(f"from ann's kernel: {json.dumps(probe, indent=1)}")
    assert probe["sa_dir"] is False
    assert probe["incluster"].startswith("ConfigException"), probe["incluster"]
    for call in ("anonymous_get", "anonymous_patch"):  # 403 to system:anonymous (401 were anonymous auth off)
        assert probe[call][0] in (401, 403), probe
    assert probe["service_put"][0] == 403, probe
    assert probe["service_put_anonymous"][0] in (401, 403), probe
    hard = kube.get("/api/v1/namespaces/team-alpha/resourcequotas")["items"]
    assert all(q["spec"]["hard"].get("requests.nvidia.com/gpu") != "100" for q in hard)

    # %swift_sft in her kernel: her server forwards to the service, which creates the Job in team-alpha.
    args = tiny_swift.swift_flags(work / "model", work / "data.jsonl", work / "out")
    code = (
        "import json\nfrom IPython import get_ipython\nfrom IPython.utils.capture import capture_output\n"
        "ip = get_ipython()\nip.run_line_magic('load_ext', 'jupyter_quota')\n"
        "with capture_output() as shown:\n"
        f"    job = ip.run_line_magic('swift_sft', {'--as-is --gpus 1 --name kspawn ' + ' '.join(args)!r})\n"
        "print('RESULT:' + json.dumps({'name': job.name, 'namespace': job.namespace, 'shown': shown.stdout[-2000:]}))\n"
    )
    spawn(hub, "cat", "team-alpha")  # before the job: it may end while her pod starts
    submitted = kernel_result(hub, "ann", code)
    name = submitted["name"]
    assert submitted["namespace"] == "team-alpha", submitted

    # cat, of the same team, sees the GPU in use in team-alpha's balance (through her own server pod).
    def gpu_used_seen_by_cat():
        r = hub.quota("cat", "GET", "/namespaces/team-alpha/balance")
        assert r.status_code == 200, r.text
        return r.json()["resources"]["requests.nvidia.com/gpu"]["used"] == "1" and r.json()

    def ended():
        r = hub.quota("ann", "GET", f"/namespaces/team-alpha/jobs/{name}")
        assert r.status_code == 200, r.text
        return r.json()["phase"] in ("Succeeded", "Failed") and r.json()

    seen = until(lambda: gpu_used_seen_by_cat() or ended(), SWIFT_TIMEOUT, "cat to see the GPU used (or the job end)")
    assert "phase" not in seen, f"the job ended before cat saw its GPU: {seen}"
    job_pod = kube.get("/api/v1/namespaces/team-alpha/pods", labelSelector=f"job-name={name}")["items"][0]
    done = until(ended, SWIFT_TIMEOUT, "ann's swift job to end")
    logs = hub.quota("ann", "GET", f"/namespaces/team-alpha/jobs/{name}/logs").text
    assert done["phase"] == "Succeeded", (done, logs[-3000:])
    assert done["owner"] == "ann"
    assert job_pod["spec"]["nodeName"] == kubenode.NODE_NAME
    container = job_pod["spec"]["containers"][0]
    assert container["image"] == kubenode.JOB_IMAGE and container["resources"]["limits"]["nvidia.com/gpu"] == "1"
    assert list((work / "out").glob("v*/checkpoint-3")), "no checkpoint on the shared volume"
    print(
        f"ann's job: pod team-alpha/{job_pod['metadata']['name']} on {job_pod['spec']['nodeName']}, "
        f"resources {container['resources']}, {done['phase']}; cat saw team-alpha's GPUs "
        f"{seen['resources']['requests.nvidia.com/gpu']}"
    )
