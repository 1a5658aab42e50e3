"""``jupyter quota`` (also ``python -m jupyter_quota``): the command line.

Profiles come from the same Jupyter server config files the server reads
(``jupyter_server_config.py`` / ``.json`` in the Jupyter config path), or from ``--config FILE``.
"""

from __future__ import annotations

import argparse
import os
import sys

import yaml

from .config import JupyterQuota
from .errors import QuotaError

EPILOG = """examples:
  jupyter quota profiles render --config binder/jupyter_server_config.py
  jupyter quota profiles render --team alpha
"""


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
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

    profiles = sub.add_parser("profiles", help="team profiles: render their Namespace, ResourceQuota and LimitRange")
    psub = profiles.add_subparsers(title="profile commands", metavar="ACTION")
    render = psub.add_parser(
        "render",
        help="print each team's Namespace, ResourceQuota and LimitRange as YAML",
        description="Print, as a multi-document YAML stream, the Namespace, ResourceQuota and "
        "LimitRange objects each team profile stands for (ready for `kubectl apply -f -`).",
    )
    _config_option(render)
    render.add_argument("--team", action="append", metavar="TEAM", help="only this team (repeatable)")
    render.set_defaults(func=_profiles_render)
    profiles.set_defaults(func=lambda a: (profiles.print_help(), 2)[1])
    return parser


def _config_option(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--config",
        metavar="FILE",
        help="a Jupyter config file (.py or .json) holding c.JupyterQuota settings; default: the "
        "jupyter_server_config files of the Jupyter config path",
    )


def load_config(config_file: str | None) -> JupyterQuota:
    """``JupyterQuota`` as the server would see it, from the Jupyter config path or ``FILE``."""
    from jupyter_core.application import JupyterApp

    class _Loader(JupyterApp):
        name = "jupyter-quota"
        config_file_name = "jupyter_server_config"

    loader = _Loader()
    if config_file:
        if not os.path.isfile(config_file):
            raise QuotaError(f"config file {config_file!r} does not exist")
        loader.config_file = os.path.abspath(config_file)
    loader.initialize([])
    return JupyterQuota(config=loader.config)


def _profiles_render(args) -> int:
    from .access import TeamRegistry

    config = load_config(args.config)
    registry = TeamRegistry(config.profiles, default_team=config.default_team)
    profiles = registry.all()
    if args.team:
        unknown = sorted(set(args.team) - {p.team for p in profiles})
        if unknown:
            raise QuotaError(f"unknown team(s) {', '.join(unknown)}; configured: "
                             f"{', '.join(p.team for p in profiles) or 'none'}")
        profiles = [p for p in profiles if p.team in args.team]
    if not profiles:
        print("# no team profiles configured (c.JupyterQuota.profiles is empty)", file=sys.stderr)
        return 1
    docs = []
    for p in profiles:
        docs.append(p.namespace_object())
        docs.extend(p.resource_quotas())
        docs.extend(p.limit_ranges())
    yaml.safe_dump_all(docs, sys.stdout, sort_keys=False)
    return 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
