"""A real Kubernetes v1.20.2 control plane on loopback for the kube test tier.

``start_cluster()`` runs etcd, kube-apiserver (TLS, bearer tokens, RBAC authorization with the
admin in ``system:masters`` and the test identities of :data:`IDENTITIES`, LimitRanger and
ResourceQuota admission on), kube-controller-manager (resourcequota, job, garbagecollector,
namespace, and the deployment and replicaset controllers endpoints need) and kube-scheduler, all
from ``scripts/build-kube.sh``'s cache, on free loopback ports in a temporary directory;
registers simulated GPU nodes; and runs a :class:`NodeAgent` that plays the kubelet, as kwok
does: a bound pod goes Running, then Succeeded or Failed as its container's arguments say
(``--sleep S``, ``--exit CODE``, the arguments ``tests/fake_trainer.py`` takes), and a pod being
deleted is removed.

``JUPYTER_QUOTA_TEST_KUBECONFIG=/path/to/kubeconfig`` points the tier at an existing cluster
instead (any version from 1.20 on, with nodes that have ``nvidia.com/gpu``); nothing is started
then, and tests that restart the API server are skipped with that reason.

Anything that prevents the cluster from starting raises :class:`ClusterStartError` with the
reason and the tail of the failing component's log; the fixtures turn it into a test failure.
"""

from __future__ import annotations

import atexit
import json
import os
import shlex
import shutil
import signal
import socket
import subprocess
import tempfile
import threading
import time
from pathlib import Path

import kubenode
from processes import ProcessGroup, utcnow

from jupyter_quota.backends.kube.client import Kube, KubeError, load_api_client
from jupyter_quota.rbac import ServiceAccount

ROOT = Path(__file__).resolve().parents[2]
CACHE = Path(os.environ.get("JUPYTER_QUOTA_KUBE_CACHE") or Path.home() / ".cache/jupyter-quota/kube-1.20.2")
TOKEN = "jupyter-quota-test-token"
#: The quota service's account (z2jh's hub pod's, in the release namespace ``jhub``).
SERVICE_ACCOUNT = ServiceAccount("hub", "jhub")
#: Who else the API server knows (``--token-auth-file``), each with its token and groups, as the
#: API server names a ServiceAccount's token: the quota service (``JupyterQuota.kube_service_account``)
#: and a single-user pod's account. The API server authorizes with RBAC; the admin (``TOKEN``) is
#: in ``system:masters``.
IDENTITIES = {
    "service": (
        "jupyter-quota-test-service-token",
        SERVICE_ACCOUNT.username,
        "system:serviceaccounts,system:serviceaccounts:jhub,system:authenticated",
    ),
    "user-pod": (
        "jupyter-quota-test-user-pod-token",
        "system:serviceaccount:jhub:default",
        "system:serviceaccounts,system:serviceaccounts:jhub,system:authenticated",
    ),
}
GPU = "nvidia.com/gpu"
#: The job command on the test cluster: a POSIX-shell stand-in for ``swift sft`` taking
#: fake_trainer's arguments, so the same jobs also run on a real cluster's nodes (busybox).
TRAINER_SCRIPT = (
    's=0; c=0; while [ $# -gt 0 ]; do case "$1" in --sleep) s=$2; shift;; --exit) c=$2; shift;; '
    'esac; shift; done; echo ready; sleep "$s"; echo "exiting with $c"; exit "$c"'
)
JOB_COMMAND = ["sh", "-c", TRAINER_SCRIPT, "fake-trainer"]
JOB_IMAGE = os.environ.get("JUPYTER_QUOTA_TEST_IMAGE", "busybox:1.36")
NODES = [
    {"name": "gpu-node-0", "labels": {"jupyter-quota-test/gpu-model": "a100"}, "gpus": 8},
    {"name": "gpu-node-1", "labels": {"jupyter-quota-test/gpu-model": "h100"}, "gpus": 8},
]


