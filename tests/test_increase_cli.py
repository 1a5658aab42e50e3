"""``jupyter quota increases ...`` and ``jupyter quota audit``: a member asks, another admin
decides, on one state directory (two configs: the member's and the admin's)."""

from __future__ import annotations

import csv
import io
import json
import subprocess
import sys

from quota_testing import DEMO_CONFIG

CONFIG = """
exec(open({demo!r}).read())
c.JupyterQuota.profiles = [c.JupyterQuota.profiles[0], {{**c.JupyterQuota.profiles[1], "users": ["bea"]}}]
c.JupyterQuota.admin_users = ["ada"]
c.JupyterQuota.owner = {owner!r}
c.JupyterQuota.state_dir = {state!r}
"""


def run(config, *args, check=True):
    """``jupyter quota <command...> --config FILE <rest>``: the config before the words of a request."""
    split = 1 if args[0] == "audit" else 2
    out = subprocess.run(
        [sys.executable, "-m", "jupyter_quota", *args[:split], "--config", config, *args[split:]],
        capture_output=True,
        text=True,
        timeout=120,
    )
    if check:
        assert out.returncode == 0, out.stderr
    return out


def test_request_approve_list_and_audit(tmp_path):
    configs = {}
    for owner in ("bea", "ada"):
        path = tmp_path / f"{owner}_config.py"
        path.write_text(CONFIG.format(demo=str(DEMO_CONFIG), owner=owner, state=str(tmp_path / "state")))
        configs[owner] = str(path)

    asked = run(configs["bea"], "increases", "request", "+1", "gpu", "4h", "eval run before the review")
    assert "inc-1 team-beta: Pending: +1 requests.nvidia.com/gpu for 4 h, asked by bea" in asked.stdout
    bad = run(configs["bea"], "increases", "request", "+1.5", "gpu", "4h", "half", check=False)
    assert bad.returncode == 1 and "whole units" in bad.stderr
    refused = run(configs["bea"], "increases", "approve", "inc-1", check=False)
    assert refused.returncode == 1 and "not a quota admin" in refused.stderr

    approved = run(configs["ada"], "increases", "approve", "inc-1", "-m", "fine")
    assert "inc-1 team-beta: Approved by ada, until " in approved.stdout and "(fine)" in approved.stdout
    listed = json.loads(run(configs["bea"], "increases", "list", "--json").stdout)
    assert [(i["name"], i["phase"], i["decidedBy"]) for i in listed] == [("inc-1", "Approved", "ada")]

    not_admin = run(configs["bea"], "audit", check=False)
    assert not_admin.returncode == 1 and "audit log" in not_admin.stderr
    rows = list(csv.DictReader(io.StringIO(run(configs["ada"], "audit", "--csv").stdout)))
    assert [(r["who"], r["action"], r["target"]) for r in rows] == [
        ("bea", "increase.requested", "increase/team-beta/inc-1"),
        ("ada", "increase.approved", "increase/team-beta/inc-1"),
    ]


def test_a_server_that_forwards_to_a_hub_service_is_told_where_to_ask(tmp_path):
    path = tmp_path / "forwarding_config.py"
    config = CONFIG.format(demo=str(DEMO_CONFIG), owner="bea", state=str(tmp_path / "state"))
    path.write_text(config + "c.JupyterQuota.service_url = 'http://127.0.0.1:9/services/jupyter-quota/'\n")
    out = run(str(path), "increases", "list", check=False)
    assert out.returncode == 1 and "%quota request" in out.stderr
    assert not (tmp_path / "state" / "records.sqlite3").exists()
