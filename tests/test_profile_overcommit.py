"""A profile edit that makes the teams' GPU quotas pass the inventory is stored with a warning
(issue 21's Apply; the same ``warnings`` an increase's approver gets, issue 25): overcommitting
can be deliberate, so it is not refused."""

from __future__ import annotations

import pytest
from local_testing import GPU_KEY

from jupyter_quota.config import JupyterQuota
from jupyter_quota.extension import build_service
from jupyter_quota.identity import Identity

ADA = Identity("ada", admin=True)


@pytest.fixture
def service(tmp_path):
    config = JupyterQuota()
    config.state_dir = str(tmp_path / "state")
    config.inventory = {"gpus": 4, "cpu": "16", "memory": "64Gi"}
    config.admin_users = ["ada"]
    config.profiles = [
        {"team": "alpha", "users": ["ann"], "hard": {GPU_KEY: "2"}},
        {"team": "beta", "users": ["bea"], "hard": {GPU_KEY: "2"}},
    ]
    made = build_service(config)
    yield made
    made.close()


def test_a_profile_edit_past_the_inventory_is_stored_with_a_warning(service):
    answer = service.put_profile(ADA, "alpha", {"users": ["ann"], "hard": {GPU_KEY: "3"}})
    (warning,) = answer["warnings"]
    assert "5 GPUs" in warning and "4 GPUs" in warning, warning  # 3 + 2 of 4
    assert warning.startswith("with this profile "), warning
    assert service.profile(ADA, "alpha")["hard"] == {GPU_KEY: "3"}  # stored: not a refusal
    again = service.put_profile(ADA, "alpha", answer)  # the answer sent back: its warnings are no field
    assert again["warnings"] == [warning] and "warnings" not in service.profile(ADA, "alpha")


def test_no_warning_while_the_quotas_fit_the_inventory(service):
    assert service.put_profile(ADA, "alpha", {"users": ["ann"], "hard": {GPU_KEY: "1"}})["warnings"] == []
    assert service.put_profile(ADA, "gamma", {"users": ["gil"], "hard": {GPU_KEY: "1"}})["warnings"] == []