class ClusterStartError(RuntimeError):
    """The test cluster could not be started; the message says why."""


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Cluster:
    """A running test cluster, or an external one (``external=True``: no processes of ours)."""

    def __init__(self, workdir: Path, kubeconfig: Path, external: bool = False):
        self.workdir = workdir
        self.kubeconfig = kubeconfig
        self.external = external
        self.procs = ProcessGroup(workdir, error=ClusterStartError, stop_timeout=15.0)
        self.timings: dict[str, float] = {}
        self.agent: NodeAgent | None = None
        #: the real node (:func:`start_node`), when one was started
        self.node: kubenode.KubeletNode | None = None
        self.server = ""
        #: keep ``workdir`` at stop (``scripts/kube-cluster``'s DIR belongs to the caller)
        self.keep = False

    # -- clients ----------------------------------------------------------------------------

    def api_client(self):
        return load_api_client(str(self.kubeconfig), in_cluster="false")

    def kube(self, timeout: float = 10.0) -> Kube:
        return Kube(self.api_client(), request_timeout=timeout)

    def kubeconfig_as(self, identity: str) -> Path:
        """A kubeconfig with the token of ``IDENTITIES[identity]`` (not the admin's)."""
        self._require_own(f"sign in as the test identity {identity!r}")
        return self.workdir / f"kubeconfig-{identity}"

    def service_kube(self, timeout: float = 10.0) -> Kube:
        """As the quota service's account (``SERVICE_ACCOUNT``); an external cluster: its kubeconfig's user."""
        return self.kube(timeout) if self.external else self.kube_as("service", timeout)

    def kube_as(self, identity: str, timeout: float = 10.0) -> Kube:
        return Kube(load_api_client(str(self.kubeconfig_as(identity)), in_cluster="false"), request_timeout=timeout)

    def stop_apiserver(self) -> None:
        """Stop kube-apiserver (etcd keeps the data); watches break."""
        self._require_own("restart the API server")
        self.procs.terminate("kube-apiserver")

    def pause_apiserver(self) -> None:
        """Freeze kube-apiserver with SIGSTOP, as a network partition looks to a client: open
        connections stay open and nothing arrives on them. :meth:`resume_apiserver` undoes it."""
        self._require_own("pause the API server")
        os.kill(self.procs["kube-apiserver"].pid, signal.SIGSTOP)

    def resume_apiserver(self, timeout: float = 60.0) -> None:
        """SIGCONT the frozen kube-apiserver and wait until it is ready again."""
        self._require_own("resume the API server")
        os.kill(self.procs["kube-apiserver"].pid, signal.SIGCONT)
        self.wait_ready(timeout)

    def stop_controller_manager(self) -> None:
        """Stop kube-controller-manager: Jobs get no pods, quotas no recount, until started again."""
        self._require_own("stop the controller manager")
        self.procs.terminate("kube-controller-manager")

    def start_controller_manager(self) -> None:
        self._require_own("start the controller manager")
        self.procs.restart("kube-controller-manager")

    def start_apiserver(self, timeout: float = 60.0) -> float:
        """Start kube-apiserver again with the same flags; return seconds until ready."""
        self._require_own("restart the API server")
        started = time.monotonic()
        self.procs.restart("kube-apiserver")
        self.wait_ready(timeout)
        return time.monotonic() - started

    def wait_ready(self, timeout: float) -> None:
        kube = self.kube(timeout=2.0)
        deadline = time.monotonic() + timeout
        last = ""
        while time.monotonic() < deadline:
            self.procs.check_alive("kube-apiserver")
            try:
                if kube.request("GET", "/readyz", raw=True).strip() == "ok":
                    return
            except KubeError as e:
                last = str(e)
            time.sleep(0.2)
        raise ClusterStartError(
            f"kube-apiserver not ready after {timeout:.0f}s ({last}):\n{self.procs.log_tail('kube-apiserver')}"
        )

    def stop(self) -> None:
        if self.agent is not None:
            self.agent.stop()
        if self.node is not None:
            self.node.stop(self.kube(timeout=5.0) if "kube-apiserver" in self.procs else None)
            self.node = None
        for name in ("kube-scheduler", "kube-controller-manager", "kube-apiserver", "etcd"):
            self.procs.terminate(name)
        if not self.external and not self.keep and not os.environ.get("JUPYTER_QUOTA_KEEP_KUBE"):
            shutil.rmtree(self.workdir, ignore_errors=True)

    def _require_own(self, what: str) -> None:
        if self.external:
            import pytest

            pytest.skip(f"cannot {what} of an external cluster (JUPYTER_QUOTA_TEST_KUBECONFIG)")


