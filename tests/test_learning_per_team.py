"""Each team learns from its own jobs (issue 25, item 5): one team's logs never move another
team's estimates, nor show it their counts or ratios; a correction shared across teams is one an
admin approved (``JupyterQuota.shared_corrections``, audited); and a peak no GPU of the team could
hold, or far outside the estimate's range, is kept in the error table but not learned from.

Once, three alpha jobs whose log printed ``memory(GiB) 79.9`` raised team beta's estimate of the
same configuration by the x1.5 cap, and beta's estimate showed alpha's job count and raw ratio.
A job's log is written by user code: it is not a trusted measurement.
"""

from __future__ import annotations

import sys
import time

import pytest
from quota_testing import FAKE_TRAINER

from jupyter_quota import audit
from jupyter_quota.config import JupyterQuota
from jupyter_quota.estimator import estimate, learning
from jupyter_quota.extension import build_service
from jupyter_quota.identity import Identity

GPU = "requests.nvidia.com/gpu"
GIB = 1024**3
ANN, BEA, ADA = Identity("ann"), Identity("bea"), Identity("ada", admin=True)
MODEL = ["--model", "Qwen/Qwen2.5-1.5B-Instruct", "--tuner_type", "full", "--max_length", "2048"]
RAW = estimate(MODEL, gpus=1)
ESTIMATED_GIB = RAW.peak_bytes_per_gpu / GIB
REGIME = learning.regime_of(RAW)


def make_service(tmp_path, shared=()):
    config = JupyterQuota()
    config.state_dir = str(tmp_path / "state")
    config.inventory = {"gpus": 2, "cpu": "16", "memory": "64Gi"}
    config.job_command = [sys.executable, str(FAKE_TRAINER)]
    config.admin_users = ["ada"]
    config.shared_corrections = list(shared)
    gpu = {"gpuModel": "A100 80GB", "gpuMemory": "80Gi", "hard": {GPU: "1"}}
    config.profiles = [{"team": "alpha", "users": ["ann"], **gpu}, {"team": "beta", "users": ["bea"], **gpu}]
    return build_service(config)


@pytest.fixture
def service(tmp_path):
    made = make_service(tmp_path)
    yield made
    made.close()


def run(service, who, namespace, measured_gib: float) -> dict:
    """A job of MODEL whose log says ``memory(GiB) measured_gib``, once ended and learned from."""
    job = service.submit(
        who, namespace, {"args": [*MODEL, "--steps", "2", "--memory-gib", str(measured_gib)], "gpus": 1}
    )
    deadline = time.monotonic() + 120
    while True:
        service.backend.reap()
        seen = service.get_job(who, namespace, job["name"])  # an ended job is learned from when read
        if seen["phase"] in ("Succeeded", "Failed"):
            assert seen["phase"] == "Succeeded", seen
            return seen
        assert time.monotonic() < deadline, seen
        time.sleep(0.05)


def estimated(service, who) -> dict:
    return service.estimate(who, {"args": MODEL, "gpus": 1})


def test_one_teams_jobs_correct_its_own_estimates_only(service):
    measured = round(ESTIMATED_GIB * 1.3, 2)
    for _ in range(learning.MIN_JOBS):
        assert run(service, ANN, "team-alpha", measured)["memory"]["measuredGib"] == measured
    mine = estimated(service, ANN)
    assert mine["correction"]["jobs"] == learning.MIN_JOBS
    assert mine["correction"]["factor"] == pytest.approx(1.3, abs=0.01)

    theirs = estimated(service, BEA)
    assert theirs["correction"] is None, theirs["correction"]  # alpha's jobs do not move beta's
    assert theirs["peakBytesPerGpu"] == RAW.peak_bytes_per_gpu
    assert not [a for a in theirs["assumptions"] if "finished jobs" in a], theirs["assumptions"]
    # beta's plan is fitted to its own estimate too
    plan = service.plan(BEA, "team-beta", {"args": MODEL})
    corrected = [
        p for p in [plan["recommended"], *(r["plan"] for r in plan["rejected"])] if p and p["estimate"]["correction"]
    ]
    assert corrected == []
    # and its error table has no row of alpha's
    assert service.estimator_errors(BEA)["rows"] == []
    assert service.estimator_errors(ADA)["rows"][-1]["jobs"] == learning.MIN_JOBS


