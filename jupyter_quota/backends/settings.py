"""The backends' settings, each backend's in its own group: traitlets mixins that
``config.JupyterQuota`` is composed of, so that every name stays ``c.JupyterQuota.<name>``.

Light on purpose (traitlets only): the config imports this module before any backend is chosen,
and neither the local backend's modules nor the Kubernetes client are loaded for it.
"""

from __future__ import annotations

import os

from traitlets import Bool, Dict, Enum, Float, Int, List, Unicode, default, validate
from traitlets.config import Configurable

JOB_USERS = ("auto", "owner", "server")  # ``backends.local.account.POLICIES`` (a test keeps them one)


class LocalBackendSettings(Configurable):
    """The local backend (``backend = "local"``): how it runs, supervises and keeps jobs."""

    job_workdir = Unicode(
        "",
        help="Local backend: working directory of job processes; ``{username}`` is replaced by the "
        "job's owner and ``{home}`` by the home directory of the account the job runs as (see "
        "``job_user``), e.g. ``'{home}/jobs'``. A directory that does not exist refuses the job. "
        "Default: empty: the account's home directory for a job run as its owner's account, else "
        "the server's root directory.",
    ).tag(config=True)

    job_user = Enum(
        JOB_USERS,
        "auto",
        help="Local backend: the OS account jobs run as. ``auto``: the job owner's account (same "
        "name) when the server runs as root (e.g. a quota service under JupyterHub with "
        "LocalProcessSpawner) and the account exists, else the server's own user; ``owner``: "
        "always the owner's account, and a submit by a user without one (or to a server that "
        "cannot switch to it) is refused with 403; ``server``: always the server's own user. A job "
        "run as its owner's account gets that account's uid, gid, groups, HOME, USER and LOGNAME. "
        "Default: ``auto``.",
    ).tag(config=True)

    cancel_grace_period = Float(
        10.0,
        help="Seconds between SIGTERM and SIGKILL when a job is cancelled. Default: 10.",
    ).tag(config=True)

    reap_interval = Float(1.0, help="Local backend: seconds between checks for ended jobs. Default: 1.").tag(
        config=True
    )

    job_log_max_bytes = Int(
        10 * 1024 * 1024,
        min=4096,
        help="Local backend: bytes at which a job's log (``output.log``) is rotated to "
        "``output.log.1``; with ``job_log_backups`` this caps a job's log on disk at "
        "``job_log_max_bytes * (job_log_backups + 1)`` bytes. Minimum 4096. "
        "Default: 10485760 (10 MiB).",
    ).tag(config=True)

    job_log_backups = Int(
        2,
        min=0,
        help="Local backend: rotated log files kept per job (``output.log.1`` is the newest); "
        "0 empties ``output.log`` at the cap instead. Default: 2.",
    ).tag(config=True)

    job_cgroups = Bool(
        True,
        help="Local backend: run each job in a cgroup (v2) of its own, below the server's cgroup, "
        "where the machine allows it (cgroup2 mounted and the server's cgroup writable: root, or "
        "a delegated subtree). It finds and kills processes of a job that left no other trace. "
        "Every job's processes are also tracked through /proc either way. Default: True.",
    ).tag(config=True)

    job_retention_seconds = Int(
        86400,
        help="Local backend: seconds a Succeeded or Failed job (its record and log) is kept after "
        "it finished, as a Job's ``ttlSecondsAfterFinished`` on a cluster; then the reaper deletes "
        "it, its name is free again, and a compact record (owner, team, requests, usage, GPUs, "
        "times, phase, reason) stays in the ledger's ``job_history`` table. -1 keeps finished jobs "
        "forever. Default: 86400 (one day, as ``kube_ttl_seconds_after_finished``).",
    ).tag(config=True)

    job_retention_count = Int(
        1000,
        help="Local backend: finished jobs kept per namespace; beyond it the oldest submitted are "
        "pruned as ``job_retention_seconds`` prunes (a record stays in ``job_history``). -1: no "
        "limit. Default: 1000.",
    ).tag(config=True)


