"""``jupyter quota recommend`` and ``jupyter quota replay``: quota from history on the command line.

Under a hub (``JupyterQuota.service_url``) the quota service answers (``GET /recommendations``,
``POST /replay``); otherwise the configured backend's history is read in this process for the
server's owner, with the REST API's access rules. ``--history FILE`` judges a history from
another system instead (a CSV, ``history.COLUMNS``) against the configured profiles: the file is
yours, so every team of the configuration is shown.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import yaml

from .. import history
from ..errors import InvalidRequest, QuotaError
from ..identity import Identity
from ..recommend import show_duration
from .common import config_option, load_config

EPILOG = """examples:
  jupyter quota recommend                              # every team you may see, from the service's records
  jupyter quota recommend --history sacct-export.csv   # judge another system's history
  jupyter quota recommend --json > recommendations.json
  jupyter quota replay --profiles proposed.yaml        # the last 28 days under proposed profiles
  jupyter quota replay --profiles proposed.yaml --history jobs.csv --gpus 16 --json

--history FILE is a CSV with the header
  team,user,submitted,started,finished,gpus,cpus,memory,priority
times in RFC 3339 (2026-11-30T08:00:00Z); started and finished empty for a job that never
started; gpus, cpus and memory as quantities (1, 500m, 64Gi); priority high, normal or best-effort.
"""


def add_commands(sub) -> None:
    """The ``recommend`` and ``replay`` subcommands of ``jupyter quota``."""
    import argparse

    formatter = argparse.RawDescriptionHelpFormatter
    rec = sub.add_parser(
        "recommend",
        help="recommended hard quotas per team from the history of their demand",
        description="For each team and quota resource: the recommended hard quota (the P90 of the "
        "team's demand, recent days weighing more, plus a safety margin, as the Kubernetes VPA "
        "recommender sizes a container), its lower and upper bound (wider when the history is "
        "short), how often demand exceeded the current quota in working hours, how much of it sat "
        "idle, and the p90 queue wait. Demand is running plus waiting plus refused requests. Settings: "
        "c.Recommendations.half_life_hours, percentile, margin, window_days, working_days, "
        "working_hours, working_timezone.",
        epilog=EPILOG,
        formatter_class=formatter,
    )
    rec.add_argument("--history", metavar="FILE", help="read the history from this CSV (see below)")
    rec.add_argument("--json", action="store_true", help="print the REST body of GET /recommendations")
    config_option(rec)
    rec.set_defaults(func=_recommend)

    rep = sub.add_parser(
        "replay",
        help="replay the recorded jobs under proposed profiles: waits, utilization, borrowing, a capacity curve",
        description="Replay the recorded jobs (arrival, GPUs, duration, priority) through the real "
        "scheduler (elastic quota, admission) under the proposed profiles (the rest stay as "
        "configured), on a fake clock. Per team: p50/p90 waits beside the recorded ones, "
        "utilization, GPU hours borrowed, preemptions and refusals; then the same at several "
        "cluster sizes, with the cost of each at JupyterQuota.prices.",
        epilog=EPILOG,
        formatter_class=formatter,
    )
    rep.add_argument("--profiles", metavar="FILE", required=True, help="YAML or JSON: a list of team profiles")
    rep.add_argument("--history", metavar="FILE", help="read the history from this CSV (see below)")
    rep.add_argument("--since", metavar="TIME", help="RFC 3339 (default: --until - 28 days)")
    rep.add_argument("--until", metavar="TIME", help="RFC 3339 (default: now, or the history's end)")
    rep.add_argument(
        "--gpus", type=int, metavar="N", help="the machine's GPUs (default: this machine's, or the quotas' sum)"
    )
    rep.add_argument("--no-curve", action="store_true", help="skip the capacity curve")
    rep.add_argument("--json", action="store_true", help="print the REST body of POST /replay")
    config_option(rep)
    rep.set_defaults(func=_replay)


def _recommend(args) -> int:
    records = _history(args.history)
    answer = _call(args.config, "GET", "/recommendations", None, records)
    if args.json:
        print(json.dumps(answer, indent=1))
        return 0
    columns = ["team", "resource", "current", "recommended", "lower", "upper", "demandP90"]
    rows = [[str(r.get(c) if r.get(c) is not None else "-") for c in columns] for r in answer["recommendations"]]
    for r, line in zip(answer["recommendations"], rows, strict=True):
        line += [_share(r["exceededShare"]), _share(r["idleShare"]), _wait(r["waitP90Seconds"])]
    _table([*columns, "exceeded", "idle", "waitP90"], rows)
    print()
    for r in answer["recommendations"]:
        print(f"{r['team']} {r['resource']}: {r['explanation']}")
    _unknown(answer)
    return 0


def _replay(args) -> int:
    body = {"profiles": _profiles(args.profiles)}
    for key in ("since", "until", "gpus"):
        if getattr(args, key) is not None:
            body[key] = getattr(args, key)
    if args.no_curve:
        body["curve"] = False
    records = _history(args.history)
    if records is not None and "until" not in body and records:
        from ..usage import format_time

        body["until"] = format_time(1 + max(max(r.submitted, r.started or 0, r.finished or 0) for r in records))
    print("replaying the history (and, for the curve, at several cluster sizes)...", file=sys.stderr)
    answer = _call(args.config, "POST", "/replay", body, records)
    if args.json:
        print(json.dumps(answer, indent=1))
        return 0
    print(
        f"{answer['since']} to {answer['until']} on {answer['gpus']} GPUs, utilization {_share(answer['utilization'])}"
    )
    columns = [
        "team",
        "jobs",
        "refused",
        "waitP50",
        "waitP90",
        "recorded p50",
        "recorded p90",
        "utilization",
        "borrowed h",
        "preemptions",
    ]
    rows = [
        [
            t["team"],
            str(t["jobs"]),
            str(t["refused"]),
            _wait(t["waitP50Seconds"]),
            _wait(t["waitP90Seconds"]),
            _wait(t["recordedWaitP50Seconds"]),
            _wait(t["recordedWaitP90Seconds"]),
            _share(t["utilization"]),
            str(t["borrowedGpuHours"]),
            str(t["preemptions"]),
        ]
        for t in answer["teams"]
    ]
    _table(columns, rows)
    curve = answer.get("curve")
    if curve:
        print()
        cost = f"cost ({curve['currency']})" if curve["currency"] else "cost (no JupyterQuota.prices)"
        rows = [
            [
                str(p["gpus"]),
                _wait(p["worstWaitP90Seconds"]),
                str(p["refused"]),
                _share(p["utilization"]),
                str(p["cost"] or "-"),
            ]
            for p in curve["points"]
        ]
        _table(["GPUs", "worst p90 wait", "refused", "utilization", cost], rows)
        target = show_duration(curve["waitTargetSeconds"])
        found = curve["gpusForWaitTarget"]
        print(
            f"{found} GPUs keep every team's p90 wait within {target}"
            if found
            else f"no size tried keeps every team's p90 wait within {target}"
        )
    _unknown(answer)
    return 0


def _history(path: str | None) -> list | None:
    if path is None:
        return None
    try:
        text = Path(path).read_text(encoding="utf-8")
    except OSError as e:
        raise InvalidRequest(f"cannot read --history {path}: {e.strerror}") from None
    records = history.parse_csv(text, path)
    if not records:
        raise InvalidRequest(f"--history {path} holds no jobs: nothing to judge")
    return records


def _profiles(path: str) -> list:
    try:
        data = yaml.safe_load(Path(path).read_text(encoding="utf-8"))
    except OSError as e:
        raise InvalidRequest(f"cannot read --profiles {path}: {e.strerror}") from None
    except yaml.YAMLError as e:
        raise InvalidRequest(f"--profiles {path} is not YAML or JSON: {e}") from None
    if isinstance(data, dict) and "profiles" in data:
        data = data["profiles"]
    if not isinstance(data, list):
        raise InvalidRequest(f"--profiles {path} must hold a list of team profiles (or {{profiles: [...]}})")
    return data


def _call(config_file: str | None, method: str, route: str, body: dict | None, records: list | None) -> dict:
    """The route's answer: from the hub's quota service, or computed here."""
    config = load_config(config_file)
    if config.service_url and records is None:
        from ..magics.client import QuotaClient, QuotaClientError

        token = os.environ.get("JUPYTERHUB_API_TOKEN", "")
        client = QuotaClient(config.service_url, token, "JupyterQuota.service_url", timeout=config.service_timeout)
        try:
            return client.call(method, route, body=body)
        except QuotaClientError as e:
            raise QuotaError(e.message) from None
    from ..identity import owner_identity
    from ..service.app import build_service

    service = build_service(config)
    try:
        # a history file is the caller's own data: judged against every configured team
        who = owner_identity(config) if records is None else Identity(config.owner or "cli", (), True, "history file")
        if route == "/recommendations":
            return service.recommender.recommendations(who, records)
        return service.recommender.replay(who, body, records)
    finally:
        service.backend.close()


def _unknown(answer: dict) -> None:
    missing = answer.get("teamsWithoutProfile") or []
    if missing:
        names = ", ".join(f"{m['team']} ({m['jobs']} jobs)" for m in missing)
        print(f"\nteams in the history with no profile (left out): {names}")


def _table(columns: list[str], rows: list[list[str]]) -> None:
    widths = [max(len(c), *(len(r[i]) for r in rows)) if rows else len(c) for i, c in enumerate(columns)]
    for line in [columns, *rows]:
        print("  ".join(v.ljust(w) for v, w in zip(line, widths, strict=True)).rstrip())


def _share(value) -> str:
    return "-" if value is None else f"{round(100 * value)}%"


def _wait(seconds) -> str:
    return "-" if seconds is None else show_duration(seconds)
