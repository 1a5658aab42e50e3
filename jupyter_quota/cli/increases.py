"""``jupyter quota increases ...`` and ``jupyter quota audit``: temporary increases from a shell.

The command acts as the configured (embedded) server's owner (``JupyterQuota.owner``, an admin when in
``admin_users``) on the configured state directory, with the service's own rules (a member asks,
another admin decides), as ``jupyter quota plan`` does. A running server sees the change at once
(it reads the records on every balance).
"""

from __future__ import annotations

import argparse
import json
import sys

from ..errors import QuotaError
from .common import config_option, load_config, only_namespace, owner_service


def add_commands(sub) -> None:
    """The ``increases`` and ``audit`` subcommands of ``jupyter quota``."""
    increases = sub.add_parser("increases", help="temporary quota increases: list, request, approve, deny")
    isub = increases.add_subparsers(title="increase commands", metavar="ACTION")
    listing = isub.add_parser("list", help="your teams' increase requests (every team's for an admin)")
    config_option(listing)
    listing.add_argument("--json", action="store_true", help="print the REST answer (GET /increases)")
    listing.set_defaults(func=_list)
    request = isub.add_parser(
        "request",
        help='ask for more: +N RESOURCE ... DURATION "REASON", e.g. +2 gpu 8h "deadline"',
        description="Ask an admin for a temporary increase, e.g. `jupyter quota increases request -n team-alpha "
        '+2 gpu 8h "paper deadline"`.',
    )
    config_option(request)
    request.add_argument("--namespace", "-n", metavar="NS", help="the team namespace; default: your only one")
    request.add_argument("words", nargs=argparse.REMAINDER, help='+N RESOURCE ... DURATION "REASON"')
    request.set_defaults(func=_request)
    for verb in ("approve", "deny"):
        decide = isub.add_parser(verb, help=f"{verb} a Pending request (admins; never your own)")
        config_option(decide)
        decide.add_argument("name", help="the request's name, e.g. inc-3")
        decide.add_argument("--comment", "-m", default="", help="why, for the requester and the audit log")
        decide.set_defaults(func=_decide, approve=verb == "approve")
    increases.set_defaults(func=lambda a: (increases.print_help(), 2)[1])
    audit = sub.add_parser("audit", help="print the audit log (admins)")
    config_option(audit)
    audit.add_argument("--csv", action="store_true", help="as CSV (as GET /audit?format=csv)")
    audit.set_defaults(func=_audit)


def _service(args):
    config = load_config(args.config)
    if config.service_url:  # the records are the hub's quota service's, not in this config's state dir
        raise QuotaError(
            f"this server forwards to the hub's quota service ({config.service_url}): ask from a notebook "
            "(%quota request), the sidebar, or the REST API; admins decide in the admin view"
        )
    return owner_service(config)


def _list(args) -> int:
    from ..magics.display import increases_text

    service, who = _service(args)
    try:
        items = service.list_increases(who)["increases"]
    finally:
        service.close()
    print(json.dumps(items, indent=1) if args.json else increases_text(items))
    return 0


def _request(args) -> int:
    from ..increasewords import parse_words
    from ..magics.display import increases_text

    service, who = _service(args)
    try:
        namespace = args.namespace or only_namespace(service.registry, who)
        profile = service.registry.for_namespace(who, namespace)
        body = parse_words(args.words, set(profile.hard), profile.gpuResource)
        made = service.request_increase(who, namespace, body)
    finally:
        service.close()
    print(increases_text([made]))
    return 0


def _decide(args) -> int:
    from ..magics.display import increases_text

    service, who = _service(args)
    try:
        decided = service.decide_increase(who, args.name, {"comment": args.comment}, args.approve)
    finally:
        service.close()
    print(increases_text([decided]))
    return 0


def _audit(args) -> int:
    from ..audit import FIELDS, to_csv

    service, who = _service(args)
    try:
        entries = service.audit_log(who)
    finally:
        service.close()
    if args.csv:
        sys.stdout.write(to_csv(entries))
    else:
        for entry in entries:
            print("  ".join(str(entry[k]) for k in FIELDS[1:]))
    return 0