def start_cluster(*, nodes: bool = True, agent: bool = True, workdir: Path | None = None) -> Cluster:
    """Start (or attach to) the test cluster; raises :class:`ClusterStartError` with the reason.

    ``nodes``: register the simulated nodes (:data:`NODES`); ``agent``: run their
    :class:`NodeAgent`; ``workdir``: where the cluster's files go (kept at stop), else a temporary
    directory. A real node is :func:`start_node`'s."""
    external = os.environ.get("JUPYTER_QUOTA_TEST_KUBECONFIG")
    if external:
        cluster = Cluster(Path(tempfile.mkdtemp(prefix="jq-kube-ext-")), Path(external), external=True)
        try:
            cluster.kube().get("/version")
        except KubeError as e:
            raise ClusterStartError(
                f"the cluster in JUPYTER_QUOTA_TEST_KUBECONFIG={external} does not answer: {e}"
            ) from e
        return cluster
    binaries = {c: CACHE / "bin" / c for c in ("kube-apiserver", "kube-controller-manager", "kube-scheduler")}
    missing = [str(p) for p in binaries.values() if not os.access(p, os.X_OK)]
    etcd = shutil.which("etcd") or "/usr/bin/etcd"
    if not os.access(etcd, os.X_OK):
        missing.append("etcd (Debian package etcd-server)")
    if missing:
        raise ClusterStartError(
            "the Kubernetes test binaries are missing: "
            + ", ".join(missing)
            + ". Build them once with `scripts/build-kube.sh` (about 13 minutes on 2 cores), or point "
            "JUPYTER_QUOTA_TEST_KUBECONFIG at a cluster."
        )
    keep = workdir is not None
    workdir = Path(workdir) if workdir is not None else Path(tempfile.mkdtemp(prefix="jq-kube-"))
    workdir.mkdir(parents=True, exist_ok=True)
    cluster = Cluster(workdir, workdir / "kubeconfig")
    cluster.keep = keep
    atexit.register(cluster.stop)  # even when the run is interrupted, no process is left behind
    t0 = time.monotonic()
    try:
        _certificates(workdir)
        (workdir / "tokens.csv").write_text(
            f"{TOKEN},admin,admin-uid,system:masters\n"
            + "".join(f'{token},{user},{user}-uid,"{groups}"\n' for token, user, groups in IDENTITIES.values())
            + kubenode.TOKEN_LINE
        )
        etcd_port, peer_port, api_port = free_port(), free_port(), free_port()
        cluster.procs.spawn(
            "etcd",
            [
                etcd,
                "--name",
                "default",
                "--data-dir",
                str(workdir / "etcd"),
                "--listen-client-urls",
                f"http://127.0.0.1:{etcd_port}",
                "--advertise-client-urls",
                f"http://127.0.0.1:{etcd_port}",
                "--listen-peer-urls",
                f"http://127.0.0.1:{peer_port}",
                "--initial-advertise-peer-urls",
                f"http://127.0.0.1:{peer_port}",
                "--initial-cluster",
                f"default=http://127.0.0.1:{peer_port}",
                "--log-level",
                "warn",
            ],
        )
        _wait_port(etcd_port, 30, cluster, "etcd")
        cluster.timings["etcd"] = time.monotonic() - t0
        cluster.procs.spawn(
            "kube-apiserver",
            [
                str(binaries["kube-apiserver"]),
                f"--etcd-servers=http://127.0.0.1:{etcd_port}",
                "--bind-address=127.0.0.1",
                "--advertise-address=127.0.0.1",
                f"--secure-port={api_port}",
                f"--tls-cert-file={workdir / 'server.crt'}",
                f"--tls-private-key-file={workdir / 'server.key'}",
                f"--token-auth-file={workdir / 'tokens.csv'}",
                "--authorization-mode=RBAC",
                "--service-cluster-ip-range=10.0.0.0/24",
                "--service-account-issuer=https://kubernetes.default.svc",
                f"--service-account-key-file={workdir / 'sa.pub'}",
                f"--service-account-signing-key-file={workdir / 'sa.key'}",
                "--enable-admission-plugins=NamespaceLifecycle,LimitRanger,ResourceQuota,Priority",
                "--disable-admission-plugins=ServiceAccount",
                "--kubelet-preferred-address-types=InternalIP",
                "--v=1",
            ],
        )
        cluster.server = f"https://127.0.0.1:{api_port}"
        _write_kubeconfig(cluster.kubeconfig, cluster.server, workdir / "ca.crt")
        for identity, (token, _, _) in IDENTITIES.items():
            _write_kubeconfig(
                cluster.kubeconfig_as(identity), f"https://127.0.0.1:{api_port}", workdir / "ca.crt", token
            )
        cluster.wait_ready(90)
        cluster.timings["kube-apiserver"] = time.monotonic() - t0
        cluster.procs.spawn(
            "kube-controller-manager",
            [
                str(binaries["kube-controller-manager"]),
                f"--kubeconfig={cluster.kubeconfig}",
                "--leader-elect=false",
                "--controllers=resourcequota,job,garbagecollector,namespace,deployment,replicaset",
                "--bind-address=127.0.0.1",
                "--secure-port=0",
                "--port=0",
                "--use-service-account-credentials=false",
                "--resource-quota-sync-period=10s",
                "--concurrent-resource-quota-syncs=5",
                "--v=1",
            ],
        )
        cluster.procs.spawn(
            "kube-scheduler",
            [
                str(binaries["kube-scheduler"]),
                f"--kubeconfig={cluster.kubeconfig}",
                "--leader-elect=false",
                "--bind-address=127.0.0.1",
                "--secure-port=0",
                "--port=0",
                "--v=1",
            ],
        )
        kube = cluster.kube()
        if nodes:
            for node in NODES:
                register_node(kube, node["name"], node["labels"], node["gpus"])
        _wait_controllers(cluster, kube)
        cluster.timings["ready"] = time.monotonic() - t0
        if agent:
            cluster.agent = NodeAgent(cluster.kube(timeout=5.0), {n["name"] for n in NODES})
            cluster.agent.start()
    except BaseException:
        cluster.stop() if os.environ.get("JUPYTER_QUOTA_KEEP_KUBE") else _stop_keep_logs(cluster)
        raise
    return cluster


