"""``JupyterQuota``: the one configurable object of the server extension and the CLI.

Set in any Jupyter server config file, e.g. ``c.JupyterQuota.profiles = [...]``. Defaults read
the environment JupyterHub spawners set, so the extension works under a hub with no config.
"""

from __future__ import annotations

import getpass
import os

from jupyter_core.paths import jupyter_data_dir
from traitlets import Bool, Dict, Enum, Float, Int, List, Unicode, default, validate
from traitlets.config import Configurable

from .paging import MAX_LIMIT

BACKENDS = ("local", "kube")
JOB_USERS = ("auto", "owner", "server")  # ``backends.local.account.POLICIES`` (a test keeps them one)


class JupyterQuota(Configurable):
    """Teams, their quotas, and where their jobs run."""

    backend = Unicode(
        help="Where jobs run: ``local`` (this machine, a SQLite ledger; the default) or ``kube`` "
        "(Kubernetes through kubeconfig or in-cluster config). Default: the environment "
        "variable ``JUPYTER_QUOTA_BACKEND``, else ``local``.",
    ).tag(config=True)

    @default("backend")
    def _backend_default(self):
        return os.environ.get("JUPYTER_QUOTA_BACKEND", "local") or "local"

    @validate("backend")
    def _valid_backend(self, proposal):
        if proposal["value"] not in BACKENDS:
            raise ValueError(f"JupyterQuota.backend must be one of {', '.join(BACKENDS)}, not {proposal['value']!r}")
        return proposal["value"]

    profiles = List(
        Dict(),
        help="Team profiles, one dict per team; see ``jupyter_quota.profiles.TeamProfile`` for "
        "the fields (team, namespace, users, groups, hard, limitRange, gpuModel, gpuMemory, ...). "
        "Default: none (nobody sees a namespace).",
    ).tag(config=True)

    new_team_defaults = Dict(
        {
            "hard": {"requests.nvidia.com/gpu": "1", "requests.cpu": "8", "requests.memory": "32Gi"},
            "limitRange": {"limits": [{"type": "Container", "defaultRequest": {"cpu": "1", "memory": "4Gi"}}]},
        },
        help="Profile fields a team created by an admin (``PUT /profiles/{team}`` for a team not yet "
        "defined) gets when the body leaves them out: a small quota to start from, raised later "
        "by an edit or an approved increase. A field given in the body, even empty (``'hard': {}``: "
        "no quota), wins; teams from ``profiles`` and edits of existing teams are not touched. "
        "Default: ``{'hard': {'requests.nvidia.com/gpu': '1', 'requests.cpu': '8', "
        "'requests.memory': '32Gi'}, 'limitRange': {'limits': [{'type': 'Container', "
        "'defaultRequest': {'cpu': '1', 'memory': '4Gi'}}]}}`` (1 GPU, 8 CPUs, 32 GiB; the "
        "LimitRange gives jobs that state no CPU or memory a request, which a CPU or memory quota "
        "requires). ``{}`` turns it off.",
    ).tag(config=True)

    @validate("new_team_defaults")
    def _valid_new_team_defaults(self, proposal):
        from .errors import InvalidRequest
        from .profiles import TeamProfile

        value = proposal["value"]
        try:
            TeamProfile(**{**value, "team": "new-team-defaults"})
        except InvalidRequest as e:
            raise ValueError(f"JupyterQuota.new_team_defaults is not a valid profile: {e.message}") from None
        return value

    default_team = Unicode(
        "",
        help="Team whose namespace a user who is in no team gets. Default: empty (such a user sees no namespace).",
    ).tag(config=True)

    groups = Dict(
        help="Outside JupyterHub: group name to list of user names, for profiles that name "
        "groups. Under JupyterHub the hub's groups are used instead. Default: none.",
    ).tag(config=True)

    admin_users = List(
        Unicode(),
        help="User names that may see every namespace and change profiles. JupyterHub admins "
        "always may. Default: none.",
    ).tag(config=True)

    admin_groups = List(Unicode(), help="Groups whose members are admins as in ``admin_users``. Default: none.").tag(
        config=True
    )

    owner = Unicode(
        help="Outside JupyterHub, jupyter-server's token/password login has one account, the "
        "server's owner: the user name quota membership uses for it. Default: "
        "``JUPYTERHUB_USER`` if set, else the operating-system user running the server.",
    ).tag(config=True)

    @default("owner")
    def _owner_default(self):
        return os.environ.get("JUPYTERHUB_USER") or getpass.getuser()

    state_dir = Unicode(
        help="Directory of the local backend's ledger (``ledger.sqlite3``), job logs and "
        "profile changes made over the API. Default: ``JUPYTER_QUOTA_STATE_DIR``, else "
        "``<jupyter data dir>/jupyter_quota``.",
    ).tag(config=True)

    @default("state_dir")
    def _state_dir_default(self):
        return os.environ.get("JUPYTER_QUOTA_STATE_DIR") or os.path.join(jupyter_data_dir(), "jupyter_quota")

    inventory = Dict(
        help="Local backend: the machine's resources when ``nvidia-smi`` is absent, e.g. "
        "``{'gpus': 4, 'gpuModel': 'A100 80GB', 'gpuMemory': '80Gi', 'cpu': '32', "
        "'memory': '256Gi'}``; shown as ``declared`` in the API. CPU and memory default to "
        "this machine's. Default: none (no GPUs without nvidia-smi).",
    ).tag(config=True)

    service_url = Unicode(
        help="The hub's quota service (``jupyter quota serve``), e.g. "
        "``http://127.0.0.1:10101/services/jupyter-quota/``. When set, this server keeps no quota "
        "state: ``{base_url}quota/v1/*`` is forwarded there with the server's hub token, for the "
        "server's owner only. Default: ``JUPYTER_QUOTA_SERVICE_URL`` (the hub sets it for every "
        "server: ``jupyter_quota.hubservice.hubconfig``), else empty: embedded mode, where this "
        "server is its own quota authority.",
    ).tag(config=True)

    @default("service_url")
    def _service_url_default(self):
        from .hubservice.names import SERVICE_URL_ENV

        return os.environ.get(SERVICE_URL_ENV, "")

    @validate("service_url")
    def _valid_service_url(self, proposal):
        url = proposal["value"]
        if url and not url.startswith(("http://", "https://")):
            raise ValueError(f"JupyterQuota.service_url must be an http(s) URL, not {url!r}")
        return url

    service_timeout = Float(
        300.0,
        help="Seconds a user server waits for the quota service to answer a forwarded plan search "
        "(``POST estimate``, ``plan``, ``replan``: the slowest calls) or a write (a submit or a "
        "decision cut short could still be carried out). Default: 300.",
    ).tag(config=True)

    service_read_timeout = Float(
        30.0,
        help="Seconds a user server waits for the quota service to answer a forwarded read (every "
        "``GET``: balances, jobs, usage), so a hung service fails the sidebar's poll in seconds "
        "(503 ServiceUnavailable) instead of holding it. Default: 30.",
    ).tag(config=True)

    service_connect_timeout = Float(
        5.0,
        help="Seconds a user server waits to connect to the quota service, for any call. Default: 5.",
    ).tag(config=True)

    hub_timeout = Float(
        10.0,
        help="The quota service (``jupyter quota serve``): seconds it waits for JupyterHub to say "
        "who a caller is (a token or cookie it has not cached); a hub that does not answer in time "
        "is a 503 ServiceUnavailable. Default: 10.",
    ).tag(config=True)

    job_command = List(
        Unicode(),
        default_value=["swift", "sft"],
        help="The argv a job's arguments are appended to (never run through a shell). Local "
        "backend: a bare command name is looked up in the server's own environment (the bin of "
        "the venv it runs from) first, then on PATH; a relative path is taken from job_workdir. "
        "Default: ``['swift', 'sft']`` (ms-swift: ``pip install 'jupyter_quota[swift]'``).",
    ).tag(config=True)

    job_image = Unicode(
        "",
        help="Kubernetes backend: the default job image (a profile's ``image`` wins). Default: empty.",
    ).tag(config=True)

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

    job_list_limit = Int(
        100,
        help="Jobs in one page of ``GET .../jobs`` when the request names no ``limit`` (newest "
        "first; the answer's ``metadata.continue`` fetches the next page). A request may ask for "
        "1 to 1000. Default: 100.",
    ).tag(config=True)

    @validate("job_list_limit")
    def _valid_job_list_limit(self, proposal):
        if not 1 <= proposal["value"] <= MAX_LIMIT:
            raise ValueError(f"JupyterQuota.job_list_limit must be from 1 to {MAX_LIMIT}, not {proposal['value']}")
        return proposal["value"]

    plan_fit = Enum(
        ("upper", "estimate"),
        "upper",
        help="What a plan must fit under the GPU's memory less the safety margin: ``upper``, the "
        "upper end of its estimate's range (where measured peaks of the estimate's regime fell, "
        "docs/estimator.md §9.1), or ``estimate``, the point estimate (more plans fit; more of "
        "them run out of memory). Default: ``upper``.",
    ).tag(config=True)

    log_tail_lines = Int(
        200, help="Lines of a job's log returned when the request names no ``tailLines``. Default: 200."
    ).tag(config=True)

    max_concurrent_plans = Int(
        2,
        help="Plan and estimate searches (``POST .../plan``, ``POST /estimate``) the server works on "
        "at once, on threads of their own; one more is answered 429 TooManyRequests with "
        "``Retry-After``. The searches are CPU-bound and hold Python's GIL, so few of them keep "
        "balance reads fast (see ``benchmarks/plan_load_bench.py``); 2 lets the sidebar's planner "
        "ask for its estimate and its plan at once. At least 1. Default: 2 (requests at once).",
    ).tag(config=True)

    @validate("max_concurrent_plans")
    def _valid_max_concurrent_plans(self, proposal):
        if proposal["value"] < 1:
            raise ValueError(f"JupyterQuota.max_concurrent_plans must be at least 1, not {proposal['value']}")
        return proposal["value"]

    max_open_increases = Int(
        3,
        help="Temporary increase requests (``POST .../increases``) a user may have Pending at once; "
        "one more is refused (409 TooManyOpenRequests) until an admin decides one. At least 1. Default: 3.",
    ).tag(config=True)

    max_open_increases_per_team = Int(
        20,
        help="Temporary increase requests a team may have Pending at once, whoever filed them; one "
        "more is refused (409 TooManyOpenRequests) until an admin decides one. At least 1. Default: 20.",
    ).tag(config=True)

    increase_retention_days = Float(
        90.0,
        help="Days a decided increase request (Denied or Expired) stays in ``GET .../increases``; "
        "past them it is moved to the records' archive table (the audit log keeps every entry). "
        "0 keeps every request listed. Default: 90.",
    ).tag(config=True)

    max_increase_hours = Float(
        168.0,
        help="The longest a temporary increase may be asked for, in hours (a request's ``hours`` must be "
        "more than 0 and at most this). Default: 168 (one week).",
    ).tag(config=True)

    @validate("max_open_increases", "max_open_increases_per_team", "max_increase_hours")
    def _valid_increase_limits(self, proposal):
        if proposal["value"] <= 0:
            raise ValueError(f"JupyterQuota.{proposal['trait'].name} must be more than 0, not {proposal['value']}")
        return proposal["value"]

    prices = Dict(
        help="Prices per resource-hour that turn usage (``GET .../usage``) into cost and the monthly "
        'chargeback (``GET .../chargeback``): ``{"currency": "EUR", "gpuHour": 2.5, '
        '"cpuHour": 0.04, "memoryGibHour": 0.005}``, each the price of one GPU, one CPU core or '
        "one GiB of memory requested for an hour (``jupyter_quota/chargeback.py``). A resource left "
        "out costs 0. Default: empty (usage has no cost; ``cost`` is null).",
    ).tag(config=True)

    @validate("prices")
    def _valid_prices(self, proposal):
        from .chargeback import parse_prices

        parse_prices(proposal["value"])  # raises ValueError naming the bad key
        return proposal["value"]

    @property
    def ledger_path(self) -> str:
        return os.path.join(self.state_dir, "ledger.sqlite3")

    # -- Kubernetes backend (``backend = "kube"``) ---------------------------------------------

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
        from .podresources import DNS1123_LABEL

        value, name = proposal["value"], proposal["trait"].name
        required = name == "kueue_cohort"  # an empty kueue_queue means Kueue is not in use
        if (value or required) and (len(value) > 63 or not DNS1123_LABEL.fullmatch(value)):
            raise ValueError(
                f"JupyterQuota.{name} {value!r} is not a valid Kueue name: use at most 63 lower-case "
                "letters, digits and '-', starting and ending with a letter or digit (e.g. 'team-queue')"
            )
        return value

    # -- metrics and stalled jobs (``metrics/``, ``stall.py``) ----------------------------------

    metrics_token = Unicode(
        help="A scrape token for ``GET {base_url}quota/v1/metrics``: a caller sending "
        "``Authorization: Bearer <token>`` gets the metrics without signing in (Prometheus: "
        "``authorization: {credentials: <token>}`` in the scrape config). Admins may always read "
        "them. Default: ``JUPYTER_QUOTA_METRICS_TOKEN``, else empty (admins only).",
    ).tag(config=True)

    @default("metrics_token")
    def _metrics_token_default(self):
        return os.environ.get("JUPYTER_QUOTA_METRICS_TOKEN", "")

    stalled_job_minutes = Float(
        30.0,
        help="Minutes a Running job may go without writing to its log (or, where ``nvidia-smi`` "
        "reports it, keep its GPUs under ``stalled_gpu_utilization`` percent busy) before it is "
        "flagged as stalled (the job's ``stalled`` field, the metric "
        "``jupyter_quota_stalled_jobs``). 0 turns the check off. Default: 30.",
    ).tag(config=True)

    stalled_gpu_utilization = Float(
        5.0,
        help="GPU utilisation, in percent, under which a Running job's GPUs count as idle for "
        "``stalled_job_minutes`` (local backend, where ``nvidia-smi`` is present). Default: 5.",
    ).tag(config=True)

    stalled_job_action = Enum(
        ("flag", "cancel"),
        "flag",
        help="What happens to a stalled job: ``flag`` only shows it (job field, metrics, sidebar); "
        "``cancel`` also cancels it, as an admin would, and logs each cancel. Default: ``flag``.",
    ).tag(config=True)
