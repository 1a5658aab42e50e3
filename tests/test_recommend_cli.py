"""``jupyter quota recommend`` and ``jupyter quota replay``: from a CSV history and from the local
ledger (``usage_seed``), with bad input refused in words."""

from __future__ import annotations

import json
import subprocess
import sys
import time

import pytest
import recommend_history as gen
import usage_seed
from quota_testing import DEMO_CONFIG

from jupyter_quota import history
from jupyter_quota.history import JobRecord
from jupyter_quota.profiles import TeamProfile


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("recommend")
    records = gen.record(gen.wanted(seed=7))
    records.append(JobRecord("ghost", "g", gen.START + 3600, gen.START + 3600, gen.START + 7200, 1.0))
    (tmp / "jobs.csv").write_text(history.to_csv(records))
    profiles = [{"team": t, "hard": {gen.GPU: str(q)}} for t, q in gen.QUOTAS.items()]
    (tmp / "config.py").write_text(
        "c = get_config()\n"
        f"c.JupyterQuota.profiles = {profiles!r}\n"
        f"c.JupyterQuota.state_dir = {str(tmp / 'state')!r}\n"
        "c.JupyterQuota.prices = {'currency': 'EUR', 'gpuHour': 2.5}\n"
    )
    (tmp / "proposed.yaml").write_text("- team: deadline\n  hard: {requests.nvidia.com/gpu: '3'}\n")
    return tmp


def quota(*args, check=True):
    return subprocess.run(
        [sys.executable, "-m", "jupyter_quota", *args], capture_output=True, text=True, check=check, timeout=300
    )


def test_recommend_from_a_csv_history_prints_the_rest_body_and_reports_teams_without_a_profile(files):
    out = json.loads(
        quota("recommend", "--history", str(files / "jobs.csv"), "--config", str(files / "config.py"), "--json").stdout
    )
    rows = {r["team"]: r for r in out["recommendations"]}
    assert set(rows) == {"grow", "deadline", "idle"}
    assert rows["grow"]["recommended"] == "7" and rows["grow"]["current"] == "10"
    assert set(rows["grow"]) == {
        "team", "namespace", "resource", "current", "recommended", "lower", "upper", "demandP90",
        "exceededShare", "idleShare", "waitP90Seconds", "explanation",
    }  # fmt: skip
    assert out["teamsWithoutProfile"] == [{"team": "ghost", "jobs": 1}]


def test_the_recommend_table_explains_each_row_in_words(files):
    table = quota("recommend", "--history", str(files / "jobs.csv"), "--config", str(files / "config.py")).stdout
    assert (
        "deadline requests.nvidia.com/gpu: in the last 28 days deadline needed more than 10 GPUs 0% of working hours"
        in table
    )
    assert "teams in the history with no profile (left out): ghost (1 jobs)" in table


def test_replay_under_a_tighter_proposed_quota_refuses_the_deadline_peak_and_draws_a_capacity_curve(files):
    args = ("--history", str(files / "jobs.csv"), "--config", str(files / "config.py"), "--gpus", "12")
    out = json.loads(quota("replay", "--profiles", str(files / "proposed.yaml"), *args, "--json").stdout)
    teams = {t["team"]: t for t in out["teams"]}
    assert teams["deadline"]["refused"] > 100 and teams["grow"]["refused"] == 0
    assert out["curve"]["currency"] == "EUR" and len(out["curve"]["points"]) >= 4
    table = quota("replay", "--profiles", str(files / "proposed.yaml"), *args).stdout
    assert "worst p90 wait" in table and "GPUs keep every team's p90 wait within 1 h" in table


def test_recommend_reads_the_local_ledger_when_no_history_is_given(tmp_path):
    state = tmp_path / "state"
    path = tmp_path / "config.py"
    path.write_text(
        "c = get_config()\n"
        f"load_subconfig({str(DEMO_CONFIG)!r})\n"
        f"c.JupyterQuota.state_dir = {str(state)!r}\n"
        "c.JupyterQuota.admin_users = [c.JupyterQuota.profiles[0]['users'][0]]\n"
        "c.JupyterQuota.owner = c.JupyterQuota.profiles[0]['users'][0]\n"
    )
    from jupyter_quota.cli import load_config

    profiles = [TeamProfile(**p) for p in load_config(str(path)).profiles]
    usage_seed.seed(state, profiles, jobs=200, week_start=int(time.time()) - 8 * 86400)  # a week within the window
    out = json.loads(quota("recommend", "--config", str(path), "--json").stdout)
    assert {r["team"] for r in out["recommendations"]} == {p.team for p in profiles}
    assert all(r["waitP90Seconds"] is not None for r in out["recommendations"])  # every team's jobs were read
    assert any(float(r["demandP90"]) > 0 for r in out["recommendations"])


@pytest.mark.parametrize(
    ("content", "words"),
    [
        ("team,user\nalpha,ann\n", "the header must be team,user,submitted,started,finished,gpus,cpus,memory,priority"),
        ("team,user,submitted,started,finished,gpus,cpus,memory,priority\n", "holds no jobs"),
        (
            "team,user,submitted,started,finished,gpus,cpus,memory,priority\nalpha,ann,monday,,,1,,,normal\n",
            "line 2: submitted must be an RFC 3339 time",
        ),
        (
            "team,user,submitted,started,finished,gpus,cpus,memory,priority\n"
            "alpha,ann,2026-11-30T10:00:00Z,2026-11-30T09:00:00Z,,1,,,normal\n",
            "line 2: started (2026-11-30T09:00:00Z) is before submitted",
        ),
        (
            "team,user,submitted,started,finished,gpus,cpus,memory,priority\nalpha,ann,2026-11-30T10:00:00Z,,,two,,,normal\n",
            "line 2: gpus 'two' is not a quantity",
        ),
    ],
)
def test_a_bad_history_file_is_refused_with_what_to_fix(files, tmp_path, content, words):
    bad = tmp_path / "bad.csv"
    bad.write_text(content)
    refused = quota("recommend", "--history", str(bad), "--config", str(files / "config.py"), check=False)
    assert refused.returncode == 1 and words in refused.stderr, refused.stderr


def test_a_proposed_profile_that_fails_validation_is_refused(files, tmp_path):
    bad = tmp_path / "bad.yaml"
    bad.write_text("- team: deadline\n  hard: {requests.nvidia.com/gpu: 'lots'}\n")
    refused = quota(
        "replay",
        "--profiles",
        str(bad),
        "--history",
        str(files / "jobs.csv"),
        "--config",
        str(files / "config.py"),
        check=False,
    )
    assert refused.returncode == 1 and "profile 'deadline'" in refused.stderr, refused.stderr