def _stop_keep_logs(cluster: Cluster) -> None:
    if cluster.node is not None:
        cluster.node.stop(None)
        cluster.node = None
    for name in list(cluster.procs):
        cluster.procs.terminate(name)


#: The taint the tests give the real node, so that only pods meant for it (which tolerate it and
#: select it by :data:`REAL_NODE_LABEL`) land there and the simulated nodes keep the rest.
REAL_NODE_TAINT = {"key": "jupyter-quota-test/real-node", "value": "true", "effect": "NoSchedule"}
REAL_NODE_LABEL = {"jupyter-quota-test/node": "real"}


def start_node(cluster: Cluster, *, gpus: int = 4, taints: tuple = (), labels: dict | None = None) -> None:
    """A real node (containerd + kubelet, :mod:`kubenode`) in ``cluster``, Ready with ``gpus`` fake
    GPUs; stopped with the cluster. Raises :class:`ClusterStartError` with the reason."""
    cluster._require_own("run a kubelet for")
    kube = cluster.kube()
    binding = {
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "ClusterRoleBinding",
        "metadata": {"name": "jupyter-quota-test-node"},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "system:node"},
        "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": kubenode.NODE_USER}],
    }
    try:
        kube.post("/apis/rbac.authorization.k8s.io/v1/clusterrolebindings", binding)
    except KubeError as e:
        if e.code != 409:
            raise
    node = kubenode.KubeletNode(
        cluster.workdir, cluster.server, cluster.workdir / "ca.crt", CACHE, gpus=gpus, taints=taints, labels=labels
    )
    cluster.node = node
    try:
        node.start(kube)
    except kubenode.NodeStartError as e:
        cluster.node = None
        raise ClusterStartError(f"the real node could not start: {e}") from e
    cluster.timings.update({f"node {k}": v for k, v in node.timings.items()})


def shared_node(config) -> Cluster:
    """The shared cluster with the real node started (once per run; tainted, see REAL_NODE_TAINT)."""
    cluster = shared_cluster(config)
    error = getattr(config, "_jupyter_quota_node_error", None)
    if error is not None:
        raise ClusterStartError(error)
    if cluster.node is None:
        try:
            start_node(cluster, gpus=8, taints=(REAL_NODE_TAINT,), labels=REAL_NODE_LABEL)
        except ClusterStartError as e:
            config._jupyter_quota_node_error = str(e)
            raise
    return cluster


def node_or_fail(config) -> Cluster:
    """:func:`shared_node`, or a failed test saying why (a skip only when asked for)."""
    import pytest

    cluster = cluster_or_fail(config)
    if cluster.external:
        pytest.skip("JUPYTER_QUOTA_TEST_KUBECONFIG: the real-node tests start their own kubelet")
    try:
        return shared_node(config)
    except ClusterStartError as e:
        pytest.fail(f"the test cluster's real node could not start: {e}", pytrace=False)


