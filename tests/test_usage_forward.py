"""Usage and the chargeback download through a user's server that forwards to the quota service."""

from __future__ import annotations

import getpass

import pytest
from openapi_contract import assert_matches


@pytest.fixture
def quota_mode():
    return "service"


@pytest.fixture
def extra_quota_config():
    return {"admin_users": [getpass.getuser()], "prices": {"currency": "EUR", "gpuHour": 1.0}}


async def test_the_chargeback_csv_downloads_through_the_forwarding_server(api, jp_fetch):
    status, report = await api("GET", "usage", params={"by": "user"})
    assert status == 200, report
    assert_matches("UsageReport", report)
    response = await jp_fetch("quota", "v1", "chargeback", params={"month": "2026-11", "format": "csv"})
    assert response.code == 200, response.body
    assert response.headers["Content-Type"].startswith("text/csv")
    assert response.headers["Content-Disposition"] == "attachment; filename=chargeback-2026-11.csv"
    assert response.body.decode().splitlines()[0].startswith("namespace,team,gpuHours,gpuCost")
