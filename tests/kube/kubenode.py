"""A real node for the test cluster: containerd and a kubelet v1.20.2 on this machine.

:class:`KubeletNode` starts Debian's containerd (its own socket and state; the image store in the
kube cache, so imported images outlive a run) and the kubelet of ``scripts/build-kube.sh``
against a control plane of ``kubecluster``, imports the images of ``scripts/build-kube-images.sh``
(busybox, pause, the job image with ms-swift) with no registry, and advertises fake
``nvidia.com/gpu`` capacity, as ``../shared/research/kubelet.md`` worked it out:

- runc cannot lower ``oom_score_adj`` here (no ``CAP_SYS_RESOURCE``): containerd clamps it
  (``restrict_oom_score_adj``);
- kubelet 1.20 refuses a loopback ``--node-ip``: the node's InternalIP is patched to 127.0.0.1
  (the API server reaches the kubelet there for logs);
- no node lifecycle controller runs: the ``not-ready`` taint is replaced by the node's own taints;
- pods get a bridge whose address (:data:`GATEWAY`) is the host's on the pod network, so the host
  (the API server's proxy, a hub, the quota service) reaches pods and pods reach the host; no
  masquerade and no iptables rules, so pods reach nothing beyond this machine.

The kubelet writes host paths it does not let one configure (``/var/log/pods``,
``/var/log/containers``, ``/var/lib/kubelet/device-plugins``, ``/var/lib/cni``,
``/run/containerd``) and host sysctls (``vm.overcommit_memory``, ``kernel.panic``,
``kernel.panic_on_oops``), so one kubelet runs per machine: :data:`LOCK` is taken (``flock``)
for the node's whole life, a second run waits for it, and what the host looked like before is
written to :data:`HOST_STATE` so that :meth:`KubeletNode.stop`, or the next start after a crash,
puts it back (sysctls, mounts, cgroups, the bridge, the host paths it created).
"""

from __future__ import annotations

import fcntl
import json
import os
import shutil
import signal
import subprocess
import time
from pathlib import Path

from processes import ProcessGroup

NODE_NAME = "jq-node"
NODE_TOKEN = "jupyter-quota-test-node-token"
NODE_USER = f"system:node:{NODE_NAME}"
#: The line of the API server's token file for the kubelet (group system:nodes).
TOKEN_LINE = f'{NODE_TOKEN},{NODE_USER},{NODE_USER}-uid,"system:nodes"\n'
GPU = "nvidia.com/gpu"
CGROUP_ROOT = "jq-kubelet"
BRIDGE = "jq0"
SUBNET = "10.244.77.0/24"
#: The host's address on the pod bridge: what a pod dials to reach a process on the host.
GATEWAY = "10.244.77.1"
LOCK = Path(os.environ.get("JUPYTER_QUOTA_KUBELET_LOCK", "/run/lock/jupyter-quota-kubelet.lock"))
HOST_STATE = LOCK.with_suffix(".host.json")
SYSCTLS = ("vm.overcommit_memory", "kernel.panic", "kernel.panic_on_oops")
#: Debian's containernetworking-plugins, and those the node's network config and containerd use
CNI_BIN = Path("/usr/lib/cni")
CNI_PLUGINS = ("bridge", "host-local", "loopback")
#: Host paths kubelet 1.20 and containerd 1.6 use whatever their flags say; removed at stop when
#: the node created them.
HOST_PATHS = ("/var/log/pods", "/var/log/containers", "/var/lib/kubelet", "/var/lib/cni", "/run/containerd")
PAUSE_IMAGE = "localhost/jupyter-quota-pause:3.4.1"
JOB_IMAGE = "localhost/jupyter-quota-job:latest"
#: KubeSpawner's single-user image (the job image plus jupyter_quota, jupyterhub, jupyterlab).
USER_IMAGE = "localhost/jupyter-quota-user:latest"
BUSYBOX_IMAGE = "docker.io/library/busybox:1.36"


class NodeStartError(RuntimeError):
    """The node could not start; the message says why (and shows the failing log's tail)."""