def test_a_peak_far_outside_the_range_is_in_the_error_table_but_not_learned_from(service):
    for _ in range(learning.MIN_JOBS):
        run(service, ANN, "team-alpha", 79.9)  # the log line, on a ~17 GiB estimate
    assert estimated(service, ANN)["correction"] is None
    rows = {(r["family"], r["regime"]): r for r in service.estimator_errors(ANN)["rows"]}
    assert rows[("all", "all")]["jobs"] == learning.MIN_JOBS
    assert rows[("qwen2", REGIME)]["correction"] is None
    assert rows[("all", "all")]["p90ErrorPct"] > 50  # the table shows how far off they were


def test_a_peak_above_the_gpus_memory_is_not_learned_from():
    records = [
        learning.Measured("qwen2", REGIME, 17.0, 90.0, trusted=learning.plausible(17.0, 90.0, 80.0, (10.0, 100.0)))
        for _ in range(learning.MIN_JOBS)
    ]
    assert not records[0].trusted
    assert learning.corrections(records) == {}
    assert learning.error_table(records)[-1]["jobs"] == learning.MIN_JOBS
    assert learning.plausible(17.0, 22.0, 80.0, (10.0, 21.0))
    assert learning.plausible(17.0, 80.0, 80.0, None) is False  # no range: far from the estimate
    assert learning.plausible(17.0, 3.0, None, (10.0, 21.0)) is False  # far below the range


def test_an_admin_approved_shared_correction_applies_to_every_team_and_is_audited(tmp_path):
    shared = {"family": "qwen2", "regime": REGIME, "factor": 1.2, "approvedBy": "ada", "reason": "A100 runs"}
    service = make_service(tmp_path, shared=[shared])
    try:
        service.start()
        for who in (ANN, BEA):
            fix = estimated(service, who)["correction"]
            assert fix["factor"] == 1.2 and fix["source"] == "shared" and fix["jobs"] == 0, fix
            assert "approved by ada" in fix["note"]
        measured = round(ESTIMATED_GIB * 1.3, 2)
        for _ in range(learning.MIN_JOBS):
            run(service, ANN, "team-alpha", measured)
        assert estimated(service, ANN)["correction"]["source"] == "team"  # a team's own comes first
        assert estimated(service, BEA)["correction"]["source"] == "shared"
        (entry,) = [e for e in audit.entries(str(tmp_path / "state")) if e["action"] == audit.CORRECTION_SHARED]
        assert entry["who"] == "ada" and entry["target"] == f"correction/qwen2/{REGIME}" and "x1.2" in entry["detail"]
    finally:
        service.close()
    again = make_service(tmp_path, shared=[shared])  # a restart with the same set audits nothing more
    try:
        again.start()
        assert len([e for e in audit.entries(str(tmp_path / "state")) if e["action"] == audit.CORRECTION_SHARED]) == 1
    finally:
        again.close()


@pytest.mark.parametrize(
    "entry, says",
    [
        ({"family": "qwen2", "regime": "r", "factor": 3.0, "approvedBy": "ada"}, "factor"),
        ({"family": "qwen2", "regime": "r", "factor": 1.2}, "approvedBy"),
        ({"family": "qwen2", "factor": 1.2, "approvedBy": "ada"}, "regime"),
        ({"family": "qwen2", "regime": "r", "factor": 1.2, "approvedBy": "ada", "jobs": 3}, "jobs"),
    ],
)
def test_a_bad_shared_correction_is_refused_naming_the_field(entry, says):
    with pytest.raises(ValueError, match=says):
        learning.shared_corrections([entry])
