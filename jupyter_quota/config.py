"""``JupyterQuota``: the one configurable object of the server extension and the CLI.

Set in any Jupyter server config file, e.g. ``c.JupyterQuota.profiles = [...]``. Defaults read
the environment JupyterHub spawners set, so the extension works under a hub with no config.
"""

from __future__ import annotations

import getpass
import os

from jupyter_core.paths import jupyter_data_dir
from traitlets import Dict, Enum, Float, Int, List, Unicode, default, validate
from traitlets.config import Configurable

from .backends.settings import JOB_USERS, KubeBackendSettings, LocalBackendSettings
from .paging import MAX_LIMIT
from .service.endpoints import EndpointSettings
from .service.increases import IncreaseSettings
from .service.stall import StallSettings
from .service.usage import UsageSettings

__all__ = ["BACKENDS", "JOB_USERS", "JupyterQuota"]

BACKENDS = ("local", "kube")


class JupyterQuota(
    IncreaseSettings,
    UsageSettings,
    StallSettings,
    EndpointSettings,
    LocalBackendSettings,
    KubeBackendSettings,
    Configurable,
):
    """Teams, their quotas, and where their jobs run.

    The settings of the whole service, under one name (``c.JupyterQuota.<name>``) as they always
    were. Those of one subsystem are declared beside it and composed in here: the increases
    (``service/increases.py``), usage (``service/usage.py``), stalled jobs (``service/stall.py``),
    the local and Kubernetes backends (``backends/settings.py``). What stays here is shared:
    teams and access, the state directory, the hub service, jobs, the planner, metrics.
    """

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

    shared_corrections = List(
        Dict(),
        help="Estimator corrections an admin approved for every team, each ``{'family': model_type, "
        "'regime': e.g. 'full/single/dense', 'factor': 0.95..1.5, 'approvedBy': admin name, 'reason': "
        "why}`` (read the error table, ``GET /estimator/errors``, to choose them). A team's own "
        "correction, learned from its own jobs, comes first; each is recorded once in the audit log. "
        "Default: none (each team learns only from its own jobs).",
    ).tag(config=True)

    @validate("shared_corrections")
    def _valid_shared_corrections(self, proposal):
        from .estimator.learning import shared_corrections

        shared_corrections(proposal["value"])  # ValueError naming the field
        return proposal["value"]

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

    max_concurrent_verifications = Int(
        1,
        help="Verifications (``POST /verifications``: the simulated training step of an argv, "
        "docs/estimator.md §14.3) the server runs at once, each in a child process that holds one "
        "CPU for tens of seconds; one more is answered 429 TooManyRequests with ``Retry-After``. "
        "At least 1. Default: 1.",
    ).tag(config=True)

    verification_timeout = Float(
        600.0,
        help="Seconds a verification's child process may run before it is stopped and the "
        "verification reads ``failed`` with the reason. Default: 600.",
    ).tag(config=True)

    @validate("max_concurrent_verifications")
    def _valid_max_concurrent_verifications(self, proposal):
        if proposal["value"] < 1:
            raise ValueError(f"JupyterQuota.max_concurrent_verifications must be at least 1, not {proposal['value']}")
        return proposal["value"]

    @validate("verification_timeout")
    def _valid_verification_timeout(self, proposal):
        if not proposal["value"] > 0:
            raise ValueError(f"JupyterQuota.verification_timeout must be more than 0 s, not {proposal['value']}")
        return proposal["value"]

    @validate("max_concurrent_plans")
    def _valid_max_concurrent_plans(self, proposal):
        if proposal["value"] < 1:
            raise ValueError(f"JupyterQuota.max_concurrent_plans must be at least 1, not {proposal['value']}")
        return proposal["value"]

    @property
    def ledger_path(self) -> str:
        return os.path.join(self.state_dir, "ledger.sqlite3")

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