class KubeletNode:
    """containerd + kubelet registered as :data:`NODE_NAME` with ``gpus`` fake GPUs.

    ``taints`` replace the node's taints once it registers (the tests taint it so that only
    pods meant for a real node land there); ``labels`` go to ``--node-labels``.
    """

    def __init__(
        self,
        workdir: Path,
        server: str,
        ca: Path,
        cache: Path,
        *,
        gpus: int = 4,
        taints: tuple = (),
        labels: dict | None = None,
        job_image: bool = True,
    ):
        self.workdir = Path(workdir) / "node"
        self.server = server
        self.ca = Path(ca)
        self.cache = Path(cache)
        self.gpus = gpus
        self.taints = list(taints)
        self.labels = dict(labels or {})
        self.job_image = job_image
        self.procs = ProcessGroup(self.workdir, error=NodeStartError, stop_timeout=20.0)
        self.timings: dict[str, float] = {}
        self.socket = self.workdir / "containerd.sock"
        self._lock_fd: int | None = None

    # -- start ---------------------------------------------------------------------------------

    def start(self, kube, lock_timeout: float = 1800.0) -> None:
        t0 = time.monotonic()
        self._take_lock(lock_timeout)
        try:
            restore_host()  # a previous holder that died left its host state behind
            self.workdir.mkdir(parents=True, exist_ok=True)
            _save_host_state(self.workdir)
            self._start_containerd()
            self.timings["containerd"] = time.monotonic() - t0
            self._import_images()
            self.timings["images"] = time.monotonic() - t0
            self._start_kubelet(kube)
            self.timings["ready"] = time.monotonic() - t0
        except BaseException:
            self.stop(kube)
            raise

    def _take_lock(self, timeout: float) -> None:
        LOCK.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(LOCK, os.O_RDWR | os.O_CREAT, 0o644)
        deadline = time.monotonic() + timeout
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if time.monotonic() > deadline:
                    holder = os.pread(fd, 4096, 0).decode(errors="replace").strip()
                    os.close(fd)
                    raise NodeStartError(
                        f"another kubelet holds {LOCK} ({holder or 'holder unknown'}) after {timeout:.0f}s: only "
                        "one kubelet can run per machine; stop it (scripts/kube-cluster down DIR) or wait"
                    ) from None
                time.sleep(1.0)
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"pid {os.getpid()}, node dir {self.workdir}\n".encode(), 0)
        self._lock_fd = fd

    def _start_containerd(self) -> None:
        missing = [p for p in CNI_PLUGINS if not (CNI_BIN / p).is_file()]
        if missing:  # else every pod waits in ContainerCreating ("failed to find plugin")
            raise RuntimeError(
                f"the CNI plugins {', '.join(missing)} are not in {CNI_BIN}: install Debian's "
                "containernetworking-plugins (scripts/kube-cluster prepare does)"
            )
        for d in ("state", "cni/net.d", "cni/ipam", "runc", "opt"):
            (self.workdir / d).mkdir(parents=True, exist_ok=True)
        root = self.cache / "containerd"
        root.mkdir(parents=True, exist_ok=True)
        (self.workdir / "cni/net.d/10-jq.conflist").write_text(
            json.dumps(
                {
                    "cniVersion": "0.4.0",
                    "name": "jq",
                    "plugins": [
                        {
                            "type": "bridge",
                            "bridge": BRIDGE,
                            "isGateway": True,
                            "ipMasq": False,
                            "ipam": {
                                "type": "host-local",
                                "dataDir": str(self.workdir / "cni/ipam"),
                                "ranges": [[{"subnet": SUBNET, "gateway": GATEWAY}]],
                            },
                        }
                    ],
                }
            )
        )
        config = subprocess.run(["containerd", "config", "default"], capture_output=True, text=True, check=True).stdout
        (self.workdir / "containerd.toml").write_text(_containerd_config(config, self.workdir, root))
        self.procs.spawn("containerd", ["containerd", "--config", str(self.workdir / "containerd.toml")])
        self._wait(lambda: self._ctr("version", check=False).returncode == 0, 30, "containerd's socket", "containerd")
        # Containers of an earlier run stay in the image store's metadata; their tasks are gone.
        for name in self._ctr("containers", "ls", "-q").stdout.split():
            self._ctr("containers", "rm", name, check=False)

    def _import_images(self) -> None:
        images = self.cache / "images"
        present = set(self._ctr("images", "ls", "-q").stdout.split())
        wanted = [("busybox.tar", BUSYBOX_IMAGE, BUSYBOX_IMAGE), ("pause.tar", PAUSE_IMAGE, PAUSE_IMAGE)]
        if self.job_image:
            digest = (images / "job.hash").read_text().strip() if (images / "job.hash").exists() else ""
            wanted.append((f"job-{digest}.tar", JOB_IMAGE, f"localhost/jupyter-quota-job:{digest}"))
            if (images / "user.hash").exists():  # built unless --no-user; test_kubespawner says so if not
                digest = (images / "user.hash").read_text().strip()
                wanted.append((f"user-{digest}.tar", USER_IMAGE, f"localhost/jupyter-quota-user:{digest}"))
        for tar, ref, marker in wanted:
            if marker in present:
                continue
            path = images / tar
            if not path.is_file():
                raise NodeStartError(f"no image {path}: run scripts/build-kube-images.sh (or scripts/kube-cluster up)")
            t = time.monotonic()
            self._ctr("images", "import", str(path))
            if marker != ref:
                self._ctr("images", "tag", "--force", ref, marker)
            self.timings[f"import {tar}"] = time.monotonic() - t

    def _start_kubelet(self, kube) -> None:
        w = self.workdir
        (w / "kubelet-root").mkdir(exist_ok=True)
        (w / "volume-plugins").mkdir(exist_ok=True)
        _make_cgroup_root()
        port = _free_port()
        (w / "kubelet.kubeconfig").write_text(
            "apiVersion: v1\nkind: Config\n"
            f"clusters:\n- name: test\n  cluster:\n    server: {self.server}\n    certificate-authority: {self.ca}\n"
            f"users:\n- name: node\n  user:\n    token: {NODE_TOKEN}\n"
            "contexts:\n- name: test\n  context:\n    cluster: test\n    user: node\ncurrent-context: test\n"
        )
        (w / "kubelet.yaml").write_text(
            json.dumps(
                {
                    "apiVersion": "kubelet.config.k8s.io/v1beta1",
                    "kind": "KubeletConfiguration",
                    "address": "127.0.0.1",
                    "port": port,
                    "readOnlyPort": 0,
                    "healthzPort": 0,
                    # The API server sends no client certificate to the kubelet; loopback only.
                    "authentication": {"anonymous": {"enabled": True}, "webhook": {"enabled": False}},
                    "authorization": {"mode": "AlwaysAllow"},
                    "cgroupDriver": "cgroupfs",
                    "cgroupRoot": f"/{CGROUP_ROOT}",
                    "failSwapOn": False,
                    "makeIPTablesUtilChains": False,
                    # The imported images can be pulled from nowhere: never collect them.
                    "imageGCHighThresholdPercent": 100,
                    "imageGCLowThresholdPercent": 99,
                    "evictionHard": {"memory.available": "100Mi", "nodefs.available": "1%", "imagefs.available": "1%"},
                    "volumePluginDir": str(w / "volume-plugins"),
                    "nodeStatusUpdateFrequency": "2s",
                    "syncFrequency": "5s",
                }
            )
        )
        kubelet = self.cache / "bin" / "kubelet"
        if not os.access(kubelet, os.X_OK):
            raise NodeStartError(f"no kubelet at {kubelet}: run scripts/build-kube.sh (or scripts/kube-cluster up)")
        started = time.monotonic()
        self.procs.spawn(
            "kubelet",
            [
                str(kubelet),
                f"--config={w / 'kubelet.yaml'}",
                f"--kubeconfig={w / 'kubelet.kubeconfig'}",
                "--container-runtime=remote",
                f"--container-runtime-endpoint=unix://{self.socket}",
                f"--root-dir={w / 'kubelet-root'}",
                f"--cert-dir={w / 'pki'}",
                f"--hostname-override={NODE_NAME}",
                # Refused as loopback, so the kubelet keeps the InternalIP patched below instead
                # of a host address where it does not listen.
                "--node-ip=127.0.0.1",
                f"--pod-infra-container-image={PAUSE_IMAGE}",
                *([f"--node-labels={','.join(f'{k}={v}' for k, v in self.labels.items())}"] if self.labels else []),
                "--v=2",
            ],
        )
        from jupyter_quota.backends.kube.client import KubeError

        def registered():
            try:
                return kube.get(f"/api/v1/nodes/{NODE_NAME}")
            except KubeError as e:
                if e.code == 404:
                    return None
                raise

        self._wait(registered, 90, "the kubelet to register the node", "kubelet")
        self.timings["registered"] = time.monotonic() - started
        kube.patch(f"/api/v1/nodes/{NODE_NAME}", {"spec": {"taints": self.taints or None}})
        kube.patch(
            f"/api/v1/nodes/{NODE_NAME}/status",
            {
                "status": {
                    "addresses": [
                        {"type": "InternalIP", "address": "127.0.0.1"},
                        {"type": "Hostname", "address": NODE_NAME},
                    ]
                }
            },
        )
        kube.patch(
            f"/api/v1/nodes/{NODE_NAME}/status",
            [{"op": "add", "path": "/status/capacity/nvidia.com~1gpu", "value": str(self.gpus)}],
            content_type="application/json-patch+json",
        )

        def ready():
            node = kube.get(f"/api/v1/nodes/{NODE_NAME}")
            status = node.get("status") or {}
            ok = any(c["type"] == "Ready" and c["status"] == "True" for c in status.get("conditions") or [])
            return ok and (status.get("allocatable") or {}).get(GPU) == str(self.gpus)

        self._wait(ready, 120, f"the node Ready with {self.gpus} allocatable {GPU}", "kubelet")
        self.timings["kubelet ready"] = time.monotonic() - started

    # -- stop ----------------------------------------------------------------------------------

    def stop(self, kube=None) -> None:
        """Stop the kubelet and containerd and put the host back; safe to call twice."""
        if kube is not None and "kubelet" in self.procs:
            _delete_node_pods(kube)
        self.procs.terminate("kubelet")
        if "containerd" in self.procs:
            self._remove_containers()
        self.procs.terminate("containerd")
        restore_host()
        if self._lock_fd is not None:
            os.ftruncate(self._lock_fd, 0)
            fcntl.flock(self._lock_fd, fcntl.LOCK_UN)
            os.close(self._lock_fd)
            self._lock_fd = None

    def _remove_containers(self) -> None:
        """Every task killed and every container removed, so no shim outlives containerd."""
        for line in self._ctr("tasks", "ls", check=False).stdout.splitlines()[1:]:
            task = line.split()[0]
            self._ctr("tasks", "kill", "-s", "SIGKILL", task, check=False)
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            tasks = [line.split()[0] for line in self._ctr("tasks", "ls", check=False).stdout.splitlines()[1:]]
            for task in tasks:
                self._ctr("tasks", "rm", "-f", task, check=False)
            if not tasks:
                break
            time.sleep(0.5)
        for name in self._ctr("containers", "ls", "-q", check=False).stdout.split():
            self._ctr("containers", "rm", name, check=False)

    # -- helpers -------------------------------------------------------------------------------

    def _ctr(self, *args: str, check: bool = True) -> subprocess.CompletedProcess:
        done = subprocess.run(
            ["ctr", "--address", str(self.socket), "--namespace", "k8s.io", *args],
            capture_output=True,
            text=True,
            timeout=600,
        )
        if check and done.returncode != 0:
            raise NodeStartError(f"ctr {' '.join(args)} failed: {done.stderr.strip()}")
        return done

    def _wait(self, condition, timeout: float, what: str, proc: str):
        deadline = time.monotonic() + timeout
        while True:
            self.procs.check_alive(proc)
            value = condition()
            if value:
                return value
            if time.monotonic() > deadline:
                raise NodeStartError(f"timed out after {timeout:.0f}s waiting for {what}:\n{self.procs.log_tail(proc)}")
            time.sleep(0.2)


