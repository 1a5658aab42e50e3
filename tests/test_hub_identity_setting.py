"""``hubservice/identity.py``'s ``_setting``: the hub's login URL is set for one call and the
application's settings are left as they were (it replaced a ``unittest.mock.patch.dict``)."""

from __future__ import annotations

import pytest

from jupyter_quota.hubservice.identity import _setting


def test_a_setting_that_was_absent_is_absent_again_after_the_block():
    settings = {"other": 1}
    with _setting(settings, "login_url", "/hub/api/oauth2/authorize"):
        assert settings == {"other": 1, "login_url": "/hub/api/oauth2/authorize"}
    assert settings == {"other": 1}


def test_a_setting_that_was_there_gets_its_value_back_even_when_the_block_raises():
    settings = {"login_url": "/login"}
    seen = []

    def handler():
        with _setting(settings, "login_url", "/hub/login"):
            seen.append(settings["login_url"])
            raise RuntimeError("the handler failed")

    with pytest.raises(RuntimeError):
        handler()
    assert seen == ["/hub/login"]
    assert settings == {"login_url": "/login"}