def register_node(kube: Kube, name: str, labels: dict, gpus: int, cpu: str = "64", memory: str = "512Gi") -> None:
    """A Node object with ``nvidia.com/gpu`` capacity, Ready, whose kubelet port is closed (no logs)."""
    try:
        kube.post(
            "/api/v1/nodes",
            {
                "apiVersion": "v1",
                "kind": "Node",
                "metadata": {"name": name, "labels": {"kubernetes.io/hostname": name, "type": "simulated", **labels}},
            },
        )
    except KubeError as e:
        if e.code != 409:
            raise
    # The TaintNodesByCondition admission plugin marks a new node not-ready; the node lifecycle
    # controller (not run here) would lift that once the kubelet reports Ready, so do it now.
    kube.patch(f"/api/v1/nodes/{name}", {"spec": {"taints": None}})
    resources = {"cpu": cpu, "memory": memory, "pods": "110", GPU: str(gpus)}
    now = utcnow()
    kube.patch(
        f"/api/v1/nodes/{name}/status",
        {
            "status": {
                "capacity": resources,
                "allocatable": resources,
                "conditions": [
                    {
                        "type": "Ready",
                        "status": "True",
                        "reason": "KubeletReady",
                        "message": "simulated by the jupyter-quota tests",
                        "lastHeartbeatTime": now,
                        "lastTransitionTime": now,
                    }
                ],
                "addresses": [{"type": "InternalIP", "address": "127.0.0.1"}, {"type": "Hostname", "address": name}],
                "daemonEndpoints": {"kubeletEndpoint": {"Port": free_port()}},
                "nodeInfo": {
                    "kubeletVersion": "v1.20.2-simulated",
                    "architecture": "amd64",
                    "operatingSystem": "linux",
                    "machineID": name,
                    "systemUUID": name,
                    "bootID": name,
                    "kernelVersion": "",
                    "osImage": "simulated",
                    "containerRuntimeVersion": "simulated://1",
                    "kubeProxyVersion": "v1.20.2",
                },
            }
        },
    )


class NodeAgent:
    """Plays the kubelet of the simulated nodes: bound pods run their course; deleted pods go.

    A pod's container arguments decide its fate, as ``tests/fake_trainer.py`` reads them:
    ``--sleep S`` (seconds Running, default 0) and ``--exit CODE`` (0: Succeeded, else Failed).
    It polls the pods bound to its nodes every ``interval`` seconds.
    """

    def __init__(self, kube: Kube, nodes: set[str], interval: float = 0.1):
        self.kube = kube
        self.nodes = nodes
        self.interval = interval
        self.errors: list[str] = []
        self._started: dict[str, float] = {}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="kube-test-node-agent", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(5)

    def _run(self) -> None:
        while not self._stop.wait(self.interval):
            try:
                self.step()
            except KubeError as e:  # the API server may be down on purpose; try again next tick
                if len(self.errors) < 100:
                    self.errors.append(str(e))

    def step(self) -> None:
        pods = self.kube.get("/api/v1/pods", fieldSelector="spec.nodeName!=").get("items") or []
        for pod in pods:
            if pod["spec"].get("nodeName") not in self.nodes:
                continue
            meta, status = pod["metadata"], pod.get("status") or {}
            path = f"/api/v1/namespaces/{meta['namespace']}/pods/{meta['name']}"
            try:
                if meta.get("deletionTimestamp"):
                    self.kube.delete(path, body={"apiVersion": "v1", "kind": "DeleteOptions", "gracePeriodSeconds": 0})
                    self._started.pop(meta["uid"], None)
                    continue
                phase = status.get("phase", "Pending")
                sleep, code = fate(pod)
                if phase == "Pending":
                    self._started[meta["uid"]] = time.time()
                    self.kube.patch(path + "/status", {"status": running_status(pod)})
                elif phase == "Running":
                    began = self._started.setdefault(meta["uid"], time.time())
                    if time.time() - began >= sleep:
                        self.kube.patch(path + "/status", {"status": finished_status(pod, code)})
                        self._started.pop(meta["uid"], None)
            except KubeError as e:
                if e.code not in (404, 409):
                    raise