def _containerd_config(default: str, w: Path, root: Path) -> str:
    """``containerd config default`` with the keys research/kubelet.md changed."""
    out = []
    section = ""
    for line in default.splitlines():
        stripped = line.strip()
        if stripped.startswith("["):
            section = stripped
        key = stripped.split("=", 1)[0].strip() if "=" in stripped else ""
        indent = line[: len(line) - len(line.lstrip())]
        value = None
        if section == "" and key == "root":
            value = str(root)
        elif section == "" and key == "state":
            value = str(w / "state")
        elif section == "[grpc]" and key == "address":
            value = str(w / "containerd.sock")
        elif section == '[plugins."io.containerd.grpc.v1.cri"]' and key == "restrict_oom_score_adj":
            out.append(f"{indent}restrict_oom_score_adj = true")  # no CAP_SYS_RESOURCE here
            continue
        elif section == '[plugins."io.containerd.grpc.v1.cri"]' and key == "netns_mounts_under_state_dir":
            out.append(f"{indent}netns_mounts_under_state_dir = true")
            continue
        elif section == '[plugins."io.containerd.grpc.v1.cri"]' and key == "sandbox_image":
            value = PAUSE_IMAGE
        elif section == '[plugins."io.containerd.grpc.v1.cri".cni]' and key == "bin_dir":
            value = str(CNI_BIN)
        elif section == '[plugins."io.containerd.grpc.v1.cri".cni]' and key == "conf_dir":
            value = str(w / "cni/net.d")
        elif section.startswith('[plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]') and (
            key == "Root"
        ):
            value = str(w / "runc")
        elif section == '[plugins."io.containerd.internal.v1.opt"]' and key == "path":
            value = str(w / "opt")
        out.append(f"{indent}{key} = {json.dumps(value)}" if value is not None else line)
    return "\n".join(out) + "\n"


