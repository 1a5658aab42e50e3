"""``jupyter quota``: the parser, and the profiles, estimate, plan and serve commands.

Profiles come from the same Jupyter server config files the server reads
(``jupyter_server_config.py`` / ``.json`` in the Jupyter config path), or from ``--config FILE``.
"""

from __future__ import annotations

import argparse
import json
import sys

import yaml

from ..config import JupyterQuota
from ..errors import QuotaError
from . import increases, recommend, usage
from .common import config_option, hub_client, load_config, only_namespace, owner_service

EPILOG = """examples:
  jupyter quota profiles render --config binder/jupyter_server_config.py
  jupyter quota profiles render --team alpha
  jupyter quota profiles render --kueue | kubectl apply -f -
  jupyter quota estimate --gpus 1 -- --model Qwen/Qwen2.5-7B-Instruct --tuner_type lora
  jupyter quota plan --namespace team-alpha -- --model Qwen/Qwen2.5-7B-Instruct --tuner_type full
  jupyter quota serve                 # as a JupyterHub service (README: Running under JupyterHub)
  jupyter quota increases request -n team-alpha +2 gpu 8h "paper deadline"
  jupyter quota increases approve inc-3 -m "ok until the deadline"
  jupyter quota usage --by user --format csv   # requested GPU-, CPU-, memory GiB-seconds, last 24 hours
  jupyter quota chargeback --month 2026-11     # cost per team (admins; JupyterQuota.prices)
  jupyter quota recommend --history jobs.csv   # hard quotas recommended from a history of demand
  jupyter quota replay --profiles proposed.yaml  # waits, utilization, capacity curve under new profiles
"""


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    argv = list(sys.argv[1:] if argv is None else argv)
    # Everything after the first "--" is the swift sft command, never our own options.
    swift_args = argv[argv.index("--") + 1 :] if "--" in argv else None
    args, extra = parser.parse_known_args(argv[: argv.index("--")] if "--" in argv else argv)
    if hasattr(args, "swift_args"):
        if swift_args is None or extra:
            parser.error(
                f"put the swift sft arguments after --, e.g. jupyter quota {args.command} -- "
                "--model Qwen/Qwen2.5-7B-Instruct --tuner_type lora"
            )
        args.swift_args = swift_args
    elif extra:
        parser.error(f"unrecognized arguments: {' '.join(extra)}")
    if not getattr(args, "func", None):
        parser.print_help()
        return 2
    try:
        return args.func(args)
    except QuotaError as e:
        print(f"error: {e.message}", file=sys.stderr)
        return 1


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="jupyter quota",
        description="Team quotas for Jupyter: render the Kubernetes objects of team profiles.",
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    sub = parser.add_subparsers(title="commands", metavar="COMMAND")

    profiles = sub.add_parser(
        "profiles",
        help="team profiles: render or apply their Namespace, ResourceQuota, LimitRange, Role and RoleBinding",
    )
    psub = profiles.add_subparsers(title="profile commands", metavar="ACTION")
    render = psub.add_parser(
        "render",
        help="print each team's Namespace, ResourceQuota, LimitRange, Role and RoleBinding as YAML",
        description="Print, as a multi-document YAML stream, the Namespace, ResourceQuota and "
        "LimitRange objects each team profile stands for, and the Role and RoleBinding that let the "
        "quota service's account (JupyterQuota.kube_service_account) run jobs there "
        "(ready for `kubectl apply -f -`).",
    )
    config_option(render)
    render.add_argument("--team", action="append", metavar="TEAM", help="only this team (repeatable)")
    render.add_argument(
        "--kueue",
        action="store_true",
        help="also Kueue's objects (Kueue must be installed): a PriorityClass and a WorkloadPriorityClass "
        "per job priority, the ResourceFlavors, each team's ClusterQueue (one cohort, "
        "JupyterQuota.kueue_cohort; nominal quota, borrowingLimit and lendingLimit from the profile) "
        "and its LocalQueue (JupyterQuota.kueue_queue, default team-queue)",
    )
    render.set_defaults(func=_profiles_render)
    apply = psub.add_parser(
        "apply",
        help="create or update each team's Namespace, ResourceQuota, LimitRange, Role and RoleBinding",
        description="Make the cluster (JupyterQuota.kube_config_file / kube_context, or in-cluster "
        "config) hold each team's Namespace, ResourceQuota, LimitRange, and the Role and RoleBinding "
        "of JupyterQuota.kube_service_account: created when absent, "
        "replaced when they differ, unchanged otherwise. With --dry-run the API server validates "
        "and defaults every object (dryRun=All) and nothing is stored; a diff is printed.",
    )
    config_option(apply)
    apply.add_argument("--team", action="append", metavar="TEAM", help="only this team (repeatable)")
    apply.add_argument("--dry-run", action="store_true", help="show what would change; store nothing")
    apply.set_defaults(func=_profiles_apply)
    profiles.set_defaults(func=lambda a: (profiles.print_help(), 2)[1])

    estimate = sub.add_parser(
        "estimate",
        help="peak GPU memory of a swift sft command, with its breakdown",
        description="Estimate the peak GPU memory per GPU (torch.cuda.max_memory_reserved) of a "
        "`swift sft` command. --model is a catalog name, a local folder with a config.json or a hub id "
        "whose config.json is in the local Hugging Face or ModelScope cache (all offline); with "
        "JUPYTER_QUOTA_HUB_LOOKUP=1, other hub ids are fetched from the Hugging Face hub. Any other "
        "id is estimated approximately from the size in its name (8B, 30B-A3B) or --model_size. "
        "Put the swift sft arguments after --.",
        usage="jupyter quota estimate [--gpus N] [--model_size SIZE] [--json] -- <swift sft args>",
    )
    estimate.add_argument("--gpus", default="1", metavar="N", help="GPUs the job runs on (default 1)")
    _model_size_option(estimate)
    estimate.add_argument("--json", action="store_true", help="print the estimate as JSON (bytes)")
    estimate.add_argument(
        "--verify",
        action="store_true",
        help="after the estimate, run one simulated training step of the real model code on fake tensors "
        "(no GPU; needs torch, transformers and peft; about a minute per ten layers) and print its peak "
        "(JSON: a 'verification' key); docs/estimator.md §14",
    )
    estimate.set_defaults(func=_estimate, command="estimate", swift_args=None)

    plan = sub.add_parser(
        "plan",
        help="the best swift sft configuration that fits a team namespace's balance",
        description="Fit a `swift sft` command to what a team namespace has left (the local "
        "backend's ledger; nothing is submitted): the recommended plan as a command, the "
        "alternatives, and the rejected ones with their reasons. Put the swift sft arguments after --.",
        usage="jupyter quota plan --namespace NS [--gpus N] [--model_size SIZE] [--json] [--config FILE] "
        "-- <swift sft args>",
    )
    plan.add_argument("--namespace", "-n", metavar="NS", help="the team namespace (default: your only one)")
    plan.add_argument(
        "--gpus",
        default=None,
        metavar="N",
        help="the GPU count you have in mind (default 1); plans may use more or fewer",
    )
    _model_size_option(plan)
    plan.add_argument("--json", action="store_true", help="print the plan result as JSON")
    config_option(plan)
    plan.set_defaults(func=_plan, command="plan", swift_args=None)

    increases.add_commands(sub)

    serve = sub.add_parser(
        "serve",
        help="run the quota service of a JupyterHub (started by the hub as a managed service)",
        description="Run the one quota authority of a JupyterHub: the REST API of the server "
        "extension under $JUPYTERHUB_SERVICE_PREFIX/quota/v1, listening on $JUPYTERHUB_SERVICE_URL, "
        "with every team's state (the local backend's ledger and jobs, or the Kubernetes "
        "credentials). Callers are identified by the hub and need the scope "
        "access:services!service=jupyter-quota. The hub starts it: see "
        "jupyter_quota.hubservice.hubconfig and the README (Running under JupyterHub).",
    )
    config_option(serve)
    serve.add_argument(
        "--ip",
        metavar="IP",
        help="the address to listen on (default: the host of "
        "$JUPYTERHUB_SERVICE_URL; 0.0.0.0 for every interface, e.g. in a hub pod whose "
        "service URL names the Kubernetes Service)",
    )
    serve.add_argument(
        "--port", type=int, metavar="PORT", help="the port to listen on (default: the port of $JUPYTERHUB_SERVICE_URL)"
    )
    serve.set_defaults(func=_serve)

    usage.add_commands(sub)
    recommend.add_commands(sub)
    return parser