def fate(pod: dict) -> tuple[float, int]:
    container = pod["spec"]["containers"][0]
    argv = [str(a) for a in (container.get("command") or []) + (container.get("args") or [])]
    sleep, code = 0.0, 0
    for i, arg in enumerate(argv[:-1]):
        if arg == "--sleep":
            sleep = float(argv[i + 1])
        elif arg == "--exit":
            code = int(argv[i + 1])
    return sleep, code


def running_status(pod: dict) -> dict:
    now = utcnow()
    return {
        "phase": "Running",
        "startTime": now,
        "hostIP": "127.0.0.1",
        "podIP": "10.244.0.10",
        "conditions": [
            {"type": t, "status": "True", "lastTransitionTime": now}
            for t in ("Initialized", "Ready", "ContainersReady", "PodScheduled")
        ],
        "containerStatuses": [
            {
                "name": c["name"],
                "ready": True,
                "restartCount": 0,
                "image": c.get("image", ""),
                "imageID": "",
                "started": True,
                "state": {"running": {"startedAt": now}},
            }
            for c in pod["spec"]["containers"]
        ],
    }


def finished_status(pod: dict, code: int) -> dict:
    now = utcnow()
    started = (pod.get("status") or {}).get("startTime") or now
    return {
        "phase": "Succeeded" if code == 0 else "Failed",
        "conditions": [
            {"type": t, "status": "False", "reason": "PodCompleted", "lastTransitionTime": now}
            for t in ("Ready", "ContainersReady")
        ],
        "containerStatuses": [
            {
                "name": c["name"],
                "ready": False,
                "restartCount": 0,
                "image": c.get("image", ""),
                "imageID": "",
                "started": False,
                "state": {
                    "terminated": {
                        "exitCode": code,
                        "reason": "Completed" if code == 0 else "Error",
                        "startedAt": started,
                        "finishedAt": now,
                    }
                },
            }
            for c in pod["spec"]["containers"]
        ],
    }


def create_namespace(kube: Kube, name: str) -> None:
    try:
        kube.post("/api/v1/namespaces", {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}})
    except KubeError as e:
        if e.code != 409:
            raise


def delete_namespaces(kube: Kube, names, timeout: float = 180.0) -> None:
    """Delete the namespaces ``names`` (those that exist) and wait until they are gone: the next
    test that makes namespaces of the same names (the values' teams: ``test_kubespawner``,
    ``test_z2jh_rbac``) then starts from nothing, not from a Terminating one or another's Roles."""
    for name in names:
        try:
            kube.delete(f"/api/v1/namespaces/{name}")
        except KubeError as e:
            if e.code != 404:
                raise
    wait_namespaces_gone(kube, names, timeout)


def wait_namespaces_gone(kube: Kube, names, timeout: float = 180.0, only_terminating: bool = False) -> None:
    """Until none of ``names`` exists (``only_terminating``: until none is Terminating; an Active
    one stays)."""

    def gone() -> bool:
        for name in names:
            try:
                phase = kube.get(f"/api/v1/namespaces/{name}")["status"].get("phase")
            except KubeError as e:
                if e.code == 404:
                    continue
                raise
            if phase == "Terminating" or not only_terminating:
                return False
        return True

    until(gone, timeout, f"namespaces {', '.join(names)} to be gone")


def allowed(kube: Kube, namespace: str, group: str, resource: str, subresource: str, verb: str) -> bool:
    """Whether ``kube``'s identity may do ``verb`` (a SelfSubjectAccessReview; "" namespace: cluster-wide)."""
    review = kube.post(
        "/apis/authorization.k8s.io/v1/selfsubjectaccessreviews",
        {
            "apiVersion": "authorization.k8s.io/v1",
            "kind": "SelfSubjectAccessReview",
            "spec": {
                "resourceAttributes": {
                    "namespace": namespace,
                    "group": group,
                    "resource": resource,
                    "subresource": subresource,
                    "verb": verb,
                }
            },
        },
    )
    return review["status"].get("allowed", False)


def until(condition, timeout: float = 60.0, what: str = "condition"):
    """``condition()``'s first truthy value, polled every 0.1 s; AssertionError naming ``what``
    when ``timeout`` seconds pass first."""
    deadline = time.monotonic() + timeout
    while True:
        value = condition()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout:g} s waiting for {what}")
        time.sleep(0.1)


