"""``hubservice.startup_heap``: what is alive at start-up leaves the collector's passes, and only
when ``OPTIMISATIONS["gc-freeze"]`` is on (the open-loop benchmark turns it off for its before)."""

from __future__ import annotations

import gc

import pytest

from jupyter_quota.handlers import OPTIMISATIONS
from jupyter_quota.hubservice.startup_heap import freeze_startup_heap


class _StartUpObject:
    pass


@pytest.fixture
def unfrozen():
    yield
    gc.unfreeze()  # the test process goes on as it was
    OPTIMISATIONS["gc-freeze"] = True


def test_an_object_alive_at_start_up_is_no_longer_walked_by_the_collector(unfrozen):
    alive = _StartUpObject()
    assert any(o is alive for o in gc.get_objects())
    frozen = freeze_startup_heap()
    # what was frozen: the count may fall after it as other threads of the test process free
    # frozen objects, so it is not compared with a later gc.get_freeze_count()
    assert frozen > 0
    assert not any(o is alive for o in gc.get_objects())  # in the permanent generation now
    later = _StartUpObject()
    assert any(o is later for o in gc.get_objects())  # what comes after is collected as before


def test_off_it_freezes_nothing(unfrozen):
    OPTIMISATIONS["gc-freeze"] = False
    alive = _StartUpObject()
    assert freeze_startup_heap() == 0 and gc.get_freeze_count() == 0
    assert any(o is alive for o in gc.get_objects())
