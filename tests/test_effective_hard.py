"""``QuotaService.effective_hard``: the profile's hard quota, plus approved unexpired increases,
plus open windows' extras, at a driven time; and the balance and admission that read it."""

from datetime import UTC, datetime

import pytest

from jupyter_quota.config import JupyterQuota
from jupyter_quota.errors import AdmissionDenied
from jupyter_quota.identity import Identity
from jupyter_quota.service.app import build_service

GPU = "requests.nvidia.com/gpu"
MONDAY_21H = datetime(2026, 11, 30, 21, 0, tzinfo=UTC).timestamp()
TUESDAY_9H = datetime(2026, 12, 1, 9, 0, tzinfo=UTC).timestamp()
BEA, ADA = Identity("bea"), Identity("ada", admin=True)


@pytest.fixture
def service(tmp_path):
    config = JupyterQuota()
    config.state_dir = str(tmp_path / "state")
    config.inventory = {"gpus": 8, "cpu": "32", "memory": "256Gi"}
    config.job_command = ["true"]
    config.profiles = [
        {
            "team": "beta",
            "users": ["bea"],
            "hard": {GPU: "2", "requests.cpu": "8"},
            "limitRange": {"limits": [{"type": "Container", "default": {"cpu": "1", "memory": "1Gi"}}]},
            "windows": [
                {"name": "nights", "days": ["Mon"], "start": "20:00", "end": "08:00", "extra": {GPU: "2"}},
            ],
        }
    ]
    made = build_service(config)
    made.clock = lambda: MONDAY_21H
    yield made
    made.close()


def test_windows_and_increases_add_up_in_time(service):
    assert service.effective_hard("beta", MONDAY_21H)[GPU] == "4"
    assert service.effective_hard("beta", TUESDAY_9H) == {GPU: "2", "requests.cpu": "8"}
    made = service.request_increase(BEA, "team-beta", {"resources": {GPU: "1"}, "hours": 13, "reason": "r"})
    service.decide_increase(ADA, made["name"], {}, approve=True)  # from Monday 21:00 to Tuesday 10:00
    assert service.effective_hard("beta", MONDAY_21H)[GPU] == "5"
    assert service.effective_hard("beta", TUESDAY_9H)[GPU] == "3"
    assert service.effective_hard("beta", TUESDAY_9H + 3600)[GPU] == "2"


def test_balance_and_admission_read_the_effective_quota(service):
    def submit(name, gpus):
        return service.submit(BEA, "team-beta", {"name": name, "args": [], "gpus": gpus})

    assert service.balance(BEA, "team-beta")["resources"][GPU]["hard"] == "4"
    assert submit("three", 3)["name"] == "three"
    service.clock = lambda: TUESDAY_9H
    assert service.balance(BEA, "team-beta")["resources"][GPU]["hard"] == "2"
    with pytest.raises(AdmissionDenied, match="exceeded quota"):  # 3 > 2, whatever "three" still holds
        submit("again", 3)
