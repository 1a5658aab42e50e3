"""``jupyter quota usage`` and ``jupyter quota chargeback`` over a seeded week (``usage_seed.py``).

The by-team and by-user CSVs the command prints add up to the ledger's own totals, and the
chargeback table's totals line is the sum of its team lines; both are kept under
``$JUPYTER_QUOTA_TEST_OUTPUT`` (when set) for the record.
"""

from __future__ import annotations

import csv
import io
import subprocess
import sys
from decimal import Decimal

import pytest
import usage_seed
from quota_testing import DEMO_CONFIG

from jupyter_quota import endpointrequests, usage
from jupyter_quota.profiles import TeamProfile

SINCE, UNTIL = "2026-11-16T00:00:00Z", "2026-11-23T00:00:00Z"
FIGURES = ("gpuSeconds", "cpuSeconds", "memoryGibSeconds")


@pytest.fixture
def config(tmp_path):
    """The demo teams with more users, a seeded week (half of it pruned into job_history), prices."""
    state = tmp_path / "state"
    path = tmp_path / "usage_config.py"
    path.write_text(
        "c = get_config()\n"
        f"load_subconfig({str(DEMO_CONFIG)!r})\n"
        "c.JupyterQuota.profiles[0]['users'] += ['carl', 'dora']\n"
        "c.JupyterQuota.profiles[1]['users'] += ['bea']\n"
        f"c.JupyterQuota.state_dir = {str(state)!r}\n"
        "c.JupyterQuota.admin_users = [c.JupyterQuota.profiles[0]['users'][0]]\n"
        "c.JupyterQuota.prices = {'currency': 'EUR', 'gpuHour': 2.5, 'cpuHour': 0.04, 'memoryGibHour': 0.005}\n"
    )
    from jupyter_quota.cli import load_config

    profiles = [TeamProfile(**p) for p in load_config(str(path)).profiles]
    usage_seed.seed(state, profiles, jobs=400)  # one job per team still Running: it counts up to --until
    usage_seed.prune(state, keep_count=100)
    return path, state


def quota(*args, check=True):
    return subprocess.run(
        [sys.executable, "-m", "jupyter_quota", *args], capture_output=True, text=True, check=check, timeout=120
    )


def test_the_usage_csvs_by_team_and_by_user_add_up_to_the_ledgers_totals(config):
    path, state = config
    ledger = usage_seed.ledger_totals(state / "ledger.sqlite3", SINCE, UNTIL, now=usage_seed.WEEK_START + 8 * 86400)
    week = ("--since", SINCE, "--until", UNTIL, "--format", "csv", "--config", str(path))
    by_team = quota("usage", "--by", "team", *week).stdout
    by_user = quota("usage", "--by", "user", *week).stdout
    usage_seed.save("cli-usage-week-by-team.csv", by_team)
    usage_seed.save("cli-usage-week-by-user.csv", by_user)
    teams, users = list(csv.DictReader(io.StringIO(by_team))), list(csv.DictReader(io.StringIO(by_user)))
    assert {(r["team"], r["user"]) for r in users[:-1]} == set(ledger) and len(ledger) == 5
    for i, figure in enumerate(FIGURES):
        total = float(sum(f[i] for f in ledger.values()))
        assert float(teams[-1][figure]) == pytest.approx(total, abs=1e-3) == float(users[-1][figure])
        assert sum(float(r[figure]) for r in users[:-1]) == pytest.approx(total, abs=0.01)
        assert sum(float(r[figure]) for r in teams[:-1]) == pytest.approx(total, abs=0.01)
    for lines in (teams, users):
        assert Decimal(lines[-1]["cost"]) == sum(Decimal(r["cost"]) for r in lines[:-1])


def test_the_chargeback_table_adds_up(config):
    path, _ = config
    table = quota("chargeback", "--month", "2026-10", "--config", str(path)).stdout  # before the week: zero
    assert "total" in table and "no prices" not in table
    table = quota("chargeback", "--month", "2026-11", "--config", str(path)).stdout
    usage_seed.save("cli-chargeback-2026-11.txt", table)
    lines = list(csv.DictReader(io.StringIO(quota("chargeback", "--month", "2026-11", "--format", "csv",
                                                  "--config", str(path)).stdout)))  # fmt: skip
    assert [line["team"] for line in lines] == ["alpha", "beta", ""]
    for column in ("gpuCost", "cpuCost", "memoryCost", "cost"):
        assert Decimal(lines[-1][column]) == sum(Decimal(line[column]) for line in lines[:-1])


def test_usage_by_job_names_the_endpoints_and_their_requests(config):
    """An endpoint recorded in the records (as the service records one it creates) among the seeded
    jobs: its row says ``endpoint`` and how many requests its proxy forwarded in the window."""
    path, state = config
    week = ("--since", SINCE, "--until", UNTIL, "--by", "job", "--namespace", "team-alpha", "--config", str(path))
    rows = list(csv.DictReader(io.StringIO(quota("usage", *week, "--format", "csv").stdout)))
    served = rows[0]
    created = "2026-11-16T00:00:00Z"
    endpointrequests.remember(str(state), {"namespace": "team-alpha", "name": served["job"], "createdAt": created,
                                           "team": served["team"], "owner": served["user"]})  # fmt: skip
    minute = usage.parse_time(SINCE, "since") + 3600
    key = ("team-alpha", served["job"], created)
    endpointrequests.add(str(state), {key: {(minute, "2xx"): [40, 4.0], (minute + 60, "5xx"): [2, 0.2]}})
    rows = list(csv.DictReader(io.StringIO(quota("usage", *week, "--format", "csv").stdout)))
    kinds = {(r["job"], r["kind"], r["requests"]) for r in rows[:-1]}
    assert (served["job"], "endpoint", "42") in kinds
    assert all(kind == "job" and requests == "" for job, kind, requests in kinds if job != served["job"])
    table = quota("usage", *week).stdout
    assert "kind" in table.splitlines()[0] and "endpoint" in table


def test_bad_options_say_what_to_fix(config):
    path, _ = config
    refused = quota("usage", "--since", "monday", "--config", str(path), check=False)
    assert refused.returncode == 1 and "since must be an RFC 3339 time" in refused.stderr
    refused = quota("usage", "--by", "owner", "--config", str(path), check=False)
    assert refused.returncode == 2 and "invalid choice: 'owner'" in refused.stderr
    assert "GPU-, CPU- and memory GiB-seconds" in quota("--help").stdout


def test_a_user_who_is_no_admin_gets_no_chargeback(config, tmp_path):
    path, _ = config
    other = tmp_path / "other_config.py"
    other.write_text(f"c = get_config()\nload_subconfig({str(path)!r})\nc.JupyterQuota.owner = 'bea'\n"
                     "c.JupyterQuota.admin_users = []\n")  # fmt: skip
    refused = quota("chargeback", "--config", str(other), check=False)
    assert refused.returncode == 1 and "the chargeback is for JupyterHub admins" in refused.stderr
    mine = quota("usage", "--since", SINCE, "--until", UNTIL, "--format", "csv", "--config", str(other)).stdout
    assert {line["team"] for line in csv.DictReader(io.StringIO(mine))} == {"beta", ""}