def _selected_profiles(config: JupyterQuota, teams: list[str] | None) -> list:
    """The configured profiles, or those of ``teams``; an unknown team is an error."""
    from ..access import TeamRegistry

    profiles = TeamRegistry(config.profiles, default_team=config.default_team).all()
    if teams:
        unknown = sorted(set(teams) - {p.team for p in profiles})
        if unknown:
            raise QuotaError(
                f"unknown team(s) {', '.join(unknown)}; configured: {', '.join(p.team for p in profiles) or 'none'}"
            )
        profiles = [p for p in profiles if p.team in teams]
    if not profiles:
        raise QuotaError("no team profiles configured (c.JupyterQuota.profiles is empty)")
    return profiles


def _profiles_render(args) -> int:
    from ..rbac import ServiceAccount, team_objects

    config = load_config(args.config)
    account = ServiceAccount.from_config(config)
    profiles = _selected_profiles(config, args.team)
    docs = [obj for p in profiles for obj in team_objects(p, account)]
    if args.kueue:
        from ..kueue import DEFAULT_QUEUE, KueueSettings, kueue_objects

        docs += kueue_objects(profiles, KueueSettings(config.kueue_cohort, config.kueue_queue or DEFAULT_QUEUE))
    yaml.safe_dump_all(docs, sys.stdout, sort_keys=False)
    return 0