def wait_quota_status(kube: Kube, namespace: str, timeout: float = 30.0) -> None:
    """Until the quota controller filled ``status.hard`` of every quota in ``namespace``."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        items = kube.get(f"/api/v1/namespaces/{namespace}/resourcequotas").get("items") or []
        if all((q.get("status") or {}).get("hard") is not None and "used" in (q.get("status") or {}) for q in items):
            return
        time.sleep(0.1)
    raise AssertionError(f"the quota controller never filled the status of the quotas in {namespace}")


# -- setup helpers ---------------------------------------------------------------------------------


def _certificates(workdir: Path) -> None:
    """A CA, a server certificate for 127.0.0.1, and the service-account key pair (openssl)."""
    ext = workdir / "server.ext"
    ext.write_text(
        "subjectAltName=IP:127.0.0.1,DNS:localhost\nbasicConstraints=CA:FALSE\n"
        "keyUsage=digitalSignature,keyEncipherment\nextendedKeyUsage=serverAuth\n"
    )
    steps = [
        [
            "openssl",
            "req",
            "-x509",
            "-newkey",
            "rsa:2048",
            "-nodes",
            "-keyout",
            "ca.key",
            "-out",
            "ca.crt",
            "-days",
            "3650",
            "-subj",
            "/CN=jupyter-quota-test-ca",
        ],
        [
            "openssl",
            "req",
            "-newkey",
            "rsa:2048",
            "-nodes",
            "-keyout",
            "server.key",
            "-out",
            "server.csr",
            "-subj",
            "/CN=kube-apiserver",
        ],
        [
            "openssl",
            "x509",
            "-req",
            "-in",
            "server.csr",
            "-CA",
            "ca.crt",
            "-CAkey",
            "ca.key",
            "-CAcreateserial",
            "-out",
            "server.crt",
            "-days",
            "3650",
            "-extfile",
            "server.ext",
        ],
        ["openssl", "genrsa", "-out", "sa.key", "2048"],
        ["openssl", "rsa", "-in", "sa.key", "-pubout", "-out", "sa.pub"],
    ]
    for step in steps:
        done = subprocess.run(step, cwd=workdir, capture_output=True, text=True)
        if done.returncode != 0:
            raise ClusterStartError(f"{shlex.join(step)} failed: {done.stderr.strip()}")


def _write_kubeconfig(path: Path, server: str, ca: Path, token: str = TOKEN) -> None:
    path.write_text(f"""apiVersion: v1
kind: Config
clusters:
- name: test
  cluster:
    server: {server}
    certificate-authority: {ca}
users:
- name: admin
  user:
    token: {token}
contexts:
- name: test
  context:
    cluster: test
    user: admin
current-context: test
""")


def _wait_port(port: int, timeout: float, cluster: Cluster, name: str) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        cluster.procs.check_alive(name)
        with socket.socket() as s:
            if s.connect_ex(("127.0.0.1", port)) == 0:
                return
        time.sleep(0.1)
    raise ClusterStartError(
        f"{name} did not listen on 127.0.0.1:{port} within {timeout:.0f}s:\n{cluster.procs.log_tail(name)}"
    )


def _wait_controllers(cluster: Cluster, kube: Kube, timeout: float = 60.0) -> None:
    """Until the quota controller fills a probe quota's status (the controller-manager works)."""
    create_namespace(kube, "jq-probe")
    try:
        kube.post(
            "/api/v1/namespaces/jq-probe/resourcequotas",
            {
                "apiVersion": "v1",
                "kind": "ResourceQuota",
                "metadata": {"name": "probe"},
                "spec": {"hard": {"pods": "1"}},
            },
        )
    except KubeError as e:
        if e.code != 409:
            raise
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        for name in ("kube-controller-manager", "kube-scheduler"):
            cluster.procs.check_alive(name)
        quota = kube.get("/api/v1/namespaces/jq-probe/resourcequotas/probe")
        if (quota.get("status") or {}).get("used") is not None:
            return
        time.sleep(0.2)
    raise ClusterStartError(
        f"the quota controller did not sync within {timeout:.0f}s:\n{cluster.procs.log_tail('kube-controller-manager')}"
    )