class KubeBackendSettings(Configurable):
    """The Kubernetes backend (``backend = "kube"``) and Kueue."""

    job_image_pull_policy = Enum(
        ["", "Always", "IfNotPresent", "Never"],
        "",
        help="Kubernetes backend: the job container's ``imagePullPolicy``. ``IfNotPresent`` or ``Never`` "
        "for an image imported on the nodes rather than pulled (``scripts/kube-cluster``'s "
        "``localhost/jupyter-quota-job:latest``). Default: empty: Kubernetes' default (``Always`` for a "
        "``:latest`` tag, else ``IfNotPresent``).",
    ).tag(config=True)

    kube_config_file = Unicode(
        "",
        help="Kubernetes backend: path of the kubeconfig file. Default: empty, meaning in-cluster "
        "config when running in a pod (``KUBERNETES_SERVICE_HOST`` is set and ``kube_in_cluster`` "
        "allows it), else ``KUBECONFIG``, else ``~/.kube/config``.",
    ).tag(config=True)

    kube_context = Unicode(
        "", help="Kubernetes backend: kubeconfig context to use. Default: empty (the current context)."
    ).tag(config=True)

    kube_in_cluster = Unicode(
        "auto",
        help="Kubernetes backend: ``auto`` uses the pod's service account when running in a pod "
        "and no ``kube_config_file`` is set; ``true`` always uses it; ``false`` never does. "
        "Default: ``auto``.",
    ).tag(config=True)

    kube_watch_timeout = Int(
        10,
        help="Kubernetes backend: seconds one watch request stays open (``timeoutSeconds``) "
        "before it is renewed from the last resourceVersion. The renewal is how a quiet cluster "
        "shows it is alive, so at most two thirds of ``kube_stale_after`` is used. Default: 10.",
    ).tag(config=True)

    kube_stale_after = Float(
        15.0,
        help="Kubernetes backend: seconds without any data from the API server (events, "
        "bookmarks, a watch's end, a list) after which the balance says ``stale: true``; it "
        "bounds how long a hung API server or a network partition goes unnoticed. Default: 15.",
    ).tag(config=True)

    kube_request_timeout = Float(
        10.0,
        help="Kubernetes backend: seconds a non-watch API call (list, create, delete, logs) may "
        "take before it fails. Default: 10.",
    ).tag(config=True)

    kube_watch_backoff_max = Float(
        30.0,
        help="Kubernetes backend: the longest wait, in seconds, between retries of a failed list "
        "or watch; waits start at 0.2 s and double. Default: 30.",
    ).tag(config=True)

    kube_ttl_seconds_after_finished = Int(
        86400,
        help="Kubernetes backend: the Job's ``ttlSecondsAfterFinished``, seconds a finished Job "
        "(and its pods and logs) is kept before the cluster deletes it; -1 leaves it unset "
        "(kept until deleted). Default: 86400 (one day).",
    ).tag(config=True)

    kube_backoff_limit = Int(
        0,
        help="Kubernetes backend: the Job's ``backoffLimit``, how many times a failed pod is "
        "retried. Default: 0 (a failed training run fails the job).",
    ).tag(config=True)

    kube_cache_volumes = List(
        Dict(),
        help="Kubernetes backend: volumes mounted into every job pod, e.g. a model cache: "
        "``[{'name': 'hf-cache', 'mountPath': '/root/.cache/huggingface', "
        "'persistentVolumeClaim': {'claimName': 'hf-cache'}}]``. Each dict holds ``name``, "
        "``mountPath``, optional ``readOnly`` and ``subPath``, and one Kubernetes volume source "
        "(``persistentVolumeClaim``, ``hostPath``, ``emptyDir``, ``nfs``, ...). Default: none.",
    ).tag(config=True)

    kube_service_account = Unicode(
        "hub",
        help="Kubernetes backend: the ServiceAccount the quota service runs as, the only account "
        "that gets a Role in the team namespaces (``jupyter quota profiles render|apply`` binds it; "
        "``jupyter_quota/rbac.py``). Default: ``hub``, the hub pod's account in Zero to JupyterHub, "
        "where the service runs as a hub-managed service.",
    ).tag(config=True)

    kube_service_account_namespace = Unicode(
        help="Kubernetes backend: the namespace of ``kube_service_account`` (where the hub runs). "
        "Default: ``POD_NAMESPACE`` (Zero to JupyterHub sets it in the hub pod), else ``jupyterhub``.",
    ).tag(config=True)

    @default("kube_service_account_namespace")
    def _service_account_namespace_default(self):
        return os.environ.get("POD_NAMESPACE") or "jupyterhub"

    kube_watch_scope = Enum(
        ("namespaces", "cluster"),
        "namespaces",
        help="Kubernetes backend: ``namespaces`` watches each team namespace on its own (5 watches "
        "per team), which the per-namespace Role of ``kube_service_account`` allows; ``cluster`` "
        "watches each kind across all namespaces (5 watches in all), which needs cluster-wide "
        "list and watch of pods, jobs, events, resourcequotas and limitranges (a ClusterRole). "
        "Default: ``namespaces`` (least privilege).",
    ).tag(config=True)

    kueue_queue = Unicode(
        "",
        help="Kubernetes backend with Kueue: the LocalQueue (in every team namespace) that jobs are "
        "queued in. When set, each Job carries the ``kueue.x-k8s.io/queue-name`` label and its "
        "priority's ``kueue.x-k8s.io/priority-class``, and is created suspended, so that Kueue "
        "admits it into the team's ClusterQueue (``jupyter quota profiles render --kueue`` makes "
        "them; ``jupyter_quota/kueue.py``). Default: empty (Kueue not in use; render names the "
        "LocalQueue ``team-queue``).",
    ).tag(config=True)

    kueue_cohort = Unicode(
        "jupyter-quota",
        help="Kubernetes backend with Kueue: the cohort of the teams' ClusterQueues, within which "
        "they lend and borrow unused quota (``profiles render --kueue``). Default: ``jupyter-quota``.",
    ).tag(config=True)

    @validate("kueue_queue", "kueue_cohort")
    def _valid_kueue_name(self, proposal):
        from ..podresources import DNS1123_LABEL

        value, name = proposal["value"], proposal["trait"].name
        required = name == "kueue_cohort"  # an empty kueue_queue means Kueue is not in use
        if (value or required) and (len(value) > 63 or not DNS1123_LABEL.fullmatch(value)):
            raise ValueError(
                f"JupyterQuota.{name} {value!r} is not a valid Kueue name: use at most 63 lower-case "
                "letters, digits and '-', starting and ending with a letter or digit (e.g. 'team-queue')"
            )
        return value
