"""jupyter_quota: quota-aware fine-tuning from the notebook.

The server extension (REST API under ``{base_url}quota/v1``), the JupyterLab extension (its
prebuilt assets under ``labextension/``), and the pure domain modules (``quantity``, ``quota``,
``profiles``, ``jobspec``, ``swift``, ``estimator``, ``planner``) that both backends share.

From Python (the same inputs as ``jupyter quota estimate|plan``)::

    from jupyter_quota import estimate, plan
    estimate(["--model", "Qwen/Qwen2.5-7B-Instruct", "--tuner_type", "lora"], gpus=1).to_json()
    plan("--model Qwen/Qwen2.5-7B-Instruct --tuner_type full", namespace="team-alpha").to_json()

``estimate`` and ``plan`` import their modules on first call, so loading the server extension
stays light. In IPython, ``%load_ext jupyter_quota`` adds the ``%quota`` and ``%swift_sft`` magics.
"""

try:
    from ._version import __version__
except ImportError:  # pragma: no cover - a source tree that was never built
    import warnings

    warnings.warn("Importing 'jupyter_quota' outside a proper installation.", stacklevel=2)
    __version__ = "dev"


def estimate(args, gpus: int = 1):
    """Peak GPU memory per GPU of a ``swift sft`` command: an ``Estimate`` (``.to_json()``).

    ``args`` is the argv list (``["--model", "...", "--tuner_type", "lora"]``), a string split as a
    shell would, or parsed ``SftArgs``; ``gpus`` the number of GPUs. Raises
    ``errors.InvalidRequest`` for malformed arguments or an unknown model.
    """
    from .estimator import estimate as _estimate

    return _estimate(_argv(args), gpus=gpus)


def plan(
    args,
    namespace: str | None = None,
    *,
    gpus: int | None = None,
    balance: dict | None = None,
    profile=None,
    inventory: dict | None = None,
    gpu_memory=None,
    margin: float | None = None,
    config=None,
    fit: str | None = None,
):
    """The best configuration of a ``swift sft`` command that fits a namespace: a ``PlanResult``.

    Two ways to say what to fit:

    - ``balance=`` a dict as ``GET /quota/v1/namespaces/{ns}/balance`` returns (from the REST API or
      a backend), with ``profile=`` (a ``TeamProfile`` or its dict) for the GPU memory and the
      LimitRange, or ``gpu_memory="24Gi"`` when there is none; ``inventory`` bounds the GPUs.
      Nothing is read from disk.
    - otherwise the configured server state: profiles from the Jupyter config (or ``config=``, a
      file path), the balance from the local backend's ledger, as the server's owner sees it;
      ``namespace`` may be left out when the owner has one team.

    ``gpus`` is the GPU count in mind (default 1). ``margin`` is the share of GPU memory kept free
    (default 0.10). ``fit``: what a plan must fit, ``"upper"`` (the upper end of its estimate's
    range; the default, or the config's ``plan_fit``) or ``"estimate"``. ``.to_json()`` has the
    shape of ``POST /namespaces/{ns}/plan``; ``str()`` is the text ``jupyter quota plan`` prints.
    """
    from .planner import DEFAULT_MARGIN, context_from_balance
    from .planner import plan as _plan

    options = {"gpu_memory": gpu_memory, "margin": DEFAULT_MARGIN if margin is None else margin}
    if fit is not None:
        options["fit"] = fit
    if balance is not None:
        if namespace and not balance.get("namespace"):
            balance = {**balance, "namespace": namespace}
        context = context_from_balance(balance, profile, inventory=inventory, **options)
    else:
        from .cli import configured_context

        context = configured_context(namespace, config, **options)
    return _plan(_argv(args), context, gpus=gpus)


def _argv(args):
    if isinstance(args, str):
        import shlex

        return shlex.split(args)
    return args


def load_ipython_extension(ipython):
    """``%load_ext jupyter_quota``: register the ``%quota`` and ``%swift_sft`` magics."""
    from .magics import load_ipython_extension as _load

    _load(ipython)


def _jupyter_labextension_paths():
    return [{"src": "labextension", "dest": "jupyter-quota"}]


def _jupyter_server_extension_points():
    return [{"module": "jupyter_quota"}]


def _load_jupyter_server_extension(server_app):
    """Wire config, team registry, backend and REST routes into a running ``ServerApp``."""
    from .extension import load

    load(server_app)