def shared_cluster(config) -> Cluster:
    """One cluster per pytest run, whichever directory asks first; stopped at the end of the run."""
    cluster = getattr(config, "_jupyter_quota_kube_cluster", None)
    error = getattr(config, "_jupyter_quota_kube_error", None)
    if error is not None:
        raise ClusterStartError(error)
    if cluster is None:
        try:
            cluster = start_cluster()
        except ClusterStartError as e:
            config._jupyter_quota_kube_error = str(e)
            raise
        config._jupyter_quota_kube_cluster = cluster
        config.add_cleanup(cluster.stop)
    return cluster


def team_profile(namespace: str, **fields):
    """A TeamProfile for ``namespace`` (2 GPUs unless ``hard`` says otherwise), alice a member."""
    from jupyter_quota.profiles import TeamProfile

    fields.setdefault("hard", {"requests.nvidia.com/gpu": "2"})
    return TeamProfile(team=namespace.replace("jq-", ""), namespace=namespace, users=["alice"], **fields)


def server_config(cluster: Cluster, profile: dict) -> str:
    """Config lines for a ``tests/server_process.ServerProcess`` on the kube backend with one team."""
    return (
        "c.JupyterQuota.backend = 'kube'\n"
        f"c.JupyterQuota.profiles = [{profile!r}]\n"
        f"c.JupyterQuota.kube_config_file = {str(cluster.kubeconfig)!r}\n"
        "c.JupyterQuota.kube_in_cluster = 'false'\n"
        f"c.JupyterQuota.job_command = {JOB_COMMAND!r}\n"
        f"c.JupyterQuota.job_image = {JOB_IMAGE!r}\n"
    )


def cluster_or_fail(config) -> Cluster:
    """:func:`shared_cluster`, or a failed test saying why (a skip only when asked for)."""
    import pytest

    if os.environ.get("JUPYTER_QUOTA_KUBE_TESTS") == "skip":
        pytest.skip("JUPYTER_QUOTA_KUBE_TESTS=skip: the Kubernetes test tier was turned off")
    try:
        return shared_cluster(config)
    except ClusterStartError as e:
        pytest.fail(f"the Kubernetes test cluster could not start: {e}", pytrace=False)


def serve(workdir: Path) -> int:
    """``scripts/kube-cluster up``'s daemon: a control plane and a real node (untainted, 4 GPUs)
    in ``workdir``; writes ``workdir/ready`` (or ``workdir/failed`` with the reason) and runs until
    SIGTERM (``scripts/kube-cluster down``), then stops it all and puts the host back."""
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    signal.signal(signal.SIGINT, lambda *_: stop.set())
    cluster = None
    try:
        cluster = start_cluster(nodes=False, agent=False, workdir=workdir)
        start_node(cluster, gpus=int(os.environ.get("JUPYTER_QUOTA_NODE_GPUS", "4")))
    except (ClusterStartError, KubeError, OSError) as e:
        (workdir / "failed").write_text(f"{e}\n")
        if cluster is not None:
            cluster.stop()
        return 1
    (workdir / "timings.json").write_text(json.dumps(cluster.timings, indent=1))
    (workdir / "ready").write_text(f"{cluster.server}\n")
    while not stop.wait(1.0):
        for name in list(cluster.procs) + list(cluster.node.procs if cluster.node else []):
            proc = cluster.procs.get(name) or cluster.node.procs.get(name)
            if proc is not None and proc.poll() is not None:
                (workdir / "failed").write_text(f"{name} exited with code {proc.returncode}\n")
                stop.set()
    cluster.stop()
    (workdir / "ready").unlink(missing_ok=True)
    return 0


__all__ = [
    "CACHE",
    "GPU",
    "IDENTITIES",
    "JOB_COMMAND",
    "JOB_IMAGE",
    "NODES",
    "REAL_NODE_LABEL",
    "REAL_NODE_TAINT",
    "SERVICE_ACCOUNT",
    "TOKEN",
    "Cluster",
    "ClusterStartError",
    "NodeAgent",
    "allowed",
    "cluster_or_fail",
    "create_namespace",
    "fate",
    "node_or_fail",
    "register_node",
    "server_config",
    "shared_cluster",
    "shared_node",
    "start_cluster",
    "start_node",
    "until",
    "wait_quota_status",
]


if __name__ == "__main__":  # scripts/kube-cluster up runs: python tests/kube/kubecluster.py serve DIR
    import sys

    if len(sys.argv) != 3 or sys.argv[1] != "serve":
        sys.exit("usage: kubecluster.py serve DIR (use scripts/kube-cluster up|down DIR)")
    sys.exit(serve(Path(sys.argv[2]).resolve()))
