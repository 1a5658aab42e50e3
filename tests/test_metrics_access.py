"""Who may read GET quota/v1/metrics: quota admins, and a scraper with the scrape token; nobody else."""

from __future__ import annotations

import pytest
from quota_testing import HeaderIdentityProvider

SCRAPE_TOKEN = "scrape-token-for-access-tests"


@pytest.fixture
def extra_quota_config():
    return {"admin_users": ["ada"], "metrics_token": SCRAPE_TOKEN}


@pytest.fixture
def jp_server_config(jp_server_config):
    jp_server_config.ServerApp.identity_provider_class = HeaderIdentityProvider
    return jp_server_config


async def fetch(jp_fetch, headers):
    response = await jp_fetch("quota", "v1", "metrics", headers=headers, raise_error=False)
    return response.code, response.body.decode()


async def test_admins_may_scrape_and_other_users_may_not(jp_fetch):
    code, text = await fetch(jp_fetch, {"X-Test-User": "ada"})
    assert code == 200 and "jupyter_quota_resourcequota{" in text
    code, text = await fetch(jp_fetch, {"X-Test-User": "beta-user"})
    assert code == 403 and "not a quota admin" in text and "resourcequota{" not in text


@pytest.mark.parametrize("header", [f"Bearer {SCRAPE_TOKEN}", f"bearer  {SCRAPE_TOKEN} "])
async def test_the_scrape_token_needs_no_sign_in(http_server_client, jp_base_url, header):
    response = await http_server_client.fetch(
        f"{jp_base_url}quota/v1/metrics", headers={"Authorization": header}, raise_error=False
    )
    assert response.code == 200 and b"jupyter_quota_resourcequota{" in response.body


@pytest.mark.parametrize("header", [None, "Bearer not-the-token", f"token {SCRAPE_TOKEN}", f"Bearer {SCRAPE_TOKEN}x"])
async def test_anything_else_is_refused(http_server_client, jp_base_url, header):
    headers = {"Authorization": header} if header else {}
    response = await http_server_client.fetch(f"{jp_base_url}quota/v1/metrics", headers=headers, raise_error=False)
    assert response.code == 403 and b"resourcequota{" not in response.body


async def test_the_hub_quota_service_takes_the_scrape_token(quota_service_url):
    """Prometheus scrapes the hub's quota service itself (``jupyter quota serve``): the token is
    checked there before any hub lookup."""
    from tornado.httpclient import AsyncHTTPClient

    url = quota_service_url + "quota/v1/metrics"
    client = AsyncHTTPClient()
    response = await client.fetch(url, headers={"Authorization": f"Bearer {SCRAPE_TOKEN}"}, raise_error=False)
    assert response.code == 200 and b"jupyter_quota_resourcequota{" in response.body
    assert response.headers["Content-Type"].startswith("text/plain; version=")
    response = await client.fetch(url, headers={"Authorization": "Bearer not-the-token"}, raise_error=False)
    assert response.code == 403 and b"resourcequota{" not in response.body