def _free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _delete_node_pods(kube) -> None:
    """The node's pods deleted at once (grace 0), so the kubelet is not stopped mid-way."""
    try:
        pods = kube.get("/api/v1/pods", fieldSelector=f"spec.nodeName={NODE_NAME}").get("items") or []
        for pod in pods:
            meta = pod["metadata"]
            kube.delete(
                f"/api/v1/namespaces/{meta['namespace']}/pods/{meta['name']}",
                body={"apiVersion": "v1", "kind": "DeleteOptions", "gracePeriodSeconds": 0},
            )
    except Exception:  # noqa: BLE001 - the API server may be gone already; ctr removes the containers
        pass


# -- host state --------------------------------------------------------------------------------


def _cgroup_hierarchies() -> list[Path]:
    base = Path("/sys/fs/cgroup")
    if (base / "cgroup.controllers").exists():  # cgroup v2 only
        return [base]
    return [p for p in base.iterdir() if p.is_dir() and not p.is_symlink() and os.path.ismount(p)]


def _make_cgroup_root() -> None:
    for h in _cgroup_hierarchies():
        d = h / CGROUP_ROOT
        d.mkdir(exist_ok=True)
        for f in ("cpuset.cpus", "cpuset.mems"):  # a v1 cpuset group starts empty
            if (h / f).exists() and not (d / f).read_text().strip():
                (d / f).write_text((h / f).read_text())