def _profiles_apply(args) -> int:
    from ..backends.kube.apply import apply_profiles, render_diff
    from ..backends.kube.client import KubeError, load_api_client
    from ..rbac import ServiceAccount

    config = load_config(args.config)
    profiles = _selected_profiles(config, args.team)
    try:
        client = load_api_client(config.kube_config_file, config.kube_context, config.kube_in_cluster)
    except Exception as e:  # noqa: BLE001 - the kubernetes client raises several kinds for a missing/bad config
        raise QuotaError(
            f"cannot load the Kubernetes configuration: {e}; set "
            "c.JupyterQuota.kube_config_file (or run inside the cluster)"
        ) from None
    try:
        results = apply_profiles(profiles, client, ServiceAccount.from_config(config), dry_run=args.dry_run)
    except KubeError as e:
        raise QuotaError(
            f"{e}; check JupyterQuota.kube_config_file / kube_context: `profiles apply` "
            "creates Namespaces, Roles and RoleBindings, so it needs a cluster admin"
        ) from None
    for r in results:
        where = f"{r['namespace']}/" if r["namespace"] else ""
        print(f"{r['kind']} {where}{r['name']}: {r['action']}{' (dry run)' if r['dryRun'] else ''}")
    if args.dry_run:
        sys.stdout.write(render_diff(results))
    return 0


def _serve(args) -> int:
    from ..hubservice.app import serve

    return serve(load_config(args.config), ip=args.ip, port=args.port)


def _model_size_option(parser) -> None:
    parser.add_argument(
        "--model_size",
        metavar="SIZE",
        help="the parameter count of a model the estimator has no facts for (not in the catalog, no local "
        "config.json), e.g. 8B or 30B-A3B (mixture of experts: total-active); the estimate is then approximate",
    )


def _estimate(args) -> int:
    from ..estimator import estimate
    from ..planner.report import estimate_text
    from ..planner.request import parse_gpus, parse_model_size
    from ..swift import parse_sft_args

    gpus = parse_gpus(args.gpus, "--gpus")
    model_size = parse_model_size(args.model_size, "--model_size")
    sft = parse_sft_args(args.swift_args)
    result = estimate(sft, gpus=gpus, model_size=model_size).to_json()
    if not args.verify:
        if args.json:
            print(json.dumps(result, indent=1))
        else:
            print(estimate_text(result, sft.notes))
        return 0
    if not args.json:
        print(estimate_text(result, sft.notes), flush=True)
    result["verification"] = _verification(sft, gpus)
    if args.json:
        print(json.dumps(result, indent=1))
    else:
        print(_verification_text(result["verification"], result["peakBytesPerGpu"]))
    return 0