def _save_host_state(workdir: Path) -> None:
    state = {
        "workdir": str(workdir),
        "sysctls": {k: _read_sysctl(k) for k in SYSCTLS},
        "created": [p for p in HOST_PATHS if not os.path.exists(p)],
    }
    HOST_STATE.write_text(json.dumps(state))


def _read_sysctl(key: str) -> str:
    return Path("/proc/sys", *key.split(".")).read_text().strip()


def restore_host() -> None:
    """Undo what a node changed on the host, from :data:`HOST_STATE`; nothing when it is absent."""
    if not HOST_STATE.exists():
        return
    state = json.loads(HOST_STATE.read_text())
    workdir = state["workdir"]
    _kill_leftovers(workdir)
    # Mounts under the node's directory (the kubelet's root dir, pod volumes), innermost first.
    mounts = [line.split()[1] for line in Path("/proc/mounts").read_text().splitlines()]
    for m in sorted((m for m in mounts if m.startswith(workdir)), reverse=True):
        if subprocess.run(["umount", m], capture_output=True).returncode != 0:
            subprocess.run(["umount", "-l", m], capture_output=True)
    subprocess.run(["ip", "link", "delete", BRIDGE], capture_output=True)
    for h in _cgroup_hierarchies():
        root = h / CGROUP_ROOT
        if root.exists():
            for d in sorted((p for p in root.rglob("*") if p.is_dir()), key=lambda p: len(p.parts), reverse=True):
                _rmdir(d)
            _rmdir(root)
    for key, value in state["sysctls"].items():
        try:
            Path("/proc/sys", *key.split(".")).write_text(value)
        except OSError:
            pass
    for p in state["created"]:
        shutil.rmtree(p, ignore_errors=True)
    HOST_STATE.unlink()


def _rmdir(d: Path) -> None:
    for _ in range(50):  # a cgroup is busy for a moment after its last process exits
        try:
            d.rmdir()
            return
        except FileNotFoundError:
            return
        except OSError:
            time.sleep(0.1)


def _kill_leftovers(workdir: str) -> None:
    """Processes of a node whose owner died: shims, containers, containerd, the kubelet."""
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit() or int(proc.name) == os.getpid():
            continue
        try:
            cmdline = (proc / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
            cgroup = (proc / "cgroup").read_text()
        except OSError:
            continue
        if workdir in cmdline or f"/{CGROUP_ROOT}/" in cgroup:
            try:
                os.kill(int(proc.name), signal.SIGKILL)
            except OSError:
                pass
    time.sleep(0.2)