def _verification(sft, gpus: int) -> dict:
    """The simulated step's answer, or why there is none (``{"unsupported": reason}``)."""
    from ..estimator.simstep import UnsupportedStep
    from ..estimator.verify import verify

    print("verifying: one simulated training step on fake tensors (no GPU) ...", file=sys.stderr, flush=True)
    try:
        return verify(sft, gpus)
    except UnsupportedStep as exc:
        return {"unsupported": str(exc)}
    except ImportError as exc:
        return {"unsupported": f"the simulated step needs torch, transformers and peft ({exc})"}


def _verification_text(v: dict, estimated: int) -> str:
    if "unsupported" in v:
        return f"Verification: none ({v['unsupported']})"
    gib = 1024**3
    b = v["breakdown"]
    return "\n".join(
        [
            f"Verification (simulated step, {v['regime']}, {v['seconds']:.0f} s): "
            f"{v['peakBytesPerGpu'] / gib:.2f} GiB per GPU "
            f"({v['peakBytesPerGpu'] / estimated - 1:+.0%} of the estimate)",
            f"  live tensors at the peak ({v['peakPhase']}): {v['liveBytes'] / gib:.2f} GiB = "
            + ", ".join(f"{k} {b[k] / gib:.2f}" for k in b),
            f"  caching allocator: allocated {v['allocatedBytes'] / gib:.2f} GiB, "
            f"reserved {v['reservedBytes'] / gib:.2f} GiB; "
            f"+ foreach AdamW update buffer {v['foreachBytes'] / gib:.2f} GiB ({v['optimizerStep']} step)",
            f"  + workspaces no tensor shows {v['workspaceBytes'] / gib:+.2f} GiB: the median gap of "
            f"{v['workspaceBasis']} (they range {v['workspaceRangeBytes'][0] / gib:+.2f} to "
            f"{v['workspaceRangeBytes'][1] / gib:+.2f} GiB)",
        ]
    )


def _plan(args) -> int:
    from ..planner import plan
    from ..planner.report import plan_text
    from ..planner.request import parse_gpus, parse_model_size

    gpus = None if args.gpus is None else parse_gpus(args.gpus, "--gpus")
    model_size = parse_model_size(args.model_size, "--model_size")
    config = load_config(args.config)
    if config.service_url:  # under a hub: the quota service holds the balance
        result = _service_plan(config, args.namespace, args.swift_args, gpus, model_size)
    else:
        context = configured_context(args.namespace, config)
        result = plan(args.swift_args, context, gpus=gpus, model_size=model_size).to_json()
    if args.json:
        print(json.dumps(result, indent=1))
    else:
        print(plan_text(result))
    return 0 if result["recommended"] is not None else 3


def _service_plan(
    config: JupyterQuota, namespace: str | None, swift_args: list[str], gpus, model_size: str | None = None
) -> dict:
    """``POST /namespaces/{ns}/plan`` at the hub's quota service, as this server's user."""
    from ..magics.client import QuotaClientError

    client = hub_client(config)
    try:
        if not namespace:
            mine = [n["name"] for n in client.namespaces()]
            if len(mine) != 1:
                raise QuotaError(f"name the namespace with --namespace; yours: {', '.join(mine) or 'none'}")
            namespace = mine[0]
        return client.plan(namespace, swift_args, gpus, model_size)
    except QuotaClientError as e:
        raise QuotaError(e.message) from None


def configured_context(namespace: str | None, config_file=None, **options):
    """The planning context of ``namespace`` as the configured server sees it, read-only.

    Profiles and the backend come from the Jupyter config (or ``config_file``, a path or a
    ``JupyterQuota``); the balance is the backend's (the local ledger). The caller is the
    server's owner (``JupyterQuota.owner``) with the usual access rules: only their teams'
    namespaces. ``options`` go to :func:`planner.context_from_balance` (``gpu_memory``, ``margin``).
    """
    from ..planner import context_from_balance

    config = config_file if isinstance(config_file, JupyterQuota) else load_config(config_file)
    service, who = owner_service(config)
    try:
        profile = service.profile_for(who, namespace or only_namespace(service.registry, who))
        options.setdefault("fit", config.plan_fit)
        return context_from_balance(
            service.backend.balance(profile), profile, inventory=service.backend.inventory(), **options
        )
    finally:
        service.close()


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
